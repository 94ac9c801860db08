"""Plan storage (format /2): a worker-computed layer's variables are created on the PS task the
plan names; the layer still computes on the worker; split storage is refused with the fix."""
from __future__ import annotations

from typing import Any

import pytest

from ralp_tf import models
from ralp_tf.applier import place
from ralp_tf.errors import PlanError
from ralp_tf.plan import Plan

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


def test_split_storage_is_refused_with_the_fix(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    plan = Plan({}, storage={"fc1": [PS0, PS1]}, policy="test")
    with pytest.raises(PlanError, match="splits the variables of layer 'fc1'.*store the layer on one PS task"):
        place(models.small_cnn(fc=64), plan, strategy)
