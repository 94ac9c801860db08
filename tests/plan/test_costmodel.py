"""The cost model: bytes per task pair and per host link, compute, CPU, contention, the ring, and
the terms of partitioned storage, split layers and CPU-only PS hosts. No TensorFlow."""
from __future__ import annotations

import dataclasses

import pytest

from plan_helpers import BATCH, MB, builtin, cnn_with_head, layer, mlp, ps
from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan import costmodel
from ralp_tf.plan.analyzer import plan_for
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import (PS_STEP_CPU_S, RPC_CONTROL_BYTES, RPC_FIXED_S, SERVE_CPU_S_PER_BYTE,
                                    STEP_OVERHEAD_BYTES, estimate, estimate_allreduce, layer_seconds,
                                    ring_allreduce_bytes)
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.traffic import HANDLE_BYTES
from ralp_tf.plan.storage import with_balanced_storage

C = RPC_CONTROL_BYTES / 2  # one direction of one message's control bytes
H = 0.5 * C  # one direction of half a message


def handles(p: ModelProfile, plan: Plan, cluster: Cluster, task: str) -> float:
    """Bytes one worker step sends ``task`` as the resource handles of its PS-computed variables."""
    from ralp_tf.plan.traffic import HANDLES

    step = costmodel.step_traffic(p, costmodel.resolve_placements(p, plan), cluster.num_ps,
                                  costmodel.resolve_storage(plan), plan.compression, costmodel.resolve_splits(plan))
    return sum(b for (src, dst, phase), b in step.control.items() if phase == HANDLES and dst == task)


def variables(p: ModelProfile, layers: tuple[str, ...] | None = None) -> int:
    return sum(len(l.var_bytes) for l in p.layers if layers is None or l.name in layers)


