"""The HeterPS cost model and provisioning, checked by hand, and its bad-input errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ralp_tf.errors import ValidationError
from scheduler.core.errors import CatalogError, InfeasibleError, MemoryLimitError, ProblemError
from scheduler.core.problem import Problem
from scheduler.core.resources import Catalog, Constraints, ResourceType

from sched_helpers import tiny_catalog, tiny_problem


def test_tiny_costs_by_hand(tiny: Problem) -> None:
    ev = tiny.evaluate([1, 0])  # slow, fast
    assert [(s.first, s.last, s.type_index, s.units) for s in ev.stages] == [(0, 0, 1, 2), (1, 1, 0, 1)]
    assert ev.throughput == pytest.approx(100.0)
    assert ev.price_per_hour == pytest.approx(3.6)
    assert ev.cost == pytest.approx(10.0)
    assert ev.constraint_met and ev.feasible
    ev = tiny.evaluate([0, 0])
    assert ev.units == {"fast": 2} and ev.cost == pytest.approx(4.0 / 3600 * 1e6 / 100)
    ev = tiny.evaluate([0, 1])  # slow stage needs 5 units > 4: provisioned at 4 and misses
    assert not ev.constraint_met and ev.units["slow"] == 4
    assert ev.throughput == pytest.approx(4 * 10 / 0.5)
    assert math.isinf(ev.objective)


def test_sync_and_traffic_by_hand() -> None:
    # One worker layer with 1 MB of parameters on a 1 Gbit/s link, batch 8, compute 0.01 s.
    cat = Catalog("c", (ResourceType("w", "/job:worker/device:CPU:0", flops=1e11, memory_bytes=1e9,
                                     price_per_hour=1.0, max_units=8, bandwidth_bps=1e9),))
    p = Problem("s", ["x"], ["dense"], cat, Constraints(1500.0), batch_size=8, compute=[[0.01]],
                param_bytes=[1e6])
    # T(k) = 0.01 + 8 * 2 (k-1)/k * 1e6 / 1e9; rate = 8k / T(k).
    rates = [8 * k / (0.01 + 8 * 2 * (k - 1) / k * 1e6 / 1e9) for k in range(1, 9)]
    k = next(i + 1 for i, r in enumerate(rates) if r >= 1500)
    ev = p.evaluate([0])
    assert ev.units == {"w": k} and ev.throughput == pytest.approx(rates[k - 1])
    # Two layers on different types: the 4 kB/sample activation crosses both ways (gradient too).
    cat2 = Catalog("c2", (cat.types[0], ResourceType("v", "/job:worker/device:GPU:0", flops=1e12,
                                                     memory_bytes=1e9, price_per_hour=1.0, max_units=8,
                                                     bandwidth_bps=1e9)))
    q = Problem("t", ["x", "y"], ["dense", "dense"], cat2, Constraints(0.0), batch_size=8,
                compute=[[0.01, 0.01], [0.02, 0.02]], param_bytes=[4.0, 0.0], output_bytes=[4000.0, 10.0],
                edges=[(0, 1)])
    ev = q.evaluate([0, 1])
    t0 = 0.01 + 8 * 8 * 4000 / 1e9   # sends activation, receives its gradient (full duplex: max)
    t1 = 0.02 + 8 * 8 * 4000 / 1e9
    assert [s.rate for s in ev.stages] == pytest.approx([8 / t0, 8 / t1])


def test_ps_stage_shards_layers() -> None:
    cat = Catalog("c", (ResourceType("ps", "/job:ps/replica:0/task:{k}/device:CPU:0", flops=1e11,
                                     memory_bytes=1e9, price_per_hour=0.5, max_units=4, bandwidth_bps=math.inf),))
    p = Problem("p", ["a", "b", "c"], ["dense"] * 3, cat, Constraints(45.0), batch_size=10,
                compute=[[0.1], [0.1], [0.2]], edges=[(0, 1), (1, 2)])
    # T(k) = max(0.4 / k, 0.2): k=1 -> 25/s, k=2 -> 50/s (meets 45), k >= 2 capped by the 0.2 s layer.
    ev = p.evaluate([0, 0, 0])
    assert ev.units == {"ps": 2} and ev.throughput == pytest.approx(50.0)
    with pytest.raises(InfeasibleError, match="best achievable throughput is 50"):
        p.with_constraints(Constraints(60.0))
    sched = p.make_schedule(np.array([0, 0, 0]), "t", 0.0)
    assert set(sched.placement.values()) == {"/job:ps/replica:0/task:0/device:CPU:0",
                                             "/job:ps/replica:0/task:1/device:CPU:0"}


def test_infeasible_throughput_states_best() -> None:
    with pytest.raises(InfeasibleError) as exc:
        tiny_problem(min_throughput=1000.0)
    assert "best achievable throughput is 200" in str(exc.value)
    assert exc.value.best_throughput == pytest.approx(200.0)
    assert isinstance(exc.value, ValidationError)


def test_empty_catalog() -> None:
    with pytest.raises(CatalogError, match="empty"):
        Catalog("none", ())


@pytest.mark.parametrize("bad", [float("nan"), -1.0])
def test_negative_or_nan_costs_and_times(bad: float) -> None:
    with pytest.raises(ProblemError):
        Problem("x", ["a"], ["dense"], tiny_catalog(), compute=[[bad, 0.1]])
    with pytest.raises(ProblemError):
        Problem("x", ["a"], ["dense"], tiny_catalog(), flops=[bad])
    with pytest.raises(CatalogError):
        ResourceType("t", "/job:worker/device:CPU:0", flops=1e9, memory_bytes=1e9, price_per_hour=bad,
                     max_units=1, bandwidth_bps=1e9)
    with pytest.raises(ProblemError):
        Constraints(min_throughput=bad)


def test_memory_limit_no_placement() -> None:
    with pytest.raises(MemoryLimitError, match="no placement satisfies the memory limit"):
        Problem("big", ["emb"], ["embedding"], tiny_catalog(), compute=[[0.1, 0.1]], param_bytes=[1e9])


def test_bad_catalog_fields() -> None:
    with pytest.raises(CatalogError, match="device template"):
        ResourceType("t", "gpu0", flops=1e9, memory_bytes=1e9, price_per_hour=1, max_units=1, bandwidth_bps=1e9)
    with pytest.raises(CatalogError, match="max_units"):
        ResourceType("t", "/job:worker/device:CPU:0", flops=1e9, memory_bytes=1e9, price_per_hour=1, max_units=0,
                     bandwidth_bps=1e9)


def test_from_profile_uses_ralp_tf_cost_model() -> None:
    from ralp_tf.plan.costmodel import layer_seconds
    from scheduler.core.catalogs import CLOUD
    from scheduler.workloads import load_profile

    prof = load_profile("ctr_dnn")
    p = Problem.from_profile(prof, CLOUD, Constraints(0.0))
    layers = prof.compute_layers
    assert p.layer_names == [l.name for l in layers]
    r = CLOUD.index("gpu_v100")
    assert p.compute[3, r] == pytest.approx(layer_seconds(layers[3], CLOUD.types[r].task(), prof.batch_size)
                                            + CLOUD.types[r].overhead_s)
    # "other"-free model: PS allowed for every PS-placeable kind; inputs are not decisions.
    assert "input" not in p.kinds
