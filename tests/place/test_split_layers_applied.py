"""Plan splits (format /3): a PS-computed layer's compute spread over several PS tasks. Each
shard's variables, forward ops and gradient ops are on its task; the model trains exactly like
the unplaced one (1 worker, rtol 1e-5)."""
from __future__ import annotations

from typing import Any

import pytest

from ralp_tf import models
from trains_like import assert_trains_like
from ralp_tf.errors import PlanError
from ralp_tf.place.applier import place
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.shards import LayerSplit

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
BOTH = (PS0, PS1)


def _head_plan(first: str, second: str) -> Plan:
    """small_cnn's head on PS 0, fc1 split ``first`` and fc2 ``second`` over PS 0 and PS 1."""
    return Plan({"fc1": PS0, "fc2": PS0, "logits": PS0}, policy="test",
                splits={"fc1": LayerSplit(first, BOTH), "fc2": LayerSplit(second, BOTH)})


@pytest.mark.parametrize("first, second", [("columns", "rows"), ("columns", "columns"), ("rows", "columns")])
def test_a_split_head_keeps_each_shard_on_its_task_and_trains_like_the_unplaced_model(
        inprocess: Any, first: str, second: str) -> None:
    """fc1 and fc2 of small_cnn split over two PS tasks (Megatron's columns then rows, an
    all-gather between two column splits, rows then columns); verify() has checked every op of
    the split layers against their tasks."""
    _, strategy, coordinator = inprocess
    reference = models.small_cnn(fc=64)
    placed = place(reference, _head_plan(first, second), strategy)
    fc1 = placed.get_layer("fc1")
    rows = reference.get_layer("fc1").kernel.shape[0]
    kernel = ((rows, 32), (rows, 32)) if first == "columns" else ((rows // 2, 64), (rows // 2, 64))
    bias = [((32,), PS0), ((32,), PS1)] if first == "columns" else [((64,), PS0)]
    assert [(tuple(w.shape), w.device) for w in fc1.weights] == list(zip(kernel, BOTH)) + bias
    batches = [models.synthetic_batch(reference, 8, seed=s % 2) for s in range(4)]
    assert_trains_like(reference, placed, strategy, coordinator, batches)


def test_a_split_embedding_looks_up_each_shard_on_its_task_and_trains_like_the_unplaced_model(inprocess: Any) -> None:
    """ctr_head's table split by rows over two PS tasks (ids partitioned and rows stitched on the
    assembly task), fc1 by columns and fc2 by rows."""
    _, strategy, coordinator = inprocess
    reference = models.ctr_head(vocab=101, embed_dim=8, ids=4, hidden=16)
    plan = Plan({"embedding": PS1, "flatten": PS1, "fc1": PS1, "fc2": PS1, "logits": PS1}, policy="test",
                splits={"embedding": LayerSplit("rows", (PS1, PS0)), "fc1": LayerSplit("columns", (PS1, PS0)),
                        "fc2": LayerSplit("rows", (PS1, PS0))})
    placed = place(reference, plan, strategy)
    assert [(tuple(w.shape), w.device) for w in placed.get_layer("embedding").weights] == [((51, 8), PS1),
                                                                                             ((50, 8), PS0)]
    batches = [models.synthetic_batch(reference, 8, seed=s % 2) for s in range(4)]
    assert_trains_like(reference, placed, strategy, coordinator, batches)


def test_a_column_split_of_a_softmax_layer_is_refused_with_the_fix(inprocess: Any) -> None:
    import tf_keras

    _, strategy, _ = inprocess
    model = tf_keras.Sequential([tf_keras.layers.Input((8,)), tf_keras.layers.Dense(4, activation="softmax", name="p")])
    plan = Plan({"p": PS0}, splits={"p": LayerSplit("columns", BOTH)}, policy="test")
    with pytest.raises(PlanError, match=r"'p' \(Dense\) has activation 'softmax'.*split it by rows"):
        place(model, plan, strategy)


def test_a_split_of_a_layer_that_is_not_dense_or_embedding_is_refused_naming_it(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    plan = Plan({"conv2": PS0}, splits={"conv2": LayerSplit("columns", BOTH)}, policy="test")
    with pytest.raises(PlanError, match=r"'conv2' \(Conv2D\) cannot be split: only Dense"):
        place(models.small_cnn(fc=64), plan, strategy)


def test_column_pieces_reach_an_unsplit_ps_layer_and_the_worker_on_sequence_inputs(inprocess: Any) -> None:
    """Inputs of shape (batch, 5, 8): a GELU Dense split by columns feeds a Dense computed whole on
    PS 0 (the pieces concatenated there), which feeds a Dense split by columns whose output is the
    model's (concatenated on the worker, where the loss reads it)."""
    import numpy as np
    import tf_keras

    _, strategy, coordinator = inprocess
    L = tf_keras.layers
    inp = L.Input((5, 8), name="x")
    h = L.Dense(16, activation="gelu", name="a")(inp)
    h = L.Dense(12, activation="tanh", name="mid")(h)
    reference = tf_keras.Model(inp, L.Dense(6, name="b")(L.Flatten(name="flat")(h)))
    plan = Plan({"a": PS0, "mid": PS0, "flat": PS0, "b": PS1}, policy="test",
                splits={"a": LayerSplit("columns", BOTH), "b": LayerSplit("columns", (PS1, PS0))})
    placed = place(reference, plan, strategy)
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(8, 5, 8)).astype("float32"), rng.integers(0, 6, size=(8,))) for _ in range(4)]
    assert_trains_like(reference, placed, strategy, coordinator, batches)


@pytest.mark.integration
def test_a_split_head_moves_the_predicted_bytes_on_a_local_cluster() -> None:
    """ctr_head on 2 workers and 2 PS tasks (real processes), its table split by rows, fc1 by
    columns and fc2 by rows: the bytes crossing between the tasks are the cost model's, within
    10% (measured 141.2 KB against 141.2 KB per step when written)."""
    from measure import compare_many_in_subprocess

    plan = Plan({n: PS0 for n in ("embedding", "flatten", "fc1", "fc2", "logits")}, policy="split_head",
                splits={"embedding": LayerSplit("rows", BOTH), "fc1": LayerSplit("columns", BOTH),
                        "fc2": LayerSplit("rows", BOTH)})
    (results,) = compare_many_in_subprocess([("ctr_head", [plan], {"steps": 4, "warmup_steps": 2})], ps=2)
    r = results["split_head"]
    assert r.plan["splits"] and r.bytes_per_step == pytest.approx(r.predicted_bytes_per_step, rel=0.10)
