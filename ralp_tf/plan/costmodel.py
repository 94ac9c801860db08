r"""The one cost model: bytes per host link and time per training step for any placement.

Every formula the planners, the benchmark's predictions and the "explain" output use is stated
here (docs/costmodel.md has them by topic with worked numbers).

Notation: ``b`` per-worker batch, ``N`` workers, ``M`` PS tasks, ``B_h`` link rate of host h
(bits/s, each direction, shared by its tasks), ``F_t`` FLOP rate of task t, ``F_h`` CPU budget
of host h, ``f_l`` forward FLOPs per sample of layer l, ``a_l`` output bytes per sample of
layer l, ``p_v`` bytes of variable v. ``host(x)`` is the host of task x (:mod:`ralp_tf.plan.cluster`).

**Compute.** One layer's forward+backward time for a batch on task t is
``c(l, t) = 3 * f_l * b / F_t`` (backward ~ 2x forward), or the profiler's measured time when
the profile has one and t is a CPU task.

**Variable storage.** ``home(v)``, the PS task(s) holding variable v of layer l, is: the plan's
PS task for a layer computed on a PS task; the plan's ``storage`` task for a worker-computed
layer it names, or, for a layer partitioned over K tasks, ``p_v / K`` on each of them; otherwise
ParameterServerStrategy's round-robin over PS tasks, in creation order, counting only the
variables so placed.

**Variable traffic** (per worker step, between the stepping worker and ``home(v)``), for every
layer l computed on the worker and called ``k_l`` times:

* dense/conv/... variable: ``k_l * p_v`` down (each call reads it; *pull* phase) and ``p_v`` up
  (the tape sums the calls' gradients on the worker, then pushes one; *push* phase);
* embedding table: the lookup runs on ``home(v)``, where the table lives, so the table never
  moves; the gathered rows are an activation *produced on* ``home(v)`` (below; a table
  partitioned over K tasks produces ``1/K`` of the rows on each). The gradient (IndexedSlices)
  is built on the worker, so ``min(b * a_l * k_l, p_v) + 4 * b * ids_l * k_l`` goes up (values
  and int32 indices; push phase). The same holds for an embedding layer the plan computes on a
  PS task (its table lives there): the gradient still comes to the worker and goes back
  (measured on ctr_dnn with every layer on the PS: 45.6 KB per step against 10.4 KB priced
  without it).

**Activation traffic.** Every activation tensor (one per layer call, ``ModelProfile.tensors``)
is produced at ``src`` (the producer's device; ``home(v)`` for a worker-computed embedding) and
read by the devices of its consumers (and by the worker's loss for a model output). For each
distinct reading device ``d``: ``b * a`` crosses ``src -> d`` when ``d != src`` (phase
``fwd:<producer>``), and, when a gradient flows into the producer (it is floating point with
trainable parameters at or before it), ``b * a`` crosses back ``d -> g`` (phase
``bwd:<producer>``), where ``g`` is the device
computing the producer's gradient (the producer's device; the worker for an embedding),
when ``d != g``. Hops between two PS tasks computing parts of the head are priced
the same way.

**Compression** (a Plan's ``compression``, :mod:`ralp_tf.plan.compression`). A worker-computed
layer's ``weights`` codec scales its variable pull and push by the codec's wire ratio (embedding
tables excepted), read once per step however often the layer is called (the compressed read is
reused by its calls); its ``gradients`` codec, when set, prices the push instead
(:func:`ralp_tf.plan.compression.pushed_bytes`: ``int8`` ``n + 4`` bytes per n-element variable,
``topk:f`` ``8 ceil(f n)``). A PS-computed layer's ``activations`` codec scales the activations it
receives from the worker, and their gradients, by that ratio. Outputs returning to the worker
are not compressed. A gradients codec's encode and decode are charged to the worker's compute:
``codec_flops / F_worker`` per variable (:func:`ralp_tf.plan.compression.codec_flops`, measured work
per entry); the fp16/bf16 casts are not charged (one pass over each tensor).

**Control traffic.** ``STEP_OVERHEAD_BYTES`` per worker step with each PS task it exchanges
data with (measured gRPC dispatch and framing), half each way (pull and push phases).

**Per host link.** Traffic between two tasks of one host is loopback and free. A *synchronous
step* is N worker steps, one per worker (N * b samples). A worker step moves its bytes in
phases, one after another: ``pull`` (variable reads), ``fwd:<layer>`` (each activation),
``bwd:<layer>`` (each activation gradient), ``push`` (variable gradients). Workers run in step
with each other (measured: two workers on one PS link move ``down + up`` per worker step at the
link rate, not ``max(down, up)``), so the same phase of every worker's step overlaps, and a
link can carry a phase's traffic both ways at once. Host h's link carries, per synchronous step
and phase ``q``, ``out_hq`` = the bytes of every worker's step sent from a task on h to a task
on another host, and ``in_hq`` likewise received; it is busy
``L_h = sum_q 8 * max(out_hq, in_hq) / B_h`` seconds per synchronous step. For a PS task on a
host of its own that is ``8 * N * (down + up) / B``; with PS task i on worker i's host and
variables spread evenly, each direction of a phase carries ``(N-1)/N`` of it, like a ring.

**Per host CPU.** Tasks on one host share its CPU budget ``F_h`` (default: the highest
``F_t`` of its CPU tasks). Per worker step, host h spends
``C_h = sum_{PS k on h} ps_k * F_k / F_h + sum_{CPU workers w on h} c_w * F_w / F_h / N``
seconds, where ``ps_k`` is PS k's compute for one worker step and ``c_w`` a worker step's
compute on the worker; only hosts with PS compute, or with a known core count (below), are
limited this way (a worker alone is bounded by its own step time below).

**Serving CPU.** Moving bytes costs CPU at both ends (gRPC framing, tensor (de)serialisation,
the PS's optimizer update of what it receives): ``SERVE_CPU_S_PER_BYTE`` core-seconds per byte a
task sends or receives, loopback included, plus ``PS_STEP_CPU_S`` per worker step on each PS
task the step exchanges data with (its step dispatch). On a host whose budget in cores ``K_h``
is known (:attr:`ralp_tf.plan.cluster.Host.cores`), ``C_h`` above also holds
``(sum_{PS k on h} (a * bytes_k + d) + sum_{workers w on h} a * bytes_w / N) / K_h``, with
``bytes_k`` / ``bytes_w`` a worker step's bytes to and from task k / the worker. It enters only
that CPU bound, not a step's chain: a task serializes while its bytes are on the wire (priced
below). Measured with one 0.7-core worker and a 1-core PS task on dedicated 1 Gbit/s hosts
(PS CPU seconds per step against payload bytes, stock PSS): small_cnn b256 6.7 ms / 3.2 MB,
ctr_head b32 43.3 ms / 42.1 MB, alexnet_cifar b32 323 ms / 287 MB; fit (relative error) 1.03
ns/byte + 3.3 ms; small_cnn with its three dense layers on the PS: 10.2 ms measured, 9.3 priced.
Where no host states its cores, none of this is priced.

**Step time.** One step of worker w, with no contention, takes
``t_w = sum_{l on worker} c(l, w) + sum_{l on PS} c(l, ps) + sum_{x -> y crossing hosts} 8 * bytes / min(B_host(x), B_host(y))``
(pull, compute and push happen one after another).

**Contention.** A host's CPU also runs other work while a step's chain computes on it: the head
compute of the other workers' steps on a PS host, and the colocated worker's own compute. With
``W_h = N * C_h`` the host's CPU seconds per synchronous step of ``T`` seconds and ``m_wh`` this
chain's share of them, the chain's part on h (``x_wh`` seconds) is slowed by processor sharing to
``x_wh / (1 - rho_wh)``, ``rho_wh = min((W_h - m_wh) / T, 0.95)``; ``T`` is the fixed point of
the step time below (bisection). On a host that runs one task of one chain, ``rho = 0``. The cluster completes
``S = min(sum_w 1 / t_w, min_h N / L_h, min_h 1 / C_h)`` worker steps per second; the
predicted (synchronous) step time is ``N / S`` and throughput ``S * b`` samples/s. The
bottleneck is the term that sets ``S``.

**Ring all-reduce** (Horovod, MultiWorkerMirroredStrategy) over N workers in index order, per
synchronous step of ``N * b`` samples: each worker sends ``2 (N-1)/N * P`` bytes of gradients
to the next (P = trainable parameter bytes) and receives as much from the previous, at the same
time (full duplex), on the worker hosts only (PS tasks take no part). Hop w -> w+1 loads the
links of both hosts when they differ. So
``t = sum_l c(l, w) + max_h 8 * max(out_h, in_h) / B_h`` and total bytes ``2 (N-1) P``.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Mapping

from ralp_tf.plan.cluster import Cluster, Task
from ralp_tf.plan.compression import Compression, codec_flops, pushed_bytes, setting_of, wire_ratio
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.model.profiler import LayerProfile, ModelProfile

__all__ = ["WORKER", "STEP_OVERHEAD_BYTES", "SERVE_CPU_S_PER_BYTE", "PS_STEP_CPU_S", "MAX_CONTENTION",
           "StepEstimate", "transfer_seconds", "WIRE_OVERHEAD", "wire_bytes", "ps_sync_bytes",
           "ring_allreduce_bytes", "layer_seconds", "resolve_placements", "variable_traffic_bytes",
           "variable_homes", "compressed_ratios", "worker_step_traffic", "estimate", "serving_seconds",
           "estimate_allreduce"]

WORKER = "worker"
PULL, PUSH = "pull", "push"
#: gRPC control traffic per worker step with each PS task it talks to (function dispatch, tensor
#: handshakes, HTTP/2 framing), measured on LocalCluster runs: 6.7-9.1 KB per step.
STEP_OVERHEAD_BYTES = 8_000
#: CPU core-seconds a task spends per byte it sends or receives (module docstring, *Serving CPU*).
SERVE_CPU_S_PER_BYTE = 1.03e-9
#: CPU core-seconds a PS task spends per worker step it takes part in (dispatch), same source.
PS_STEP_CPU_S = 3.3e-3
#: Cap on the share of a host's CPU that other work takes from a step's chain (rho in the module
#: docstring), so that a host loaded past its budget prices a long step, not an infinite one.
MAX_CONTENTION = 0.95
#: Bytes per embedding id in a gradient's IndexedSlices (int32 indices).
_INDEX_BYTES = 4


@dataclasses.dataclass(frozen=True)
class StepEstimate:
    """Predicted cost of one training step.

    ``bytes_between`` maps ``(src, dst)`` task keys ("worker", "ps:0", ...) to bytes moved per
    worker step, loopback included (for ring all-reduce: per worker per synchronous step).
    ``bytes_per_step`` is the total over all worker<->PS pairs, both directions (ring: over all
    links).

    Per host (see the module docstring), per synchronous step of ``num_workers * batch_size``
    samples: ``link_bytes_out`` / ``link_bytes_in`` bytes sent / received over the host's link
    (loopback excluded), ``link_s`` seconds the link is busy, ``host_cpu_s`` CPU seconds of
    hosts with PS compute. ``busiest_link`` names the host with the largest ``link_s``.
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
    link_bytes_out: Mapping[str, float] = dataclasses.field(default_factory=dict)
    link_bytes_in: Mapping[str, float] = dataclasses.field(default_factory=dict)
    link_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    host_cpu_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    busiest_link: str = ""

    @property
    def max_link_bytes(self) -> float:
        """Bytes per synchronous step on the busiest host link, in its busier direction."""
        return max([*self.link_bytes_out.values(), *self.link_bytes_in.values(), 0.0])

    @property
    def link_bytes_per_step(self) -> float:
        """Bytes crossing host links per synchronous step (each counted once, at its sender)."""
        return sum(self.link_bytes_out.values())

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bytes_between"] = {f"{a}->{b}": v for (a, b), v in self.bytes_between.items()}
        d["max_link_bytes"] = self.max_link_bytes
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


