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

Embedding tables are never split here (the applier shards a table through a different
mechanism than dense kernels; see :mod:`ralp_tf.plan.plans`), and layers computed on PS tasks are
stored where they compute, so neither is given a storage entry of its own.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import WORKER, resolve_placements, variable_traffic_bytes
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.model.profiler import ModelProfile

__all__ = ["PIECES_PER_SHARE", "balance_storage", "with_balanced_storage", "stored_bytes"]

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
