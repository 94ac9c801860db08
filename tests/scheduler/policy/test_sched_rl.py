"""The RL solver: tiny optima, per-decision timing, and generalisation to unseen problems."""
from __future__ import annotations


import pytest

from scheduler.solvers.exact import Exact
from scheduler.policy.envs import HeterPSEnv
from scheduler.policy.rl import RL
from scheduler.workloads import dnn_partitioning as dp

from sched_helpers import random_problem
from test_sched_maxload import chain3


def test_rl_tiny(tiny) -> None:
    s = RL(train=True, iterations=40, batch=16, seed=0, polish=True).solve(tiny)
    assert s.cost == pytest.approx(10.0)
    assert s.notes["iterations"] == 40
    assert 0 < s.notes["decision_ms"] < 50  # the 2 ms target is measured by compare-schedulers


def test_rl_maxload_tiny() -> None:
    p = dp.from_dict(chain3())
    s = RL(train=True, iterations=30, batch=16, seed=0, polish=True).solve(p)
    assert s.max_load == pytest.approx(3.25)


def test_features_same_width_across_problems() -> None:
    widths = {HeterPSEnv(random_problem(s, n=4 + s)).feature_dim for s in range(4)}
    assert len(widths) == 1


@pytest.mark.slow  # over ~5 s: the fast tier's limit
def test_generalisation_small_scale() -> None:
    train = [random_problem(s, n=6) for s in range(6)]
    test = [random_problem(s, n=6) for s in (50, 51, 52)]
    solver = RL.pretrain(train, iterations=240, seed=0, samples=16, batch=16, polish=True)  # work budget: no time cap
    ratios = []
    for p in test:
        s = solver.solve(p)  # no retraining
        assert s.notes.get("iterations") is None
        ratios.append(s.objective / Exact().solve(p).objective)
    assert max(ratios) <= 1.10, ratios
