"""The one solver interface: ``solve(problem) -> Schedule``, plus ralp_tf's placement-policy
protocol ``plan(profile, cluster) -> Plan``. Both run the solver outside the caller's
TensorFlow context (:func:`ralp_tf.place.isolation.outside_strategy`): a solver called from inside a
``strategy.scope()`` never creates variables or runs optimizers on the user's cluster.

A solver subclass implements ``_solve(problem) -> (assignment, notes)`` (one choice index per
decision); :meth:`Solver.solve` times it and asks the problem to price it. Every problem kind
(:class:`scheduler.core.problem.Problem` (HeterPS), :class:`scheduler.core.maxload.MaxLoadProblem`,
:class:`scheduler.core.pss.PSSProblem`) offers the same small surface: ``num_decisions``,
``num_choices``, ``allowed``, ``evaluate``, ``objective``, ``penalized``, ``scores``
(``(objective, penalized)`` from one evaluation), ``random_assignments``,
``encode_dim``/``decode`` and ``make_schedule``. A solver that has no meaning for a problem kind
raises :class:`scheduler.core.errors.SolverNotApplicableError`.
"""
from __future__ import annotations

import abc
import time
import warnings
from typing import Any

import numpy as np

from ralp_tf.model import ModelProfile
from ralp_tf.place import outside_strategy
from ralp_tf.plan import Cluster, Plan
from scheduler.core.resources import Catalog
from scheduler.core.schedule import Schedule

__all__ = ["time_cap_cut", "Solver"]


def time_cap_cut(notes: dict[str, Any], solver: str, phase: str, seconds: float) -> None:
    """Record in ``notes["time_cap_cut"]`` (and warn) that a wall-clock safety cap of ``seconds``
    cut ``phase`` of a solve short: solver budgets are counted in work, so a cut result depends
    on the machine's speed and is no longer reproducible."""
    notes.setdefault("time_cap_cut", []).append(phase)
    warnings.warn(f"{solver}: the {seconds:g} s safety cap cut {phase} short; the result now depends on this "
                  "machine's speed (raise the cap, or lower the work budget)", RuntimeWarning, stacklevel=3)


class Solver(abc.ABC):
    """Base class of every solver.

    ``throughput`` / ``budget`` / ``catalog`` are used only by :meth:`plan`: given any of them, the
    HeterPS schedule of the cluster's types (or of ``catalog``) under that constraint is one of the
    candidate plans (:mod:`scheduler.solvers.cluster_plan`).
    """

    name = "solver"

    def __init__(self, *, throughput: float | None = None, budget: float | None = None,
                 catalog: Catalog | None = None, seed: int = 0) -> None:
        self.throughput = throughput
        self.budget = budget
        self.catalog = catalog
        self.seed = int(seed)

    @abc.abstractmethod
    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Return ``(assignment, notes)``."""

    def solve(self, problem: Any) -> Schedule:
        """Solve ``problem`` outside any distribution strategy (:mod:`ralp_tf.place.isolation`); the
        Schedule's ``solve_seconds`` is this call's wall time."""
        t0 = time.perf_counter()
        assignment, notes = outside_strategy(self._solve, problem)
        seconds = time.perf_counter() - t0
        return problem.make_schedule(np.asarray(assignment, dtype=np.int64), self.name, seconds, notes)

    # ----------------------------------------------------------------- ralp_tf policy protocol
    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan:
        """Placement policy for ``ralp_tf.placement(policy=...)``: the fastest plan, by ralp_tf's cost
        model, of the analyzer's, this solver's own plan of the PSS problem and (with ``catalog``,
        ``throughput`` or ``budget``) its HeterPS schedule mapped onto the cluster; never predicted
        slower than the analyzer's (:func:`scheduler.solvers.cluster_plan.plan_for_cluster`). The Plan is
        validated against ``profile`` and ``cluster``; its notes name the model of every figure.
        Safe inside ``strategy.scope()``: the solver runs outside it and creates nothing on the
        cluster (:mod:`ralp_tf.place.isolation`)."""
        from scheduler.solvers.cluster_plan import plan_for_cluster

        return outside_strategy(plan_for_cluster, self, profile, cluster)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed})"
