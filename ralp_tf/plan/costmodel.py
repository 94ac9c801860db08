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

**Bytes of a worker step** (:mod:`ralp_tf.plan.traffic`, whose docstring states them): variable
pulls and pushes by where each variable (or shard) lives, activations by where each tensor is
produced and required (split layers included), embedding rows and gradients, compression, and
the control traffic (``STEP_OVERHEAD_BYTES`` per PS task talked to, ``RPC_CONTROL_BYTES`` per
message), each in a *phase*.

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
seconds, where ``ps_k`` is PS k's compute for one worker step (a split layer's shard on k: its
share of the layer, :mod:`ralp_tf.plan.traffic`) and ``c_w`` a worker step's compute on the
worker; only hosts with PS compute, or with a known core count (below), are limited this way
(a worker alone is bounded by its own step time below). CPU-only PS hosts
(:attr:`ralp_tf.plan.cluster.Cluster.ps_only_hosts`) are hosts like any other: their link and CPU
are priced by the same formulas.

**Serving CPU.** Moving bytes costs CPU at both ends (gRPC framing, tensor (de)serialisation, the
PS's optimizer update of what it receives): ``SERVE_CPU_S_PER_BYTE`` core-seconds per byte a task
sends or receives, loopback included; and each (worker step, PS task) pair costs dispatch CPU at
both ends, ``PS_STEP_CPU_S`` at the PS task and ``WORKER_STEP_CPU_S`` at the worker, for every PS
task the step exchanges data with. On a host that runs both a CPU worker and a PS task the three
are ``COLOCATED_*``, measured 3x higher there, and each tensor message costs
``COLOCATED_MESSAGE_CPU_S`` at each end. On a host whose budget in cores ``K_h`` is known
(:attr:`ralp_tf.plan.cluster.Host.cores`), ``C_h`` above also holds ``(sum_{PS k on h} (a * bytes_k
+ d) + sum_{workers w on h} (a * bytes_w + e * m_w) / N) / K_h``, with ``bytes_k`` / ``bytes_w`` a
worker step's bytes to and from task k / the worker and ``m_w`` the PS tasks it exchanges data
with, plus ``RPC_FIXED_S`` per further message (:mod:`ralp_tf.plan.traffic`) at each end. It enters
only that CPU bound, not a step's chain: a task serializes while its bytes are on the wire (priced
below). ``a`` = 1.03 ns/byte and ``d`` = 3.3 ms were fitted with one 0.7-core worker and a 1-core
PS task on dedicated 1 Gbit/s hosts (PS CPU seconds per step against payload bytes, stock PSS:
small_cnn b256 6.7 ms / 3.2 MB, ctr_head b32 43.3 ms / 42.1 MB, alexnet_cifar b32 323 ms / 287 MB);
the colocated ``d`` and ``e`` on the CPU each task measured (``task_cpu_s_per_step`` of ``ralp-tf
bench --host-cpu``) in colocated runs at 0.3 and 1 core per host, with
``COLOCATED_SERVE_CPU_S_PER_BYTE``: ``python benchmarks/cpu_by_task.py --fit`` (docs/costmodel.md,
"Where a budgeted host's CPU goes"). :func:`task_cpu_seconds` gives every task's predicted CPU.
Where no host states its cores, none of this is priced. A cluster whose serving CPU ``ralp-tf
calibrate`` measured (``Cluster.serving``) prices its measured rates on every host instead, and
two more terms where it measured them: each *chained* message (:func:`chained_message_ends`: a
cut's activations and gradients, a split layer's hops between PS tasks, the gradients pushed as
the backward computes them, which arrive one at a time while the receiver waits) at its chained
rate instead of a tensor message's, and the chief's CPU per closure, on the host it shares
(``Cluster.chief_host``), ``N c / K`` per synchronous step (docs/costmodel.md, "Chained messages
and the chief").

**Sparse updates.** An optimizer that passes over whole tables (:mod:`ralp_tf.model.optimizers`:
``tf_keras.optimizers.SGD`` writes the table and its momentum slot each step, momentum 0
included) spends ``passes * DENSE_PASS_S_PER_BYTE * p_v`` per worker step on each table's PS
task (a shard its share): PS compute after the push, one more stage of the chain and of the
host's CPU load, whatever the plan.

**Dense updates.** A PS task applies the optimizer's update of every variable it holds, each
worker step: where the cluster carries a measured rate for the profile's optimizer
(``Cluster.dense_update_s_per_byte``, ``ralp-tf calibrate``), each trainable variable with a dense
gradient costs ``u_o * p_v`` on each of its tasks (a shard its share), in the same last stage as
the sparse passes. The layer times hold no update; without a measured rate it is not priced (the
fitted serving constants hold the update of pushed gradients they were fitted with). A ring
worker's update of its replica is in the ring's per-byte CPU, which its probes measure with it.

**Step time.** One step of worker w, with no contention, takes
``t_w = sum_{l on worker} c(l, w) + sum_{l on PS} c(l, ps) + sum_{x -> y crossing hosts} 8 * bytes / min(B_host(x), B_host(y))``
(pull, compute and push one after another, less the overlap below); a split layer's shards
compute at once, so it adds its slowest shard, ``max_i s_i c(l, ps_i)``. Where the cluster prices
a closure floor (:attr:`~ralp_tf.plan.cluster.Cluster.floor`), each worker's ``t_w`` also holds the
floor per worker step at the cluster's steps per closure (:mod:`ralp_tf.plan.closures`).

**Overlap.** TensorFlow starts a layer's compute as soon as its weights have arrived and sends a
weight's gradient as soon as it is computed, so a worker's pulls overlap the forward of the
layers before them and its pushes the backward of the layers before them. ``t_w`` is less
``PULL_PUSH_OVERLAP * o_h * s_w``, ``s_w`` the saving of that two-stage pipeline over the worker's
own layers (:func:`ralp_tf.plan.loads.pipeline_savings`): each layer's compute, and as its pull and
its push the seconds of its dense variables stored on other hosts (at ``min(B_w, B_k)``) plus
half each of its variables' share of the closure floor (``p_var``, or ``s_var`` at K > 1, per
variable: its messages). The factor is the share of it TensorFlow achieves, fitted on measured
runs. Moving tensors takes a core while the worker computes, so ``o_h = clamp(K - busy, 0, 1)``:
``K`` the cores of the worker's host, ``busy`` its CPU workers (a core each) and its PS tasks'
compute per second of the step; where the hosts share one machine
(:attr:`~ralp_tf.plan.cluster.Cluster.shared_cores`, the testbed without CPU budgets) ``K`` and
``busy`` are the machine's; where the cores are unknown ``o_h = 1``. So a 1-core host that runs a
worker and a PS task overlaps nothing, nor do two workers computing on a 2-core machine (both
measured). A ring all-reduce step overlaps its gradients' all-reduce with the backward likewise:
its ``t`` is less ``PULL_PUSH_OVERLAP * o_h * s``, with no pulls and each layer's share of the ring's
seconds by its trainable bytes, ``o_h`` as above with no PS task. The same factor, since no ring run
measured here had a core free (two ranks on a 2-core machine, or 1-core hosts) to fit one of its
own; without it a projection would price the overlap for one side only.

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
``t = sum_l c(l, w) + max_h 8 * max(out_h, in_h) / B_h`` less its overlap (*Overlap*) and total
bytes ``2 (N-1) P``. A looked-up table's gradient is IndexedSlices, which both rings all-gather
instead (values and indices, repeats included): each worker sends the other N-1 workers' pieces,
``(N-1) (n r + n q)`` for n ids of rows of r bytes (measured, ctr_dnn's 128 MB table at 2 workers,
MWMS: 2.04 MB per step in all, not the 2 x 128 MB a dense all-reduce would move), and then applies
it to its own replica of the table, the optimizer's whole-table passes (*Sparse updates*) on
every worker. Where host cores ``K_h`` are known, the ring's own CPU per synchronous step,
``r_h = RING_CPU_S_PER_BYTE[i] (out_h + in_h) + RING_STEP_CPU_S + RING_TENSOR_HOP_CPU_S[i] G 2 (N-1)``
(implementation i, G gradient tensors), adds ``max_h r_h / K_h`` to ``t``, after the compute and
the link (``benchmarks/fit_ring_cpu.py``; docs/costmodel.md, "The ring's CPU"); a cluster whose ring
CPU was measured (``Cluster.ring_cpu``, ``ralp-tf calibrate``) prices its terms instead, and one
more: ``sparse_gradient_s`` per IndexedSlices gradient, which the ring all-gathers on its own (the
constants have none).
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Iterable, Mapping

