r"""The one cost model: bytes and time per training step for any placement.

Notation: ``b`` per-worker batch, ``N`` workers, ``M`` PS tasks, ``B_t`` link rate of task t
(bits/s, each direction), ``F_t`` FLOP rate of task t, ``f_l`` forward FLOPs per sample of layer
l, ``a_l`` output bytes per sample of layer l, ``p_v`` bytes of variable v.

**Compute.** One layer's forward+backward time for a batch on task t is
``c(l, t) = 3 * f_l * b / F_t`` (backward ~ 2x forward), or the profiler's measured time when
the profile has one and t is a CPU task.

**Variable traffic** (per worker step, between the stepping worker and the PS task ``home(v)``
holding variable v), for every layer l computed on the worker and called ``k_l`` times:

* dense/conv/... variable: ``k_l * p_v`` down (each call reads it) and ``p_v`` up (the tape sums
  the calls' gradients on the worker, then pushes one);
* embedding table: the lookup runs on ``home(v)``, where the table lives, so the table never
  moves; the gathered rows are an activation *produced on* ``home(v)`` (below). The gradient
  (IndexedSlices) is built on the worker, so ``b * a_l * k_l + 4 * b * ids_l * k_l`` goes up
  (values and int32 indices).

``home(v)`` is the plan's PS task for layers placed on PS tasks (variables colocated, no
traffic to workers), and ParameterServerStrategy's round-robin over PS tasks, in creation
order, for the rest.

**Activation traffic.** Every activation tensor (one per layer call, ``ModelProfile.tensors``)
is produced at ``src`` (the producer's device; ``home(v)`` for a worker-computed embedding) and
read by the devices of its consumers (and by the worker's loss for a model output). For each
distinct reading device ``d``: ``b * a`` crosses ``src -> d`` when ``d != src``, and, when a
gradient flows into the producer (it is floating point with trainable parameters at or before
it), ``b * a`` crosses back ``d -> g``, where ``g`` is the device computing the producer's
gradient (the producer's device; the worker for a worker-computed embedding), when ``d != g``.

**Control traffic.** ``STEP_OVERHEAD_BYTES`` per worker step with each PS task it exchanges
data with (measured gRPC dispatch and framing).

**Step time** of one worker step with no contention:
``t_w = sum_{l on worker} c(l, w) + sum_{l on PS} c(l, ps) + 8 * (down + up) / min(B_w, B_ps)``
(pull, compute and push happen one after another). With N asynchronous workers the cluster
completes ``S = min(N / t_w, min_k B_k / (8 * N_k), min_k 1 / C_k)`` worker steps per second,
where ``N_k = max(down_k, up_k)`` is PS k's per-step traffic in its busier direction and ``C_k``
its per-step compute. The predicted step time is ``N / S`` and throughput ``S * b`` samples/s.

**Ring all-reduce** (Horovod, MultiWorkerMirroredStrategy) over N workers, per synchronous
step of ``N * b`` samples: each worker sends and receives ``2 (N-1)/N * P`` bytes of gradients
(P = trainable parameter bytes), so
``t = sum_l c(l, w) + 8 * 2 (N-1)/N * P / B_w`` and total bytes on all links ``2 (N-1) P``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ralp_tf.cluster import Cluster, Task
from ralp_tf.errors import PlanError
from ralp_tf.plan import Plan, parse_device
from ralp_tf.profiler import LayerProfile, ModelProfile

WORKER = "worker"
#: gRPC control traffic per worker step with each PS task it talks to (function dispatch, tensor
#: handshakes, HTTP/2 framing), measured on LocalCluster runs: 6.7-9.1 KB per step.
STEP_OVERHEAD_BYTES = 8_000
#: Bytes per embedding id in a gradient's IndexedSlices (int32 indices).
_INDEX_BYTES = 4


@dataclasses.dataclass(frozen=True)
class StepEstimate:
    """Predicted cost of one training step.

    ``bytes_between`` maps ``(src, dst)`` task keys ("worker", "ps:0", ...) to bytes moved per
    worker step (for ring all-reduce: per worker per synchronous step). ``bytes_per_step`` is
    the total over all worker<->PS pairs, both directions (ring: over all links).
    """

    mode: str
    batch_size: int
    num_workers: int
    bytes_between: Mapping[tuple[str, str], float]
    bytes_per_step: float
    worker_compute_s: float
    ps_compute_s: Mapping[str, float]
    comm_s: float
    step_s: float
    samples_per_s: float
    bottleneck: str

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bytes_between"] = {f"{a}->{b}": v for (a, b), v in self.bytes_between.items()}
        return d


def transfer_seconds(nbytes: float, bandwidth_bps: float) -> float:
    """Time to move ``nbytes`` over a link of ``bandwidth_bps`` bits/s (0 on an uncapped link)."""
    return 8.0 * nbytes / bandwidth_bps if math.isfinite(bandwidth_bps) else 0.0


#: Ethernet + IPv4 + TCP (with timestamps) headers per full 1448-byte segment: wire = payload x 1.0456
#: (measured on the testbed's veth links with offloads off).
WIRE_OVERHEAD = 66 / 1448


def wire_bytes(payload_bytes: float) -> float:
    """Bytes on the wire (Ethernet frames) for ``payload_bytes`` of TCP payload in full segments."""
    return payload_bytes * (1.0 + WIRE_OVERHEAD)


def ps_sync_bytes(param_bytes: float) -> float:
    """Bytes one worker moves per step to keep ``param_bytes`` of dense variables in sync with the
    PS tasks: the weights pulled plus the gradients pushed."""
    return 2.0 * param_bytes


def ring_allreduce_bytes(num_workers: int, param_bytes: float) -> float:
    """Bytes each worker sends (and receives) per ring all-reduce of ``param_bytes``: 2 (N-1)/N * P."""
    return 2.0 * (num_workers - 1) / num_workers * param_bytes if num_workers > 1 else 0.0


def layer_seconds(layer: LayerProfile, task: Task, batch_size: int) -> float:
    """Forward+backward time of ``layer`` for one batch on ``task``'s device."""
    if layer.measured_seconds is not None and not task.gpus:
        return layer.measured_seconds
    return 3.0 * layer.flops * batch_size / task.flops


