"""scheduler.core: the problem a solver solves and what it returns; imports nothing else of scheduler.

* :mod:`~scheduler.core.errors`: the scheduler's exceptions (all :class:`~ralp_tf.errors.RalpError`).
* :mod:`~scheduler.core.resources`, :mod:`~scheduler.core.catalogs`: resource types, catalogs
  (``cloud``, ``cloud5``, a cluster's), constraints.
* :mod:`~scheduler.core.problem`, :mod:`~scheduler.core.segments`, :mod:`~scheduler.core.encoding`:
  the HeterPS problem (layers x types, cost and provisioning), its segment tables, and the
  decision encoding; :func:`~scheduler.core.problem.default_throughput`.
* :mod:`~scheduler.core.maxload`: the dnn-partitioning max-load problem.
* :mod:`~scheduler.core.pss`: one profile on one ParameterServerStrategy cluster, priced by
  ``ralp_tf.plan.estimate``, and its HeterPS view.
* :mod:`~scheduler.core.schedule`: the :class:`~scheduler.core.schedule.Schedule` every solver returns.
"""

#: The modules of this package (import them by their full names).
__all__ = ["catalogs", "encoding", "errors", "maxload", "problem", "pss", "resources", "schedule", "segments"]