from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import LayerProfile, ModelProfile
from ralp_tf.plan.closures import dispatch_bytes_per_step
from ralp_tf.plan.cluster import Cluster, Task, TaskRef
from ralp_tf.plan.compression import codec_flops, setting_of, wire_ratio
from ralp_tf.plan.loads import MAX_CONTENTION, ChainModel, contended_step, host_loads, pipeline_savings, transfer_seconds
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.serving import (COLOCATED_MESSAGE_CPU_S, COLOCATED_PS_STEP_CPU_S, COLOCATED_SERVE_CPU_S_PER_BYTE,
                                  COLOCATED_WORKER_STEP_CPU_S, PS_STEP_CPU_S, SERVE_CPU_S_PER_BYTE, WORKER_STEP_CPU_S,
                                  chained_message_ends, serving_core_seconds, serving_seconds, step_messages_by_ps,
                                  task_cpu_seconds)
from ralp_tf.plan.lookups import embedding_ids, gathered_rows
from ralp_tf.plan.updates import (DENSE_PASS_S_PER_BYTE, dense_pass_seconds, dense_update_seconds,
                                  ps_pass_s_per_byte, ring_pass_s_per_byte, ring_table_pass_seconds,
                                  updated_sparsely)
from ralp_tf.plan.traffic import (HANDLES, INDEX_BYTES, PULL, PUSH, RPC_CONTROL_BYTES, RPC_FIXED_S, STEP_OVERHEAD_BYTES, WORKER,
                                  compressed_ratios, regularised, resolve_placements, resolve_splits, resolve_storage,
                                  split_shares, step_traffic, variable_homes, StepTraffic, variable_traffic_bytes, worker_step_traffic)