def resolve_placements(profile: ModelProfile, placements: Plan | Mapping[str, str] | None) -> dict[str, str]:
    """Layer -> location key: ``"worker"`` or ``"ps:K"``. Inputs always on the worker."""
    if isinstance(placements, Plan):
        placements = placements.placements
    placements = placements or {}
    out = {}
    for l in profile.layers:
        dev = placements.get(l.name)
        if dev is None or l.kind == "input":
            out[l.name] = WORKER
            continue
        d = parse_device(dev)
        out[l.name] = f"ps:{d.task}" if d.is_ps else WORKER
    unknown = set(placements) - set(out)
    if unknown:
        raise PlanError(f"placements name layers not in the profile: {sorted(unknown)}")
    return out


def variable_homes(profile: ModelProfile, where: Mapping[str, str], num_ps: int) -> dict[str, list[tuple[int, int]]]:
    """Layer -> [(variable bytes, PS index)], simulating ParameterServerStrategy's round-robin
    for layers not placed on a PS task (creation order = topological order)."""
    homes: dict[str, list[tuple[int, int]]] = {}
    counter = 0
    for l in profile.layers:
        loc = where[l.name]
        if loc.startswith("ps:"):
            k = int(loc[3:])
            homes[l.name] = [(v, k) for v in l.var_bytes]
        else:
            homes[l.name] = []
            for v in l.var_bytes:
                homes[l.name].append((v, counter % max(num_ps, 1)))
                counter += 1
    return homes


def _has_trainable_upstream(profile: ModelProfile) -> dict[str, bool]:
    flag: dict[str, bool] = {}
    for l in profile.layers:
        flag[l.name] = l.trainable_param_bytes > 0 or any(flag.get(u, False) for u in l.inbound)
    return flag


