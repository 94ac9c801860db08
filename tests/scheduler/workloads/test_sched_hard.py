"""Harder workloads: loadable by name, seeded, and out of reach of the simple baselines."""
from __future__ import annotations

import math

import pytest

from scheduler.solvers.exact import Exact
from scheduler.solvers.greedy import Greedy
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem
from scheduler.solvers.random_search import RandomSearch
from scheduler.workloads import load_workload
from scheduler.workloads.hard import HARD_WORKLOADS


def test_hard_workloads_load_by_name() -> None:
    kinds = {n: type(load_workload(n)) for n in HARD_WORKLOADS}
    assert kinds == {"inception_tight": MaxLoadProblem, "inception_training_tight": MaxLoadProblem,
                     "ctr_cloud5": Problem}
    p = load_workload("ctr_cloud5")
    assert p.num_choices == 5 and p.num_decisions >= 25
    assert [t.name for t in p.catalog.types] == ["gpu_v100", "gpu_t4", "cpu_c5", "cpu_m5", "ps_r5"]


def test_baselines_fall_short_on_inception_tight() -> None:
    p = load_workload("inception_tight")
    assert len(p.node_ids) == 175
    opt = Exact().solve(p).objective
    for solver in (Greedy(), RandomSearch(samples=500, seed=0)):
        v = solver.solve(p).objective
        assert not math.isfinite(v) or v >= 1.10 * opt, (solver.name, v / opt)


@pytest.mark.parametrize("field,value", [("price_per_hour", 0.0), ("price_per_hour", -1.0), ("flops", 0.0),
                                         ("flops", -5.0), ("bandwidth_bps", 0.0)])
def test_zero_or_negative_price_or_rate_is_refused(field: str, value: float) -> None:
    from scheduler.core.errors import CatalogError
    from scheduler.core.resources import ResourceType

    kw = dict(flops=1e9, memory_bytes=1e9, price_per_hour=1.0, max_units=1, bandwidth_bps=1e9)
    kw[field] = value
    with pytest.raises(CatalogError, match=field):
        ResourceType("t", "/job:worker/device:CPU:0", **kw)