__all__ = ["WORKER", "PULL", "PUSH", "STEP_OVERHEAD_BYTES", "RPC_CONTROL_BYTES", "RPC_FIXED_S", "INDEX_BYTES",
           "SERVE_CPU_S_PER_BYTE", "PS_STEP_CPU_S", "WORKER_STEP_CPU_S",
           "COLOCATED_SERVE_CPU_S_PER_BYTE", "COLOCATED_PS_STEP_CPU_S", "COLOCATED_WORKER_STEP_CPU_S",
           "COLOCATED_MESSAGE_CPU_S", "DENSE_PASS_S_PER_BYTE", "dense_pass_seconds",
           "STEPS_PER_CLOSURE_CHOICES", "STEPS_PER_CLOSURE_GAIN", "best_steps_per_closure", "step_messages_by_ps", "chained_message_ends",
           "closure_floor_seconds", "PULL_PUSH_OVERLAP", "overlap_seconds", "free_core", "MAX_CONTENTION",
           "StepEstimate", "transfer_seconds",
           "WIRE_OVERHEAD", "wire_bytes", "ps_sync_bytes", "ring_allreduce_bytes", "ring_allgather_bytes",
           "ring_gradient_bytes", "ring_table_pass_seconds", "layer_seconds",
           "resolve_placements", "variable_traffic_bytes", "variable_homes", "compressed_ratios",
           "worker_step_traffic", "estimate", "dense_update_seconds", "serving_core_seconds", "serving_seconds", "task_cpu_seconds",
           "RING_CPU_S_PER_BYTE", "RING_STEP_CPU_S", "RING_TENSOR_HOP_CPU_S", "ring_cpu_seconds", "ring_cpu_terms", "estimate_allreduce"]