def estimate(profile: ModelProfile, cluster: Cluster,
             placements: Plan | Mapping[str, str] | None = None) -> StepEstimate:
    """Predict bytes and time per worker step for ``placements`` (None: stock PSS)."""
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers")
    where = resolve_placements(profile, placements)
    ps_used = {loc for loc in where.values() if loc.startswith("ps:")}
    if ps_used and cluster.num_ps == 0:
        raise PlanError("plan places layers on PS tasks but the cluster has no PS tasks; add a 'ps' job")
    for loc in ps_used:
        if int(loc[3:]) >= cluster.num_ps:
            raise PlanError(f"plan uses {loc.replace(':', ' task ')} but the cluster has {cluster.num_ps} PS task(s)")
    b = profile.batch_size
    worker = cluster.workers[0]
    traffic: dict[tuple[str, str], float] = {}

    def add(src: str, dst: str, nbytes: float) -> None:
        if src != dst and nbytes:
            traffic[(src, dst)] = traffic.get((src, dst), 0.0) + nbytes

    produced_at = dict(where)  # where each layer's output appears
    # Variables of worker-computed layers.
    if cluster.num_ps:
        homes = variable_homes(profile, where, cluster.num_ps)
        for l in profile.layers:
            if where[l.name] != WORKER:
                continue
            for nbytes, k in homes[l.name]:
                ps = f"ps:{k}"
                if l.kind == "embedding":
                    produced_at[l.name] = ps
                    rows = b * l.output_bytes * l.calls
                    ids = rows / (4 * (l.output_shape[-1] if l.output_shape else 1))
                    add(WORKER, ps, min(rows, nbytes) + _INDEX_BYTES * ids)
                else:
                    add(ps, WORKER, nbytes * l.calls)
                    add(WORKER, ps, nbytes)
    # Activations and their gradients across devices.
    grad_flows = _has_trainable_upstream(profile)
    kinds = {l.name: l.kind for l in profile.layers}
    for t in profile.activation_tensors():
        src, grad_at = produced_at[t.producer], where[t.producer]
        readers = {where[c] for c in t.consumers}
        if t.is_output:
            readers.add(WORKER)  # the loss
        nbytes = b * t.bytes
        for dst in readers:
            if dst != src:
                add(src, dst, nbytes)
            if dst != grad_at and grad_flows[t.producer] and kinds[t.producer] != "input":
                add(dst, grad_at, nbytes)
    for ps_key in {k for pair in traffic for k in pair if k != WORKER}:
        add(WORKER, ps_key, STEP_OVERHEAD_BYTES / 2)
        add(ps_key, WORKER, STEP_OVERHEAD_BYTES / 2)
    # Compute.
    worker_s = sum(layer_seconds(l, worker, b) for l in profile.layers if where[l.name] == WORKER)
    ps_s: dict[str, float] = {}
    for l in profile.layers:
        loc = where[l.name]
        if loc != WORKER:
            ps_s[loc] = ps_s.get(loc, 0.0) + layer_seconds(l, cluster.task("ps", int(loc[3:])), b)
    # Communication time of one worker step: its own transfers, one after another.
    comm_s = 0.0
    for (src, dst), nbytes in traffic.items():
        ends = [worker if x == WORKER else cluster.task("ps", int(x[3:])) for x in (src, dst)]
        comm_s += transfer_seconds(nbytes, min(t.bandwidth_bps for t in ends))
    t_w = worker_s + sum(ps_s.values()) + comm_s
    n = cluster.num_workers
    limits = {"workers": n / t_w if t_w > 0 else math.inf}
    for ps in cluster.ps:
        key = f"ps:{ps.index}"
        down = sum(v for (s, d), v in traffic.items() if s == key)
        up = sum(v for (s, d), v in traffic.items() if d == key)
        busiest = max(down, up) * n
        if busiest and math.isfinite(ps.bandwidth_bps):
            limits[f"{key} link"] = ps.bandwidth_bps / (8 * busiest)
        if ps_s.get(key):
            limits[f"{key} compute"] = 1.0 / ps_s[key]
    bottleneck = min(limits, key=limits.get)  # type: ignore[arg-type]
    steps_per_s = limits[bottleneck]
    pairs = sum(v for (s, d), v in traffic.items() if WORKER in (s, d))
    return StepEstimate(
        mode="ralp" if ps_used else "ps", batch_size=b, num_workers=n, bytes_between=traffic,
        bytes_per_step=pairs, worker_compute_s=worker_s, ps_compute_s=ps_s, comm_s=comm_s,
        step_s=n / steps_per_s, samples_per_s=steps_per_s * b, bottleneck=bottleneck)


def estimate_allreduce(profile: ModelProfile, cluster: Cluster) -> StepEstimate:
    """Predict one synchronous ring all-reduce step over the cluster's workers (see module doc)."""
    n = cluster.num_workers
    if n == 0:
        raise PlanError("the cluster has no workers")
    b = profile.batch_size
    worker = cluster.workers[0]
    p = profile.trainable_param_bytes
    per_worker = ring_allreduce_bytes(n, p)
    comm_s = transfer_seconds(per_worker, min(t.bandwidth_bps for t in cluster.workers))
    compute_s = sum(layer_seconds(l, worker, b) for l in profile.layers)
    step_s = compute_s + comm_s
    traffic = {("worker", "next worker"): per_worker} if n > 1 else {}
    return StepEstimate(
        mode="allreduce", batch_size=b, num_workers=n, bytes_between=traffic, bytes_per_step=per_worker * n,
        worker_compute_s=compute_s, ps_compute_s={}, comm_s=comm_s, step_s=step_s,
        samples_per_s=n * b / step_s if step_s > 0 else math.inf,
        bottleneck="ring links" if comm_s > compute_s else "workers")
