"""scheduler.solvers: the solvers behind :class:`~scheduler.solvers.base.Solver` (``solve(problem)``,
``plan(profile, cluster)``); they import :mod:`scheduler.core` only.

* :mod:`~scheduler.solvers.base`, :mod:`~scheduler.solvers.cluster_plan`: the solver protocol and
  ``Solver.plan``'s contract (the fastest of the analyzer's plan and the solver's own).
* :mod:`~scheduler.solvers.exact` (with :mod:`~scheduler.solvers.bounds`,
  :mod:`~scheduler.solvers.segment_dp`, :mod:`~scheduler.solvers.contraction`): reference optima.
* :mod:`~scheduler.solvers.greedy`, :mod:`~scheduler.solvers.ralp`,
  :mod:`~scheduler.solvers.random_search`, :mod:`~scheduler.solvers.bayesopt`,
  :mod:`~scheduler.solvers.milp`, :mod:`~scheduler.solvers.baechi` (mETF, mSCT): the other solvers.
* :mod:`~scheduler.solvers.polish`: the local polish (block moves) the RL solver ends with.
"""

#: The modules of this package (import them by their full names).
__all__ = ["baechi", "base", "bayesopt", "bounds", "cluster_plan", "contraction", "exact", "greedy", "milp", "polish",
           "random_search", "ralp", "segment_dp"]
