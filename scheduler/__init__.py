"""scheduler: HeterPS-style placement of layers on heterogeneous resources.

Build a :class:`Problem` (layers x resource types, constraints, HeterPS cost and provisioning)
from a ralp_tf profile, or load a workload (:func:`scheduler.workloads.load_workload`), then
solve it with any solver; all share ``solve(problem) -> Schedule`` and ralp_tf's placement
policy protocol ``plan(profile, cluster) -> Plan``::

    import scheduler
    problem = scheduler.load_workload("ctr_dnn")
    schedule = scheduler.Exact().solve(problem)
    plan = scheduler.RL(throughput=500).plan(profile, cluster)

TensorFlow is imported only by the BO and RL solvers (lazily).
"""
from scheduler.solvers.baechi import METF, MSCT
from scheduler.solvers.base import Solver
from scheduler.solvers.bayesopt import BayesOpt
from scheduler.core.catalogs import CLOUD, catalog_from_cluster, get_catalog
from scheduler.core.errors import (CatalogError, InfeasibleError, MemoryLimitError, PolicyMismatchError, ProblemError,
                                   SchedulerError, SolverNotApplicableError, WorkloadError)
from scheduler.solvers.exact import Exact
from scheduler.solvers.greedy import Greedy
from scheduler.core.maxload import MaxLoadProblem
from scheduler.solvers.milp import MILP
from scheduler.core.problem import Problem
from scheduler.core.pss import PSSProblem
from scheduler.core.resources import Catalog, Constraints, ResourceType
from scheduler.solvers.ralp import RALP
from scheduler.solvers.random_search import RandomSearch
from scheduler.policy.lstm_policy import LSTMPolicy
from scheduler.policy.rl import RL
from scheduler.core.schedule import Schedule
from scheduler.workloads import load_workload

SOLVERS: dict[str, type[Solver]] = {
    "exact": Exact, "ralp": RALP, "greedy": Greedy, "random": RandomSearch, "bo": BayesOpt, "rl": RL, "milp": MILP,
    "metf": METF, "msct": MSCT,
}

__all__ = [
    "BayesOpt", "CLOUD", "Catalog", "CatalogError", "Constraints", "Exact", "Greedy", "InfeasibleError",
    "LSTMPolicy", "METF", "MILP", "MSCT", "MaxLoadProblem", "MemoryLimitError", "PSSProblem", "PolicyMismatchError", "Problem", "ProblemError", "RALP", "RL", "RandomSearch",
    "ResourceType", "SOLVERS", "Schedule", "SchedulerError", "Solver", "SolverNotApplicableError", "WorkloadError",
    "catalog_from_cluster", "get_catalog", "load_workload",
]
