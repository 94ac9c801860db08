"""The decision env of a feature set: :func:`make_feature_env` builds the paper's env (``basic``,
:mod:`scheduler.policy.envs`), the lookahead one (``lookahead``,
:mod:`scheduler.policy.policy_features`) or the type-slot one (``slots``, :mod:`scheduler.policy.slots`)
for a problem. Above all three, so that none of them imports another's user.
"""
from __future__ import annotations

from typing import Any

from scheduler.core.errors import ProblemError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem
from scheduler.policy.envs import make_env
from scheduler.policy.policy_features import FEATURE_SETS, LookaheadHeterPSEnv, LookaheadMaxLoadEnv
from scheduler.policy.slots import SlotEnv, SlotView

__all__ = ["make_feature_env"]


def make_feature_env(problem: Any, features: str = "basic") -> Any:
    """The env of ``problem`` for the feature set ``features`` (:data:`FEATURE_SETS`)."""
    if features == "basic":
        return make_env(problem)
    if features not in FEATURE_SETS:
        raise ProblemError(f"unknown feature set {features!r}; use one of {', '.join(FEATURE_SETS)}")
    if isinstance(problem, MaxLoadProblem):
        return LookaheadMaxLoadEnv(problem)
    if features == "slots":
        return SlotEnv(problem if isinstance(problem, SlotView) else SlotView(problem), "lookahead")
    if isinstance(problem, Problem):
        return LookaheadHeterPSEnv(problem)
    raise ProblemError(f"RL cannot handle {type(problem).__name__}")
