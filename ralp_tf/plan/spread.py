"""Spreading the PS-side layers of a cut over several PS tasks, within each layer (the Plan's
``splits``, :mod:`ralp_tf.plan.plans`).

:func:`split_head` makes the plan of one choice: every PS-side layer assembled on PS task A (the
first of the tasks given) and every layer that can be split (:func:`ralp_tf.plan.shards.split_limit`)
split over the first ``min(K, limit)`` of the K tasks, by one of two :data:`PATTERNS`:

* ``"columns"``: every Dense layer by columns, so that each consumer of a column-split layer
  gathers its slices (an all-gather among the tasks when the consumer is column-split too); the
  last Dense layer of the cut goes by rows when its input is column-split over the same tasks,
  so its (narrow) partial sums go to A instead of its (wide) input to every task;
* ``"megatron"``: Megatron-LM's MLP split over PS tasks: a Dense layer reading a column-split
  layer goes by rows (its input slices stay where they are, its partial sums are added on A),
  any other by columns.

An Embedding table in the cut goes by rows either way. Which of these, and which K, pays is the
cost model's call (:mod:`ralp_tf.plan.analyzer` prices them). :func:`task_order` lists the PS
tasks the shards take first: those on CPU-only PS hosts, then the others by index.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.shards import SPLITTABLE_DENSE, SPLITTABLE_EMBEDDING, LayerSplit, split_limit

__all__ = ["PATTERNS", "PATTERN_NAMES", "task_order", "splittable", "split_head", "shard_counts"]

PATTERNS = ("columns", "megatron")
#: How a pattern is named in a candidate's label.
PATTERN_NAMES = {"columns": "by columns", "megatron": "columns then rows"}


def task_order(cluster: Cluster) -> list[int]:
    """PS task indices, those on CPU-only PS hosts first (they compute nothing else), then the rest."""
    alone = {k for h in cluster.ps_only_hosts for k in h.tasks}
    return sorted(range(cluster.num_ps), key=lambda k: (f"ps:{k}" not in alone, k))


def splittable(profile: ModelProfile, ps_layers: Sequence[str]) -> bool:
    """Whether every PS-side layer with weights can be split (a cut worth spreading this way)."""
    weighted = [profile.layer(n) for n in ps_layers if profile.layer(n).param_bytes]
    return bool(weighted) and all(split_limit(l, "rows") >= 2 for l in weighted)


def shard_counts(k: int) -> list[int]:
    """The shard counts the analyzer tries with ``k`` PS tasks: 2, 4, 8, ... below ``k``, and ``k``."""
    counts, n = [], 2
    while n < k:
        counts.append(n)
        n *= 2
    return counts + [k] if k >= 2 else []


def split_head(plan: Plan, profile: ModelProfile, cluster: Cluster, ps_layers: Sequence[str], tasks: Sequence[int],
               pattern: str) -> Plan:
    """``plan`` with ``ps_layers`` assembled on PS task ``tasks[0]`` and split over ``tasks`` by
    ``pattern`` (module docstring); its storage and other fields are kept."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown split pattern {pattern!r}; use one of {', '.join(PATTERNS)}")
    assembly = cluster.ps_device(tasks[0])
    placements = dict(plan.placements)
    placements.update({name: assembly for name in ps_layers})
    dense = [n for n in ps_layers if profile.layer(n).class_name == SPLITTABLE_DENSE]
    splits: dict[str, LayerSplit] = {}
    by_columns: dict[str, tuple[int, ...]] = {}
    for name in ps_layers:
        layer = profile.layer(name)
        if layer.class_name == SPLITTABLE_EMBEDDING:
            by = "rows"
        elif layer.class_name == SPLITTABLE_DENSE:
            source = by_columns.get(layer.inbound[0]) if len(layer.inbound) == 1 else None
            if pattern == "megatron":
                by = "rows" if source is not None else "columns"
            else:
                by = "rows" if source is not None and name == dense[-1] else "columns"
        else:
            continue
        k = min(len(tasks), split_limit(layer, by))
        if k < 2:
            continue
        if by == "rows" and layer.class_name == SPLITTABLE_DENSE and source is not None:
            k = min(k, len(source))
        chosen = tuple(tasks[:k])
        splits[name] = LayerSplit(by, tuple(cluster.ps_device(t) for t in chosen))
        if by == "columns":
            by_columns[name] = chosen
    return dataclasses.replace(plan, placements=placements, splits=splits)
