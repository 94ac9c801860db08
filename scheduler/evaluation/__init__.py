"""scheduler.evaluation: experiments and reports over the solvers and the learned policy; nothing
else in scheduler imports it. Each module with a ``main`` is a command (``python -m scheduler.<name>``
runs it through the thin module kept at the old path).

* :mod:`~scheduler.evaluation.recipes`: the training recipes of the shipped weights and the
  command that makes them (``python -m scheduler.shipped``).
* :mod:`~scheduler.evaluation.generalise`: DAgger training against exact experts,
  leave-one-out measurements, the paper-LSTM baseline.
* :mod:`~scheduler.evaluation.type_slots`: the type-slot policy's training sets and its
  evaluation across catalogs of 2-6 types.
* :mod:`~scheduler.evaluation.policy_eval`: the shipped policy on held-out workloads, and its latency.
* :mod:`~scheduler.evaluation.compare`, :mod:`~scheduler.evaluation.compare_report`:
  ``compare-schedulers`` (every solver on every workload) and its tables, chart and verdict.
* :mod:`~scheduler.evaluation.pss_table`: every policy planning every built-in model for PSS clusters.
* :mod:`~scheduler.evaluation.exact_reach`: the exact max-load DP and the MILP beside the authors' DP.
"""

#: The modules of this package (import them by their full names).
__all__ = ["compare", "compare_report", "exact_reach", "generalise", "policy_eval", "pss_table", "recipes",
           "type_slots"]