#: Ring CPU per byte a host sends or receives (by implementation) and per step (module docstring),
#: fitted on budgeted Horovod and MWMS runs (``python benchmarks/fit_ring_cpu.py``).
RING_CPU_S_PER_BYTE = {"horovod": 1.4e-9, "mwms": 3.2e-9}
RING_STEP_CPU_S = 0.005
#: Core-seconds per gradient tensor and ring hop (``2 (N-1)`` hops a step), fitted with the two above:
#: MWMS all-reduces each gradient on its own; Horovod fuses them, but still handles each by name.
RING_TENSOR_HOP_CPU_S = {"horovod": 2e-5, "mwms": 5e-5}
#: The share of a worker step's pull/compute/push pipeline saving that TensorFlow achieves where a core
#: is free (module docstring, *Overlap*): fitted on the 1-worker cells of docs/costmodel.md, "Overlap".
PULL_PUSH_OVERLAP = 1.0


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
    hosts with PS compute. ``busiest_link`` names the host with the largest ``link_s``. Per task
    on a host with known cores, ``task_cpu_s``: its CPU core-seconds (:func:`task_cpu_seconds`).
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
    task_cpu_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: payload bytes between the coordinator and the workers per synchronous step (closure calls)
    dispatch_bytes: float = 0.0

    @property
    def max_link_bytes(self) -> float:
        """Bytes per synchronous step on the busiest host link, in its busier direction."""
        return max([*self.link_bytes_out.values(), *self.link_bytes_in.values(), 0.0])

    @property
    def link_bytes_per_step(self) -> float:
        """Bytes crossing host links per synchronous step (each counted once, at its sender), the
        coordinator's dispatch included (:func:`ralp_tf.plan.closures.dispatch_bytes_per_step`)."""
        return sum(self.link_bytes_out.values()) + self.dispatch_bytes

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["bytes_between"] = {f"{a}->{b}": v for (a, b), v in self.bytes_between.items()}
        d["max_link_bytes"] = self.max_link_bytes
        return d


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


def ring_allgather_bytes(num_workers: int, contributed_bytes: float) -> float:
    """Bytes each worker sends (and receives) per ring all-gather in which every worker contributes
    ``contributed_bytes``: it passes on the N-1 other workers' pieces, (N-1) * s."""
    return (num_workers - 1) * contributed_bytes if num_workers > 1 else 0.0


def ring_gradient_bytes(layer: LayerProfile, batch_size: int) -> tuple[float, float]:
    """``(dense, gathered)`` for ``layer``'s trainable variables in a ring step: the bytes of its
    gradients all-reduced densely, and the bytes one worker contributes to all-gathers. A variable
    whose rows the layer looks up (an embedding's table, a ``gathered`` one) and that no regulariser
    reads has an IndexedSlices gradient, which MultiWorkerMirroredStrategy and Horovod all-gather
    (values and indices) instead of all-reducing: the step's rows with their ids, repeats included,
    ``n r + n q`` (module docstring, *Ring all-reduce*)."""
    return _dense_and_gathered(_ring_gradients(layer, batch_size))


def _dense_and_gathered(gradients: Iterable[tuple[str, float]]) -> tuple[float, float]:
    """The ``(dense, gathered)`` sums of :func:`_ring_gradients`' entries."""
    dense = gathered = 0.0
    for kind, nbytes in gradients:
        if kind == "dense":
            dense += nbytes
        else:
            gathered += nbytes
    return dense, gathered


def _ring_gradients(layer: LayerProfile, batch_size: int) -> list[tuple[str, float]]:
    """Per trainable variable of ``layer``, ``("dense", its bytes)`` or ``("gathered", the bytes one
    worker contributes to its all-gather)`` (:func:`ring_gradient_bytes`)."""
    out = []
    trainable = len(layer.var_bytes) - layer.untrainable_variables
    for i, v in enumerate(layer.var_bytes[:trainable]):
        rows = gathered_rows(layer, i, batch_size, 1.0)
        if regularised(layer, i) or (layer.kind != "embedding" and rows is None):
            out.append(("dense", float(v)))
        elif rows is not None:
            ids, _, row = rows
            out.append(("gathered", ids * (row + layer.id_bytes)))
        else:
            values, ids = embedding_ids(layer, batch_size, 1.0)
            out.append(("gathered", values + layer.id_bytes * ids))
    return out


