r"""A worker step's traffic: the bytes one worker step moves between which tasks, in which phase.

Part of the one cost model (:mod:`ralp_tf.plan.costmodel` prices time and host loads from it).
Notation as there: ``b`` per-worker batch, ``p_v`` bytes of variable v, ``a`` bytes per sample
of an activation, ``k_l`` calls of layer l. Tasks are :class:`~ralp_tf.plan.cluster.TaskRef`\ s:
``"worker"`` (the stepping worker) and ``"ps:K"``.

**Where variables live** (:func:`variable_shards`). The home of variable v of layer l is: the
plan's PS task for a layer computed on one; the split's shards for a split layer (below); the
plan's ``storage`` for a worker-computed layer it names (:mod:`ralp_tf.plan.plans`: one task,
a layer-wide list of K tasks, each variable in ``min(K, rows)`` shards along axis 0, or one
entry per variable, sharded along any axis); otherwise ParameterServerStrategy's round-robin
over PS tasks, in the order the model created its variables (``ModelProfile.variable_order``;
a profile without it: the layers' order), counting only the variables so placed. A shard of ``n_i`` of
the variable's ``n`` entries along its split axis holds ``p_v * n_i / n`` bytes (``p_v / K``
each when the profile has no shapes).

**Variable traffic** (between the stepping worker and each shard's task), for every layer l
computed on the worker:

* dense/conv/... variable: ``r_v * p_v`` down (*pull* phase; ``r_v`` = :meth:`LayerProfile.reads`:
  each of the ``k_l`` calls reads it, ``T`` times when a recurrent loop's body reads it per timestep,
  as ``SimpleRNN``, ``RNN(cell)`` and ``ConvLSTM2D`` do; measured: a ``SimpleRNN(256)`` over 20
  timesteps, 5.94 MB down per worker step, 20 reads of its 296 KB), ``p_v`` more
  when a weight regulariser reads it (the loss reads the variable again: measured on
  regularized_cnn, whose L2-regularised kernels hold nearly all its weights, 28.8 MB per step
  against 19.2 MB priced with one read), and ``p_v`` up (the tape sums the calls' and the
  regulariser's gradients on the worker, then pushes one; *push* phase), split over its shards by
  their bytes;
* embedding table: the lookup runs where the table lives, so the table never moves; the
  worker's ids go there (``q n``, ``q`` the profile's ``id_bytes``; phase ``fwd:<layer>``) and the gathered rows are an activation
  *produced on* the table's task (a table sharded by rows produces each shard's share of the
  rows there). Where the gradient (IndexedSlices) goes depends on the profile's optimizer
  (:mod:`ralp_tf.model.optimizers`). A ``tf_keras.optimizers`` class sums its repeated ids on the
  worker (``Unique`` and ``UnsortedSegmentSum`` in ``apply_gradients``), so the rows' gradient
  comes to the worker and ``u * (r + q)`` goes up (rows of ``r`` bytes and their indices; push
  phase), ``u`` the distinct ids among the step's ``n`` lookups in a table of ``R`` rows,
  :func:`distinct_rows` ``= R (1 - (1 - 1/R)^n)``; each shard its share. The same holds for an
  embedding the plan computes on PS tasks, split or not: the gradient still comes to the worker
  and goes back (measured on ctr_dnn with every layer on the PS: 45.6 KB per step against 10.4
  KB priced without it). A ``tf_keras.optimizers.legacy`` class sums them in the update,
  colocated with the table, so the rows' gradient goes straight from where it is computed to
  the table (measured on ctr_dnn's ralp plan, loopback: 7.8-8.1 KB per worker step with
  ``legacy.SGD``, 43.3-43.8 KB with ``SGD``; priced 7.7 KB and 43.8 KB). A profile without
  shapes prices ``min(b a_l k_l, p_v) + q b ids_l k_l``. The call of a table on one task runs there
  (:func:`ralp_tf.place.wrappers.install_placement`), so the gradient's indices are that task's copy
  of the ids: ``q n`` come down (phase ``bwd:<layer>``) to be made unique on the worker; with a
  legacy optimizer they come down and go back with the rows when the rows' gradient arrives on the
  worker (no consumer on a PS task). Measured: 40 int64 ids per sample read by
  ``GlobalAveragePooling1D``, ``Conv1D`` or ``LSTM``, 2 workers: 1.32, 1.63 and 1.72 MB per step,
  within 0.3% of priced;
* a table a weight regulariser reads (the profile's ``regularised``; an ``embeddings_regularizer``)
  of a worker-computed layer: the loss reads it whole on the worker (``p_v`` down, pull phase),
  and the tape sums the regulariser's dense gradient with the rows' into a dense one (``p_v`` up
  instead of the rows). Computed on a PS task, the regulariser runs there and moves nothing;
* any other variable whose rows a layer's calls look up (the profile's ``gathered``: a composite
  layer holding a token and a position embedding) is priced alike, and its looked-up rows,
  ``n * r``, come down to the worker: in the forward phase when the layer is computed on the
  worker, as the gradient's values in the backward phase when it is computed on a PS task (a
  legacy optimizer: they go from that task to the table instead)
  (measured: a token + position embedding layer on the PS, batch 16 x 200 ids into 20,000 x 32:
  450 KB down and 434 KB up per step, against 410 and 399 priced plus the control bytes).

* a variable with a constraint (``kernel_constraint=max_norm(3)``): the optimizer applies it after
  the update, in the step's function, so for a worker-computed layer the worker reads the variable
  ``r`` times (``r`` the reads the constraint makes, the profile's ``constraint_reads``: 2 for
  ``max_norm``, ``non_neg``, ``unit_norm``) and writes it back, ``r p_v`` down and ``p_v`` up after the
  push (phases ``constraint`` and ``constraint-write``); measured on a CNN whose 33.5 MB Dense kernel
  has ``max_norm(3)``, stock PSS: 302.5 MB per step against 201.8 MB priced without it, 100.7 MB
  more. A PS-computed layer's constraint runs on its variable's task
  (:func:`ralp_tf.place.wrappers.install_placement`) and moves nothing.

**Activation traffic.** Every activation tensor (one per layer call, ``ModelProfile.tensors``) has
a *layout*: pieces ``(task, weight, [lo, hi))``, a ``weight`` share of its rows and the columns
``[lo, hi)`` of its last axis (as fractions). An unsplit producer's output is whole on its task
(``home`` for a worker-computed embedding: one piece per table shard, weighted by its share); a
column-split Dense's output is column-sliced over its shards; a row-split layer's output is
whole on its assembly task. Each consumer *requires* columns on devices: an unsplit consumer
the whole tensor on its device (the worker's loss for a model output); a column-split Dense the
whole tensor on every shard; a row-split Dense columns ``r_i`` on shard i. For each piece and
each requiring device ``d`` with overlap ``o`` (weight x the columns they share), ``b * a * o``
crosses ``task -> d`` when ``d != task`` (phase ``fwd:<producer>``), and, when a gradient flows
into the producer (it is floating point with trainable parameters at or before it), as much
crosses back ``d -> g`` (phase ``bwd:<producer>``), ``g`` the device computing the producer's
gradient of that piece (the piece's task; the worker for an embedding), when ``d != g``. Hops
between PS tasks computing parts of the head are priced the same way.

**Split layers** (:mod:`ralp_tf.plan.plans`, *splits*) also move, per worker step, in phase
``fwd:<layer>`` / ``bwd:<layer>``: a row-split Dense's partial sums, ``b * a_l`` from every shard
to the assembly task A, and ``dz`` (as much) back from A to every shard; a row-split
Embedding's ids, ``4 * b * ids_l * s_i`` from A to shard i, and its rows, ``b * a_l * s_i`` back
to A (``s_i`` the shard's share of the table). Shard i computes the share ``s_i`` of the layer's
FLOPs (the additions on A, ``K`` times the output per sample, are not priced).

**Compression** (a Plan's ``compression``, :mod:`ralp_tf.plan.compression`). A worker-computed
layer's ``weights`` codec scales its variable pull and push by the codec's wire ratio (embedding
tables excepted), read once per step however often the layer is called; its ``gradients`` codec,
when set, prices the push instead (:func:`ralp_tf.plan.compression.pushed_bytes`, per shard). A
PS-computed layer's ``activations`` codec scales the activations it receives from the worker,
and their gradients, by that ratio. Outputs returning to the worker are not compressed.

**Fused transfers** (``Cluster.fused_transfers``, :mod:`ralp_tf.place.fusion`). The variables of
worker-computed layers that live whole on a PS task, of layers :func:`fusable` (read whole, no
weights or gradients codec), move per PS task as one pull message and one push message: each variable's bytes once
per step however often its layer is called, the gradients of the trainable ones in the push. An
untrainable one (a BatchNorm statistic) still costs a message of its own for its update. They
are left out of ``layer_variables``: a fused pull ends before the forward starts and its push
starts after the backward ends, so nothing of them overlaps the compute.

**Control traffic.** Every message costs ``RPC_CONTROL_BYTES`` (request and response framing,
tensor metadata), half each way in the message's phase, and each worker step costs
``STEP_OVERHEAD_BYTES`` (function dispatch) with each PS task it exchanges data with, half each
way. A message is one tensor crossing between two tasks: each read of a variable shard (a
worker-computed layer called ``k`` times, or regularised, reads it ``k`` or ``k + 1`` times), each
pushed gradient shard, each piece of an activation or of its gradient, each split layer's
partial sum. Both were fitted on the zoo's four smallest steps (docs/costmodel.md, *Control
bytes*). Each closure also sends each PS task, from the worker, ``HANDLE_BYTES`` (150) per
variable shard a PS-computed layer reads there, ``LEGACY_HANDLE_BYTES`` (70) with a ``legacy``
optimizer (resource handles of the calls of that task's part of the step function), spread over
the closure's steps. Measured on models computed whole on the PS, 2 workers, batch 16, bytes
measured less those priced without the term: 65 Dense layers (130 variables), one step per closure,
+20.4 KB per step with ``SGD``, +9.2 KB with ``legacy.SGD``, at 8 steps per closure +1.1 KB;
mobilenetv2_transfer (262 variables, ``SGD``, one step) +35.2 KB. The CPU term counts only the messages beyond one per variable and per activation: a
variable in ``S`` shards ``S - 1`` per transfer, a split layer's phase carried as ``m`` messages
``m - 1``; each costs ``RPC_FIXED_S`` CPU seconds at both ends
(:func:`ralp_tf.plan.costmodel.serving_seconds`), an upper bound derived from other terms.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from ralp_tf.errors import PlanError
from ralp_tf.model.optimizers import sparse_update
from ralp_tf.model.profiles import LayerProfile, ModelProfile, follows_inputs
from ralp_tf.plan.cluster import TaskRef
from ralp_tf.plan.compression import Compression, pushed_bytes, setting_of, wire_ratio
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.plan.homes import split_shares, variable_homes, variable_shards
from ralp_tf.plan.lookups import INDEX_BYTES, distinct_rows, embedding_ids, gathered_rows, rows_gradient_on_worker
from ralp_tf.plan.shards import VariableStorage

__all__ = ["distinct_rows", "gathered_rows", "regularised", "constraint_reads", "WORKER", "PULL", "PUSH", "CONSTRAINT",
           "CONSTRAINT_WRITE", "HANDLES", "STEP_OVERHEAD_BYTES", "RPC_CONTROL_BYTES", "HANDLE_BYTES", "LEGACY_HANDLE_BYTES", "RPC_FIXED_S", "INDEX_BYTES",
           "Piece", "StepTraffic", "resolve_placements", "resolve_splits", "resolve_storage", "split_shares", "variable_shards", "variable_homes",
           "variable_traffic_bytes", "compressed_ratios", "step_traffic", "worker_step_traffic", "fusable"]

WORKER = TaskRef.worker()
PULL, PUSH = "pull", "push"
#: the phase of the resource handles a call of a PS task's part of the step function carries
HANDLES = "handles"
#: phases of a weight constraint the optimizer applies on the worker after the update: its reads, then its write
CONSTRAINT, CONSTRAINT_WRITE = "constraint", "constraint-write"
#: gRPC control bytes per worker step with each PS task it talks to (function dispatch), and per
#: message (framing, tensor metadata): a least-squares fit, weighted by the step's bytes, of the
#: zoo's four smallest steps (siamese_contrastive 54 messages, recommender_net 12, deep_cross_network
#: 5, vae_kl_loss 3; 3.8-24.0 KB of control), 2,803 B and 347 B.
STEP_OVERHEAD_BYTES = 2_800
RPC_CONTROL_BYTES = 350
#: Bytes per closure, worker to PS task, per variable a PS-computed layer reads there, by optimizer
#: family (module docstring, *Control traffic*): the ``tf_keras.optimizers`` classes, whose update
#: is a call of its own per variable, and the ``legacy`` ones.
HANDLE_BYTES = 150
LEGACY_HANDLE_BYTES = 70
#: CPU core-seconds each end spends on one further message (module docstring). Start value, to be
#: fitted: PS_STEP_CPU_S (3.3 ms per worker step on a PS task) over the 32 tensor transfers of the
#: alexnet_cifar step of that fit, 103 us, an upper bound (it charges the step's dispatch to its
#: transfers). ``ralp-tf floor`` measured 177 us at a PS task and 197 us at a worker
#: (docs/costmodel.md, "The CPU of a message"); the vgg16 scaling slice fits only at 5 ms, a cost
#: of budgeted hosts this term does not measure, so the start value stays.
RPC_FIXED_S = 3.3e-3 / 32


@dataclasses.dataclass(frozen=True)
class Piece:
    """A part of an activation: the ``weight`` share of its rows, columns ``[lo, hi)`` (fractions
    of its last axis), on ``task``."""

    task: TaskRef
    weight: float = 1.0
    lo: float = 0.0
    hi: float = 1.0


@dataclasses.dataclass(frozen=True)
class StepTraffic:
    """One worker step: ``bytes`` ``(src, dst, phase) -> bytes`` (data and control), ``control``
    the control part of each, ``messages`` task -> the messages beyond one per variable and per
    activation that the task sends or receives (the CPU term's count), ``homes`` the shards of
    every layer's variables it was priced with (:func:`variable_shards`), and ``layer_variables``
    worker-computed layer -> PS task -> the ``(pull, push)`` data bytes of its dense variables
    there (the pull and push phases by layer, for the overlap of :mod:`ralp_tf.plan.costmodel`)."""

    bytes: dict[tuple[TaskRef, TaskRef, str], float]
    messages: dict[TaskRef, float]
    control: dict[tuple[TaskRef, TaskRef, str], float] = dataclasses.field(default_factory=dict)
    homes: dict[str, list[list[tuple[TaskRef, float]]]] = dataclasses.field(default_factory=dict)
    layer_variables: dict[str, dict[TaskRef, tuple[float, float]]] = dataclasses.field(default_factory=dict)


def resolve_placements(profile: ModelProfile, placements: Plan | Mapping[str, str] | None) -> dict[str, TaskRef]:
    """Layer -> where it computes (a split layer: its assembly task): the worker or a PS task.
    Inputs always on the worker; an ``op:`` record where its inputs are
    (:func:`~ralp_tf.model.profiles.follows_inputs`), whatever the plan says of it."""
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
        out[l.name] = TaskRef.ps(d.task) if d.is_ps else WORKER  # type: ignore[arg-type]
    for l in profile.layers:  # topological order: a record fed by a record sees where that one went
        if follows_inputs(l):
            where = [out[u] for u in l.inbound]
            out[l.name] = where[0] if where and all(w.is_ps for w in where) else WORKER
    unknown = set(placements) - set(out)
    if unknown:
        raise PlanError(f"placements name layers not in the profile: {sorted(unknown)}")
    return out


def resolve_splits(plan: Plan | Mapping[str, Any] | None) -> dict[str, tuple[str, tuple[TaskRef, ...]]]:
    """Layer -> (``by``, its shards' tasks) for a Plan's split layers ({} for anything else)."""
    if not isinstance(plan, Plan):
        return {}
    return {layer: (by, tuple(TaskRef.ps(k) for k in tasks)) for layer, (by, tasks) in plan.split_tasks().items()}


def resolve_storage(plan: Plan | None) -> dict[str, tuple[int, ...] | VariableStorage]:
    """Layer -> its ``storage`` for :func:`variable_shards`: PS task indices (one task, or a
    layer-wide partition) or the per-variable VariableStorage."""
    if plan is None:
        return {}
    tasks = plan.stored_on()
    return {layer: entry if isinstance(entry, VariableStorage) else tasks[layer] for layer, entry in plan.storage.items()}


def variable_traffic_bytes(layer: LayerProfile, batch_size: int) -> float:
    """Bytes one worker step moves between a worker and the PS storing ``layer``'s variables,
    both directions (module docstring): ``sum_v (k_l + 1) p_v`` for a dense/conv layer; for an
    embedding, its rows (read) plus the IndexedSlices gradient."""
    if layer.kind == "embedding":
        rows = batch_size * layer.output_bytes * layer.calls
        ids = rows / (4 * (layer.output_shape[-1] if layer.output_shape else 1))
        return sum(rows + 2 * v if regularised(layer, i) else rows + min(rows, v) + layer.id_bytes * ids
                   for i, v in enumerate(layer.var_bytes))
    return sum((layer.reads(i) + 1) * v for i, v in enumerate(layer.var_bytes))


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


class _Builder:
    """Accumulates ``(src, dst, phase) -> bytes`` (data and control), the control part of each,
    and, per task, the messages beyond one per variable and per activation (the CPU term's count)."""

    def __init__(self) -> None:
        self.bytes: dict[tuple[TaskRef, TaskRef, str], float] = {}
        self.control: dict[tuple[TaskRef, TaskRef, str], float] = collections.defaultdict(float)
        self.messages: dict[TaskRef, float] = collections.defaultdict(float)
        self.layer_variables: dict[str, dict[TaskRef, tuple[float, float]]] = {}

    def add(self, src: TaskRef, dst: TaskRef, nbytes: float, phase: str) -> None:
        if src != dst and nbytes:
            key = (src, dst, phase)
            self.bytes[key] = self.bytes.get(key, 0.0) + nbytes

    def send(self, src: TaskRef, dst: TaskRef, nbytes: float, phase: str, messages: float = 1.0) -> None:
        """``nbytes`` of data from ``src`` to ``dst`` in ``messages`` messages, each costing
        ``RPC_CONTROL_BYTES``, half each way (module docstring, *Control traffic*)."""
        if src != dst:
            self.add(src, dst, nbytes, phase)
            self.add_control(src, dst, messages * RPC_CONTROL_BYTES / 2, phase)
            self.add_control(dst, src, messages * RPC_CONTROL_BYTES / 2, phase)

    def add_control(self, src: TaskRef, dst: TaskRef, nbytes: float, phase: str) -> None:
        if nbytes:
            self.add(src, dst, nbytes, phase)
            self.control[(src, dst, phase)] += nbytes

    def further(self, a: TaskRef, b: TaskRef, count: float) -> None:
        """``count`` messages between ``a`` and ``b`` beyond one per variable and per activation."""
        if a != b and count > 0:
            self.messages[a] += count
            self.messages[b] += count


def constraint_reads(layer: LayerProfile, index: int) -> int:
    """How often variable ``index`` of ``layer``'s constraint reads it (its profile's ``constraint_reads``)."""
    return layer.constraint_reads[index] if index < len(layer.constraint_reads) else 0


def regularised(layer: LayerProfile, index: int) -> bool:
    """Whether a weight regulariser reads variable ``index`` of ``layer`` (its profile's ``regularised``)."""
    return index < len(layer.regularised) and layer.regularised[index]


def _gradient_indices(layer: LayerProfile, where: Mapping[str, TaskRef], on_worker: bool, task: TaskRef,
                      nbytes: float, dedup_on_worker: bool, out: _Builder) -> None:
    """The ids of an embedding's sparse gradient (module docstring, *embedding table*): its call runs
    on the table's task (or its PS task), so its gradient's indices are that task's copy of the ids."""
    at = where[layer.name] if where[layer.name] != WORKER else task
    if dedup_on_worker:  # summed on the worker: the indices come down to be made unique
        out.send(at, WORKER, nbytes, f"bwd:{layer.name}")
    elif on_worker and where[layer.name] == WORKER:  # reshaped on the worker, pushed with the rows
        out.send(at, WORKER, nbytes, f"bwd:{layer.name}")
        out.send(WORKER, at, nbytes, PUSH)


def _variable_traffic(profile: ModelProfile, where: Mapping[str, TaskRef],
                      homes: Mapping[str, list[list[tuple[TaskRef, float]]]],
                      compression: Mapping[str, Compression], weights_ratio: Mapping[str, float],
                      out: _Builder, fused: bool = False) -> dict[str, list[Piece]]:
    """Variable pulls and pushes, embedding gradients; returns the layouts of embedding outputs
    produced on their tables' tasks (module docstring)."""
    b = profile.batch_size
    fused_pulls: set[TaskRef] = set()
    fused_pushes: set[TaskRef] = set()
    dedup_on_worker = sparse_update(profile.optimizer).dedup_on_worker
    layouts: dict[str, list[Piece]] = {}
    for l in profile.layers:
        on_ps = where[l.name] != WORKER
        for i, (v, shards) in enumerate(zip(l.var_bytes, homes.get(l.name, []))):
            extra = (len(shards) - 1) / len(shards)
            for task, share in shards:
                gathered = gathered_rows(l, i, b, share)
                if l.kind == "embedding" or gathered is not None:
                    q = l.id_bytes
                    if gathered is not None:
                        ids, distinct, row = gathered
                        push = distinct * (row + q)
                    else:
                        rows, ids = embedding_ids(l, b, share)
                        push = min(rows, v * share) + q * ids
                    dense = not on_ps and regularised(l, i)  # the loss reads it whole; its gradient sum is dense
                    if dense:
                        push = v * share
                        out.send(task, WORKER, v * share, PULL)
                        out.further(task, WORKER, extra)
                    if dense or dedup_on_worker:
                        out.send(WORKER, task, push, PUSH)
                        out.further(WORKER, task, extra)
                    elif l.kind != "embedding":  # the rows' gradient goes from the computing task to the table
                        out.send(where[l.name], task, ids * (row + q), PUSH)
                    if l.kind != "embedding" and (not on_ps or dedup_on_worker):  # rows looked up in a call
                        out.send(task, WORKER, ids * row, f"bwd:{l.name}" if on_ps else f"fwd:{l.name}")
                    elif not on_ps and i == 0:  # the table's shards produce the rows, from the worker's ids
                        layouts.setdefault(l.name, []).append(Piece(task, share))
                        out.send(WORKER, task, q * ids, f"fwd:{l.name}")
                        out.further(task, WORKER, extra)
                    if l.kind == "embedding" and i == 0 and not dense and (on_ps or len(shards) == 1):
                        _gradient_indices(l, where, rows_gradient_on_worker(profile, where, l.name), task,
                                          q * ids, dedup_on_worker, out)
                elif not on_ps and fused and len(shards) == 1 and fusable(l, setting_of(compression, l.name)):
                    trainable = i < len(l.var_bytes) - l.untrainable_variables
                    out.send(task, WORKER, v, PULL, messages=0)
                    out.send(WORKER, task, v, PUSH, messages=0 if trainable else 1)  # an untrainable one: its assign
                    fused_pulls.add(task)
                    if trainable:
                        fused_pushes.add(task)
                elif not on_ps:
                    setting = setting_of(compression, l.name)
                    reads = 1 if setting.weights != "none" or setting.gradients != "none" else (
                        l.reads(i) + regularised(l, i))
                    pull, push = v * share * reads * weights_ratio[l.name], pushed_bytes(setting, v * share)
                    out.send(task, WORKER, pull, PULL, messages=reads)
                    out.send(WORKER, task, push, PUSH)
                    before = out.layer_variables.setdefault(l.name, {}).get(task, (0.0, 0.0))
                    out.layer_variables[l.name][task] = (before[0] + pull, before[1] + push)
                    out.further(task, WORKER, extra * reads)
                    out.further(WORKER, task, extra)
                if not on_ps and constraint_reads(l, i):  # the optimizer's constraint, where the step runs
                    out.send(task, WORKER, v * share * constraint_reads(l, i), CONSTRAINT,
                             messages=constraint_reads(l, i))
                    out.send(WORKER, task, v * share, CONSTRAINT_WRITE)
    for task in fused_pulls:
        out.send(task, WORKER, 0.0, PULL)
    for task in fused_pushes:
        out.send(WORKER, task, 0.0, PUSH)
    return layouts


def fusable(layer: LayerProfile, setting: Compression) -> bool:
    """Whether a worker-computed layer's whole variables move fused (module docstring, *Fused
    transfers*): it reads them whole and has no weights or gradients codec."""
    return (not layer.looks_up_rows and not layer.loop_reads and setting.weights == "none"
            and setting.gradients == "none")


def _requirements(profile: ModelProfile, consumers: Iterable[str], is_output: bool, where: Mapping[str, TaskRef],
                  splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]]) -> dict[TaskRef, tuple[list[list[float]], list[str]]]:
    """Requiring device -> (merged column ranges, the consumers requiring there) of one tensor."""
    needs: dict[TaskRef, tuple[list[list[float]], list[str]]] = {}

    def need(task: TaskRef, lo: float, hi: float, consumer: str | None) -> None:
        ranges, names = needs.setdefault(task, ([], []))
        ranges.append([lo, hi])
        if consumer is not None:
            names.append(consumer)

    for c in consumers:
        split = splits.get(c)
        layer = profile.layer(c)
        if split is None or layer.kind == "embedding":
            need(where[c], 0.0, 1.0, c)
        elif split[0] == "columns":
            for t in split[1]:
                need(t, 0.0, 1.0, c)
        else:
            lo = 0.0
            for t, share in zip(split[1], split_shares(layer, "rows", len(split[1]))):
                need(t, lo, lo + share, c)
                lo += share
    if is_output:
        need(WORKER, 0.0, 1.0, None)
    for ranges, _ in needs.values():
        ranges.sort()
        merged = [ranges[0]]
        for lo, hi in ranges[1:]:
            if lo <= merged[-1][1] + 1e-12:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        ranges[:] = merged
    return needs


def _layout(layer: LayerProfile, where: Mapping[str, TaskRef], splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]],
            produced: Mapping[str, list[Piece]]) -> list[Piece]:
    """Where ``layer``'s output appears (module docstring, *Activation traffic*)."""
    if layer.name in produced:
        return produced[layer.name]
    split = splits.get(layer.name)
    if split is None or split[0] == "rows" or layer.kind == "embedding":
        return [Piece(where[layer.name])]
    pieces, lo = [], 0.0
    for t, share in zip(split[1], split_shares(layer, "columns", len(split[1]))):
        pieces.append(Piece(t, 1.0, lo, lo + share))
        lo += share
    return pieces