def variable_traffic_bytes(layer: LayerProfile, batch_size: int) -> float:
    """Bytes one worker step moves between a worker and the PS storing ``layer``'s variables,
    both directions (module docstring): ``sum_v (k_l + 1) p_v`` for a dense/conv layer; for an
    embedding, its rows (read) plus the IndexedSlices gradient."""
    if layer.kind == "embedding":
        rows = batch_size * layer.output_bytes * layer.calls
        ids = rows / (4 * (layer.output_shape[-1] if layer.output_shape else 1))
        return sum(rows + min(rows, v) + _INDEX_BYTES * ids for v in layer.var_bytes)
    return sum((layer.calls + 1) * v for v in layer.var_bytes)


def variable_homes(profile: ModelProfile, where: Mapping[str, str], num_ps: int,
                   storage: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, list[tuple[float, int]]]:
    """Layer -> [(variable bytes, PS index)]: the plan's PS task for PS-computed layers, the
    ``storage`` task(s) for layers it names (a partitioned variable is one entry per shard of
    ``p_v / K``), else ParameterServerStrategy's round-robin (creation order = topological
    order; only round-robin variables advance it)."""
    storage = storage or {}
    homes: dict[str, list[tuple[float, int]]] = {}
    counter = 0
    for l in profile.layers:
        loc = where[l.name]
        if loc.startswith("ps:"):
            k = int(loc[3:])
            homes[l.name] = [(v, k) for v in l.var_bytes]
        elif l.name in storage:
            tasks = storage[l.name]
            homes[l.name] = [(v / len(tasks) if len(tasks) > 1 else v, k) for v in l.var_bytes for k in tasks]
        else:
            homes[l.name] = []
            for v in l.var_bytes:
                homes[l.name].append((v, counter % max(num_ps, 1)))
                counter += 1
    return homes


