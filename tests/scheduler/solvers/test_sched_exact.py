"""The exact solver: hand-checked optima, and the DP equals exhaustive search on small problems."""
from __future__ import annotations


import pytest

from scheduler.core.errors import InfeasibleError
from scheduler.solvers.exact import Exact
from scheduler.core.resources import Constraints

from sched_helpers import random_problem, tiny_problem


def test_tiny_optimum(tiny) -> None:
    s = Exact().solve(tiny)
    assert s.assignment == [1, 0]
    assert s.cost == pytest.approx(10.0)
    assert s.units == {"slow": 2, "fast": 1}
    assert s.placement == {"a": "/job:worker/device:CPU:0", "b": "/job:worker/device:GPU:0"}
    assert s.constraint_met


def test_exhaustive_agrees_on_tiny(tiny) -> None:
    assert Exact(method="exhaustive").solve(tiny).cost == pytest.approx(10.0)


@pytest.mark.parametrize("seed", range(8))
def test_dp_equals_exhaustive(seed: int) -> None:
    p = random_problem(seed, n=6, dag=seed % 2 == 0)
    dp = Exact().solve(p)
    ex = Exact(method="exhaustive").solve(p)
    assert dp.objective == pytest.approx(ex.objective, rel=1e-9)


def test_unit_caps_across_stages() -> None:
    # Caps of 2 units per type make splitting into several stages of one type run out of units.
    for seed in range(4):
        p = random_problem(seed + 100, n=6, caps=2)
        dp, ex = Exact().solve(p), Exact(method="exhaustive").solve(p)
        assert dp.objective == pytest.approx(ex.objective, rel=1e-9)
        assert dp.units and all(v <= 2 for v in dp.units.values())


def test_budget() -> None:
    p = tiny_problem()
    assert Exact().solve(p.with_constraints(Constraints(100.0, budget_per_hour=3.7))).cost == pytest.approx(10.0)
    with pytest.raises(InfeasibleError, match="budget"):
        Exact().solve(p.with_constraints(Constraints(100.0, budget_per_hour=3.5)))