def layer_seconds(layer: LayerProfile, task: Task, batch_size: int) -> float:
    """Forward+backward time of ``layer`` for one batch on ``task``'s device: measured there by
    ``ralp-tf calibrate`` (the layer's ``device_seconds`` for the task or its job), else the
    profiler's measured time on CPU tasks, else ``3 f_l b / F_t``."""
    calibrated = layer.seconds_on(task.key, task.job) if layer.device_seconds else None
    if calibrated is not None:
        return calibrated
    if layer.measured_seconds is not None and not task.gpus:
        return layer.measured_seconds
    return 3.0 * layer.flops * batch_size / task.flops


def _check_ps_indices(locations: set[int], num_ps: int, what: str) -> None:
    if locations and num_ps == 0:
        raise PlanError(f"plan {what} PS tasks but the cluster has no PS tasks; add a 'ps' job")
    for k in sorted(locations):
        if k >= num_ps:
            raise PlanError(f"plan {what} ps task {k} but the cluster has {num_ps} PS task(s)")


def _ps_compute(profile: ModelProfile, cluster: Cluster, where: Mapping[str, TaskRef],
                splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]], updates: Mapping[TaskRef, float]
                ) -> tuple[dict[TaskRef, float], list[dict[str, float]], dict[str, float]]:
    """Per PS task, its compute seconds per worker step; the chain's PS stages (``{host: seconds}``,
    a split layer's shards at once; ``updates``, the optimizer's work per task, sparse updates'
    whole-table passes and dense updates, a last stage after the push); per host, that compute at
    the host's CPU budget."""
    hosts = {h.name: h for h in cluster.hosts}
    ps_s: dict[TaskRef, float] = {}
    stages: list[dict[str, float]] = []
    loads: dict[str, float] = collections.defaultdict(float)

    def add_stage(parts: Iterable[tuple[TaskRef, float]]) -> None:
        """One stage of the chain: ``(PS task, seconds)`` computed at once."""
        stage: dict[str, float] = collections.defaultdict(float)
        for ref, seconds in parts:
            task = cluster.task("ps", ref.index)  # type: ignore[arg-type]
            ps_s[ref] = ps_s.get(ref, 0.0) + seconds
            stage[task.host] += seconds
            loads[task.host] += seconds * task.flops / hosts[task.host].cpu_flops
        stages.append(dict(stage))

    for l in profile.layers:
        loc = where[l.name]
        if loc == WORKER:
            continue
        split = splits.get(l.name)
        shares = list(zip(split[1], split_shares(l, split[0], len(split[1])))) if split else [(loc, 1.0)]
        add_stage([(ref, share * layer_seconds(l, cluster.task("ps", ref.index), profile.batch_size))  # type: ignore[arg-type]
                   for ref, share in shares])
    if updates:
        add_stage(updates.items())
    return ps_s, stages, dict(loads)


