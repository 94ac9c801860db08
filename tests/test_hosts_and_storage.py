"""Hosts in the cluster model, per-host-link predictions, balanced storage and the plan format's
versions. Pure data: profiles are written by hand, no TensorFlow."""
from __future__ import annotations

import json

import pytest

from ralp_tf.plan.analyzer import analyze, plan_for
from ralp_tf.plan.cluster import Cluster, address_host
from ralp_tf.plan.costmodel import STEP_OVERHEAD_BYTES, estimate, estimate_allreduce, ring_allreduce_bytes
from ralp_tf.errors import ClusterConfigError, PlanError
from ralp_tf.plan.plans import PLAN_FORMAT, PLAN_FORMAT_V1, Plan
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.storage import balance_storage, stored_bytes, with_balanced_storage

MB = 1_000_000
BATCH = 8


def _layer(name: str, kind: str, var_bytes: list[int], out: int, inbound: list[str], flops: float = 1e6) -> dict:
    return {"name": name, "kind": kind, "param_bytes": sum(var_bytes), "var_bytes": var_bytes, "flops": flops,
            "output_bytes": out, "inbound": inbound, "output_shape": [out // 4]}


def cnn_with_head() -> ModelProfile:
    """Four conv layers of 4, 3, 2 and 1 MB (one variable each) and a 10 MB dense head."""
    layers = [_layer("x", "input", [], 1024, []), _layer("c4", "conv", [4 * MB], 4096, ["x"]),
              _layer("c3", "conv", [3 * MB], 4096, ["c4"]), _layer("c2", "conv", [2 * MB], 4096, ["c3"]),
              _layer("c1", "conv", [1 * MB], 4096, ["c2"]), _layer("flat", "reshape", [], 4096, ["c1"]),
              _layer("fc", "dense", [10 * MB], 40, ["flat"])]
    return ModelProfile.from_dict({"model_name": "cnn", "batch_size": BATCH, "outputs": ["fc"], "layers": layers})


# ---------------------------------------------------------------------------------------- hosts
def test_hosts_come_from_the_address_host_part() -> None:
    c = Cluster.from_tf_config(json.dumps({"cluster": {
        "chief": ["10.0.0.1:2000"], "worker": ["10.0.0.1:2222", "Node-2.example:2222"],
        "ps": ["10.0.0.1:2223", "[fe80::1]:2223"]}}), bandwidth="1gbit")
    assert [t.host for t in c.tasks] == ["10.0.0.1", "10.0.0.1", "node-2.example", "10.0.0.1", "fe80::1"]
    assert [(h.name, h.tasks) for h in c.hosts] == [
        ("10.0.0.1", ("chief:0", "worker:0", "ps:0")), ("node-2.example", ("worker:1",)), ("fe80::1", ("ps:1",))]
    assert c.num_hosts == 3 and "on 3 host(s)" in c.describe()


def test_loopback_tasks_count_as_hosts_of_their_own() -> None:
    assert address_host("127.0.0.1:2222") == "127.0.0.1:2222"
    assert address_host("localhost:1") != address_host("localhost:2")
    c = Cluster.from_dict({"worker": ["localhost:1", "localhost:2"], "ps": ["localhost:3"]},
                          hosts={"worker": ["a", "b"], "ps": ["a"]})
    assert [h.tasks for h in c.hosts] == [("worker:0", "ps:0"), ("worker:1",)]


@pytest.mark.parametrize("address", ["h1", "a b:1", "host:99999", "-bad:1", "a..b:1", "[zz::1]:1", "h:port"])
def test_unparsable_tf_config_hosts_name_the_address_and_the_fix(address: str) -> None:
    with pytest.raises(ClusterConfigError, match=r"task 0: address .* write 'host:port', e\.g\."):
        Cluster.from_tf_config(json.dumps({"cluster": {"worker": [address]}}))


def test_local_layouts() -> None:
    dedicated = Cluster.local(2, 1, chief=True)
    assert [h.name for h in dedicated.hosts] == ["chief0", "worker0", "worker1", "ps0"]
    colocated = Cluster.local(3, 2, chief=True, layout="colocated")
    assert [(h.name, h.tasks) for h in colocated.hosts] == [
        ("host0", ("chief:0", "worker:0", "ps:0")), ("host1", ("worker:1", "ps:1")), ("host2", ("worker:2",))]
    assert [h.tasks for h in Cluster.local(1, 3, layout="colocated").hosts] == [("worker:0", "ps:0"), ("ps:1",),
                                                                                ("ps:2",)]
    with pytest.raises(ClusterConfigError, match="unknown layout 'shared'"):
        Cluster.local(2, 2, layout="shared")


def test_host_link_rate_and_cpu_budget() -> None:
    c = Cluster.local(2, 2, layout="colocated", bandwidth={"worker": "1gbit", "ps": "100mbit"})
    assert all(h.bandwidth_bps == 100e6 for h in c.hosts)  # one link per host: the slowest task's rate
    assert c.with_rates(bandwidth="10gbit").hosts[0].bandwidth_bps == 10e9
    budgeted = c.with_host_cpu({"host1": 2e9})
    assert budgeted.host("host1").cpu_flops == 2e9 and budgeted.host("host0").cpu_flops == c.workers[0].flops
    assert budgeted.with_rates(bandwidth="1gbit").host("host1").cpu_flops == 2e9
    with pytest.raises(ClusterConfigError, match="host 'nowhere', which runs no task"):
        c.with_host_cpu({"nowhere": 1e9})


# ------------------------------------------------------------------------- per-host-link bytes
def test_dedicated_ps_link_carries_every_workers_bytes() -> None:
    p = cnn_with_head()
    e = estimate(p, Cluster.local(2, 1, bandwidth="1gbit"))
    per_worker_down = e.bytes_between[("ps:0", "worker")]
    assert e.link_bytes_out["ps0"] == 2 * per_worker_down and e.link_bytes_in["worker0"] == per_worker_down
    # Two phases of two workers each, one after another: 8 * 2 * (down + up) / B.
    up = e.bytes_between[("worker", "ps:0")]
    assert e.link_s["ps0"] == pytest.approx(8 * 2 * (per_worker_down + up) / 1e9)
    assert e.busiest_link == "ps0" and e.bottleneck.startswith("ps0 link")


def test_colocated_traffic_between_tasks_of_one_host_is_free() -> None:
    p = cnn_with_head()
    cluster = Cluster.local(1, 1, layout="colocated", bandwidth="100mbit")
    e = estimate(p, cluster)
    assert e.bytes_per_step > 20 * MB  # the worker still exchanges every weight with its PS task...
    assert e.max_link_bytes == 0 and e.comm_s == 0  # ...over loopback


def test_sharded_colocated_ralp_moves_a_ring_share_of_the_conv_bytes() -> None:
    """N colocated hosts, conv variables balanced over N PS tasks, head on PS 0: each host link
    carries about 2 (N-1)/N of the conv bytes, like a ring of the conv weights only."""
    p = cnn_with_head()
    conv = 10 * MB
    for n in (2, 4):
        cluster = Cluster.local(n, n, layout="colocated", bandwidth="100mbit")
        plan = with_balanced_storage(plan_for(p, cluster, ["flat", "fc"], ps_tasks=1), p, cluster)
        e = estimate(p, cluster, plan)
        ring = estimate_allreduce(p, cluster)
        per_link = 2 * (n - 1) / n * conv
        busiest_worker_host = max(e.link_bytes_out[f"host{i}"] for i in range(1, n))
        assert busiest_worker_host == pytest.approx(per_link, rel=0.05)  # shards within a quarter share
        assert ring.link_bytes_out["host1"] == ring_allreduce_bytes(n, p.trainable_param_bytes)
        assert e.samples_per_s > 1.7 * ring.samples_per_s


def test_head_spread_over_ps_tasks_pays_for_activation_hops() -> None:
    layers = [_layer("x", "input", [], 4096, []), _layer("fc1", "dense", [8 * MB], 4096, ["x"]),
              _layer("fc2", "dense", [8 * MB], 40, ["fc1"])]
    p = ModelProfile.from_dict({"model_name": "mlp", "batch_size": BATCH, "outputs": ["fc2"], "layers": layers})
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    spread = estimate(p, cluster, plan_for(p, cluster, ["fc1", "fc2"]))
    assert spread.bytes_between[("ps:0", "ps:1")] == BATCH * 4096  # fc1's output to fc2's task
    assert spread.bytes_between[("ps:1", "ps:0")] == BATCH * 4096  # and its gradient back
    # Per synchronous step (2 worker steps), ps0 sends the hop and its control bytes; ps1 receives the hop.
    assert spread.link_bytes_out["ps0"] == 2 * (BATCH * 4096 + STEP_OVERHEAD_BYTES / 2)
    assert spread.link_bytes_in["ps1"] == 2 * (BATCH * 4096 + STEP_OVERHEAD_BYTES / 2 + BATCH * 40)  # + logits' grad
    one_task = estimate(p, cluster, plan_for(p, cluster, ["fc1", "fc2"], ps_tasks=1))
    assert ("ps:0", "ps:1") not in one_task.bytes_between


def test_ring_loads_only_worker_hosts() -> None:
    p = cnn_with_head()
    e = estimate_allreduce(p, Cluster.local(3, 3, layout="colocated", bandwidth="1gbit"))
    assert set(v for v in e.link_bytes_out.values()) == {ring_allreduce_bytes(3, p.trainable_param_bytes)}
    dedicated = estimate_allreduce(p, Cluster.local(3, 1, bandwidth="1gbit"))
    assert dedicated.link_bytes_out["ps0"] == 0 and dedicated.link_bytes_in["ps0"] == 0


def test_a_ps_host_shared_by_several_chains_slows_each_by_processor_sharing() -> None:
    """Dedicated PS computing the head for 2 workers: while it computes one worker's head the other's
    may arrive, so each chain's head part is x_h / (1 - rho), rho = the other worker's head work per
    second of step; the step T is the fixed point T = c + x_h / (1 - x_h / T) + comm. One worker: no
    other work, the plain sum."""
    p = cnn_with_head()
    head = Plan({"fc": "/job:ps/replica:0/task:0/device:CPU:0"})
    one = estimate(p, Cluster.local(1, 1, bandwidth="100gbit"), head)
    c, h = one.worker_compute_s, one.ps_compute_s["ps:0"]
    assert one.step_s == pytest.approx(c + h + one.comm_s, rel=1e-9)
    two = estimate(p, Cluster.local(2, 1, bandwidth="100gbit"), head)
    t = two.step_s  # one step per worker per synchronous step: T = t_w
    assert two.bottleneck == "workers" and t > c + h + two.comm_s
    assert t == pytest.approx(c + h / (1 - h / t) + two.comm_s, rel=1e-6)


def test_host_cpu_budget_limits_a_computing_ps() -> None:
    p = cnn_with_head()
    cluster = Cluster.local(2, 2, layout="colocated", bandwidth="uncapped")
    plan = plan_for(p, cluster, ["flat", "fc"], ps_tasks=1)
    fast = estimate(p, cluster, plan)
    slow = estimate(p, cluster.with_host_cpu({"host0": 1e6}), plan)
    assert slow.bottleneck.startswith("host0 cpu") and slow.samples_per_s < fast.samples_per_s / 100
    assert slow.host_cpu_s["host0"] > fast.host_cpu_s["host0"]


# ---------------------------------------------------------------------------------- storage
def test_balanced_storage_by_traffic_lpt() -> None:
    p = cnn_with_head()
    stored = balance_storage(p, 2, {"fc": "/job:ps/replica:0/task:0/device:CPU:0"}, partition=False)
    assert stored == {"c4": (0,), "c3": (1,), "c2": (1,), "c1": (0,)}  # 4+1 vs 3+2 MB
    assert stored_bytes(p, stored, 2) == [10 * MB, 10 * MB]  # (calls + 1) x bytes each


def test_a_layer_above_a_share_is_partitioned() -> None:
    layers = [_layer("x", "input", [], 64, []), _layer("big", "dense", [9 * MB], 64, ["x"]),
              _layer("small", "dense", [1 * MB], 40, ["big"])]
    p = ModelProfile.from_dict({"model_name": "m", "batch_size": BATCH, "outputs": ["small"], "layers": layers})
    stored = balance_storage(p, 2, None)
    assert stored["big"] == (0, 1) and stored["small"] in ((0,), (1,))
    assert balance_storage(p, 2, None, partition=False)["big"] == (0,)
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    plan = with_balanced_storage(Plan({}), p, cluster)
    assert plan.storage["big"] == ("/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0")
    e = estimate(p, cluster, plan)
    assert e.bytes_between[("ps:0", "worker")] == pytest.approx(4.5 * MB + (MB if stored["small"] == (0,) else 0)
                                                                + STEP_OVERHEAD_BYTES / 2)
    assert with_balanced_storage(Plan({}), p, Cluster.local(2, 1)) == Plan({})  # one PS: nothing to balance


def test_storage_moves_variables_in_the_estimate() -> None:
    p = cnn_with_head()
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    on_one = Plan({}, storage={name: cluster.ps_device(1) for name in ("c4", "c3", "c2", "c1", "fc")})
    e = estimate(p, cluster, on_one)
    assert ("ps:0", "worker") not in e.bytes_between
    assert e.bytes_between[("ps:1", "worker")] == 20 * MB + STEP_OVERHEAD_BYTES / 2


# ------------------------------------------------------------------------------- plan format
def test_plan_without_storage_stays_format_1_and_round_trips() -> None:
    plan = Plan({"fc": "/job:ps/replica:0/task:0/device:CPU:0"}, policy="ralp")
    assert plan.to_dict()["format"] == PLAN_FORMAT_V1 and "storage" not in plan.to_dict()
    assert Plan.from_json(plan.to_json()) == plan
    old = json.dumps({"format": "ralp_tf.plan/1", "policy": "ralp",
                      "placements": {"fc": "/job:ps/replica:0/task:0/device:CPU:0"}})
    assert Plan.from_json(old) == plan


def test_plan_with_storage_is_format_2_sorted_and_diffable() -> None:
    plan = Plan({"fc": "/job:ps/replica:0/task:0/device:CPU:0"},
                storage={"c4": "/job:ps/replica:0/task:1/device:CPU:0",
                         "c3": ["/job:ps/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"]})
    d = json.loads(plan.to_json())
    assert d["format"] == PLAN_FORMAT and d["storage"]["c3"] == ["/job:ps/replica:0/task:0/device:CPU:0",
                                                                "/job:ps/replica:0/task:1/device:CPU:0"]
    text = plan.to_json()
    assert text.index('"format"') < text.index('"placements"') < text.index('"storage"')
    assert text.index('"c3"') < text.index('"c4"')
    assert Plan.from_json(text) == plan and plan.stored_on() == {"c4": (1,), "c3": (0, 1)}


@pytest.mark.parametrize("doc, match", [
    ({"format": "ralp_tf.plan/1", "placements": {}, "storage": {"c1": "/job:ps/replica:0/task:0/device:CPU:0"}},
     r"format 'ralp_tf.plan/1' has field\(s\) \['storage'\], which that format does not have; set \"format\": "
     r"\"ralp_tf.plan/2\""),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": "/job:worker/device:CPU:0"}}, "not a PS task"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": ["/job:ps/replica:0/task:0/device:CPU:0"]}},
     "two or more"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": ["/job:ps/replica:0/task:0/device:CPU:0",
                                                                      "/job:ps/task:0/device:CPU:0"]}}, "twice"),
    ({"format": "ralp_tf.plan/2", "placements": {"fc": "/job:ps/replica:0/task:0/device:CPU:0"},
      "storage": {"fc": "/job:ps/replica:0/task:1/device:CPU:0"}}, "compute on a PS task"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": ["c1"]}, "'storage' must"),
])
def test_malformed_storage(doc: dict, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        Plan.from_dict(doc)


def test_storage_on_a_missing_ps_task_names_it_and_the_ps_count() -> None:
    p = cnn_with_head()
    plan = Plan({}, storage={"c1": "/job:ps/replica:0/task:3/device:CPU:0"})
    with pytest.raises(PlanError, match=r"stores layer 'c1' on PS task 3 .* the cluster has 2 PS task\(s\) "
                                        r"\(tasks 0..1\)"):
        plan.validate(p, Cluster.local(2, 2))
    with pytest.raises(PlanError, match="ps task 3 but the cluster has 2 PS task"):
        estimate(p, Cluster.local(2, 2), plan)
    with pytest.raises(PlanError, match="not in the model: 'c9'"):
        Plan({}, storage={"c9": "/job:ps/replica:0/task:0/device:CPU:0"}).validate(p)


# ---------------------------------------------------------------------------------- analyzer
def test_analyzer_offers_storage_and_head_variants_and_reports_the_ring() -> None:
    p = cnn_with_head()
    colocated = analyze(p, Cluster.local(2, 2, layout="colocated", bandwidth="100mbit"))
    labels = {c.label for c in colocated.candidates}
    assert {"no split", "no split, balanced storage", "cut before flat, head on ps:0",
            "cut before flat, head on ps:0, balanced storage"} <= labels
    assert colocated.chosen.label.endswith(", balanced storage") and colocated.is_split  # within 1e-5 of each other
    assert colocated.plan.storage and colocated.plan.to_dict()["format"] == PLAN_FORMAT
    assert colocated.to_dict()["ring_predicted_faster"] is False and "FASTER" not in colocated.report()
    only_convs = ModelProfile.from_dict({**p.to_dict(), "layers": p.to_dict()["layers"][:5], "outputs": ["c1"]})
    ring_wins = analyze(only_convs, Cluster.local(2, 1, bandwidth="100mbit"))
    assert ring_wins.to_dict()["ring_predicted_faster"] is True and ring_wins.ring_speedup > 1.05
    assert "The ring all-reduce is predicted FASTER than this plan" in ring_wins.report()


def test_bench_predicts_bytes_per_host_link_of_the_cells_layout() -> None:
    """The benchmark compares predictions with link counters, which never see loopback: a colocated
    cell is priced on its hosts (worker i + PS i share a link), so its PSS bytes are the link bytes,
    not every worker<->PS byte."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import cell_cluster, predictions

    prof = cnn_with_head()
    rate = 100e6
    dedicated = predictions(prof, Cell("cnn", 2, "100mbit"), rate)
    colocated_cell = Cell("cnn", 2, "100mbit", layout="colocated")
    colocated = predictions(prof, colocated_cell, rate)
    cluster = cell_cluster(colocated_cell, rate)
    assert [h.tasks for h in cluster.hosts] == [("worker:0", "ps:0"), ("worker:1", "ps:1")]
    stock = estimate(prof, cluster)
    assert colocated["ps"]["payload_bytes_per_step"] == pytest.approx(stock.link_bytes_per_step)
    assert stock.link_bytes_per_step < 2 * stock.bytes_per_step  # the loopback share is left out
    # Dedicated hosts: every worker<->PS byte crosses a link, once per worker step.
    ded = estimate(prof, cell_cluster(Cell("cnn", 2, "100mbit"), rate))
    assert dedicated["ps"]["payload_bytes_per_step"] == pytest.approx(2 * ded.bytes_per_step)
    assert colocated["ralp"]["payload_bytes_per_step"] < dedicated["ralp"]["payload_bytes_per_step"]


def test_bench_compressed_strategies_are_priced_at_their_codecs_ratio() -> None:
    """``bench --compression fp16`` adds ralp_fp16 and horovod_fp16 after their uncompressed
    strategies; the ring's fp16 all-reduce moves half the bytes."""
    from ralp_tf.bench.config import BenchConfigError, Cell, strategy_base, with_compression
    from ralp_tf.bench.predictions import predictions

    assert with_compression(("ps", "ralp", "allreduce", "horovod"), "fp16") == (
        "ps", "ralp", "ralp_fp16", "allreduce", "horovod", "horovod_fp16")
    assert with_compression(("ralp", "horovod"), "bf16") == ("ralp", "ralp_bf16", "horovod", "horovod_fp16")
    assert strategy_base("ralp_bf16") == ("ralp", "bf16") and strategy_base("ps") == ("ps", None)
    with pytest.raises(BenchConfigError, match="int8.*ralp-tf run --compression"):
        with_compression(("ralp",), "int8")
    pred = predictions(cnn_with_head(), Cell("cnn", 2, "100mbit", layout="colocated"), 100e6)
    assert pred["horovod_fp16"]["payload_bytes_per_step"] == pytest.approx(pred["horovod"]["payload_bytes_per_step"] / 2)
    assert pred["ralp_fp16"]["payload_bytes_per_step"] < pred["ralp"]["payload_bytes_per_step"]