@pytest.fixture(scope="module")
def profiles() -> dict[str, ModelProfile]:
    return {name: builtin(name) for name in ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")}


def test_stock_ps_moves_every_weight_twice(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate(p, Cluster.local(2, 1))
    messages = 2 * variables(p)  # each variable read once and pushed once; the logits stay on the worker
    assert e.bytes_per_step == 2 * p.param_bytes + STEP_OVERHEAD_BYTES + messages * RPC_CONTROL_BYTES
    assert e.bytes_between[("ps:0", "worker")] == p.param_bytes + STEP_OVERHEAD_BYTES / 2 + messages * C


def test_round_robin_over_two_ps(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate(p, Cluster.local(2, 2))
    assert e.bytes_per_step == 2 * p.param_bytes + 2 * STEP_OVERHEAD_BYTES + 2 * variables(p) * RPC_CONTROL_BYTES
    assert e.bytes_between[("ps:0", "worker")] > 0 and e.bytes_between[("ps:1", "worker")] > 0


def test_ralp_alexnet_bound_is_about_15x(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    c = Cluster.local(2, 1)
    plan = plan_for(p, c, ["flatten", "fc1", "fc2", "logits"])
    e = estimate(p, c, plan)
    conv = sum(l.param_bytes for l in p.layers if l.kind == "conv")
    messages = 2 * variables(p, ("conv1", "conv2", "conv3", "conv4", "conv5")) + 2 + 2  # flatten's and logits' out and back
    handles = variables(p, ("fc1", "fc2", "logits"))  # the PS-computed variables, per closure
    assert e.bytes_per_step == (2 * conv + 2 * 32 * 4096 * 4 + 2 * 32 * 10 * 4 + STEP_OVERHEAD_BYTES
                                + messages * RPC_CONTROL_BYTES + handles * HANDLE_BYTES)
    assert 14.5 < 2 * p.param_bytes / e.bytes_per_step < 15.5


def test_no_ps_tasks_refuses_a_ps_placement(profiles: dict[str, ModelProfile]) -> None:
    with pytest.raises(PlanError, match="no PS tasks"):
        estimate(profiles["alexnet_cifar"], Cluster.local(2, 0), {"fc1": "/job:ps/replica:0/task:0/device:CPU:0"})


def test_stock_ps_moves_only_gathered_embedding_rows(profiles: dict[str, ModelProfile]) -> None:
    stock = estimate(profiles["ctr_dnn"], Cluster.local(2, 1))
    emb = profiles["ctr_dnn"].layer("emb0")
    assert stock.bytes_per_step < 2 * profiles["ctr_dnn"].param_bytes / 10
    assert stock.bytes_between[("ps:0", "worker")] >= 32 * emb.output_bytes


def test_allreduce_formula(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    e = estimate_allreduce(p, Cluster.local(3, 0, bandwidth="1gbit"))
    assert e.bytes_per_step == pytest.approx(3 * ring_allreduce_bytes(3, p.trainable_param_bytes))
    assert ring_allreduce_bytes(1, 100) == 0
    assert e.comm_s == pytest.approx(8 * 2 * 2 / 3 * p.trainable_param_bytes / 1e9)


def test_a_dedicated_ps_link_moves_down_plus_up_per_worker_step(profiles: dict[str, ModelProfile]) -> None:
    """Measured (benchmarks/README.md, scaling slice): stock PSS on alexnet at 1 Gbit/s stays at
    ~13.6-13.9 samples/s for 2 and 3 workers; the PS link moves (down + up) per worker step, less
    the control each message sends the other way in its own phase (the link is full duplex)."""
    p = profiles["alexnet_cifar"]
    for n in (2, 3):
        e = estimate(p, Cluster.local(n, 1, bandwidth="1gbit"))
        down, up = e.bytes_between[("ps:0", "worker")], e.bytes_between[("worker", "ps:0")]
        counter_flow = 2 * variables(p) * C  # each read's and each push's control the other way
        assert e.samples_per_s == pytest.approx(1e9 / (8 * (down + up - counter_flow)) * p.batch_size)
        assert 12.5 < e.samples_per_s < 15


def test_serving_cpu_is_priced_where_a_host_states_its_cores(profiles: dict[str, ModelProfile], monkeypatch: pytest.MonkeyPatch) -> None:
    """A PS host with a known core budget spends SERVE_CPU_S_PER_BYTE per byte it moves plus
    PS_STEP_CPU_S per worker step; at 0.1 core that bounds stock PSS (measured: small_cnn with a
    0.1-core PS ran 3708 samples/s where the model without the term said 5522)."""
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)  # the term alone, without the overlap
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


# ------------------------------------------------------------------------- per-host-link bytes
def test_dedicated_ps_link_carries_every_workers_bytes() -> None:
    p = cnn_with_head()
    e = estimate(p, Cluster.local(2, 1, bandwidth="1gbit"))
    per_worker_down = e.bytes_between[("ps:0", "worker")]
    assert e.link_bytes_out["ps0"] == 2 * per_worker_down and e.link_bytes_in["worker0"] == per_worker_down
    # Two phases of two workers each, one after another: 8 * 2 * (down + up) / B, less the control
    # each message sends the other way in its own phase (full duplex).
    up = e.bytes_between[("worker", "ps:0")]
    assert e.link_s["ps0"] == pytest.approx(8 * 2 * (per_worker_down + up - 2 * variables(p) * C) / 1e9)
    assert e.busiest_link == "ps0" and e.bottleneck.startswith("ps0 link")


def test_link_bytes_count_the_coordinators_closure_calls_once_per_closure(profiles: dict[str, ModelProfile]) -> None:
    """A testbed's chief has a link of its own: each closure's call (a handle per variable) and its
    reply cross it, per worker, once per K steps; the ring has no coordinator."""
    from ralp_tf.plan.closures import DISPATCH_BYTES, DISPATCH_BYTES_PER_VARIABLE, DISPATCH_REPLY_BYTES

    p = profiles["resnet_cifar"]
    cluster = Cluster.local(2, 1)
    per_closure = DISPATCH_BYTES + variables(p) * DISPATCH_BYTES_PER_VARIABLE + DISPATCH_REPLY_BYTES
    e = estimate(p, cluster)
    assert e.dispatch_bytes == 2 * per_closure
    assert e.link_bytes_per_step == sum(e.link_bytes_out.values()) + 2 * per_closure
    assert estimate(p, cluster.with_closures(8)).dispatch_bytes == 2 * per_closure / 8
    assert estimate_allreduce(p, cluster).dispatch_bytes == 0.0


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
    layers = [layer("x", "input", [], 4096, []), layer("fc1", "dense", [8 * MB], 4096, ["x"]),
              layer("fc2", "dense", [8 * MB], 40, ["fc1"])]
    p = ModelProfile.from_dict({"model_name": "mlp", "batch_size": BATCH, "outputs": ["fc2"], "layers": layers})
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    spread = estimate(p, cluster, plan_for(p, cluster, ["fc1", "fc2"]))
    # fc1's output to fc2's task and its gradient back: two messages, each with control both ways
    assert spread.bytes_between[("ps:0", "ps:1")] == BATCH * 4096 + 2 * C
    assert spread.bytes_between[("ps:1", "ps:0")] == BATCH * 4096 + 2 * C
    # Per synchronous step (2 worker steps), ps0 sends the hop and its control bytes (x's message
    # included); ps1 receives the hop, the logits' gradient and the control of the logits' two messages.
    assert spread.link_bytes_out["ps0"] == 2 * (BATCH * 4096 + 2 * C + STEP_OVERHEAD_BYTES / 2 + C)
    assert spread.link_bytes_in["ps1"] == 2 * (BATCH * 4096 + 2 * C + STEP_OVERHEAD_BYTES / 2 + BATCH * 40 + 2 * C
                                               + HANDLE_BYTES)  # the handle of fc2's kernel
    one_task = estimate(p, cluster, plan_for(p, cluster, ["fc1", "fc2"], ps_tasks=1))
    assert ("ps:0", "ps:1") not in one_task.bytes_between


def test_the_ring_prices_its_own_cpu_only_on_hosts_whose_cores_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under host budgets the ring's CPU (per byte each host sends and receives and per gradient
    tensor and hop, by implementation, and per step) adds ``r_h / K_h`` after the compute and the link; MWMS costs more per byte than
    Horovod; without known cores nothing is added; an unknown implementation is refused."""
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)  # the term alone, without the overlap
    p = cnn_with_head()
    free = Cluster.local(2, 2, layout="colocated", bandwidth="1gbit")
    budgeted = free.with_host_cores(0.3)
    plain = estimate_allreduce(p, free)
    assert plain.host_cpu_s == {} and plain.step_s == pytest.approx(plain.worker_compute_s + plain.comm_s)
    hvd, mwms = estimate_allreduce(p, budgeted), estimate_allreduce(p, budgeted, implementation="mwms")
    moved = hvd.link_bytes_out["host0"] + hvd.link_bytes_in["host0"]
    gradients = sum(1 for l in p.layers for _ in l.var_bytes)  # every variable of this profile is trainable
    r = (costmodel.RING_CPU_S_PER_BYTE["horovod"] * moved + costmodel.RING_STEP_CPU_S
         + costmodel.RING_TENSOR_HOP_CPU_S["horovod"] * gradients * 2 * (2 - 1))
    assert hvd.host_cpu_s["host0"] == pytest.approx(r / 0.3)
    assert hvd.step_s == pytest.approx(hvd.worker_compute_s + hvd.comm_s + r / 0.3)
    assert mwms.step_s > hvd.step_s
    with pytest.raises(PlanError, match="unknown ring implementation 'nccl'; use one of horovod, mwms"):
        estimate_allreduce(p, budgeted, implementation="nccl")


def test_ring_loads_only_worker_hosts() -> None:
    p = cnn_with_head()
    e = estimate_allreduce(p, Cluster.local(3, 3, layout="colocated", bandwidth="1gbit"))
    assert set(v for v in e.link_bytes_out.values()) == {ring_allreduce_bytes(3, p.trainable_param_bytes)}
    dedicated = estimate_allreduce(p, Cluster.local(3, 1, bandwidth="1gbit"))
    assert dedicated.link_bytes_out["ps0"] == 0 and dedicated.link_bytes_in["ps0"] == 0


def test_a_ps_host_shared_by_several_chains_slows_each_by_processor_sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dedicated PS computing the head for 2 workers: while it computes one worker's head the other's
    may arrive, so each chain's head part is x_h / (1 - rho), rho = the other worker's head work per
    second of step; the step T is the fixed point T = c + x_h / (1 - x_h / T) + comm. One worker: no
    other work, the plain sum."""
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)  # the term alone, without the overlap
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


def test_task_cpu_adds_up_to_the_host_cpu_the_bound_uses() -> None:
    """Per task on a host with known cores: compute at the budget times its cores plus serving;
    a host's tasks sum to its ``host_cpu_s`` in core-seconds, and a PS task serves every worker."""
    p = cnn_with_head()
    cluster = Cluster.local(2, 2, layout="colocated", bandwidth="1gbit").with_host_cores({"host0": 0.5, "host1": 0.5})
    plan = plan_for(p, cluster, ["flat", "fc"], ps_tasks=1)
    e = estimate(p, cluster, plan)
    assert set(e.task_cpu_s) == {"worker:0", "worker:1", "ps:0", "ps:1"}
    for host, tasks in (("host0", ("worker:0", "ps:0")), ("host1", ("worker:1", "ps:1"))):
        assert sum(e.task_cpu_s[t] for t in tasks) == pytest.approx(e.host_cpu_s[host] * 0.5, rel=1e-9)
    step = costmodel.step_traffic(p, costmodel.resolve_placements(p, plan), cluster.num_ps, costmodel.resolve_storage(plan),
                                  plan.compression, costmodel.resolve_splits(plan))
    serving = costmodel.serving_core_seconds(cluster, e.bytes_between, sent=costmodel.step_messages_by_ps(step))
    assert e.task_cpu_s["ps:1"] == pytest.approx(2 * serving["ps:1"], rel=1e-9)  # stores only: serving alone
    assert e.task_cpu_s["ps:0"] > 2 * serving["ps:0"]  # it computes the head for both workers too
    assert estimate(p, Cluster.local(2, 2, layout="colocated"), plan).task_cpu_s == {}  # no cores: not priced


def test_each_worker_step_costs_dispatch_cpu_at_both_ends_per_ps_task() -> None:
    """Per byte, and per (worker step, PS task) pair at both ends; higher where a host runs a CPU
    worker and a PS task."""
    traffic = {("worker", "ps:0"): 1000.0, ("ps:1", "worker"): 1000.0}
    dedicated = costmodel.serving_core_seconds(Cluster.local(2, 2), traffic)
    a, w = SERVE_CPU_S_PER_BYTE, costmodel.WORKER_STEP_CPU_S
    assert dedicated == pytest.approx({"ps:0": 1000 * a + PS_STEP_CPU_S, "ps:1": 1000 * a + PS_STEP_CPU_S,
                                       "worker:0": 2000 * a + 2 * w, "worker:1": 2000 * a + 2 * w})
    colocated = costmodel.serving_core_seconds(Cluster.local(2, 2, layout="colocated"), {("worker", "ps:1"): 1000.0})
    ca = costmodel.COLOCATED_SERVE_CPU_S_PER_BYTE
    assert colocated == pytest.approx({"ps:1": 1000 * ca + costmodel.COLOCATED_PS_STEP_CPU_S,
                                       "worker:0": 1000 * ca + costmodel.COLOCATED_WORKER_STEP_CPU_S,
                                       "worker:1": 1000 * ca + costmodel.COLOCATED_WORKER_STEP_CPU_S})
    assert ca > a and costmodel.COLOCATED_PS_STEP_CPU_S > PS_STEP_CPU_S and costmodel.COLOCATED_WORKER_STEP_CPU_S > w
    m = costmodel.COLOCATED_MESSAGE_CPU_S  # per tensor message, at each end, on colocated hosts only
    sent = {"ps:1": 10.0}
    assert costmodel.serving_core_seconds(Cluster.local(2, 2, layout="colocated"), {("worker", "ps:1"): 1000.0}, sent=sent) == \
        pytest.approx({k: v + 10 * m for k, v in colocated.items()})
    assert costmodel.serving_core_seconds(Cluster.local(2, 2), traffic, sent=sent) == pytest.approx(dedicated)


def test_storage_moves_variables_in_the_estimate() -> None:
    p = cnn_with_head()
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    on_one = Plan({}, storage={name: cluster.ps_device(1) for name in ("c4", "c3", "c2", "c1", "fc")})
    e = estimate(p, cluster, on_one)
    assert ("ps:0", "worker") not in e.bytes_between
    assert e.bytes_between[("ps:1", "worker")] == 20 * MB + STEP_OVERHEAD_BYTES / 2 + 10 * C  # 5 reads, 5 pushes


# -------------------------------------------------------------------- pieces and split layers
def test_sharded_variables_move_their_share_plus_control_per_further_piece() -> None:
    """alexnet's conv1 kernel [3, 3, 3, 64] sharded by output channels over 2 tasks: 3456 bytes
    each way on each; every piece is a message of RPC_CONTROL_BYTES, half each way."""
    p = builtin("alexnet_cifar")
    kernel, bias = p.layer("conv1").var_bytes
    assert kernel == 6912
    plan = Plan({}, storage={"conv1": {"variables": [{"axis": 3, "shards": [ps(0), ps(1)]}, ps(1)]}})
    e = estimate(p, Cluster.local(1, 2, bandwidth="1gbit"), plan)
    whole = estimate(p, Cluster.local(1, 2, bandwidth="1gbit"), Plan({}, storage={"conv1": ps(1)}))
    # conv1's pull and push to ps:0: its shard each way, and two more messages' control each way
    assert e.bytes_between[("ps:0", "worker")] - whole.bytes_between[("ps:0", "worker")] == kernel / 2 + 2 * C
    assert e.bytes_between[("worker", "ps:0")] - whole.bytes_between[("worker", "ps:0")] == kernel / 2 + 2 * C
    assert e.bytes_between[("ps:1", "worker")] - whole.bytes_between[("ps:1", "worker")] == -kernel / 2


def test_a_layer_wide_partition_takes_fewer_shards_for_short_variables() -> None:
    """The /2 list form: each variable in min(K, rows) shards along axis 0 on the first tasks."""
    from ralp_tf.plan.costmodel import variable_homes

    p = mlp((3, 8, 2))  # fc1: kernel [3, 8], bias [8]
    homes = variable_homes(p, {"x": "worker", "fc1": "worker", "fc2": "worker"}, 4, {"fc1": (0, 1, 2, 3)})
    assert homes["fc1"] == [(32.0, 0), (32.0, 1), (32.0, 2), (8.0, 0), (8.0, 1), (8.0, 2), (8.0, 3)]


def _two_way_head(fc2_by: str) -> tuple[ModelProfile, Cluster, Plan]:
    """An MLP whose fc1 is split by columns and fc2 ``fc2_by`` over ps:0 and ps:1, fc3 on ps:0."""
    plan = Plan({"fc1": ps(0), "fc2": ps(0), "fc3": ps(0)},
                splits={"fc1": {"by": "columns", "shards": [ps(0), ps(1)]},
                        "fc2": {"by": fc2_by, "shards": [ps(0), ps(1)]}})
    return mlp((1024, 4096, 4096, 10)), Cluster.local(1, 2, bandwidth="1gbit"), plan


def test_columns_then_rows_split_prices_its_messages_and_its_shards() -> None:
    """fc1 by columns and fc2 by rows over ps:0 and ps:1 (fc3 on ps:0): the worker sends x to both
    shards, fc1's slices stay where fc2 reads them, fc2's partial sum goes ps:1 -> ps:0 and its
    gradient back; each shard computes half of each split layer, and the chain waits for the
    slower shard only."""
    p, cluster, plan = _two_way_head("rows")
    e = estimate(p, cluster, plan)
    x = BATCH * 4096
    assert e.bytes_between[("worker", "ps:1")] == x + C + STEP_OVERHEAD_BYTES / 2 + handles(p, plan, cluster, "ps:1")
    # + the logits' gradient, and the control of the logits' two messages
    assert e.bytes_between[("worker", "ps:0")] == (x + C + STEP_OVERHEAD_BYTES / 2 + BATCH * 40 + 2 * C
                                                   + handles(p, plan, cluster, "ps:0"))
    # the partial sum and its gradient: two messages
    assert e.bytes_between[("ps:1", "ps:0")] == e.bytes_between[("ps:0", "ps:1")] == BATCH * 4 * 4096 + 2 * C
    c = [layer_seconds(p.layer(n), cluster.ps[0], BATCH) for n in ("fc1", "fc2", "fc3")]
    assert e.ps_compute_s["ps:1"] == pytest.approx(0.5 * (c[0] + c[1]))
    assert e.ps_compute_s["ps:0"] == pytest.approx(0.5 * (c[0] + c[1]) + c[2])
    assert e.step_s == pytest.approx(e.worker_compute_s + 0.5 * c[0] + 0.5 * c[1] + c[2] + e.comm_s, rel=1e-9)
    unsplit = estimate(p, cluster, plan_for(p, cluster, ["fc1", "fc2", "fc3"], ps_tasks=1))
    assert e.step_s < unsplit.step_s


def test_columns_everywhere_gathers_slices_for_the_next_layer() -> None:
    """fc1 and fc2 both by columns: fc2's every shard needs fc1's whole output, so each shard sends
    its slice to the other (an all-gather), and in backward each sends the other's slice of its
    partial input gradient."""
    p, cluster, plan = _two_way_head("columns")
    e = estimate(p, cluster, plan)
    half = BATCH * 4 * 4096 / 2
    # fwd: slice to the other shard; bwd: the other shard's gradient slice; plus fc2's slice to fc3
    # on ps:0 (and back): six messages between the two, each with control both ways
    assert e.bytes_between[("ps:1", "ps:0")] == pytest.approx(half + half + half + 6 * C)
    assert e.bytes_between[("ps:0", "ps:1")] == pytest.approx(half + half + half + 6 * C)


def test_an_embedding_split_by_rows_is_looked_up_on_its_shards() -> None:
    """ids to the assembly task, each shard its ids and its rows back; the IndexedSlices gradient
    from the worker to each shard, its share."""
    layers = [layer("ids", "input", [], 4, []),
              layer("emb", "embedding", [64_000], 64, ["ids"], shapes=[(1000, 16)], class_name="Embedding"),
              layer("fc", "dense", [64, 4], 4, ["emb"], shapes=[(16, 1), (1,)], class_name="Dense")]
    p = ModelProfile.from_dict({"model_name": "e", "batch_size": BATCH, "outputs": ["fc"], "layers": layers})
    plan = Plan({"emb": ps(0), "fc": ps(0)}, splits={"emb": {"by": "rows", "shards": [ps(0), ps(1)]}})
    cluster = Cluster.local(1, 2, bandwidth="1gbit")
    e = estimate(p, cluster, plan)
    rows, ids = BATCH * 64 / 2, BATCH * 64 / 2 / (4 * 16)
    assert e.bytes_between[("ps:1", "ps:0")] == rows + 2 * C and e.bytes_between[("ps:0", "ps:1")] == 4 * ids + 2 * C
    assert e.bytes_between[("worker", "ps:1")] == (rows + 4 * ids + C + STEP_OVERHEAD_BYTES / 2  # one push, one message
                                                   + handles(p, plan, cluster, "ps:1"))


def test_cpu_only_ps_hosts_carry_what_they_store_and_nothing_else() -> None:
    p = cnn_with_head()
    cluster = Cluster.local(2, 2, layout="colocated", ps_hosts=1, bandwidth="1gbit")
    plan = Plan({}, storage={name: ps(2) for name in ("c4", "c3", "c2", "c1", "fc")})
    e = estimate(p, cluster, plan)
    per_worker = e.bytes_between[("ps:2", "worker")]
    assert e.link_bytes_out["pshost0"] == 2 * per_worker and e.link_bytes_in["host0"] == per_worker
    assert e.busiest_link == "pshost0"
    ring = estimate_allreduce(p, cluster)
    assert ring.link_bytes_out["pshost0"] == 0  # the ring runs on the worker hosts only


def test_further_messages_cost_rpc_cpu_where_cores_are_known() -> None:
    p = builtin("alexnet_cifar")
    cluster = Cluster.local(1, 2, bandwidth="10gbit").with_host_cores({"ps0": 1, "ps1": 1})
    whole = estimate(p, cluster, Plan({}, storage={"conv1": ps(1)}))
    sharded = estimate(p, cluster, Plan({}, storage={"conv1": {"variables": [{"axis": 3, "shards": [ps(0), ps(1)]},
                                                                             ps(1)]}}))
    moved = sharded.bytes_between[("ps:0", "worker")] + sharded.bytes_between[("worker", "ps:0")] - (
        whole.bytes_between[("ps:0", "worker")] + whole.bytes_between[("worker", "ps:0")])
    # ps:0 takes part in 2 transfers of half a further message each (pull and push)
    assert sharded.host_cpu_s["ps0"] - whole.host_cpu_s["ps0"] == pytest.approx(
        SERVE_CPU_S_PER_BYTE * moved + RPC_FIXED_S * 1.0)


def test_an_optimizer_that_passes_over_whole_tables_pays_for_them_on_their_ps() -> None:
    """tf_keras.optimizers.SGD writes every embedding table and its slot whole each step (2
    passes); legacy.SGD scatters the batch's rows only. The passes are PS compute on the tables'
    tasks, in the chain and in the PS's CPU, whatever the plan."""
    from ralp_tf.plan.costmodel import DENSE_PASS_S_PER_BYTE

    p = builtin("ctr_dnn")
    tables = sum(l.var_bytes[0] for l in p.layers if l.kind == "embedding")
    cluster = Cluster.local(2, 1, bandwidth="1gbit")
    for plan in (None, {l.name: "/job:worker/device:CPU:0" if l.kind in ("input", "embedding") else ps(0)
                        for l in p.layers}):
        keras, legacy = (estimate(q, cluster, plan) for q in (p, p.with_optimizer("legacy-sgd")))
        passes = keras.ps_compute_s.get("ps:0", 0.0) - legacy.ps_compute_s.get("ps:0", 0.0)
        assert passes == pytest.approx(2 * DENSE_PASS_S_PER_BYTE * tables)
        assert keras.step_s > legacy.step_s + passes


def test_a_frozen_table_is_never_updated_so_no_ps_or_ring_worker_pays_its_passes() -> None:
    """An ``Embedding(trainable=False)`` has no gradient: the optimizer never passes over it, on its
    PS task or on a ring worker's replica. Only the trainable tables are charged."""
    from ralp_tf.plan.costmodel import DENSE_PASS_S_PER_BYTE, ring_table_pass_seconds

    p = builtin("ctr_dnn")
    tables = [l for l in p.layers if l.kind == "embedding"]
    frozen = tables[0]
    q = dataclasses.replace(p, layers=tuple(
        dataclasses.replace(l, trainable_param_bytes=0) if l.name == frozen.name else l for l in p.layers))
    assert next(l for l in q.layers if l.name == frozen.name).untrainable_variables == 1
    cluster = Cluster.local(2, 1, bandwidth="1gbit")
    legacy = estimate(q.with_optimizer("legacy-sgd"), cluster)
    passes = estimate(q, cluster).ps_compute_s["ps:0"] - legacy.ps_compute_s.get("ps:0", 0.0)
    trained = sum(l.var_bytes[0] for l in tables if l.name != frozen.name)
    assert passes == pytest.approx(2 * DENSE_PASS_S_PER_BYTE * trained)
    assert ring_table_pass_seconds(q) == pytest.approx(2 * DENSE_PASS_S_PER_BYTE * trained)


def test_a_profile_names_the_optimizer_it_is_priced_with() -> None:
    from ralp_tf.errors import ValidationError

    p = builtin("ctr_dnn").with_optimizer("legacy-sgd")
    assert ModelProfile.from_json(p.to_json()).optimizer == "legacy-sgd"
    assert "optimizer" not in builtin("ctr_dnn").to_dict()
    with pytest.raises(ValidationError, match="optimizer 'lamb' is not one the cost model prices; use one of sgd"):
        p.with_optimizer("lamb")


def test_the_closure_floor_joins_each_workers_chain_and_the_rule_picks_k() -> None:
    """With a floor priced, a step pays the plain closure (and its further variables) at K = 1 and
    the amortised loop at K > 1; best_steps_per_closure takes the smallest K within 5% of the
    fastest: a loop for ctr_dnn's head on the PS with legacy.SGD (7 messages a step), none for
    alexnet's (dozens), none without a floor."""
    from ralp_tf.plan.closures import MEASURED_FLOOR
    from ralp_tf.plan.costmodel import best_steps_per_closure

    cluster = Cluster.local(2, 1, bandwidth="100mbit")
    ctr = builtin("ctr_dnn").with_optimizer("legacy-sgd")
    plan = {l.name: "/job:worker/device:CPU:0" if l.kind in ("input", "embedding") else ps(0) for l in ctr.layers}
    bare = estimate(ctr, cluster, plan).step_s
    plain = estimate(ctr, cluster.with_closures(1), plan).step_s
    floor = MEASURED_FLOOR.per_step_s(1, {"ps:0": 7.0})  # P and 2.5 further variables
    assert floor > MEASURED_FLOOR.plain_closure_s
    assert bare + 0.8 * floor < plain <= bare + floor  # less contention
    assert estimate(ctr, cluster.with_closures(32), plan).step_s < plain
    assert best_steps_per_closure(ctr, cluster.with_closures(1), plan) == 32
    assert best_steps_per_closure(ctr, cluster.with_closures(1), plan, limit=10) == 8
    assert best_steps_per_closure(ctr, cluster, plan) == 1  # no floor priced
    alexnet = builtin("alexnet_cifar")
    head = plan_for(alexnet, cluster, [l.name for l in alexnet.layers[alexnet.index("flatten"):]], ps_tasks=1)
    assert best_steps_per_closure(alexnet, cluster.with_closures(1), head) == 1


def test_a_plain_step_pays_for_each_variable_it_pulls_and_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """resnet_cifar's stock PSS step exchanges 214 messages (107 variables) with its PS task: at
    K = 1 it pays the plain closure plus 106 further variables, split over the tasks that hold them."""
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)  # the term alone, without the overlap
    from ralp_tf.plan.closures import MEASURED_FLOOR

    resnet = builtin("resnet_cifar")
    for ps_tasks, further in ((1, 106), (2, 107 - 2)):
        cluster = Cluster.local(2, ps_tasks, bandwidth="1gbit")
        bare = estimate(resnet, cluster).step_s
        paid = estimate(resnet, cluster.with_closures(1)).step_s - bare
        per_variable = MEASURED_FLOOR.step_per_variable_s  # plain_step_per_variable_s not measured: s_var
        assert paid == pytest.approx(MEASURED_FLOOR.plain_closure_s + further * per_variable, rel=0.02), ps_tasks


def test_a_ring_all_gathers_a_looked_up_tables_gradient() -> None:
    """MultiWorkerMirroredStrategy and Horovod all-gather an IndexedSlices gradient (values and
    indices) instead of all-reducing the table: ctr_dnn's 70 MB of tables cost each worker (N-1) x its
    step's rows and ids, not 2 (N-1)/N x 70 MB. Measured (bench calibrated-colocated-0.3-1gbit, MWMS,
    2 workers): 2,044,821 bytes per step on the links, against 149 MB priced densely."""
    from ralp_tf.plan.costmodel import ring_allgather_bytes, ring_gradient_bytes, wire_bytes
    from ralp_tf.plan.lookups import embedding_ids

    p = builtin("ctr_dnn")
    tables = [l for l in p.layers if l.kind == "embedding"]
    assert sum(sum(l.var_bytes) for l in tables) > 60 * MB
    for n in (2, 3, 4):
        e = estimate_allreduce(p, Cluster.local(n, 0, bandwidth="1gbit"), implementation="mwms")
        dense = sum(ring_gradient_bytes(l, p.batch_size)[0] for l in p.layers)
        rows = {l.name: embedding_ids(l, p.batch_size, 1.0) for l in tables}
        gathered = sum(values + l.id_bytes * ids for l in tables for values, ids in [rows[l.name]])
        assert dense == pytest.approx(p.trainable_param_bytes - sum(sum(l.var_bytes) for l in tables))
        assert e.bytes_per_step == pytest.approx(n * (ring_allreduce_bytes(n, dense) + ring_allgather_bytes(n, gathered)))
        assert e.bytes_per_step < 0.05 * n * ring_allreduce_bytes(n, p.trainable_param_bytes)
    two = estimate_allreduce(p, Cluster.local(2, 0, bandwidth="1gbit"), implementation="mwms")
    assert wire_bytes(two.bytes_per_step) == pytest.approx(2_044_821, rel=0.10)


def test_a_regularised_table_is_all_reduced_whole_and_every_worker_pays_the_table_passes() -> None:
    """A table an ``embeddings_regularizer`` reads has a dense gradient (the tape sums the
    regulariser's into it): all-reduced whole. Each worker applies the gathered rows to its own
    replica, so the optimizer's whole-table passes (2 for tf_keras SGD) are in every worker's step."""
    from ralp_tf.plan.costmodel import ring_gradient_bytes, ring_table_pass_seconds

    p = builtin("ctr_dnn")
    table = next(l for l in p.layers if l.kind == "embedding")
    assert ring_gradient_bytes(table, p.batch_size)[0] == 0.0
    regularised = dataclasses.replace(table, regularised=(True,))
    assert ring_gradient_bytes(regularised, p.batch_size) == (float(table.var_bytes[0]), 0.0)
    tables = sum(sum(l.var_bytes) for l in p.layers if l.kind == "embedding")
    assert ring_table_pass_seconds(p) == pytest.approx(2 * costmodel.DENSE_PASS_S_PER_BYTE * tables)
    assert ring_table_pass_seconds(dataclasses.replace(p, optimizer="legacy-sgd")) == 0.0
    cluster = Cluster.local(2, 0, bandwidth="10gbit")
    e = estimate_allreduce(p, cluster)
    legacy = estimate_allreduce(dataclasses.replace(p, optimizer="legacy-sgd"), cluster)
    assert e.worker_compute_s - legacy.worker_compute_s == pytest.approx(ring_table_pass_seconds(p))