def _split_internal(profile: ModelProfile, where: Mapping[str, TaskRef],
                    splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]], grad_flows: Mapping[str, bool],
                    out: _Builder) -> None:
    """Partial sums of row-split Dense layers, ids and rows of row-split embeddings (module docstring)."""
    b = profile.batch_size
    for name, (by, tasks) in splits.items():
        if by != "rows":
            continue
        l, a = profile.layer(name), where[name]
        for t, share in zip(tasks, split_shares(l, "rows", len(tasks))):
            if l.kind == "embedding":
                rows, ids = embedding_ids(l, b, share)
                out.send(a, t, l.id_bytes * ids, f"fwd:{name}")
                out.send(t, a, rows, f"fwd:{name}")
            else:
                out.send(t, a, b * l.output_bytes, f"fwd:{name}")
                if grad_flows[name]:
                    out.send(a, t, b * l.output_bytes, f"bwd:{name}")


def _overlap(piece: Piece, ranges: Sequence[Sequence[float]]) -> float:
    return piece.weight * sum(max(0.0, min(piece.hi, hi) - max(piece.lo, lo)) for lo, hi in ranges)


def step_traffic(profile: ModelProfile, where: Mapping[str, TaskRef], num_ps: int,
                 storage: Mapping[str, Any] | None = None, compression: Mapping[str, Compression] | None = None,
                 splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]] | None = None, fused: bool = False,
                 steps_per_closure: int = 1) -> StepTraffic:
    """One worker step's traffic (module docstring): variables, activations, split layers, control;
    ``fused``: the worker's variables move fused (module docstring, *Fused transfers*);
    ``steps_per_closure``: the steps that share one call of each PS task's part of the step function."""
    compression, splits = compression or {}, splits or {}
    weights_ratio, activations_ratio = compressed_ratios(profile, where, compression)
    b = profile.batch_size
    dedup_on_worker = sparse_update(profile.optimizer).dedup_on_worker
    out = _Builder()
    homes = variable_shards(profile, where, num_ps, storage, splits) if num_ps else {}
    produced = _variable_traffic(profile, where, homes, compression, weights_ratio, out, fused)
    grad_flows = profile.gradient_flows()
    _split_internal(profile, where, splits, grad_flows, out)
    kinds = {l.name: l.kind for l in profile.layers}
    for t in profile.activation_tensors():
        layout = _layout(profile.layer(t.producer), where, splits, produced)
        needs = _requirements(profile, t.consumers, t.is_output, where, splits)
        grads = grad_flows[t.producer] and kinds[t.producer] != "input"
        messages: list[tuple[TaskRef, TaskRef, str]] = []
        for piece in layout:
            grad_at = WORKER if kinds[t.producer] == "embedding" and dedup_on_worker else piece.task
            for dst, (ranges, readers) in needs.items():
                share = _overlap(piece, ranges)
                if share <= 0:
                    continue
                ratio = 1.0
                if piece.task == WORKER and dst != WORKER:  # into PS-computed layers: their activations codec
                    ratio = min(activations_ratio[c] for c in readers)
                nbytes = b * t.bytes * share * ratio
                if dst != piece.task:
                    out.send(piece.task, dst, nbytes, f"fwd:{t.producer}")
                    messages.append((piece.task, dst, f"fwd:{t.producer}"))
                if dst != grad_at and grads:
                    out.send(dst, grad_at, nbytes, f"bwd:{t.producer}")
                    messages.append((dst, grad_at, f"bwd:{t.producer}"))
        if t.producer in splits or any(c in splits for c in t.consumers):
            _split_messages(messages, out)
    for ps_key in {k for (s, d, _) in out.bytes for k in (s, d) if k != WORKER}:
        out.add_control(WORKER, ps_key, STEP_OVERHEAD_BYTES / 2, PUSH)
        out.add_control(ps_key, WORKER, STEP_OVERHEAD_BYTES / 2, PULL)
    per_handle = LEGACY_HANDLE_BYTES if profile.optimizer.startswith("legacy") else HANDLE_BYTES
    for ps_key, handles in _ps_read_handles(profile, where, homes).items():
        out.add_control(WORKER, ps_key, per_handle * handles / max(steps_per_closure, 1), HANDLES)
    return StepTraffic(out.bytes, dict(out.messages), dict(out.control), homes, out.layer_variables)


