"""Sharded variables: one variable of a layer split over several PS tasks.

A plan may store a variable in K shards (:mod:`ralp_tf.plan.plans`, ``storage``; a split layer's
kernel or table, ``splits``): contiguous along one axis (sizes as even as possible, the first
``n % K`` one entry longer, as ParameterServerStrategy's ``variable_partitioner`` splits them),
shard i on the i-th task, wrapped in one variable (:func:`ralp_tf.model.keras_compat.sharded_variable`):

* the layer reads the variable as one tensor (a concat on the reading device), so a worker pulls
  each shard from its task, as the cost model prices it;
* tf_keras lists the shards as the layer's weights, so the tape and the optimizer see each shard,
  and each gradient shard is pushed to, and applied on, its own task;
* a checkpoint stores the full variable, so it restores into a model sharded otherwise, or not;
* a variable with fewer entries than K along the axis is split into as many shards as it has
  entries; one with a single entry (or a scalar) is created whole on the first task.

This is PSS's own mechanism (``ShardedVariable``) applied per variable: the strategy-wide
partitioner would shard every variable of the model along axis 0 and put the shards on PS tasks
round-robin, not on the tasks the planner chose.

:func:`copy_weights` and :func:`full_weights` convert between a model's full-size weights and
its shards (``Model.set_weights``/``get_weights`` see the shards).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from ralp_tf.plan.shards import shard_sizes

__all__ = ["create_sharded", "sharded_creator", "shard_axis", "weight_groups", "copy_weights", "full_weights"]

#: Suffix of shard i of a variable named ``name``: ``name/part_i`` (PSS's own naming).
_SHARD_NAME = re.compile(r"/part_\d+(?=:\d+$)")


#: Attribute a shard carries: the axis its variable is sharded along.
_SHARD_AXIS = "_ralp_shard_axis"


def create_sharded(next_creator: Callable[..., Any], kwargs: dict[str, Any], anchors: Sequence[Any],
                   axis: int = 0) -> Any:
    """The variable ``kwargs`` describe, created as shards along ``axis`` next to ``anchors`` (one
    variable on each target PS task, in shard order), per the module docstring."""
    import tensorflow as tf

    from ralp_tf.errors import PlanError
    from ralp_tf.model.keras_compat import sharded_variable

    init = kwargs.get("initial_value")
    value = tf.convert_to_tensor(init() if callable(init) else init, dtype=kwargs.get("dtype"))
    name = kwargs.get("name") or "Variable"
    if value.shape.rank is not None and axis >= max(value.shape.rank, 1):
        raise PlanError(f"variable {name!r} of shape {tuple(value.shape)} has no axis {axis} to shard along; "
                        "shard it along one of its axes, or store it whole")
    rows = shard_sizes(int(value.shape[axis]) if value.shape.rank else 1, len(anchors))
    if len(rows) < 2:
        return next_creator(**dict(kwargs, initial_value=value, colocate_with=anchors[0], use_resource=True))
    shards = [next_creator(**dict(kwargs, initial_value=part, shape=part.shape, name=f"{name}/part_{i}",
                                  colocate_with=anchor, use_resource=True))
              for i, (part, anchor) in enumerate(zip(tf.split(value, rows, axis=axis), anchors))]
    for shard in shards:
        setattr(shard, _SHARD_AXIS, axis)
    return sharded_variable(shards, name, axis)


def sharded_creator(anchors: Sequence[Any], axis: int = 0) -> Callable[..., Any]:
    """A ``tf.variable_creator_scope`` creator that creates each variable as shards along
    ``axis`` next to ``anchors`` (:func:`create_sharded`)."""

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        return create_sharded(next_creator, kwargs, anchors, axis)

    return creator


def shard_axis(shard: Any) -> int:
    """The axis the variable ``shard`` is a shard of is sharded along (0 unless ralp_tf sharded it otherwise)."""
    return int(getattr(shard, _SHARD_AXIS, 0))


def weight_groups(model: Any) -> list[list[Any]]:
    """``model.weights`` grouped by variable: one list per variable, its shards in order (one
    element for a variable that is not sharded)."""
    groups: list[tuple[str, list[Any]]] = []
    for w in model.weights:
        base = _SHARD_NAME.sub("", w.name)
        if groups and groups[-1][0] == base and base != w.name:
            groups[-1][1].append(w)
        else:
            groups.append((base, [w]))
    return [ws for _, ws in groups]


def copy_weights(model: Any, values: Sequence[Any]) -> None:
    """Assign full-size ``values`` (another copy's ``get_weights()``, same architecture) to
    ``model``, splitting each value over the shards of its variable."""
    import numpy as np

    from ralp_tf.errors import ModelError

    groups = weight_groups(model)
    if len(groups) != len(values):
        raise ModelError(f"cannot copy {len(values)} weights into a model with {len(groups)} variables; "
                         "the models differ in architecture")
    for shards, value in zip(groups, values):
        value = np.asarray(value)
        if len(shards) == 1:
            shards[0].assign(value)
            continue
        axis = shard_axis(shards[0])
        cuts = np.cumsum([int(s.shape[axis]) for s in shards])[:-1]
        for shard, part in zip(shards, np.split(value, cuts, axis=axis)):
            shard.assign(part)


def full_weights(model: Any) -> list[Any]:
    """``model``'s weights as full-size arrays, shards concatenated (what ``get_weights()`` of
    the unplaced model returns)."""
    import numpy as np

    return [np.concatenate([np.asarray(s.numpy()) for s in shards], axis=shard_axis(shards[0])) if len(shards) > 1
            else shards[0].numpy()
            for shards in weight_groups(model)]
