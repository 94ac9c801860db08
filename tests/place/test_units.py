"""Models users bring, placed by the one walk: a composite layer is placed whole (variables, forward,
gradient and its sublayers' ops on one task), weight regularisers are computed where their layer
is, inputs of variable length are placed at a given length; gradients equal the unplaced model's."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from ralp_tf.model import synthetic_batch, training_spec, walk
from ralp_tf.place.applier import place_from_builder, prepare
from ralp_tf.place.verify import traced_training_step, verify_placement
from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import train_loss

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"


def transformer_classifier() -> Any:
    """Keras's text-classification Transformer shape: custom layers that hold layers, no get_config."""
    import tensorflow as tf
    import tf_keras as keras

    L = keras.layers

    class TokenAndPosition(L.Layer):
        def __init__(self, maxlen: int, vocab: int, dim: int) -> None:
            super().__init__()
            self.token_emb = L.Embedding(vocab, dim)
            self.pos_emb = L.Embedding(maxlen, dim)

        def call(self, x: Any) -> Any:
            return self.token_emb(x) + self.pos_emb(tf.range(tf.shape(x)[-1]))

    class Block(L.Layer):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.att = L.MultiHeadAttention(num_heads=2, key_dim=dim)
            self.ffn = keras.Sequential([L.Dense(16, activation="relu"), L.Dense(dim)])
            self.norm1, self.norm2 = L.LayerNormalization(), L.LayerNormalization()

        def call(self, x: Any) -> Any:
            x = self.norm1(x + self.att(x, x))
            return self.norm2(x + self.ffn(x))

    inp = L.Input((10,), dtype="int32")
    x = Block(8)(TokenAndPosition(10, 300, 8)(inp))
    x = L.Dense(32, activation="relu", kernel_regularizer=keras.regularizers.l2(0.01))(L.GlobalAveragePooling1D()(x))
    return keras.Model(inp, L.Dense(3, activation="softmax")(x))


def _placed(strategy: Any, build: Callable[[], Any], plan: Plan, **kw: Any) -> tuple[Any, Any]:
    import tf_keras

    tf_keras.utils.set_random_seed(5)
    prepared = prepare(build, 4, **kw)
    with strategy.scope():
        placed = place_from_builder(build, prepared, plan, strategy, **kw)
    return prepared, placed


def _gradients_match(coordinator: Any, placed: Any, base: Any, x: Any, y: Any, spec: Any = None) -> None:
    import tensorflow as tf

    from ralp_tf.place.verify import placed_gradients

    base_loss = train_loss(base, spec)
    loss_p, grads_p = placed_gradients(placed, train_loss(placed, spec), x, y, coordinator)
    with tf.GradientTape() as tape:
        loss = base_loss(y, base(x, training=False))
    grads = tape.gradient(loss, base.trainable_variables)
    assert float(loss_p) == pytest.approx(float(loss), rel=1e-5)
    assert len(grads_p) == len(grads) > 0
    for g, gp in zip(grads, grads_p):
        np.testing.assert_allclose(tf.convert_to_tensor(gp), tf.convert_to_tensor(g).numpy(), rtol=1e-5, atol=1e-6)


def test_a_composite_layer_is_placed_whole_and_gradients_match(inprocess: Any) -> None:
    _, strategy, coordinator = inprocess
    plan = Plan({"block": PS1, "dense": PS0, "dense_1": PS0}, policy="test")
    prepared, placed = _placed(strategy, transformer_classifier, plan)
    assert [l.name for l in prepared.profile.layers][1:3] == ["token_and_position", "block"]
    block = walk(placed).layer("block")
    assert len(block.weights) > 10 and {v.device for v in block.weights} == {PS1}
    graph = traced_training_step(placed)
    scope = f"/{block.att.name}/"  # Keras numbers it from a process-wide counter
    attention = [op for op in graph.get_operations() if scope in op.name and op.type == "Einsum"]
    assert attention and all(op.device == PS1 for op in attention)  # its sublayers' ops, forward and gradient
    regularisers = [op for op in graph.get_operations() if "Regularizer" in op.name and op.type != "ReadVariableOp"]
    assert regularisers and all(op.device == PS0 for op in regularisers), [(op.name, op.device) for op in regularisers]
    verify_placement(placed, plan)
    x, y = synthetic_batch(prepared.base, 4)
    _gradients_match(coordinator, placed, prepared.base, x, y)


def test_a_variable_length_input_is_placed_at_the_given_length(inprocess: Any) -> None:
    import tf_keras as keras

    _, strategy, coordinator = inprocess

    def build() -> Any:
        inp = keras.Input((None,), dtype="int32")
        x = keras.layers.Bidirectional(keras.layers.LSTM(4))(keras.layers.Embedding(200, 8)(inp))
        return keras.Model(inp, keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(64)(x)))

    plan = Plan({"dense": PS0, "dense_1": PS0}, policy="test")
    prepared, placed = _placed(strategy, build, plan, sequence_length=6)
    spec = training_spec(prepared.base, sequence_length=6)
    x, y = synthetic_batch(spec, 4)
    assert x.shape == (4, 6)
    _gradients_match(coordinator, placed, prepared.base, x, y, spec)


