"""The overlap of a worker's pulls and pushes with its compute (ralp_tf.plan.costmodel, *Overlap*):
the pipeline's saving, where it is priced, and the free core it needs."""
from __future__ import annotations

import pytest

from plan_helpers import MB, cnn_with_head, ps
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan import costmodel
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.loads import pipeline_savings


def test_the_pipeline_saves_what_overlaps_and_nothing_else() -> None:
    # two layers of 3 s compute, 1 s pull and 1 s push: layer 2's pull under layer 1's forward,
    # layer 2's push under layer 1's backward; 10 s one after another, 8 s pipelined
    assert pipeline_savings([(3.0, 1.0, 1.0), (3.0, 1.0, 1.0)]) == pytest.approx(2.0)
    assert pipeline_savings([(3.0, 1.0, 1.0)]) == 0.0  # one layer waits for its own weights
    assert pipeline_savings([(0.0, 5.0, 5.0), (9.0, 0.0, 0.0)]) == 0.0  # no compute before the pull
    # a small first layer computes while the large one after it arrives: the saving is its forward
    # (1 of 3 s) and its backward (2 of 3 s), under the large pull and push
    assert pipeline_savings([(3.0, 0.0, 0.0), (0.0, 10.0, 10.0)]) == pytest.approx(3.0)
    assert pipeline_savings([]) == 0.0


def _heavy_cnn() -> ModelProfile:
    """:func:`cnn_with_head` with conv layers of 2 GFLOP per sample."""
    d = cnn_with_head().to_dict()
    d["layers"] = [dict(l, flops=2e9) if l["kind"] == "conv" else l for l in d["layers"]]
    return ModelProfile.from_dict(d)


def test_the_overlap_shortens_a_compute_bound_step_by_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stock PSS of a CNN whose conv layers compute while the dense head's weights arrive: with a
    fast link the step is the workers' chain, shortened by exactly the factor times the saving;
    a link-bound step does not move (the link is as busy)."""
    p = _heavy_cnn()
    fast, slow = Cluster.local(2, 1, bandwidth="10gbit"), Cluster.local(2, 1, bandwidth="10mbit")
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)
    base_fast, base_slow = costmodel.estimate(p, fast), costmodel.estimate(p, slow)
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.5)
    where = costmodel.resolve_placements(p, None)
    step = costmodel.step_traffic(p, where, 1)
    saving = costmodel.overlap_seconds(p, fast, where, step)["worker0"]
    assert saving > 0
    assert base_fast.bottleneck == "workers"
    assert costmodel.estimate(p, fast).step_s == pytest.approx(base_fast.step_s - 0.5 * saving, rel=1e-9)
    assert base_slow.bottleneck.startswith("ps0 link")
    assert costmodel.estimate(p, slow).step_s == pytest.approx(base_slow.step_s, rel=1e-12)


def test_loopback_variables_and_ps_computed_layers_do_not_overlap() -> None:
    """Only the worker's own layers and the variables it pulls over a link enter the pipeline: the
    head computed on the PS, or every variable on the worker's own host (colocated, one worker), saves nothing."""
    p = cnn_with_head()
    cluster = Cluster.local(1, 1, bandwidth="1gbit", layout="colocated")
    where = costmodel.resolve_placements(p, None)
    assert costmodel.overlap_seconds(p, cluster, where, costmodel.step_traffic(p, where, 1)) == {
        "host0": pytest.approx(0.0, abs=1e-12)}
    head = costmodel.resolve_placements(p, {"flat": ps(0), "fc": ps(0)})
    dedicated = Cluster.local(1, 1, bandwidth="1gbit")
    step = costmodel.step_traffic(p, head, 1)
    assert set(step.layer_variables) == {"c4", "c3", "c2", "c1"}
    assert step.layer_variables["c4"] == {costmodel.TaskRef.ps(0): (4 * MB, 4 * MB)}
    assert costmodel.overlap_seconds(p, dedicated, head, step)["worker0"] >= 0.0


def test_the_overlap_needs_a_core_free_while_the_worker_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """o_h = clamp(cores - CPU workers - PS compute per second, 0, 1), of the worker's host or of the
    one machine the hosts share, 1 where the cores are unknown: a colocated host of 1 core overlaps
    nothing, nor do two workers on a 2-core machine (both measured), one worker there does."""
    colocated = Cluster.local(2, 2, bandwidth="1gbit", layout="colocated")
    assert costmodel.free_core(colocated, "host0", {}, 1.0) == 1.0  # cores unknown
    for cores, ps_busy, share in ((1.0, 0.0, 0.0), (1.5, 0.0, 0.5), (1.5, 0.4, 0.1), (3.0, 0.4, 1.0)):
        got = costmodel.free_core(colocated.with_host_cores(cores), "host0", {"host0": ps_busy, "host1": 5.0}, 1.0)
        assert got == pytest.approx(share), (cores, ps_busy)
    assert costmodel.free_core(Cluster.local(2, 1).with_shared_cores(2.0), "worker0", {}, 1.0) == 0.0
    assert costmodel.free_core(Cluster.local(1, 1).with_shared_cores(2.0), "worker0", {}, 1.0) == 1.0
    assert costmodel.free_core(Cluster.local(1, 1).with_shared_cores(2.0), "worker0", {"ps0": 0.5}, 2.0) == 0.75
    p, one_core = _heavy_cnn(), colocated.with_host_cores(1.0)
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)
    before = {c.host_cores.get("host0"): costmodel.estimate(p, c).step_s for c in (colocated, one_core)}
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 1.0)
    assert costmodel.estimate(p, one_core).step_s == pytest.approx(before[1.0], rel=1e-12)
    assert costmodel.estimate(p, colocated).step_s < before[None]
