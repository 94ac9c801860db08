"""A placed embedding reads only its looked-up rows: the traced training step holds no dense read
of a table (``ReadVariableOp`` of the whole table, which copies it on its PS task every step once
a gather has touched it), whether the table's layer computes on its PS task, is planned on the
worker with its table on a PS task, or is split by rows; and its gradient equals the unplaced
model's (:mod:`ralp_tf.place.table_handles`)."""
from __future__ import annotations

from typing import Any

import pytest
from traced_steps import traced_update_step

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
VOCAB = 1000
HEAD = ("flatten", "fc1", "fc2", "logits")
CASES = ["table computed on its PS task", "worker-planned table on a PS task", "table split by rows"]


def _plan(case: str) -> Any:
    from ralp_tf.plan.plans import Plan
    from ralp_tf.plan.shards import LayerSplit

    if case == "table computed on its PS task":
        return Plan({n: PS0 for n in ("embedding",) + HEAD}, policy="test")
    if case == "worker-planned table on a PS task":
        return Plan({n: PS0 for n in HEAD}, policy="test")
    return Plan({n: PS0 for n in ("embedding",) + HEAD}, policy="test",
                splits={"embedding": LayerSplit("rows", (PS0, PS1))})


def _table_reads(graph: Any) -> list[str]:
    """``ReadVariableOp``s of the step (its nested functions included) that read a table whole."""
    found, seen = [], set()

    def scan(g: Any) -> None:
        for op in g.get_operations():
            if op.type == "ReadVariableOp" and op.outputs[0].shape.rank and op.outputs[0].shape[0] in (VOCAB, VOCAB // 2):
                found.append(op.name)
        for name, f in getattr(g, "_functions", {}).items():
            if name not in seen and getattr(f, "graph", None) is not None:
                seen.add(name)
                scan(f.graph)

    scan(graph)
    return found


@pytest.mark.parametrize("case", CASES)
def test_a_placed_table_is_never_read_whole(inprocess: Any, case: str) -> None:
    import tf_keras

    from ralp_tf import models
    from ralp_tf.place.applier import place

    _, strategy, _ = inprocess
    with strategy.scope():
        placed = place(models.ctr_head(vocab=VOCAB, hidden=64), _plan(case), strategy)
        optimizer = tf_keras.optimizers.legacy.SGD(0.01)

    assert _table_reads(traced_update_step(strategy, placed, optimizer, ids=8)) == []


@pytest.mark.parametrize("case", CASES)
def test_a_table_read_through_its_handle_gets_the_unplaced_gradient(inprocess: Any, case: str) -> None:
    """One step's loss and gradients equal the unplaced model's on the same batch and weights (a
    split table's shards, stacked by rows, against the whole table's)."""
    import re

    import numpy as np
    import tensorflow as tf

    from ralp_tf import models
    from ralp_tf.place.applier import place
    from ralp_tf.place.verify import placed_gradients, reference_gradients
    from ralp_tf.run.training import train_loss

    _, strategy, coordinator = inprocess
    base = models.ctr_head(vocab=VOCAB, hidden=64)
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, size=(32, 8)).astype("int32")
    y = rng.integers(0, 2, size=(32, 1)).astype("float32")
    reference = reference_gradients(base, train_loss(base), x, y)
    with strategy.scope():
        placed = place(base, _plan(case), strategy)
    got_loss, got = placed_gradients(placed, train_loss(placed), x, y, coordinator)
    by_name: dict[str, list[Any]] = {}
    for v, g in zip(placed.trainable_variables, got):
        by_name.setdefault(re.sub(r"/part_\d+:0$", ":0", v.name), []).append(np.asarray(tf.convert_to_tensor(g)))
    assert np.isclose(got_loss, reference.loss, rtol=1e-5)
    assert sorted(by_name) == sorted(reference.names)
    for name, w in zip(reference.names, reference.gradients):
        np.testing.assert_allclose(np.concatenate(by_name[name], axis=0), w, rtol=1e-5, atol=1e-7, err_msg=name)
