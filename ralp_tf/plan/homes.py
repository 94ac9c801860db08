"""Where a worker step's variables live: each variable's shards and their tasks, for a placement,
a Plan's storage and its split layers (the rules are :mod:`ralp_tf.plan.traffic`'s docstring,
*Where variables live*). Pure."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ralp_tf.model.profiles import LayerProfile, ModelProfile
from ralp_tf.plan.cluster import TaskRef
from ralp_tf.plan.plans import parse_device
from ralp_tf.plan.shards import VariableStorage, shard_fractions

__all__ = ["variable_shards", "variable_homes", "split_shares"]


def _shape_axis(layer: LayerProfile, i: int, axis: int) -> int | None:
    """Entries of variable i of ``layer`` along ``axis`` (1 for a scalar), None when unknown."""
    if not layer.var_shapes:
        return None
    shape = layer.var_shapes[i]
    return int(shape[axis]) if len(shape) > axis else 1


def _layer_wide(layer: LayerProfile, i: int, tasks: Sequence[int]) -> list[tuple[TaskRef, float]]:
    """Variable i of a layer stored layer-wide over ``tasks``: ``min(K, rows)`` shards on axis 0."""
    rows = _shape_axis(layer, i, 0)
    fractions = shard_fractions(rows, len(tasks))
    return [(TaskRef.ps(k), f) for k, f in zip(tasks, fractions)]


def variable_shards(profile: ModelProfile, where: Mapping[str, TaskRef], num_ps: int,
                    storage: Mapping[str, Any] | None = None,
                    splits: Mapping[str, tuple[str, tuple[TaskRef, ...]]] | None = None
                    ) -> dict[str, list[list[tuple[TaskRef, float]]]]:
    """Layer -> per variable, its shards ``[(task, share of its bytes)]`` (module docstring).
    ``storage`` values are PS task indices (one, or a layer-wide partition) or a VariableStorage."""
    storage, splits = storage or {}, splits or {}
    homes: dict[str, list[list[tuple[TaskRef, float]]]] = {}
    round_robin: set[str] = set()
    for l in profile.layers:
        loc = where[l.name]
        if l.name in splits:
            by, tasks = splits[l.name]
            homes[l.name] = _split_homes(l, by, tasks, loc)
        elif loc.is_ps:
            homes[l.name] = [[(loc, 1.0)] for _ in l.var_bytes]
        elif l.name in storage:
            entry = storage[l.name]
            if isinstance(entry, VariableStorage):
                homes[l.name] = [_entry_shards(l, i, e) for i, e in enumerate(entry.variables)]
            else:
                homes[l.name] = [_layer_wide(l, i, tuple(entry)) for i in range(len(l.var_bytes))]
        else:
            homes[l.name] = [[] for _ in l.var_bytes]
            round_robin.add(l.name)
    placed = [(name, i) for name, i in profile.variables_in_creation_order() if name in round_robin]
    for counter, (name, i) in enumerate(placed):  # the strategy's round-robin, in the model's creation order
        homes[name][i] = [(TaskRef.ps(counter % max(num_ps, 1)), 1.0)]
    return homes


def _entry_shards(layer: LayerProfile, i: int, entry: Any) -> list[tuple[TaskRef, float]]:
    if isinstance(entry, str):
        return [(TaskRef.ps(int(parse_device(entry).task)), 1.0)]  # type: ignore[arg-type]
    fractions = shard_fractions(_shape_axis(layer, i, entry.axis), len(entry.tasks))
    return [(TaskRef.ps(k), f) for k, f in zip(entry.tasks, fractions)]


def _split_homes(layer: LayerProfile, by: str, tasks: tuple[TaskRef, ...],
                 assembly: TaskRef) -> list[list[tuple[TaskRef, float]]]:
    """A split layer's variables: the kernel (or table) over its shards; a Dense bias with the
    columns (by columns) or whole on the assembly task (by rows)."""
    fractions = split_shares(layer, by, len(tasks))
    out = [[(t, f) for t, f in zip(tasks, fractions)]]
    for _ in layer.var_bytes[1:]:
        out.append([(t, f) for t, f in zip(tasks, fractions)] if by == "columns" else [(assembly, 1.0)])
    return out


def split_shares(layer: LayerProfile, by: str, k: int) -> list[float]:
    """Each shard's share of a layer split ``by`` columns/rows into ``k`` shards (its kernel's
    entries along the split axis, :func:`~ralp_tf.plan.shards.shard_sizes`)."""
    kernel = layer.var_shapes[0] if layer.var_shapes else None
    n = None if kernel is None else int(kernel[-1] if by == "columns" else kernel[0])
    return shard_fractions(n, k)


def variable_homes(profile: ModelProfile, where: Mapping[str, str], num_ps: int,
                   storage: Mapping[str, Any] | None = None) -> dict[str, list[tuple[float, int]]]:
    """Layer -> [(bytes, PS index)], one entry per variable shard (:func:`variable_shards`)."""
    refs = {name: TaskRef.parse(loc) for name, loc in where.items()}
    shards = variable_shards(profile, refs, num_ps, storage)
    return {l.name: [(v * share, int(task.index)) for v, parts in zip(l.var_bytes, shards[l.name])  # type: ignore[arg-type]
                     for task, share in parts] for l in profile.layers}