def _check_ps_indices(locations: set[int], num_ps: int, what: str) -> None:
    if locations and num_ps == 0:
        raise PlanError(f"plan {what} PS tasks but the cluster has no PS tasks; add a 'ps' job")
    for k in sorted(locations):
        if k >= num_ps:
            raise PlanError(f"plan {what} ps task {k} but the cluster has {num_ps} PS task(s)")


def compressed_ratios(profile: ModelProfile, where: Mapping[str, str],
                      compression: Mapping[str, Compression]) -> tuple[dict[str, float], dict[str, float]]:
    """Per layer: the wire ratio of its variables' pull and push (worker-computed, non-embedding
    layers with a ``weights`` codec) and of the activations it receives from the worker
    (PS-computed layers with an ``activations`` codec), as :mod:`ralp_tf.place.applier` applies them."""
    weights, activations = {}, {}
    for l in profile.layers:
        setting = setting_of(compression, l.name)
        on_ps = where[l.name] != WORKER
        weights[l.name] = 1.0 if on_ps or l.kind == "embedding" else wire_ratio(setting.weights)
        activations[l.name] = wire_ratio(setting.activations) if on_ps else 1.0
    return weights, activations


def worker_step_traffic(profile: ModelProfile, where: Mapping[str, str], num_ps: int,
                        storage: Mapping[str, tuple[int, ...]] | None = None,
                        compression: Mapping[str, Compression] | None = None
                        ) -> dict[tuple[str, str, str], float]:
    """``(src, dst, phase) -> bytes`` moved by one worker step (``"worker"`` is the stepping
    worker, ``"ps:K"`` a PS task), per the variable, activation and control traffic of the
    module docstring, each scaled by its compression ratio (:func:`compressed_ratios`)."""
    weights_ratio, activations_ratio = compressed_ratios(profile, where, compression or {})
    b = profile.batch_size
    traffic: dict[tuple[str, str, str], float] = {}

    def add(src: str, dst: str, nbytes: float, phase: str) -> None:
        if src != dst and nbytes:
            traffic[(src, dst, phase)] = traffic.get((src, dst, phase), 0.0) + nbytes

    def push_embedding_gradient(l: LayerProfile, ps: str, nbytes: float, share: float) -> None:
        """The IndexedSlices gradient, built on the worker, to the table's part on ``ps``."""
        rows = b * l.output_bytes * l.calls * share
        ids = rows / (4 * (l.output_shape[-1] if l.output_shape else 1))
        add(WORKER, ps, min(rows, nbytes) + _INDEX_BYTES * ids, PUSH)

    produced_at = {name: [(loc, 1.0)] for name, loc in where.items()}  # where each layer's output appears
    if num_ps:
        homes = variable_homes(profile, where, num_ps, storage)
        for l in profile.layers:
            if where[l.name] != WORKER:
                if l.kind == "embedding":  # computed where its table lives; its gradient is still built on the worker
                    for nbytes, k in homes[l.name]:
                        push_embedding_gradient(l, f"ps:{k}", nbytes, 1.0)
                continue
            share = 1.0 / len((storage or {}).get(l.name, (0,)))
            for nbytes, k in homes[l.name]:
                ps = f"ps:{k}"
                if l.kind == "embedding":
                    if share == 1.0:
                        produced_at[l.name] = [(ps, 1.0)]
                    elif produced_at[l.name][0][0] == WORKER:
                        produced_at[l.name] = [(ps, share)]
                    elif (ps, share) not in produced_at[l.name]:
                        produced_at[l.name].append((ps, share))
                    push_embedding_gradient(l, ps, nbytes, share)
                else:
                    setting = setting_of(compression or {}, l.name)
                    reads = 1 if setting.weights != "none" or setting.gradients != "none" else l.calls
                    add(ps, WORKER, nbytes * reads * weights_ratio[l.name], PULL)
                    add(WORKER, ps, pushed_bytes(setting, nbytes), PUSH)
    grad_flows = profile.gradient_flows()
    kinds = {l.name: l.kind for l in profile.layers}
    for t in profile.activation_tensors():
        grad_at = WORKER if kinds[t.producer] == "embedding" else where[t.producer]
        readers = {where[c] for c in t.consumers}
        if t.is_output:
            readers.add(WORKER)  # the loss
        for src, share in produced_at[t.producer]:
            for dst in readers:
                ratio = 1.0
                if src == WORKER and dst != WORKER:  # into PS-computed layers: their activations codec
                    ratio = min(activations_ratio[c] for c in t.consumers if where[c] == dst)
                nbytes = b * t.bytes * share * ratio
                if dst != src:
                    add(src, dst, nbytes, f"fwd:{t.producer}")
                if dst != grad_at and grad_flows[t.producer] and kinds[t.producer] != "input":
                    add(dst, grad_at, nbytes, f"bwd:{t.producer}")
    for ps_key in {k for (s, d, _) in traffic for k in (s, d) if k != WORKER}:
        add(WORKER, ps_key, STEP_OVERHEAD_BYTES / 2, PUSH)
        add(ps_key, WORKER, STEP_OVERHEAD_BYTES / 2, PULL)
    return traffic