def _ps_read_handles(profile: ModelProfile, where: Mapping[str, TaskRef],
                     homes: Mapping[str, list[list[tuple[TaskRef, float]]]]) -> dict[TaskRef, int]:
    """PS task -> the variable shards that PS-computed layers read there, each a resource handle in
    the call of that task's part of the step function (module docstring, *Control traffic*)."""
    out: dict[TaskRef, int] = collections.Counter()
    for l in profile.layers:
        if where[l.name] != WORKER:
            for shards in homes.get(l.name, []):
                for task, _ in shards:
                    out[task] += 1
    return dict(out)


def _split_messages(messages: Sequence[tuple[TaskRef, TaskRef, str]], out: _Builder) -> None:
    """A phase carried as ``m`` messages of a split layer's tensor counts ``m - 1`` further messages
    for the CPU term, spread evenly over them (module docstring, *Control traffic*)."""
    by_phase: dict[str, list[tuple[TaskRef, TaskRef]]] = {}
    for src, dst, phase in messages:
        by_phase.setdefault(phase, []).append((src, dst))
    for pairs in by_phase.values():
        each = (len(pairs) - 1) / len(pairs)
        for src, dst in pairs:
            out.further(src, dst, each)


def worker_step_traffic(profile: ModelProfile, where: Mapping[str, str], num_ps: int,
                        storage: Mapping[str, Any] | None = None,
                        compression: Mapping[str, Compression] | None = None,
                        splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]] | None = None
                        ) -> dict[tuple[str, str, str], float]:
    """``(src, dst, phase) -> bytes`` moved by one worker step (``"worker"`` is the stepping
    worker, ``"ps:K"`` a PS task): :func:`step_traffic`'s bytes."""
    refs = {name: TaskRef.parse(loc) for name, loc in where.items()}
    return dict(step_traffic(profile, refs, num_ps, storage, compression, splits).bytes)
