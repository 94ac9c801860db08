"""Balanced variable storage: which PS task stores the variables of each worker-computed layer.

ParameterServerStrategy spreads variables round-robin over PS tasks by count, so one PS task
can hold most of the bytes (a large kernel next to a small bias, a large layer next to small
ones). Its link then carries most of the traffic. This planner balances instead the bytes that
storing a layer moves per worker step (``costmodel.variable_traffic_bytes``:
``(k_l + 1) * p_l`` for a dense/conv layer called ``k_l`` times, the rows and the sparse
gradient for an embedding), because that traffic, not the stored size, loads the links.

**Greedy longest-processing-time.** With ``M`` PS tasks and the layers' weights ``w_l``, the
balanced share is ``s = sum_l w_l / M``. Layers are taken largest first, each given to the
least loaded PS task (ties: the lowest index). Greedy assignment ends with no task above
``s + (largest piece)``, so when ``partition`` is on, a layer with ``w_l > s / 4`` is split
into ``K = min(M, ceil(4 w_l / s))`` equal shards on the ``K`` least loaded tasks (when
``K >= 2``), each adding ``w_l / K``: pieces stay within a quarter share and the busiest task
within about 1.25 shares. (Without splitting, LPT's largest load is within 4/3 of the best
possible, but one layer above a share overloads its task whatever the order.)

Embedding tables are never split by this layer-level planner, and layers computed on PS tasks
are stored where they compute, so neither is given a storage entry of its own.

**Partitioned storage, per variable** (:func:`partition_storage`, BytePS's pieces): with a cap
``c`` on the bytes of a piece, a variable of ``p_v`` bytes above ``c`` is split into
``K = min(T, n_a, ceil(p_v / c))`` shards (``T`` the PS tasks given, ``n_a`` its entries along
the split axis); an embedding table is split by the rows one worker step reads,
``ceil(b * a_l * k_l / c)``. The split axis is 0 when the variable has at least K rows there,
else its longest axis (a ``[3, 3, c_in, c_out]`` conv kernel splits by channels). Smaller
variables stay whole. Variables go largest traffic first, each variable's shards to distinct
tasks, to the least loaded tasks (traffic weights as above, each shard its share). A layer
whose variables all end up whole on one task is written as that task, one whose variables are
all split along axis 0 over the same tasks as the layer-wide list; anything else per variable
(format ``ralp_tf.plan/3``). Without variable shapes nothing is partitioned (every variable
whole, balanced). The analyzer prices several caps and keeps the fastest
(:mod:`ralp_tf.plan.analyzer`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import LayerProfile, ModelProfile
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.shards import PS_STORE, Sharded, VariableStorage, shard_sizes
from ralp_tf.plan.traffic import WORKER, resolve_placements, variable_traffic_bytes

__all__ = ["PIECES_PER_SHARE", "BYTEPS_PIECE_BYTES", "balance_storage", "with_balanced_storage", "stored_bytes",
           "split_axis", "partition_storage", "with_partitioned_storage"]

#: BytePS's largest piece of a tensor, 4 MB: the largest cap the analyzer tries.
BYTEPS_PIECE_BYTES = 4_000_000

#: A partitioned layer's shards are at most ``1 / PIECES_PER_SHARE`` of a balanced share.
PIECES_PER_SHARE = 4


def balance_storage(profile: ModelProfile, num_ps: int, placements: Plan | Mapping[str, str] | None = None, *,
                    partition: bool = True) -> dict[str, tuple[int, ...]]:
    """Layer -> PS task indices storing it (one, or one per shard) for every worker-computed
    layer with variables, balanced by traffic as the module docstring states."""
    if isinstance(num_ps, bool) or not isinstance(num_ps, int) or num_ps < 1:
        raise PlanError(f"balanced storage needs at least one PS task, got num_ps={num_ps!r}; add a 'ps' job")
    where = resolve_placements(profile, placements)
    weights = {l.name: variable_traffic_bytes(l, profile.batch_size) for l in profile.layers
               if where[l.name] == WORKER and l.var_bytes}
    share = sum(weights.values()) / num_ps
    load = [0.0] * num_ps
    out: dict[str, tuple[int, ...]] = {}
    for name in sorted(weights, key=lambda n: (-weights[n], profile.index(n))):
        w = weights[name]
        shards = 1
        if partition and share > 0 and w > share / PIECES_PER_SHARE and profile.layer(name).kind != "embedding":
            shards = min(num_ps, math.ceil(PIECES_PER_SHARE * w / share))
        tasks = sorted(range(num_ps), key=lambda k: (load[k], k))[:shards]
        for k in tasks:
            load[k] += w / shards
        out[name] = tuple(sorted(tasks))
    return out


def with_balanced_storage(plan: Plan, profile: ModelProfile, cluster: Cluster, *, partition: bool = True) -> Plan:
    """``plan`` with its worker-computed layers stored by :func:`balance_storage` on the
    cluster's PS tasks (a ``ralp_tf.plan/2`` plan); ``plan`` itself when the cluster has at most
    one PS task, where there is nothing to balance."""
    if cluster.num_ps <= 1:
        return plan
    stored = balance_storage(profile, cluster.num_ps, plan, partition=partition)
    storage = {name: cluster.ps_device(tasks[0]) if len(tasks) == 1 else [cluster.ps_device(k) for k in tasks]
               for name, tasks in stored.items()}
    return dataclasses.replace(plan, storage=storage)


def stored_bytes(profile: ModelProfile, storage: Mapping[str, tuple[int, ...]], num_ps: int) -> list[float]:
    """Traffic-weighted bytes each PS task stores under ``storage`` (for reports and tests)."""
    load = [0.0] * num_ps
    for name, tasks in storage.items():
        for k in tasks:
            load[k] += variable_traffic_bytes(profile.layer(name), profile.batch_size) / len(tasks)
    return load


def split_axis(shape: Sequence[int], shards: int) -> int:
    """The axis a variable of ``shape`` splits along into ``shards`` shards: 0 when it has that
    many rows, else its longest axis (the first of equals)."""
    if shape and shape[0] >= shards:
        return 0
    return max(range(len(shape)), key=lambda a: (shape[a], -a)) if shape else 0


def _pieces(layer: LayerProfile, batch_size: int, cap: float, num_tasks: int) -> list[tuple[int, float, int, int]]:
    """Per variable of ``layer``: (index, traffic weight, shards, axis) under the piece cap ``cap``."""
    weight = variable_traffic_bytes(layer, batch_size)
    total = sum(layer.var_bytes) or 1
    out = []
    for i, v in enumerate(layer.var_bytes):
        w = weight * v / total
        size = batch_size * layer.output_bytes * layer.calls if layer.kind == "embedding" else v
        k = max(1, min(num_tasks, math.ceil(size / cap))) if layer.var_shapes and cap > 0 else 1
        shape = layer.var_shapes[i] if layer.var_shapes else ()
        axis = split_axis(shape, k) if k > 1 else 0
        k = max(1, min(k, shape[axis] if shape else 1))
        out.append((i, w, k, axis))
    return out


def partition_storage(profile: ModelProfile, tasks: Sequence[int], placements: Plan | Mapping[str, str] | None = None,
                      *, piece_bytes: float = BYTEPS_PIECE_BYTES) -> dict[str, Any]:
    """Layer -> storage entry (:mod:`ralp_tf.plan.plans`: device, layer-wide list or
    VariableStorage) for every worker-computed layer with variables, partitioned with pieces of
    at most ``piece_bytes`` over PS tasks ``tasks`` (module docstring)."""
    if not tasks:
        raise PlanError("partitioned storage needs at least one PS task; add a 'ps' job")
    where = resolve_placements(profile, placements)
    load = {k: 0.0 for k in tasks}
    items = []
    for l in profile.layers:
        if where[l.name] == WORKER and l.var_bytes:
            items += [(w, l.name, i, k, axis) for i, w, k, axis in _pieces(l, profile.batch_size, piece_bytes, len(tasks))]
    placed: dict[str, dict[int, tuple[tuple[int, ...], int]]] = {}
    for w, name, i, k, axis in sorted(items, key=lambda it: (-it[0], profile.index(it[1]), it[2])):
        chosen = sorted(tasks, key=lambda t: (load[t], t))[:k]
        shape = profile.layer(name).var_shapes[i] if profile.layer(name).var_shapes else (1,)
        sizes = shard_sizes(shape[axis] if shape else 1, k)
        for t, n in zip(chosen, sizes):
            load[t] += w * n / sum(sizes)
        placed.setdefault(name, {})[i] = (tuple(chosen), axis)
    return {name: _entry(profile.layer(name), by_var) for name, by_var in placed.items()}


def _entry(layer: LayerProfile, by_var: Mapping[int, tuple[tuple[int, ...], int]]) -> Any:
    """The shortest storage form that says what ``by_var`` (variable -> (tasks, axis)) says."""
    per_var = [by_var[i] for i in range(len(layer.var_bytes))]
    if all(len(t) == 1 for t, _ in per_var) and len({t for t, _ in per_var}) == 1:
        return PS_STORE.format(task=per_var[0][0][0])
    first = per_var[0][0]
    if len(first) > 1 and all(t == first and a == 0 and layer.var_shapes[i][0] >= len(first)
                              for i, (t, a) in enumerate(per_var)):
        return tuple(PS_STORE.format(task=k) for k in first)
    return VariableStorage(tuple(PS_STORE.format(task=t[0]) if len(t) == 1 else
                                 Sharded(tuple(PS_STORE.format(task=k) for k in t), a) for t, a in per_var))


def with_partitioned_storage(plan: Plan, profile: ModelProfile, cluster: Cluster, *,
                             piece_bytes: float = BYTEPS_PIECE_BYTES, tasks: Sequence[int] | None = None) -> Plan:
    """``plan`` with its worker-computed layers stored by :func:`partition_storage` over ``tasks``
    (default every PS task); ``plan`` itself on a cluster without PS tasks."""
    if cluster.num_ps == 0:
        return plan
    chosen = list(range(cluster.num_ps)) if tasks is None else list(tasks)
    return dataclasses.replace(plan, storage=partition_storage(profile, chosen, plan, piece_bytes=piece_bytes))
