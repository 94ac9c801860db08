"""What the optimizer's updates cost on the task that applies them, per worker step. Pure.

The cost model's *Sparse updates* and *Dense updates* (:mod:`ralp_tf.plan.costmodel`): a sparse
update's whole-table passes (:mod:`ralp_tf.model.optimizers`) on each table's PS task, or on every
ring worker's replica, and an update of a dense gradient on the PS task holding the variable, each
at a rate per byte (``DENSE_PASS_S_PER_BYTE``, or what ``ralp-tf calibrate`` measured).
"""
from __future__ import annotations

import collections
from typing import Iterator, Mapping

from ralp_tf.model.optimizers import sparse_update
from ralp_tf.model.profiles import LayerProfile, ModelProfile
from ralp_tf.plan.cluster import Cluster, TaskRef
from ralp_tf.plan.traffic import regularised

__all__ = ["DENSE_PASS_S_PER_BYTE", "updated_sparsely", "ps_pass_s_per_byte", "ring_pass_s_per_byte",
           "ring_table_pass_seconds", "dense_pass_seconds", "dense_update_seconds"]

#: Seconds per table byte of one whole-table pass of a sparse update (:mod:`ralp_tf.plan.costmodel`,
#: *Sparse updates*): ctr_dnn, batch 32, one process, ``python benchmarks/optimizer_ab.py local --model
#: ctr_dnn``: 41.3 ms per step with tf_keras.optimizers.SGD (2 passes) against 2.3 ms with
#: legacy.SGD (none), over 70.4 MB of tables: (41.3 - 2.3) ms / (2 * 70.4 MB).
DENSE_PASS_S_PER_BYTE = 2.77e-10

def updated_sparsely(layer: LayerProfile, index: int) -> bool:
    """Whether variable ``index`` of ``layer`` gets an IndexedSlices gradient: the layer looks up its
    rows (an embedding's table, a ``gathered`` variable) and no regulariser reads it whole."""
    looked_up = layer.kind == "embedding" or (index < len(layer.gathered) and any(layer.gathered[index]))
    return looked_up and not regularised(layer, index)


def _trainable(profile: ModelProfile) -> Iterator[tuple[LayerProfile, int, int]]:
    """``(layer, index, bytes)`` of every trainable variable (a frozen one is never updated)."""
    for l in profile.layers:
        for i, v in enumerate(l.var_bytes[:len(l.var_bytes) - l.untrainable_variables]):
            yield l, i, v


def _bytes_on_ps(profile: ModelProfile, homes: Mapping[str, list[list[tuple[TaskRef, float]]]],
                 sparsely: bool) -> dict[TaskRef, float]:
    """Per PS task, the bytes ``p_v * share`` of the trainable variables (and shards) it holds whose
    gradient is IndexedSlices (``sparsely``) or dense."""
    out: dict[TaskRef, float] = collections.defaultdict(float)
    for l, i, v in _trainable(profile):
        shards = homes.get(l.name, [])
        if i < len(shards) and updated_sparsely(l, i) == sparsely:
            for task, share in shards[i]:
                if task.is_ps:
                    out[task] += v * share
    return dict(out)


def ps_pass_s_per_byte(cluster: Cluster) -> float:
    """Seconds per byte of a PS task's whole-table pass: the calibrated rate
    (``Cluster.table_pass_s_per_byte``), else ``DENSE_PASS_S_PER_BYTE``."""
    return cluster.table_pass_s_per_byte or DENSE_PASS_S_PER_BYTE


def ring_pass_s_per_byte(cluster: Cluster) -> float:
    """Seconds of a ring worker's step per byte of a whole-table pass over its replicas: the ring
    probes' core-seconds (``Cluster.ring_cpu.table_pass_s_per_byte``, either ring: the passes are the
    optimizer's, not the ring's) over the fewest cores of a worker host, where both are known; else
    the rate timed on PS tasks (``Cluster.table_pass_s_per_byte``), else ``DENSE_PASS_S_PER_BYTE``."""
    measured = cluster.ring_cpu.table_pass_s_per_byte if cluster.ring_cpu is not None else None
    cores = [cluster.host(w.host).cores for w in cluster.workers]
    if measured is not None and cores and all(cores):
        return measured / min(cores)  # type: ignore[type-var]
    return ps_pass_s_per_byte(cluster)


def ring_table_pass_seconds(profile: ModelProfile, per_byte: float = DENSE_PASS_S_PER_BYTE) -> float:
    """Seconds a ring worker's own sparse updates spend in whole-table passes per step: every worker
    applies the gathered gradient to its replica of each looked-up table, ``dense_passes * per_byte *
    p_v`` (:func:`dense_pass_seconds`, on the worker instead of a PS task)."""
    passes = sparse_update(profile.optimizer).dense_passes
    return sum(passes * per_byte * v for l, i, v in _trainable(profile) if updated_sparsely(l, i))


def dense_pass_seconds(profile: ModelProfile, homes: Mapping[str, list[list[tuple[TaskRef, float]]]],
                       per_byte: float = DENSE_PASS_S_PER_BYTE) -> dict[TaskRef, float]:
    """Per PS task, the seconds one worker step's sparse updates spend in whole-table passes
    (:mod:`ralp_tf.model.optimizers`): ``dense_passes * per_byte * p_v * share`` for every trainable
    looked-up variable (an embedding's table, a composite layer's gathered tables) and shard; a frozen
    table (``trainable=False``) is never updated and costs none; ``per_byte`` is
    ``DENSE_PASS_S_PER_BYTE``, or what ``ralp-tf calibrate`` measured on the PS tasks."""
    passes = sparse_update(profile.optimizer).dense_passes
    if not passes:
        return {}
    return {task: passes * per_byte * b for task, b in _bytes_on_ps(profile, homes, sparsely=True).items()}


def dense_update_seconds(profile: ModelProfile, homes: Mapping[str, list[list[tuple[TaskRef, float]]]],
                         per_byte: float) -> dict[TaskRef, float]:
    """Per PS task, the seconds one worker step's optimizer spends updating the trainable variables
    with dense gradients it holds (:mod:`ralp_tf.plan.costmodel`, *Dense updates*): ``per_byte * p_v * share`` for
    every such variable and shard."""
    return {task: per_byte * b for task, b in _bytes_on_ps(profile, homes, sparsely=False).items()}
