"""Embedding tables read inside a ``tf.custom_gradient`` block without copying them whole.

The blocks of :func:`ralp_tf.place.wrappers.ps_call` (a PS-computed layer, or a worker-planned
Embedding whose table is on a PS task) and of :func:`ralp_tf.place.split_layers.device_block` (a
table split by rows, one block per shard) put forward and gradient ops on a PS task. A ``tf.custom_gradient`` function that reads a variable
passes it through an ``IdentityN`` and converts it for the tape: two dense reads of the whole
variable per call. Once a sparse op has touched a table (``ResourceGather``,
``ResourceScatterAdd``), TensorFlow keeps the table in copy-on-read mode, so each of those dense
reads copies the whole table on its task, every step. On ctr_dnn (70.4 MB of tables) that was
about half of each PS task's CPU (``perf``: ``memmove`` under ``ReadVariableOp``), though nothing
of it crossed the network and the unplaced model reads no table whole.

So a block takes each trainable table (or shard) as its resource handle, an input like any other:

* outside the block, :func:`block_inputs` tells the enclosing tapes the tables were read, as their
  own ``sparse_read`` would have, and gives their handles to pass in;
* inside, :func:`watched_views` has the inner tape watch each handle and gives an untrainable view
  of it, which the layer reads (swapped in for its ``embeddings`` attribute by :func:`viewing`), so
  the block's variable watcher sees no variable and the gather reads only the rows;
* the gradient function returns the rows' gradient (``IndexedSlices``) as the handle's gradient:
  the outer tape gives it to the table.

Gradients are unchanged (``tests/place/test_table_handles.py``). Private TensorFlow API, none
public: ``BaseResourceVariable(handle=...)`` and ``resource_variable_ops.variable_accessed``.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from ralp_tf.model.graph import layer_and_sublayers
from ralp_tf.model.keras_compat import swapped_attributes

__all__ = ["sparse_tables", "block_inputs", "watched_views", "viewing"]


def sparse_tables(layer: Any) -> list[Any]:
    """The trainable tables of ``layer`` and its sublayers that are ``tf_keras.layers.Embedding``
    read only by gathers (no ``embeddings_regularizer``, which reads the table whole where the
    block runs anyway), in order, each once."""
    import tensorflow as tf
    import tf_keras

    out: list[Any] = []
    for sub in layer_and_sublayers(layer):
        gathered = isinstance(sub, tf_keras.layers.Embedding) and getattr(sub, "embeddings_regularizer", None) is None
        table = getattr(sub, "embeddings", None) if gathered else None
        if isinstance(table, tf.Variable) and table.trainable and all(table is not t for t in out):
            out.append(table)
    return out


def block_inputs(tables: Sequence[Any]) -> list[Any]:
    """``tables``' handles, to pass to a block as inputs, after telling every active tape (and
    ``tf.function``) that the tables were read, as a variable's own read does: call it outside
    the block, before the block runs."""
    from tensorflow.python.ops import resource_variable_ops

    for table in tables:
        resource_variable_ops.variable_accessed(table)
    return [t.handle for t in tables]


def watched_views(tape: Any, handles: Sequence[Any], tables: Sequence[Any]) -> list[Any]:
    """Inside a block: ``tape`` (its inner tape) watches each of ``handles`` (``tables``' handles,
    as the block received them), and each gets an untrainable resource variable over it for the
    layer to gather from, which no tape or variable watcher records reading. The handles'
    gradients from ``tape`` are then the tables'."""
    from tensorflow.python.ops import resource_variable_ops

    views = []
    for handle, table in zip(handles, tables):
        tape.watch(handle)
        name = table.name.split(":")[0]
        views.append(resource_variable_ops.BaseResourceVariable(
            trainable=False, shape=table.shape, dtype=table.dtype, handle=handle, name=f"{name}_view",
            unique_id=f"{getattr(table, '_unique_id', name)}_view", in_graph_mode=True))
    return views


@contextlib.contextmanager
def viewing(layer: Any, views: Mapping[int, Any]) -> Iterator[None]:
    """While active, every attribute of ``layer`` or a sublayer holding a table ``t`` with
    ``id(t)`` in ``views`` holds ``views[id(t)]`` instead (:func:`~ralp_tf.model.keras_compat.swapped_attributes`)."""
    with contextlib.ExitStack() as stack:
        for sub in layer_and_sublayers(layer):
            stack.enter_context(swapped_attributes(sub, views))
        yield
