"""RALP solver: FC and embedding layers to the parameter servers, every other layer to workers.

The rule of ralp_tf's analyzer (:data:`ralp_tf.model.RALP_PS_KINDS` on PS tasks), applied to a
heterogeneous catalog: RALP layers go to the cheapest PS type that may run them; the rest to
the worker type with the highest FLOP rate. Provisioning (units per stage) is the problem's. On
a PSS problem: every layer of those kinds that may compute on a PS goes to the PS tasks
(spread by :meth:`scheduler.core.pss.PSSProblem.from_types`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ralp_tf.model import RALP_PS_KINDS
from scheduler.solvers.base import Solver
from scheduler.core.errors import SolverNotApplicableError
from scheduler.core.problem import Problem
from scheduler.core.pss import PSSProblem

__all__ = ["RALP"]


class RALP(Solver):
    """FC/embedding -> PS, rest -> fastest worker type."""

    name = "ralp"

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(problem, PSSProblem):
            on_ps = [l.kind in RALP_PS_KINDS for l in problem.layers]
            return problem.from_types(on_ps), {"rule": "RALP_PS_KINDS layers on the PS tasks, the rest on the workers"}
        if not isinstance(problem, Problem):
            raise SolverNotApplicableError(f"the RALP rule places FC/embedding layers on parameter servers; "
                                           f"{type(problem).__name__} {problem.name!r} has no layer kinds or PS "
                                           "type. Use exact, greedy, random, bo or rl")
        types = problem.catalog.types
        workers = [r for r, t in enumerate(types) if t.role == "worker"]
        ps = sorted((r for r, t in enumerate(types) if t.role == "ps"), key=lambda r: types[r].price_per_hour)
        fastest = max(workers, key=lambda r: types[r].flops) if workers else None
        a = np.zeros(problem.num_decisions, dtype=np.int64)
        for l, kind in enumerate(problem.kinds):
            choice = None
            if kind in RALP_PS_KINDS:
                choice = next((r for r in ps if problem.allowed[l, r]), None)
            if choice is None:
                choice = fastest if fastest is not None and problem.allowed[l, fastest] else \
                    int(np.flatnonzero(problem.allowed[l])[0])
            a[l] = choice
        return a, {"rule": "dense/embedding on PS, rest on the fastest worker type"}