def estimate(profile: ModelProfile, cluster: Cluster,
             placements: Plan | Mapping[str, str] | None = None) -> StepEstimate:
    """Predict bytes (per task pair and per host link) and time per step for ``placements``
    (None: stock PSS); a Plan's ``storage`` and ``splits`` are priced too (module docstring)."""
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers")
    plan = placements if isinstance(placements, Plan) else None
    where = resolve_placements(profile, placements)
    splits = resolve_splits(plan)
    ps_used = {loc for loc in where.values() if loc.is_ps} | {t for _, tasks in splits.values() for t in tasks}
    _check_ps_indices({int(t.index) for t in ps_used}, cluster.num_ps, "places layers on")  # type: ignore[arg-type]
    _check_ps_indices({k for tasks in (plan.stored_on() if plan else {}).values() for k in tasks}, cluster.num_ps,
                      "stores variables on")
    b = profile.batch_size
    compression = plan.compression if plan else {}
    step = step_traffic(profile, where, cluster.num_ps, resolve_storage(plan), compression, splits,
                        fused=cluster.fused_transfers, steps_per_closure=cluster.steps_per_closure)
    traffic: dict[tuple[str, str], float] = {}
    for (src, dst, _), nbytes in step.bytes.items():
        traffic[(src, dst)] = traffic.get((src, dst), 0.0) + nbytes
    worker = cluster.workers[0]
    worker_s = sum(layer_seconds(l, worker, b) for l in profile.layers if where[l.name] == WORKER)
    worker_s += sum(codec_flops(setting_of(compression, l.name).gradients, v) for l in profile.layers
                    if where[l.name] == WORKER and l.kind != "embedding" for v in l.var_bytes) / worker.flops
    updates = collections.Counter(dense_pass_seconds(profile, step.homes, ps_pass_s_per_byte(cluster)))
    update_rate = cluster.dense_update_s_per_byte.get(profile.optimizer)
    if update_rate is not None:
        updates.update(dense_update_seconds(profile, step.homes, update_rate))
    ps_s, stages, cpu_loads = _ps_compute(profile, cluster, where, splits, updates)
    n = cluster.num_workers
    loads = host_loads(cluster, step.bytes)
    priced = any(h.cores for h in cluster.hosts)  # serving CPU is priced only where cores are known
    serving = serving_core_seconds(cluster, traffic, step.messages, step_messages_by_ps(step),
                                   chained_message_ends(step)) if priced else {}
    chains = ChainModel(cluster, worker_s, stages, cpu_loads, serving_seconds(cluster, serving))
    cpu_s = chains.cpu_per_worker_step()
    fixed: dict[tuple[str, str], float] = {("link", h): n / busy for h, busy in loads.link_s.items() if busy > 0}
    fixed.update({("cpu", h): 1.0 / per_worker_step for h, per_worker_step in cpu_s.items()})

    floor_s = closure_floor_seconds(cluster, step)
    pipelined = overlap_seconds(profile, cluster, where, step)
    ps_busy = {h: n * seconds for h, seconds in cpu_loads.items()}  # PS compute per synchronous step, host budgets

    def limits_at(sync_step_s: float) -> dict[tuple[str, str], float]:
        chain = chains.seconds_by_host(sync_step_s)
        saved = {h: PULL_PUSH_OVERLAP * free_core(cluster, h, ps_busy, sync_step_s) * s for h, s in pipelined.items()}
        rate = sum(count / t if t > 0 else math.inf for host, count in chains.workers_on.items()
                   for t in [chain[host] + loads.comm_by_host[host] + floor_s - saved[host]])
        return {("workers", ""): rate, **fixed}

    limits = limits_at(contended_step(lambda t: n / min(limits_at(t).values())))
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
        task_cpu_s=task_cpu_seconds(cluster, worker_s, ps_s, serving),
        dispatch_bytes=dispatch_bytes_per_step(profile.num_variables, n, cluster.steps_per_closure),
        busiest_link=max(loads.link_s, key=loads.link_s.get, default="") if any(loads.link_s.values()) else "")  # type: ignore[arg-type]


def overlap_seconds(profile: ModelProfile, cluster: Cluster, where: Mapping[str, TaskRef],
                    step: StepTraffic) -> dict[str, float]:
    """Worker host -> ``s_w`` of the module docstring's *Overlap*: the pipeline saving of one worker
    step there over its worker-computed layers, in profile order, with the pull and push seconds of
    their dense variables stored on other hosts and of their variables' share of the closure floor."""
    hosts = {h.name: h for h in cluster.hosts}
    ps_host = {TaskRef.ps(t.index): t.host for t in cluster.ps}
    per_variable = cluster.floor.per_variable_s(cluster.steps_per_closure) if cluster.floor is not None else 0.0
    out = {}
    for w in cluster.workers:
        if w.host in out:
            continue
        stages = []
        for l in profile.layers:
            if where[l.name] != WORKER:
                continue
            stored = sum(1 for shards in step.homes.get(l.name, []) if shards)  # its variables' messages
            pull = push = per_variable / 2 * stored if l.kind != "embedding" else 0.0
            for task, (down, up) in step.layer_variables.get(l.name, {}).items():
                if ps_host[task] != w.host:
                    rate = min(hosts[w.host].bandwidth_bps, hosts[ps_host[task]].bandwidth_bps)
                    pull, push = pull + transfer_seconds(down, rate), push + transfer_seconds(up, rate)
            stages.append((layer_seconds(l, w, profile.batch_size), pull, push))
        out[w.host] = pipeline_savings(stages)
    return out


