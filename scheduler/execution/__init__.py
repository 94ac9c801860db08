"""scheduler.execution: running a schedule on emulated heterogeneous hardware
(``ralp-tf execute-schedule``); imports :mod:`scheduler.core` and ralp_tf's testbed and bench.

* :mod:`~scheduler.execution.emulated`: emulated resource types (a CPU quota, a capped link) and
  their catalogs (``scheduler/catalogs/*.json``).
* :mod:`~scheduler.execution.unitrate`: a model's samples/s under each type's quota, measured and cached.
* :mod:`~scheduler.execution.execute`: solve, provision with the cost model, run real PSS
  training on the namespace testbed, and report measured against predicted.
"""

#: The modules of this package (import them by their full names).
__all__ = ["emulated", "execute", "unitrate"]
