"""Weight constraints: the profile counts the reads each makes, and a PS-computed layer's
constraint runs on its variable's task (:func:`ralp_tf.place.wrappers.constraints_where_the_variables_are`),
with the same result."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ralp_tf.place.applier import place_from_builder, prepare
from ralp_tf.plan.plans import Plan

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"


def _build() -> Any:
    import tensorflow as tf
    import tf_keras as keras

    inp = keras.Input((6,))
    x = keras.layers.Dense(8, kernel_constraint=keras.constraints.max_norm(0.5), name="fc")(inp)
    x = keras.layers.Dense(4, kernel_constraint=keras.constraints.non_neg(),
                           bias_constraint=keras.constraints.unit_norm(), name="head")(x)
    tf.random.set_seed(1)
    return keras.Model(inp, x)


def test_the_profile_counts_each_constraints_reads() -> None:
    from ralp_tf.model.profiler import profile

    p = profile(_build(), batch_size=2)
    assert p.layer("fc").constraint_reads == (2, 0)
    assert p.layer("head").constraint_reads[0] >= 1 and p.layer("head").constraint_reads[1] >= 1


@pytest.mark.slow
def test_a_ps_computed_layers_constraint_runs_on_its_variables_task(inprocess: Any) -> None:
    import tensorflow as tf

    from ralp_tf.model import keras_compat

    _, strategy, _ = inprocess
    prepared = prepare(_build, 2)
    with strategy.scope():
        placed = place_from_builder(_build, prepared, Plan({"fc": PS0}, policy="test"), strategy)
    fc, head = placed.get_layer("fc"), placed.get_layer("head")
    kernel = fc.kernel

    @tf.function
    def constrain() -> Any:
        return keras_compat.variable_constraint(kernel)(kernel)

    graph = constrain.get_concrete_function().graph
    # a variable read is colocated with the variable by the placer; the constraint's math carries the device
    math = [op for op in graph.get_operations()
            if op.type not in ("Placeholder", "Identity", "NoOp", "Const", "ReadVariableOp")]
    assert math and all(op.device == PS0 for op in math), [(op.type, op.device) for op in math]
    expected = _build().get_layer("fc").kernel_constraint(tf.constant(kernel.numpy()))
    np.testing.assert_allclose(constrain().numpy(), expected.numpy(), rtol=1e-6)
    assert not getattr(keras_compat.variable_constraint(head.kernel), "_ralp_on_device", False)  # on the worker
