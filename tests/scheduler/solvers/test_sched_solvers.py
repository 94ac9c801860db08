"""Every solver on tiny problems with hand-checked optima (see conftest.tiny_problem and
test_maxload.chain3), and the ralp_tf placement-policy protocol."""
from __future__ import annotations

import pytest

from ralp_tf.plan.cluster import Cluster
from scheduler import RALP, BayesOpt, Exact, Greedy, RandomSearch
from scheduler.core.errors import SolverNotApplicableError
from scheduler.core.problem import Problem
from scheduler.core.resources import Catalog, Constraints, ResourceType
from scheduler.workloads import dnn_partitioning as dp

from test_sched_maxload import chain3


def test_greedy_tiny(tiny) -> None:
    # Start all-fast ($11.11); layer a -> slow gives [slow, fast] ($10, meets); layer b stays fast.
    s = Greedy().solve(tiny)
    assert s.assignment == [1, 0] and s.cost == pytest.approx(10.0)


def test_random_tiny(tiny) -> None:
    s = RandomSearch(samples=200, seed=1).solve(tiny)
    assert s.cost == pytest.approx(10.0) and s.notes["samples"] == 200


def test_ralp_rule() -> None:
    cat = Catalog("c", (
        ResourceType("gpu", "/job:worker/device:GPU:0", flops=1e12, memory_bytes=1e9, price_per_hour=3,
                     max_units=4, bandwidth_bps=1e10),
        ResourceType("cpu", "/job:worker/device:CPU:0", flops=1e11, memory_bytes=1e9, price_per_hour=1,
                     max_units=4, bandwidth_bps=1e10),
        ResourceType("ps", "/job:ps/replica:0/task:{k}/device:CPU:0", flops=1e11, memory_bytes=1e9,
                     price_per_hour=0.5, max_units=4, bandwidth_bps=1e10)))
    p = Problem("r", ["emb", "conv", "fc"], ["embedding", "conv", "dense"], cat, Constraints(0.0), batch_size=4,
                flops=[1e3, 1e6, 1e5], edges=[(0, 1), (1, 2)])
    s = RALP().solve(p)
    assert s.assignment == [2, 0, 2]
    assert s.placement["emb"].startswith("/job:ps/") and s.placement["conv"] == "/job:worker/device:GPU:0"
    with pytest.raises(SolverNotApplicableError):
        RALP().solve(dp.from_dict(chain3()))


def test_bo_tiny(tiny) -> None:
    s = BayesOpt(evaluations=16, initial=6, fit_steps=20, seed=0).solve(tiny)
    assert s.cost == pytest.approx(10.0)


def test_maxload_heuristics() -> None:
    p = dp.from_dict(chain3())
    assert Greedy().solve(p).max_load == pytest.approx(3.25)
    assert RandomSearch(samples=50).solve(p).max_load == pytest.approx(3.25)
    assert BayesOpt(evaluations=8, initial=4, fit_steps=10).solve(p).max_load == pytest.approx(3.25)


@pytest.mark.parametrize("solver", [Exact(), Greedy(), RALP(), RandomSearch(samples=100)])
def test_plan_validates_against_cluster(solver) -> None:
    from scheduler.workloads import load_profile

    prof = load_profile("ctr_dnn")
    cluster = Cluster.local(workers=2, ps=2)
    plan = solver.plan(prof, cluster)
    plan.validate(prof, cluster)
    assert plan.provisioning["worker"] <= 2 and 1 <= plan.provisioning["ps"] <= 2
    for dev in plan.placements.values():
        assert dev in cluster.devices()
    assert plan.policy == f"scheduler.{solver.name}"
    # Round trip through JSON.
    assert type(plan).from_json(plan.to_json()).placements == plan.placements


def test_plan_with_gpu_workers_and_throughput() -> None:
    from scheduler.workloads import load_profile

    prof = load_profile("alexnet")
    cluster = Cluster.local(workers=4, ps=2, gpus={"worker": 1})
    plan = Exact(throughput=2000.0).plan(prof, cluster)
    # The HeterPS schedule of the cluster's types meets the constraint (HeterPS model's figures) ...
    assert plan.notes["heterps_constraint_met"] and plan.notes["heterps_predicted_throughput"] >= 2000.0
    # ... and the plan returned is the cost model's fastest of it and the analyzer's.
    assert plan.notes["pss_predicted_step_s"] <= plan.notes["analyzer_predicted_step_s"]
    assert any(d == "/job:worker/device:GPU:0" for d in plan.placements.values())