def estimate(profile: ModelProfile, cluster: Cluster,
             placements: Plan | Mapping[str, str] | None = None) -> StepEstimate:
    """Predict bytes (per task pair and per host link) and time per step for ``placements``
    (None: stock PSS); a Plan's ``storage`` is priced too (see the module docstring)."""
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers")
    where = resolve_placements(profile, placements)
    storage = placements.stored_on() if isinstance(placements, Plan) else {}
    ps_used = {loc for loc in where.values() if loc.startswith("ps:")}
    _check_ps_indices({int(loc[3:]) for loc in ps_used}, cluster.num_ps, "places layers on")
    _check_ps_indices({k for tasks in storage.values() for k in tasks}, cluster.num_ps, "stores variables on")
    b = profile.batch_size
    compression = placements.compression if isinstance(placements, Plan) else {}
    phased = worker_step_traffic(profile, where, cluster.num_ps, storage, compression)
    traffic: dict[tuple[str, str], float] = {}
    for (src, dst, _), nbytes in phased.items():
        traffic[(src, dst)] = traffic.get((src, dst), 0.0) + nbytes
    # Compute.
    worker = cluster.workers[0]
    worker_s = sum(layer_seconds(l, worker, b) for l in profile.layers if where[l.name] == WORKER)
    worker_s += sum(codec_flops(setting_of(compression, l.name).gradients, v) for l in profile.layers
                    if where[l.name] == WORKER and l.kind != "embedding" for v in l.var_bytes) / worker.flops
    ps_s: dict[str, float] = {}
    for l in profile.layers:
        loc = where[l.name]
        if loc != WORKER:
            ps_s[loc] = ps_s.get(loc, 0.0) + layer_seconds(l, cluster.task("ps", int(loc[3:])), b)
    n = cluster.num_workers
    loads = _host_loads(cluster, phased, traffic)
    chains = _ChainModel(cluster, worker_s, ps_s, serving_seconds(cluster, traffic))
    cpu_s = chains.cpu_per_worker_step()
    fixed: dict[tuple[str, str], float] = {}
    for host, busy in loads.link_s.items():
        if busy > 0:
            fixed[("link", host)] = n / busy
    for host, per_worker_step in cpu_s.items():
        fixed[("cpu", host)] = 1.0 / per_worker_step

    def limits_at(sync_step_s: float) -> dict[tuple[str, str], float]:
        rate = sum(1.0 / t if t > 0 else math.inf
                   for t in (chains.seconds(w.host, sync_step_s) + loads.comm_by_host[w.host] for w in cluster.workers))
        return {("workers", ""): rate, **fixed}

    limits = limits_at(_contended_step(lambda t: n / min(limits_at(t).values())))
    what, host = min(limits, key=limits.get)  # type: ignore[arg-type]
    steps_per_s = limits[(what, host)]
    bottleneck = what if not host else f"{host} {what} ({', '.join(cluster.host(host).tasks)})"
    pairs = sum(v for (s, d), v in traffic.items() if WORKER in (s, d))
    return StepEstimate(
        mode="ralp" if ps_used else "ps", batch_size=b, num_workers=n, bytes_between=traffic,
        bytes_per_step=pairs, worker_compute_s=worker_s, ps_compute_s=ps_s, comm_s=max(loads.comm_by_host.values()),
        step_s=n / steps_per_s, samples_per_s=steps_per_s * b, bottleneck=bottleneck,
        link_bytes_out=loads.bytes_out, link_bytes_in=loads.bytes_in, link_s=loads.link_s,
        host_cpu_s={h: c * n for h, c in cpu_s.items()},
        busiest_link=max(loads.link_s, key=loads.link_s.get, default="") if any(loads.link_s.values()) else "")


