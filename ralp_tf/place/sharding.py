"""Partitioned storage: the variables of one worker-computed layer split over several PS tasks.

A plan's ``storage`` may name K > 1 PS tasks for a layer (:func:`ralp_tf.plan.storage.balance_storage`
with ``partition=True``). The applier then creates each variable of that layer with at least K
rows as K shards along axis 0 (sizes as even as possible, the first ``rows % K`` one row longer,
as ParameterServerStrategy's ``variable_partitioner`` splits them), shard i on the i-th task,
wrapped in a ``ShardedVariable``:

* the layer reads the variable as one tensor (a concat on the reading device), so a worker pulls
  ``p_v / K`` from each task, as the cost model prices it;
* tf_keras lists the shards as the layer's weights, so the tape and the optimizer see each shard,
  and each gradient shard is pushed to, and applied on, its own task;
* a variable with fewer rows than K (a scalar, a short bias) is created whole on the first task.

This is PSS's own mechanism (``ShardedVariable``, what ``variable_partitioner`` creates) applied
per layer: the strategy-wide partitioner would shard every variable of the model and put the
shards on PS tasks round-robin, not on the tasks the planner balanced.

:func:`copy_weights` and :func:`full_weights` convert between a model's full-size weights and
its shards (``Model.set_weights``/``get_weights`` see the shards).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

__all__ = ["shard_rows", "sharded_creator", "weight_groups", "copy_weights", "full_weights"]

#: Suffix of shard i of a variable named ``name``: ``name/part_i`` (PSS's own naming).
_SHARD_NAME = re.compile(r"/part_\d+(?=:\d+$)")


def shard_rows(rows: int, num_shards: int) -> list[int]:
    """Rows of each of ``min(num_shards, rows)`` shards: ``rows // K``, the first ``rows % K`` one more."""
    k = max(1, min(num_shards, rows))
    return [rows // k + (1 if i < rows % k else 0) for i in range(k)]


def sharded_creator(anchors: Sequence[Any]) -> Callable[..., Any]:
    """A ``tf.variable_creator_scope`` creator that creates each variable as shards next to
    ``anchors`` (one variable on each target PS task), per the module docstring."""
    import tensorflow as tf

    from ralp_tf.model.keras_compat import sharded_variable

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        init = kwargs.get("initial_value")
        value = tf.convert_to_tensor(init() if callable(init) else init, dtype=kwargs.get("dtype"))
        rows = shard_rows(int(value.shape[0]) if value.shape.rank else 1, len(anchors))
        if len(rows) < 2:
            return next_creator(**dict(kwargs, initial_value=value, colocate_with=anchors[0], use_resource=True))
        name = kwargs.get("name") or "Variable"
        shards = [next_creator(**dict(kwargs, initial_value=part, shape=part.shape, name=f"{name}/part_{i}",
                                      colocate_with=anchor, use_resource=True))
                  for i, (part, anchor) in enumerate(zip(tf.split(value, rows, axis=0), anchors))]
        return sharded_variable(shards, name)

    return creator


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
        cuts = np.cumsum([int(s.shape[0]) for s in shards])[:-1]
        for shard, part in zip(shards, np.split(value, cuts, axis=0)):
            shard.assign(part)


def full_weights(model: Any) -> list[Any]:
    """``model``'s weights as full-size arrays, shards concatenated (what ``get_weights()`` of
    the unplaced model returns)."""
    import numpy as np

    return [np.concatenate([np.asarray(s.numpy()) for s in shards], axis=0) if len(shards) > 1 else shards[0].numpy()
            for shards in weight_groups(model)]
