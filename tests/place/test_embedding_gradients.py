"""An embedding's gradient stays on the PS tasks that compute it and hold its table, with the
legacy optimizers too: in the traced training step (optimizer update included) no floating
tensor made on a PS task reaches an op on the worker whose result goes back to a PS task, when
every layer but the input computes on the PS (nothing on the worker needs it)."""
from __future__ import annotations

from typing import Any

import pytest
from traced_steps import traced_update_step

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"


def _hops(graph: Any) -> list[str]:
    """Ops on the worker that take a floating tensor made on a PS task and feed a PS task."""
    on_ps = lambda op: "/job:ps" in (op.device or "")  # noqa: E731
    out = []
    for op in graph.get_operations():
        if on_ps(op) or not any(t.dtype.is_floating and on_ps(t.op) for t in op.inputs):
            continue
        if any(on_ps(c) for o in op.outputs for c in o.consumers()):
            out.append(f"{op.type} {op.name}")
    return out


@pytest.mark.parametrize("splits", [None, "rows"])
def test_a_head_on_the_ps_keeps_its_embedding_gradient_there_with_legacy_sgd(inprocess: Any, splits: Any) -> None:
    """ctr_head with its head on PS 0 and its table on a PS task (the Embedding planned on the worker:
    it computes on its table's task, gradient included), or the table split by rows over both PS
    tasks (one replica's gradients are not all-reduced through the worker). Before: 137 KB and
    76.5 KB per worker step measured on a local cluster, against 5.4 KB and 8.2 KB priced."""
    import tf_keras

    from ralp_tf import models
    from ralp_tf.place.applier import place
    from ralp_tf.plan.plans import Plan
    from ralp_tf.plan.shards import LayerSplit

    _, strategy, _ = inprocess
    head = ("flatten", "fc1", "fc2", "logits")
    plan = (Plan({n: PS0 for n in head}, policy="test") if splits is None else
            Plan({n: PS0 for n in ("embedding",) + head}, policy="test",
                 splits={"embedding": LayerSplit("rows", (PS0, PS1))}))
    with strategy.scope():
        placed = place(models.ctr_head(vocab=1000, hidden=64), plan, strategy)
        optimizer = tf_keras.optimizers.legacy.SGD(0.01)
    assert _hops(traced_update_step(strategy, placed, optimizer, ids=8)) == []


def test_a_worker_computed_tables_gradient_is_reshaped_where_it_arrives(inprocess: Any) -> None:
    """Stock placement, tf_keras SGD (it sums repeated ids on the worker): the Embedding computes on
    its table's task, but its gradient runs where the rows' gradient arrives, the worker. Before, the
    rows' gradient went up to be reshaped there and came down to be summed: two more copies of the
    looked-up rows (40 ids a sample into GlobalAveragePooling1D: 2.64 MB a step measured against
    1.31 MB priced; 1.32 MB after)."""
    import tf_keras
    from tf_keras import layers

    from ralp_tf.place.applier import place
    from ralp_tf.plan.plans import Plan

    _, strategy, _ = inprocess
    inp = tf_keras.Input((40,), dtype="int32")
    out = layers.Dense(1)(layers.GlobalAveragePooling1D()(layers.Embedding(1000, 16)(inp)))
    with strategy.scope():
        placed = place(tf_keras.Model(inp, out), Plan({}, policy="ps"), strategy)
        optimizer = tf_keras.optimizers.SGD(0.01)
    assert _hops(traced_update_step(strategy, placed, optimizer, ids=40)) == []