@dataclasses.dataclass
class _HostLoads:
    """Per host: bytes out/in and busy seconds per synchronous step; per worker host: one
    worker's comm seconds per step."""

    bytes_out: dict[str, float]
    bytes_in: dict[str, float]
    link_s: dict[str, float]
    comm_by_host: dict[str, float]


def _host_loads(cluster: Cluster, phased: Mapping[tuple[str, str, str], float],
                traffic: Mapping[tuple[str, str], float]) -> _HostLoads:
    """Host link loads of N worker steps and each worker's comm time (module docstring).

    Workers are priced by class: a host that runs a PS task is a class of its own; worker hosts
    without PS tasks that share a link rate behave alike, so one of them stands for all."""
    hosts = cluster._hosts_by_name
    ps_host = {f"ps:{t.index}": t.host for t in cluster.ps}
    ps_hosts = set(ps_host.values())
    workers_on = collections.Counter(t.host for t in cluster.workers)
    classes: dict[Any, list[str]] = {}
    for h in workers_on:
        classes.setdefault(h if h in ps_hosts else ("no PS", hosts[h].bandwidth_bps), []).append(h)
    by_phase: dict[str, dict[str, list[float]]] = {}  # hosts with PS tasks
    plain: list[tuple[list[str], dict[str, list[float]]]] = []  # PS-free worker hosts, per worker
    comm_by_host: dict[str, float] = {}
    for members in classes.values():
        rep = members[0]
        per_worker: dict[str, dict[str, list[float]]] = {}
        comm_s = 0.0  # one worker's own transfers, one after another
        for (src, dst, phase), nbytes in phased.items():
            hs, hd = (rep if src == WORKER else ps_host[src]), (rep if dst == WORKER else ps_host[dst])
            if hs != hd:
                per_worker.setdefault(hs, {}).setdefault(phase, [0.0, 0.0])[0] += nbytes
                per_worker.setdefault(hd, {}).setdefault(phase, [0.0, 0.0])[1] += nbytes
        for (src, dst), nbytes in traffic.items():
            hs, hd = (rep if src == WORKER else ps_host[src]), (rep if dst == WORKER else ps_host[dst])
            if hs != hd:
                comm_s += transfer_seconds(nbytes, min(hosts[hs].bandwidth_bps, hosts[hd].bandwidth_bps))
        in_class = sum(workers_on[h] for h in members)
        for host, phases in per_worker.items():
            if host == rep and rep not in ps_hosts:
                plain.append((members, phases))
                continue
            for phase, (out, into) in phases.items():
                pair = by_phase.setdefault(host, {}).setdefault(phase, [0.0, 0.0])
                pair[0] += in_class * out
                pair[1] += in_class * into
        comm_by_host.update(dict.fromkeys(members, comm_s))
    bytes_out, bytes_in, link_s = dict.fromkeys(hosts, 0.0), dict.fromkeys(hosts, 0.0), dict.fromkeys(hosts, 0.0)
    for members, phases in plain:  # PS-free worker hosts: the same figures for the same worker count
        by_count: dict[int, list[str]] = {}
        for h in members:
            by_count.setdefault(workers_on[h], []).append(h)
        for count, same in by_count.items():
            scaled = {phase: [count * out, count * into] for phase, (out, into) in phases.items()}
            _phase_totals(scaled, hosts[same[0]].bandwidth_bps, same, bytes_out, bytes_in, link_s)
    for host, phases in by_phase.items():
        _phase_totals(phases, hosts[host].bandwidth_bps, [host], bytes_out, bytes_in, link_s)
    return _HostLoads(bytes_out, bytes_in, link_s, comm_by_host)