def free_core(cluster: Cluster, host: str, ps_busy: Mapping[str, float], sync_step_s: float) -> float:
    """``o_h`` of the module docstring's *Overlap*: the share of a core free for a worker's transfers
    on ``host`` while it computes, when a synchronous step takes ``sync_step_s`` and ``ps_busy`` gives
    each host's PS compute per synchronous step (in its CPU budget's seconds)."""
    if cluster.shared_cores is not None:
        cores, scope = cluster.shared_cores, {h.name for h in cluster.hosts}
    elif cluster.host(host).cores is not None:
        cores, scope = cluster.host(host).cores, {host}
    else:
        return 1.0
    busy = sum(1 for w in cluster.workers if w.host in scope and not w.gpus)
    busy += sum(s for h, s in ps_busy.items() if h in scope) / sync_step_s if sync_step_s > 0 else 0.0
    return min(max(cores - busy, 0.0), 1.0)


def closure_floor_seconds(cluster: Cluster, step: StepTraffic) -> float:
    """Seconds a worker step pays for its closure (:meth:`ralp_tf.plan.closures.FloorTerms.per_step_s`,
    at the cluster's ``steps_per_closure``); 0 when the cluster prices no floor."""
    if cluster.floor is None:
        return 0.0
    return cluster.floor.per_step_s(cluster.steps_per_closure, step_messages_by_ps(step))


#: The steps per closure :func:`best_steps_per_closure` weighs, and how much faster than the
#: smallest a larger K must be predicted to be taken (a closure of K steps re-runs whole after a
#: fault, and reports its losses and progress only at its end).
STEPS_PER_CLOSURE_CHOICES = (1, 2, 4, 8, 16, 32, 64)
STEPS_PER_CLOSURE_GAIN = 0.05


def best_steps_per_closure(profile: ModelProfile, cluster: Cluster, placements: Plan | Mapping[str, str] | None,
                           limit: int | None = None) -> int:
    """The steps per closure a job should run: of :data:`STEPS_PER_CLOSURE_CHOICES` up to ``limit``
    (e.g. the checkpoint interval), the smallest K whose predicted step (the cluster's floor at K)
    is within ``STEPS_PER_CLOSURE_GAIN`` of the fastest. 1 when the cluster prices no floor."""
    if cluster.floor is None:
        return 1
    choices = [k for k in STEPS_PER_CLOSURE_CHOICES if limit is None or k <= max(limit, 1)]
    steps = {k: estimate(profile, cluster.with_closures(k, cluster.floor), placements).step_s for k in choices}
    fastest = min(steps.values())
    return min(k for k, t in steps.items() if t <= fastest * (1 + STEPS_PER_CLOSURE_GAIN))


def ring_cpu_seconds(cluster: Cluster, bytes_out: Mapping[str, float], bytes_in: Mapping[str, float],
                     implementation: str = "horovod", gradients: int = 0, sparse_gradients: int = 0) -> dict[str, float]:
    """Host -> seconds of its CPU budget a ring all-reduce's own work takes per synchronous step,
    ``r_h / K_h`` (module docstring, *Ring all-reduce*), for worker hosts whose cores are known;
    ``gradients`` is the number of gradient tensors, ``sparse_gradients`` how many of them are
    IndexedSlices (each all-gathered on its own: priced where the cluster's ring CPU measured it)."""
    if implementation not in RING_CPU_S_PER_BYTE:
        raise PlanError(f"unknown ring implementation {implementation!r}; use one of {', '.join(RING_CPU_S_PER_BYTE)}")
    per_byte, step, hop, sparse = ring_cpu_terms(cluster, implementation)
    fixed = step + 2 * (cluster.num_workers - 1) * gradients * hop + sparse * sparse_gradients
    moved = {h: bytes_out.get(h, 0.0) + bytes_in.get(h, 0.0) for h in {w.host for w in cluster.workers}}
    return {h: (per_byte * b + fixed) / cluster.host(h).cores  # type: ignore[operator]
            for h, b in moved.items() if cluster.host(h).cores}


