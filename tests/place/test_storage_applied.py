"""Plan storage (format /2): a worker-computed layer's variables are created on the PS task the
plan names, or its shards on the tasks the plan splits it over; the layer still computes on the
worker and trains like the unplaced model."""
from __future__ import annotations

from typing import Any

import pytest

from ralp_tf import models
from trains_like import assert_trains_like
from ralp_tf.place.applier import place
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"


def test_stored_layers_keep_their_variables_on_the_named_task_and_compute_on_the_worker(inprocess: Any) -> None:
    import tensorflow as tf

    _, strategy, _ = inprocess
    plan = Plan({"fc1": PS0, "fc2": PS0, "logits": PS0}, storage={"conv1": PS1, "conv2": PS1}, policy="test")
    placed = place(models.small_cnn(fc=64), plan, strategy)  # verify checks the stored layers too
    for name in ("conv1", "conv2"):
        assert [v.device for v in placed.get_layer(name).weights] == [PS1, PS1]
    x, y = models.synthetic_batch(placed, 4)

    @tf.function
    def forward(x: Any) -> Any:
        return placed(x, training=False)

    ops = forward.get_concrete_function(tf.TensorSpec(x.shape, tf.float32)).graph.get_operations()
    convs = [op for op in ops if op.type == "Conv2D"]
    assert len(convs) == 2 and all("/job:ps" not in op.device for op in convs)


def test_a_layer_split_over_two_tasks_is_sharded_there_and_trains_like_the_unplaced_model(inprocess: Any) -> None:
    """Partitioned storage: fc1's kernel and bias become shards on PS 0 and PS 1 (rows split
    along axis 0); the model reads them whole, each shard gets its own gradient, and the losses
    and final weights equal the unplaced model's."""


    _, strategy, coordinator = inprocess
    reference = models.small_cnn(fc=64)
    plan = Plan({"logits": PS0}, storage={"fc1": [PS0, PS1], "conv1": PS1}, policy="test")
    placed = place(reference, plan, strategy)
    fc1 = placed.get_layer("fc1")
    assert [(w.name.rsplit("/", 2)[-2:], w.device) for w in fc1.weights] == [
        (["kernel", "part_0:0"], PS0), (["kernel", "part_1:0"], PS1),
        (["bias", "part_0:0"], PS0), (["bias", "part_1:0"], PS1)]
    kernel_rows = reference.get_layer("fc1").kernel.shape[0]
    assert [w.shape[0] for w in fc1.weights[:2]] == [(kernel_rows + 1) // 2, kernel_rows // 2]
    assert [w.device for w in placed.get_layer("conv1").weights] == [PS1, PS1]
    assert_trains_like(reference, placed, strategy, coordinator,
                       [models.synthetic_batch(reference, 8, seed=s % 2) for s in range(4)])


def test_per_variable_storage_shards_each_variable_along_its_own_axis_and_trains_like_the_unplaced_model(
        inprocess: Any) -> None:
    """Format /3 storage: conv2's kernel split along its output channels (axis 3) over PS 0 and
    PS 1 with its bias whole on PS 1; fc1's kernel split by columns (axis 1) and its bias along
    axis 0. Each shard is a variable on its task, the layers compute on the worker, and the
    losses and final weights equal the unplaced model's."""
    from ralp_tf.plan.shards import Sharded, VariableStorage

    _, strategy, coordinator = inprocess
    reference = models.small_cnn(fc=64)
    storage = {"conv2": VariableStorage((Sharded((PS0, PS1), axis=3), PS1)),
               "fc1": VariableStorage((Sharded((PS1, PS0), axis=1), Sharded((PS1, PS0), axis=0)))}
    placed = place(reference, Plan({"logits": PS0}, storage=storage, policy="test"), strategy)
    conv2, fc1 = placed.get_layer("conv2"), placed.get_layer("fc1")
    assert [(tuple(w.shape), w.device) for w in conv2.weights] == [((3, 3, 8, 8), PS0), ((3, 3, 8, 8), PS1),
                                                                     ((16,), PS1)]
    rows = reference.get_layer("fc1").kernel.shape[0]
    assert [(tuple(w.shape), w.device) for w in fc1.weights] == [((rows, 32), PS1), ((rows, 32), PS0),
                                                                   ((32,), PS1), ((32,), PS0)]
    assert tuple(conv2.kernel.shape) == (3, 3, 8, 16) and tuple(fc1.kernel.shape) == (rows, 64)
    assert_trains_like(reference, placed, strategy, coordinator,
                       [models.synthetic_batch(reference, 8, seed=s % 2) for s in range(4)])


def test_a_split_layer_whose_variables_cannot_cover_the_tasks_names_the_fix(inprocess: Any) -> None:
    import tf_keras

    _, strategy, _ = inprocess
    model = tf_keras.Sequential([tf_keras.layers.Input((1,)), tf_keras.layers.Dense(4, use_bias=False, name="one_row")])
    with pytest.raises(PlanError, match="'one_row' is split over PS tasks \\[0, 1\\].*store it on fewer tasks"):
        place(model, Plan({}, storage={"one_row": [PS0, PS1]}, policy="test"), strategy)
