"""The HeterPS relaxation bound: it brackets the exhaustive optimum on small problems (unit caps
binding or not, with any work budget), and is the optimum when it says so."""
from __future__ import annotations

import pytest

from scheduler.solvers.bounds import heterps_bound
from scheduler.solvers.exact import Exact, solve_heterps_sweep

from sched_helpers import random_problem


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("caps", [1, 6])
def test_bound_brackets_the_exhaustive_optimum(seed: int, caps: int) -> None:
    p = random_problem(seed, n=6, caps=caps)
    try:
        opt = Exact(method="exhaustive").solve(p).objective
    except Exception:  # no placement meets the constraint within the caps
        pytest.skip("infeasible draw")
    for budget in (2, 5, 4000):
        b = heterps_bound(p, max_dps=budget)
        assert b.lower <= opt * (1 + 1e-9)
        assert b.upper >= opt * (1 - 1e-9)
        if b.exact:
            assert b.lower == pytest.approx(opt) and p.objective(b.assignment) == pytest.approx(opt)
    assert b.dps <= b.thresholds


@pytest.mark.parametrize("seed", range(6))
def test_exact_through_the_intervals_equals_the_sweep(seed: int) -> None:
    p = random_problem(seed, n=7)
    s = Exact().solve(p)
    a, _ = solve_heterps_sweep(p)
    assert s.objective == pytest.approx(p.objective(a))