def ring_cpu_terms(cluster: Cluster, implementation: str) -> tuple[float, float, float, float]:
    """The ring's CPU per byte, per step, per gradient tensor and hop, and per sparse gradient for
    ``implementation``: the cluster's measured ones (``Cluster.ring_cpu``) where they are that
    implementation's, else ``RING_CPU_S_PER_BYTE``, ``RING_STEP_CPU_S``, ``RING_TENSOR_HOP_CPU_S``
    and no sparse term (the constants' fits had no sparse gradients)."""
    measured = cluster.ring_cpu
    if measured is not None and measured.implementation == implementation:
        return measured.s_per_byte, measured.step_s, measured.tensor_hop_s, measured.sparse_gradient_s
    return RING_CPU_S_PER_BYTE[implementation], RING_STEP_CPU_S, RING_TENSOR_HOP_CPU_S[implementation], 0.0


def estimate_allreduce(profile: ModelProfile, cluster: Cluster, gradient_codec: str = "none",
                       implementation: str = "horovod") -> StepEstimate:
    """Predict one synchronous ring all-reduce step over the cluster's workers (see module doc).
    ``gradient_codec`` (``"fp16"``: Horovod's ``hvd.Compression.fp16``) scales the all-reduced bytes
    by its wire ratio (:func:`ralp_tf.plan.compression.wire_ratio`); ``implementation``
    (``"horovod"`` or ``"mwms"``) sets the ring's CPU per byte where host budgets are known."""
    n = cluster.num_workers
    if n == 0:
        raise PlanError("the cluster has no workers")
    b = profile.batch_size
    worker = cluster.workers[0]
    gradients_of = {l.name: _ring_gradients(l, b) for l in profile.layers}
    by_layer = {name: _dense_and_gathered(g) for name, g in gradients_of.items()}
    ratio = wire_ratio(gradient_codec)
    layer_bytes = {name: ring_allreduce_bytes(n, dense * ratio) + ring_allgather_bytes(n, gathered)
                   for name, (dense, gathered) in by_layer.items()}
    per_worker = sum(layer_bytes.values())
    hosts = {h.name: h for h in cluster.hosts}
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
    passes_s = ring_table_pass_seconds(profile, ring_pass_s_per_byte(cluster))
    compute_s = sum(layer_seconds(l, worker, b) for l in profile.layers) + passes_s
    ring = [(layer_seconds(l, worker, b), 0.0, comm_s * layer_bytes[l.name] / per_worker if per_worker else 0.0)
            for l in profile.layers]
    gradients = sum(len(g) for g in gradients_of.values())
    sparse = sum(1 for g in gradients_of.values() for kind, _ in g if kind == "gathered")
    cpu_s = ring_cpu_seconds(cluster, out, into, implementation, gradients, sparse)
    ring_cpu_s = max(cpu_s.values(), default=0.0)
    step_s = compute_s + comm_s - PULL_PUSH_OVERLAP * free_core(cluster, worker.host, {}, math.inf) * pipeline_savings(ring)
    step_s += ring_cpu_s
    traffic = {("worker", "next worker"): per_worker} if n > 1 else {}
    return StepEstimate(
        mode="allreduce", batch_size=b, num_workers=n, bytes_between=traffic, bytes_per_step=per_worker * n,
        worker_compute_s=compute_s, ps_compute_s={}, comm_s=comm_s, step_s=step_s,
        samples_per_s=n * b / step_s if step_s > 0 else math.inf,
        bottleneck=max((compute_s, "workers"), (comm_s, "ring links"), (ring_cpu_s, "ring CPU"))[1],
        link_bytes_out=out, link_bytes_in=into, link_s=link_s, host_cpu_s=cpu_s,
        busiest_link=max(link_s, key=link_s.get) if comm_s > 0 else "")