def test_losses_added_in_call_and_masks_run_where_their_unit_is(inprocess: Any) -> None:
    """A unit on a PS that adds a loss inside ``call`` (an activity penalty; the Keras VAE guide's
    Sampling layer with its KL term) has that loss's gradient on the PS too, and a PS-placed
    TimeDistributed computes its mask there (tf_keras's ``__call__`` runs ``compute_mask`` outside
    ``call``). Gradients, the added loss's included, equal the unplaced model's."""
    import tensorflow as tf
    import tf_keras as keras

    from ralp_tf.zoo.shapes_guides import Sampling

    _, strategy, coordinator = inprocess
    L = keras.layers

    class Penalised(L.Layer):
        def call(self, x: Any) -> Any:
            self.add_loss(0.5 * tf.reduce_mean(tf.square(x)))
            return 2.0 * x

    def build(sampling: bool) -> Callable[[], Any]:
        def model() -> Any:
            inp = L.Input((5, 12), name="frames")
            x = L.Flatten()(L.TimeDistributed(L.Dense(16, activation="relu"), name="per_frame")(inp))
            if sampling:
                x = Sampling(name="sampling")((L.Dense(8, name="z_mean")(x), L.Dense(8, name="z_log_var")(x)))
            else:
                x = Penalised(name="penalised")(L.Dense(8, name="fc")(x))
            return keras.Model(inp, L.Dense(3, name="logits")(x))
        return model

    plan = Plan({"per_frame": PS0, "z_mean": PS0, "z_log_var": PS0, "sampling": PS0}, policy="test")
    _, placed = _placed(strategy, build(True), plan)
    verify_placement(placed, plan)  # no op of theirs on the worker: forward, mask, gradient, KL term
    plan = Plan({"per_frame": PS0, "fc": PS0, "penalised": PS0}, policy="test")
    prepared, placed = _placed(strategy, build(False), plan)
    verify_placement(placed, plan)
    graph = traced_training_step(placed)
    penalty = [op for op in graph.get_operations() if "/penalised/" in op.name and op.type in ("Square", "Mean")]
    assert penalty and all(op.device == PS0 for op in penalty), [(op.name, op.device) for op in penalty]
    x, y = synthetic_batch(prepared.base, 4)
    _gradients_match(coordinator, placed, prepared.base, x, y)


def test_the_gradient_sum_of_a_tensor_several_ps_units_read_is_on_the_ps(inprocess: Any) -> None:
    """x0 feeds three Cross layers on the PS (deep & cross): the tape sums its three gradient
    contributions on the PS, where they are, not on the worker; gradients equal the unplaced model's."""
    import tf_keras as keras

    from ralp_tf.zoo.shapes_structured import Cross

    _, strategy, coordinator = inprocess

    def build() -> Any:
        inp = keras.Input((6,))
        x0 = keras.layers.Dense(6, name="stem")(inp)
        x = x0
        for i in range(3):
            x = Cross(name=f"cross{i}")(x0, x)
        return keras.Model(inp, keras.layers.Dense(1, name="head")(x))

    plan = Plan({"cross0": PS0, "cross1": PS0, "cross2": PS0, "head": PS0}, policy="test")
    prepared, placed = _placed(strategy, build, plan)
    graph = traced_training_step(placed)
    sums = [op for op in graph.get_operations() if op.type == "AddN"
            and all(t.op.device == PS0 for t in op.inputs)]
    assert sums and all(op.device == PS0 for op in sums), [(op.name, op.device) for op in sums]
    x, y = synthetic_batch(prepared.base, 4)
    _gradients_match(coordinator, placed, prepared.base, x, y)


def test_verify_gradients_compares_the_first_step_with_the_unplaced_models(inprocess: Any) -> None:
    """The placed model's loss and gradients equal the unplaced model's: compared, True; against a
    reference of other weights: PlacementMismatchError naming the difference; a model that samples
    (its eager and traced evaluations differ) is not compared: False."""
    import tensorflow as tf
    import tf_keras as keras

    from ralp_tf.errors import PlacementMismatchError
    from ralp_tf.place.verify import reference_gradients, verify_gradients

    _, strategy, coordinator = inprocess

    def build() -> Any:
        inp = keras.Input((5,))
        return keras.Model(inp, keras.layers.Dense(3, name="head")(keras.layers.Dense(8, name="fc")(inp)))

    plan = Plan({"fc": PS0, "head": PS1}, policy="test")
    prepared, placed = _placed(strategy, build, plan)
    x, y = synthetic_batch(prepared.base, 4)
    reference = reference_gradients(prepared.base, train_loss(prepared.base), x, y)
    assert reference.reproducible and verify_gradients(placed, train_loss(placed), x, y, coordinator, reference)
    other = build()
    with pytest.raises(PlacementMismatchError, match="the placed model's first step differs .*: (the loss|variable)"):
        verify_gradients(placed, train_loss(placed), x, y, coordinator,
                         reference_gradients(other, train_loss(other), x, y))

    class Noisy(keras.layers.Layer):
        def call(self, x: Any) -> Any:
            return x + tf.random.normal(tf.shape(x))

    inp = keras.Input((5,))
    noisy = keras.Model(inp, keras.layers.Dense(3)(Noisy()(inp)))
    sampled = reference_gradients(noisy, train_loss(noisy), x, y)
    assert not sampled.reproducible
    assert verify_gradients(placed, train_loss(placed), x, y, coordinator, sampled) is False