def _phase_totals(phases: Mapping[str, list[float]], bandwidth_bps: float, hosts: list[str],
                  bytes_out: dict[str, float], bytes_in: dict[str, float], link_s: dict[str, float]) -> None:
    """Write ``hosts``' bytes out/in and link seconds from their per-phase ``[out, in]`` bytes."""
    busy = transfer_seconds(sum(max(pair) for pair in phases.values()), bandwidth_bps)
    out, into = sum(p[0] for p in phases.values()), sum(p[1] for p in phases.values())
    for h in hosts:
        bytes_out[h], bytes_in[h], link_s[h] = out, into, busy


def serving_seconds(cluster: Cluster, traffic: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """Host -> seconds of its CPU budget spent per synchronous step moving bytes (module
    docstring, *Serving CPU*), for hosts whose core count is known; ``traffic`` is one worker
    step's ``(src, dst) -> bytes``."""
    hosts = cluster._hosts_by_name
    if not any(h.cores for h in hosts.values()):
        return {}
    per_task: dict[str, float] = collections.defaultdict(float)  # core-seconds per worker step
    for (src, dst), nbytes in traffic.items():
        per_task[src] += SERVE_CPU_S_PER_BYTE * nbytes
        per_task[dst] += SERVE_CPU_S_PER_BYTE * nbytes
    for key in {k for pair in traffic for k in pair if k != WORKER}:
        per_task[key] += PS_STEP_CPU_S
    n = cluster.num_workers
    out: dict[str, float] = collections.defaultdict(float)
    for t in cluster.ps:
        if hosts[t.host].cores:
            out[t.host] += n * per_task.get(t.key, 0.0) / hosts[t.host].cores
    for t in cluster.workers:
        if hosts[t.host].cores:
            out[t.host] += per_task.get(WORKER, 0.0) / hosts[t.host].cores
    return dict(out)


class _ChainModel:
    """One worker step's compute chain, slowed by the other work sharing each host's CPU
    (module docstring, *Contention*)."""

    def __init__(self, cluster: Cluster, worker_s: float, ps_s: Mapping[str, float],
                 serve_s: Mapping[str, float]) -> None:
        hosts = cluster._hosts_by_name
        n = cluster.num_workers
        self.serve = serve_s  # host -> serving seconds per synchronous step (CPU bound only)
        self.load: dict[str, float] = collections.defaultdict(float)  # CPU s per synchronous step, at F_h
        self.ps_own: dict[str, float] = collections.defaultdict(float)  # one worker step's PS seconds per host
        self.ps_own_load: dict[str, float] = collections.defaultdict(float)
        for key, seconds in ps_s.items():
            ps = cluster.task("ps", int(key[3:]))
            share = ps.flops / hosts[ps.host].cpu_flops
            self.load[ps.host] += n * seconds * share
            self.ps_own[ps.host] += seconds
            self.ps_own_load[ps.host] += seconds * share
        self.worker: dict[str, tuple[float, float]] = {}  # worker host -> (own CPU seconds, at F_h)
        for w in cluster.workers:
            if w.gpus:
                self.worker[w.host] = (0.0, 0.0)
                continue
            share = w.flops / hosts[w.host].cpu_flops
            self.load[w.host] += worker_s * share
            self.worker[w.host] = (worker_s, worker_s * share)
        self.gpu_s = {w.host: worker_s for w in cluster.workers if w.gpus}
        self.num_workers = n

    def cpu_per_worker_step(self) -> dict[str, float]:
        """``C_h``: host -> CPU seconds per worker step, for hosts with PS compute or priced serving
        CPU (module docstring)."""
        hosts = set(self.ps_own) | {h for h, s in self.serve.items() if s > 0}
        busy = {h: self.load.get(h, 0.0) + self.serve.get(h, 0.0) for h in hosts}
        return {h: seconds / self.num_workers for h, seconds in busy.items() if seconds > 0}

    def seconds(self, worker_host: str, sync_step_s: float) -> float:
        """Compute seconds of one step of a worker on ``worker_host`` when a synchronous step
        takes ``sync_step_s``: each host's part ``/ (1 - rho)``, rho = the host's other work per second."""
        own_s, own_load = self.worker.get(worker_host, (0.0, 0.0))
        total = self.gpu_s.get(worker_host, 0.0)
        for h in set(self.ps_own) | {worker_host}:
            mine = self.ps_own.get(h, 0.0) + (own_s if h == worker_host else 0.0)
            if mine <= 0:
                continue
            mine_load = self.ps_own_load.get(h, 0.0) + (own_load if h == worker_host else 0.0)
            rho = (self.load.get(h, 0.0) - mine_load) / sync_step_s if sync_step_s > 0 else 0.0
            total += mine / (1.0 - min(max(rho, 0.0), MAX_CONTENTION))
        return total


def _contended_step(step_at: Any) -> float:
    """The synchronous step time ``T`` with ``T = step_at(T)`` (``step_at`` decreases in ``T``:
    the longer the step, the less the other work per second slows it), by bisection from the
    uncontended step ``step_at(inf)``."""
    low = step_at(math.inf)
    if not math.isfinite(low) or low <= 0:
        return low
    high = low
    for _ in range(60):
        if step_at(high) <= high:
            break
        high *= 2.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        if step_at(mid) > mid:
            low = mid
        else:
            high = mid
    return high


def estimate_allreduce(profile: ModelProfile, cluster: Cluster, gradient_codec: str = "none") -> StepEstimate:
    """Predict one synchronous ring all-reduce step over the cluster's workers (see module doc).
    ``gradient_codec`` (``"fp16"``: Horovod's ``hvd.Compression.fp16``) scales the all-reduced bytes
    by its wire ratio (:func:`ralp_tf.plan.compression.wire_ratio`)."""
    n = cluster.num_workers
    if n == 0:
        raise PlanError("the cluster has no workers")
    b = profile.batch_size
    worker = cluster.workers[0]
    p = profile.trainable_param_bytes * wire_ratio(gradient_codec)
    per_worker = ring_allreduce_bytes(n, p)
    hosts = cluster._hosts_by_name
    out = {h: 0.0 for h in hosts}
    into = {h: 0.0 for h in hosts}
    workers = cluster.workers
    for i, w in enumerate(workers):
        nxt = workers[(i + 1) % n]
        if w.host != nxt.host and per_worker:
            out[w.host] += per_worker
            into[nxt.host] += per_worker
    link_s = {h: transfer_seconds(max(out[h], into[h]), hosts[h].bandwidth_bps) for h in hosts}
    comm_s = max(link_s.values())
    compute_s = sum(layer_seconds(l, worker, b) for l in profile.layers)
    step_s = compute_s + comm_s
    traffic = {("worker", "next worker"): per_worker} if n > 1 else {}
    return StepEstimate(
        mode="allreduce", batch_size=b, num_workers=n, bytes_between=traffic, bytes_per_step=per_worker * n,
        worker_compute_s=compute_s, ps_compute_s={}, comm_s=comm_s, step_s=step_s,
        samples_per_s=n * b / step_s if step_s > 0 else math.inf,
        bottleneck="ring links" if comm_s > compute_s else "workers",
        link_bytes_out=out, link_bytes_in=into, link_s=link_s,
        busiest_link=max(link_s, key=link_s.get) if comm_s > 0 else "")
