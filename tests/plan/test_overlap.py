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


# ------------------------------------------------- two workers per host (issue 40, "Overlap on the PSS path")
def _one_dense(flops: float) -> ModelProfile:
    """One Dense layer (one stage: no pipeline saving of its own) of ``flops`` per sample."""
    return ModelProfile.from_dict({"model_name": "d", "batch_size": 8, "outputs": ["fc"], "layers": [
        {"name": "x", "kind": "input", "param_bytes": 0, "flops": 0, "output_bytes": 64, "inbound": []},
        {"name": "fc", "kind": "dense", "param_bytes": 4040, "flops": flops, "output_bytes": 40, "inbound": ["x"],
         "var_bytes": [4000, 40], "output_shape": [10]}]})


@pytest.mark.parametrize("c, d", [(0.1, 0.1), (0.1, 0.02), (0.1, 0.0), (0.02, 0.1)])
def test_a_second_worker_on_a_host_fills_the_others_wait_by_processor_sharing(c: float, d: float) -> None:
    """Two workers on one host (stock TF runs one closure at a time per worker, so a second worker is
    a second closure in flight) share its CPU: each one's compute ``c`` is slowed by the other's
    (*Contention*: rho = c / T) while the other waits out its closure (``d``, the floor: no CPU, no
    link). So the host completes 2 / T worker steps a second, T = ((2c + d) + sqrt(4c^2 + d^2)) / 2,
    against one worker's 1 / (c + d): more, never twice, and nothing where there is no wait (d = 0)."""
    from ralp_tf.plan.closures import FloorTerms

    floor = FloorTerms(closure_s=d, closure_per_ps_s=0.0, step_per_ps_s=0.0, step_per_variable_s=0.0,
                       control_bytes_per_closure_per_ps=0.0, control_bytes_per_step_per_ps=0.0, plain_closure_s=d,
                       plain_step_per_variable_s=0.0)
    p = _one_dense(c * 5e10 / 3 / 8)  # c seconds forward+backward at the default CPU rate, batch 8
    one = costmodel.estimate(p, Cluster.local(1, 1, layout="colocated").with_closures(1, floor))
    two = costmodel.estimate(p, Cluster.local(2, 1, layout="colocated", workers_per_host=2).with_closures(1, floor))
    assert one.worker_compute_s == pytest.approx(c) and one.step_s == pytest.approx(c + d)
    sync = ((2 * c + d) + ((2 * c) ** 2 + d ** 2) ** 0.5) / 2
    assert two.step_s == pytest.approx(sync, rel=1e-6) and two.bottleneck == "workers"
    assert two.samples_per_s / one.samples_per_s == pytest.approx(2 * (c + d) / sync, rel=1e-6)
    assert 1.0 - 1e-9 <= two.samples_per_s / one.samples_per_s < 2.0


def test_two_workers_per_host_move_the_same_bytes_and_cpu_per_sample() -> None:
    """Colocated hosts at 0.3 core: the second worker of each host doubles every host's link bytes and CPU
    per synchronous step (twice the samples), so where the hosts' CPU bounds the step (the 0.3-core
    scaling slices) the existing terms price no gain; each worker step's traffic is unchanged."""
    p = cnn_with_head()
    for hosts in (2, 4):
        one = Cluster.local(hosts, hosts, layout="colocated", bandwidth="10gbit").with_host_cores(0.3)
        two = Cluster.local(2 * hosts, hosts, layout="colocated", bandwidth="10gbit",
                            workers_per_host=2).with_host_cores(0.3)
        assert [len(h.tasks) for h in two.hosts] == [3] * hosts
        e1, e2 = costmodel.estimate(p, one), costmodel.estimate(p, two)
        assert dict(e2.bytes_between) == pytest.approx(dict(e1.bytes_between))
        assert e2.link_bytes_per_step - e2.dispatch_bytes == pytest.approx(2 * (e1.link_bytes_per_step - e1.dispatch_bytes))
        assert e2.host_cpu_s == pytest.approx({h: 2 * s for h, s in e1.host_cpu_s.items()})
        assert " cpu " in e1.bottleneck and " cpu " in e2.bottleneck
        assert e2.samples_per_s == pytest.approx(e1.samples_per_s, rel=1e-9)
