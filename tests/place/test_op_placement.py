"""Plain TensorFlow ops of a subclassed model's ``call`` compute with their inputs
(:mod:`ralp_tf.place.op_placement`): on the heads' PS task, forward and gradient, when the heads
are there; on the worker when they are not. The placed model's first-step loss and gradients equal
the unplaced model's (rtol 1e-5)."""
from __future__ import annotations

import re
from typing import Any

import pytest

from ralp_tf.model import synthetic_batch
from ralp_tf.place.applier import place_from_builder, prepare
from ralp_tf.place.verify import reference_gradients, verify_gradients
from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import train_loss

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
#: ops the heads' join makes, forward and in its gradient
JOIN_OPS = {"AddV2", "ConcatV2", "StridedSlice", "Mul", "ConcatOffset", "Slice", "StridedSliceGrad"}


def _build() -> Any:
    import tensorflow as tf
    import tf_keras as keras

    class Heads(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="heads_model")
            self.conv = keras.layers.Conv2D(4, 3, activation="relu")
            self.flat = keras.layers.Flatten()
            self.heads = {"a": keras.layers.Dense(16, activation="relu"), "b": keras.layers.Dense(16)}
            self.out = keras.layers.Dense(3)

        def call(self, x: Any) -> Any:
            h = self.flat(self.conv(x))
            a, b = self.heads["a"](h), self.heads["b"](h)
            return self.out(tf.concat([a + b, 2.0 * b[:, ::-1]], axis=1))

    model = Heads()
    model(tf.zeros((1, 8, 8, 3)))
    return model


def _join_op_devices(placed: Any, x: Any, y: Any) -> dict[str, set[str]]:
    """Op type -> the devices of the container's own ops of those types in a traced training step."""
    import tensorflow as tf

    loss_fn = train_loss(placed)

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, placed(xb, training=True))
        return tape.gradient(loss, placed.trainable_variables)

    graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
    units = {str(l.name) for l in placed.layers}
    out: dict[str, set[str]] = {}
    for op in graph.get_operations():
        parts = op.name.removeprefix("gradient_tape/").split("/")
        own = parts[0] == placed.name and len(parts) > 1 and re.sub(r"_\d+$", "", parts[1]) not in units \
            and parts[1] not in units
        if op.type in JOIN_OPS and own:
            out.setdefault(op.type, set()).add(op.device)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("where", ["heads_on_ps", "heads_on_two_ps", "heads_on_worker"])
def test_a_models_own_ops_compute_with_their_inputs(inprocess: Any, where: str) -> None:
    import tf_keras

    _, strategy, coordinator = inprocess
    plan = {"heads_on_ps": {"heads/a": PS0, "heads/b": PS0, "out": PS0},
            "heads_on_two_ps": {"heads/a": PS1, "heads/b": PS0, "out": PS0},
            "heads_on_worker": {"out": PS0}}[where]
    tf_keras.utils.set_random_seed(3)
    prepared = prepare(_build, 4)
    assert any(l.name.startswith("op:") for l in prepared.profile.layers)
    with strategy.scope():
        placed = place_from_builder(_build, prepared, Plan(plan, policy="test"), strategy)
    x, y = synthetic_batch(prepared.base, 4)
    reference = reference_gradients(prepared.base, train_loss(prepared.base), x, y, rtol=1e-5)
    assert verify_gradients(placed, train_loss(placed), x, y, coordinator, reference, rtol=1e-5)
    devices = _join_op_devices(placed, x, y)
    assert {"AddV2", "ConcatV2", "ConcatOffset", "Slice"} <= set(devices)
    if where == "heads_on_two_ps":  # each op on its first input's task: b's slice on PS0, the join on PS1
        assert devices["AddV2"] == devices["ConcatV2"] == {PS1} and devices["StridedSlice"] == {PS0}, devices
        assert all(d <= {PS0, PS1} for d in devices.values()), devices
        return
    expected = {"heads_on_ps": PS0, "heads_on_worker": ""}[where]
    assert all(d == {expected} for d in devices.values()), devices
