"""The cost model's byte counts and the analyzer's decisions."""
from __future__ import annotations

import pytest

from ralp_tf import models
from ralp_tf.plan.analyzer import analyze, candidate_splits, plan_for
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import STEP_OVERHEAD_BYTES, estimate, estimate_allreduce, ring_allreduce_bytes
from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.model.profiler import profile


@pytest.fixture(scope="module")
def profiles() -> dict[str, ModelProfile]:
    return {name: profile(models.BUILTIN_MODELS[name](), batch_size=32)
            for name in ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")}


def test_stock_ps_moves_every_weight_twice(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate(p, Cluster.local(2, 1))
    assert e.bytes_per_step == 2 * p.param_bytes + STEP_OVERHEAD_BYTES  # logits stay on the worker
    assert e.bytes_between[("ps:0", "worker")] == p.param_bytes + STEP_OVERHEAD_BYTES / 2


def test_round_robin_over_two_ps(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate(p, Cluster.local(2, 2))
    assert e.bytes_per_step == 2 * p.param_bytes + 2 * STEP_OVERHEAD_BYTES
    assert e.bytes_between[("ps:0", "worker")] > 0 and e.bytes_between[("ps:1", "worker")] > 0


def test_ralp_alexnet_bound_is_about_15x(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    c = Cluster.local(2, 1)
    plan = plan_for(p, c, ["flatten", "fc1", "fc2", "logits"])
    e = estimate(p, c, plan)
    conv = sum(l.param_bytes for l in p.layers if l.kind == "conv")
    assert e.bytes_per_step == 2 * conv + 2 * 32 * 4096 * 4 + 2 * 32 * 10 * 4 + STEP_OVERHEAD_BYTES
    assert 14.5 < 2 * p.param_bytes / e.bytes_per_step < 15.5


def test_analyzer_splits_alexnet_and_vgg_at_the_fc_head(profiles: dict[str, ModelProfile]) -> None:
    for name, bound in (("alexnet_cifar", 15.0), ("vgg16_cifar", 2.28)):
        a = analyze(profiles[name], Cluster.local(2, 1, bandwidth="1gbit"))
        assert a.is_split
        assert set(a.plan.ps_layers()) == {"flatten", "fc1", "fc2", "logits"}
        ratio = a.baseline.estimate.bytes_per_step / a.chosen.estimate.bytes_per_step
        assert ratio == pytest.approx(bound, rel=0.03)
        text = a.report()
        assert "Decision: split" in text and "MB" in text and "speed-up" in text


def test_analyzer_keeps_resnet_on_the_workers(profiles: dict[str, ModelProfile]) -> None:
    for bw in ("100mbit", "1gbit", "10gbit"):
        a = analyze(profiles["resnet_cifar"], Cluster.local(2, 1, bandwidth=bw))
        assert not a.is_split, a.report()
        assert "Decision: no split" in a.report()


def test_no_ps_tasks_means_no_split(profiles: dict[str, ModelProfile]) -> None:
    a = analyze(profiles["alexnet_cifar"], Cluster.local(2, 0))
    assert not a.is_split
    with pytest.raises(PlanError, match="no PS tasks"):
        estimate(profiles["alexnet_cifar"], Cluster.local(2, 0), {"fc1": "/job:ps/replica:0/task:0/device:CPU:0"})


def test_embedding_model_candidates_include_embeddings_on_ps(profiles: dict[str, ModelProfile]) -> None:
    labels = [label for label, _ in candidate_splits(profiles["ctr_dnn"])]
    assert "embeddings on PS" in labels
    stock = estimate(profiles["ctr_dnn"], Cluster.local(2, 1))
    emb = profiles["ctr_dnn"].layer("emb0")
    # Only gathered rows move for an embedding under stock PS, not the table.
    assert stock.bytes_per_step < 2 * profiles["ctr_dnn"].param_bytes / 10
    assert stock.bytes_between[("ps:0", "worker")] >= 32 * emb.output_bytes


def test_allreduce_formula(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate_allreduce(p, Cluster.local(3, 0, bandwidth="1gbit"))
    assert e.bytes_per_step == pytest.approx(3 * ring_allreduce_bytes(3, p.trainable_param_bytes))
    assert ring_allreduce_bytes(1, 100) == 0
    assert e.comm_s == pytest.approx(8 * 2 * 2 / 3 * p.trainable_param_bytes / 1e9)


def test_slower_network_favours_ralp_more(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    fast = analyze(p, Cluster.local(2, 1, bandwidth="10gbit")).predicted_speedup
    slow = analyze(p, Cluster.local(2, 1, bandwidth="100mbit")).predicted_speedup
    assert slow > fast > 1


@pytest.mark.parametrize("bw", ["100mbit", "1gbit", "10gbit"])
def test_dedicated_two_worker_choices_are_unchanged_by_hosts(profiles: dict[str, ModelProfile], bw: str) -> None:
    """The choices recorded before hosts existed, on today's layout (2 workers, 1 PS host)."""
    cluster = Cluster.local(2, 1, bandwidth=bw)
    for name in ("alexnet_cifar", "vgg16_cifar"):
        assert set(analyze(profiles[name], cluster).plan.ps_layers()) == {"flatten", "fc1", "fc2", "logits"}
    assert not analyze(profiles["resnet_cifar"], cluster).is_split


def test_a_dedicated_ps_link_moves_down_plus_up_per_worker_step(profiles: dict[str, ModelProfile]) -> None:
    """Measured (benchmarks/README.md, scaling slice): stock PSS on alexnet at 1 Gbit/s stays at
    ~13.6-13.9 samples/s for 2 and 3 workers; the PS link moves (down + up) per worker step."""
    p = profiles["alexnet_cifar"]
    for n in (2, 3):
        e = estimate(p, Cluster.local(n, 1, bandwidth="1gbit"))
        down, up = e.bytes_between[("ps:0", "worker")], e.bytes_between[("worker", "ps:0")]
        assert e.samples_per_s == pytest.approx(1e9 / (8 * (down + up)) * p.batch_size)
        assert 12.5 < e.samples_per_s < 15


def test_serving_cpu_is_priced_where_a_host_states_its_cores(profiles: dict[str, ModelProfile]) -> None:
    """A PS host with a known core budget spends SERVE_CPU_S_PER_BYTE per byte it moves plus
    PS_STEP_CPU_S per worker step; at 0.1 core that bounds stock PSS (measured: small_cnn with a
    0.1-core PS ran 3708 samples/s where the model without the term said 5522)."""
    from ralp_tf.plan.costmodel import PS_STEP_CPU_S, SERVE_CPU_S_PER_BYTE

    p = profiles["alexnet_cifar"]
    plain = Cluster.local(1, 1, bandwidth="10gbit")
    e0 = estimate(p, plain)
    roomy = estimate(p, plain.with_host_cores({"worker0": 8}))  # a worker's serving CPU: a bound that does not bind here
    assert roomy.step_s == pytest.approx(e0.step_s) and roomy.host_cpu_s["worker0"] > 0
    assert "ps0" not in e0.host_cpu_s  # no core count: serving is not priced
    e = estimate(p, plain.with_host_cores({"ps0": 0.1}))
    moved = e.bytes_per_step  # one worker: its step's bytes to and from ps:0
    serve = (SERVE_CPU_S_PER_BYTE * moved + PS_STEP_CPU_S) / 0.1
    assert e.host_cpu_s["ps0"] == pytest.approx(serve)
    assert e.bottleneck.startswith("ps0 cpu") and e.step_s == pytest.approx(max(serve, e0.step_s))
    assert e.bytes_per_step == e0.bytes_per_step  # bytes do not change
    two = estimate(p, Cluster.local(2, 1, bandwidth="10gbit").with_host_cores({"ps0": 0.1}))
    assert two.host_cpu_s["ps0"] == pytest.approx(2 * serve)  # it serves every worker's step
    with pytest.raises(Exception, match="core count of host 'ps0' must be a positive number"):
        plain.with_host_cores({"ps0": 0})
    with pytest.raises(Exception, match="runs no task"):
        plain.with_host_cores({"ps9": 1})
