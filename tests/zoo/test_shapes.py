"""The zoo's user model shapes (ralp_tf.zoo.shapes): every builder builds a fresh model of the same
architecture each time, runs forward on a synthetic batch made from its own inputs, takes a
finite gradient step, and leaves no global state behind. No placement is involved."""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

from ralp_tf.zoo.expect import EXPECT

#: Shape -> the structure of its output on the test batch (batch 2, variable lengths 16; the
#: stateful model's batch is the 8 fixed in its Input).
OUTPUTS: dict[str, Any] = {
    "subclassed_cnn": (2, 10), "text_transformer": (2, 2), "bidirectional_lstm_imdb": (2, 1),
    "lstm_flatten_dense": (2, 1), "conv1d_text": (2, 1), "recommender_net": (2, 1), "wide_and_deep": (2, 1),
    "functional_multi_io": [(2, 1), (2, 4)], "mixed_precision_mlp": (2, 10), "time_distributed_frames": (2, 5),
    "siamese_triplet": ((2,), (2,)), "vae_kl_loss": (2, 784), "cosine_head": (2, 1000), "regularized_cnn": (2, 10),
    "mobilenetv2_transfer": (2, 10), "stateful_char_gru": (8, 16, 65), "deep_cross_network": (2, 1),
    "char_seq2seq": (2, 16, 93), "attention_qa": (2, 1), "masked_tagger": (2, 16, 9), "siamese_contrastive": (2, 1),
    "functional_resnet": (2, 10), "xception_small": (2, 1), "vit_small": (2, 10), "bn_head_cnn": (2, 10),
    "layernorm_head": (2, 10), "op_joined_heads": (2, 10), "kim_text_cnn": (2, 2), "text_bilstm_stack": (2, 1),
    "two_tower_recommender": (2, 1), "partitioned_table_ctr": (2, 1), "hashing_ctr": (2, 1),
    "grn_vsn_classifier": (2, 1), "siamese_text": (2, 1), "custom_cell_rnn": (2, 1),
    "conv_lstm_frames": (2, 16, 16, 16, 1),
}
#: Shape -> how many terms ``model.losses`` holds after a call (regularisers, add_loss); others none.
LOSSES = {"recommender_net": 2, "vae_kl_loss": 1, "regularized_cnn": 4}
#: Shapes whose build, forward or gradient step takes over ~3 s on a shared CPU.
HEAVY = {"mobilenetv2_transfer", "vit_small"}
#: The costliest builds beyond the kinds make test keeps (Bidirectional, masks, multi-IO, subclassed, ...):
#: only in make test-full; `ralp-tf zoo` trains every shape.
EXTENDED = {"mobilenetv2_transfer", "vit_small", "lstm_flatten_dense", "text_transformer", "xception_small"}
MAX_PARAMS = 30_000_000
LENGTH = 16  # the length of a variable-length input in the test batch


def _names() -> list[Any]:
    return [pytest.param(name, marks=[pytest.mark.slow] + ([pytest.mark.extended] if name in EXTENDED else []))
            if name in HEAVY | EXTENDED else name for name in EXPECT]


@pytest.fixture(scope="module")
def shapes() -> Any:
    from ralp_tf.zoo import shapes

    return shapes


@pytest.fixture(scope="module")
def models(shapes: Any) -> dict[str, Any]:
    """One build of each shape, shared by this module's tests (built on first use)."""

    class Built(dict):
        def __missing__(self, name: str) -> Any:
            self[name] = shapes.SHAPES[name]()
            return self[name]

    return Built()


def synthetic_inputs(model: Any, batch: int = 2, seed: int = 0) -> Any:
    """A batch in the structure of the model's inputs (``model.input``, or the spec of a subclassed
    model's first call): ids below the smallest Embedding vocabulary, floats standard normal;
    a None batch dimension is ``batch``, any other None dimension is :data:`LENGTH`."""
    import tensorflow as tf
    import tf_keras as keras

    rng = np.random.default_rng(seed)
    if model.inputs:
        structure = model.input
    else:
        args, _ = model.save_spec()
        structure = args[0] if len(args) == 1 else args
    vocabularies = [m.input_dim for m in model.submodules if isinstance(m, keras.layers.Embedding)]

    def make(spec: Any) -> Any:
        dims = list(spec.shape)
        shape = [batch if dims[0] is None else dims[0]] + [LENGTH if d is None else d for d in dims[1:]]
        if spec.dtype == tf.string:
            return tf.constant(rng.integers(0, 1000, size=shape).astype(str))
        if spec.dtype.is_integer:
            assert vocabularies, f"{model.name}: an integer input and no Embedding to bound its ids"
            return tf.constant(rng.integers(0, min(vocabularies), size=shape), dtype=spec.dtype)
        return tf.constant(rng.standard_normal(shape), dtype=spec.dtype)

    return tf.nest.map_structure(make, structure)


def _all_finite(tensors: Any) -> bool:
    import tensorflow as tf

    return all(bool(tf.reduce_all(tf.math.is_finite(tf.cast(tf.convert_to_tensor(t), "float32"))))
               for t in tf.nest.flatten(tensors))


def test_the_registry_lists_every_shape_once_in_order_with_a_note_and_a_source(shapes: Any) -> None:
    import ralp_tf.zoo

    assert ralp_tf.zoo.SHAPES is shapes.SHAPES and ralp_tf.zoo.EXPECT is shapes.EXPECT is EXPECT
    assert list(shapes.SHAPES) == list(EXPECT) == list(OUTPUTS)
    assert len(shapes.SHAPES) >= 16
    for name, build in shapes.SHAPES.items():
        assert build.__name__ == name
        assert not inspect.signature(build).parameters, f"{name} takes arguments"
        doc = inspect.getdoc(build) or ""
        assert "Follows" in doc and ("keras.io/" in doc or "tensorflow.org/" in doc), f"{name}: no source named"
        assert EXPECT[name].strip(), f"{name}: empty EXPECT note"


@pytest.mark.parametrize("name", _names())
def test_each_build_is_fresh_built_uncompiled_and_of_the_same_architecture(shapes: Any, models: dict[str, Any],
                                                                           name: str) -> None:
    import tf_keras as keras

    first, second = models[name], shapes.SHAPES[name]()
    assert first is not second and isinstance(second, keras.Model)
    assert second.built and second.optimizer is None
    assert [tuple(w.shape) for w in first.weights] == [tuple(w.shape) for w in second.weights]
    assert [tuple(w.shape) for w in first.trainable_weights] == [tuple(w.shape) for w in second.trainable_weights]
    assert 0 < second.count_params() <= MAX_PARAMS
    assert not any(w1 is w2 for w1, w2 in zip(first.weights, second.weights))
    assert keras.mixed_precision.global_policy().name == "float32" and keras.backend.floatx() == "float32"


@pytest.mark.parametrize("name", _names())
def test_each_shape_runs_forward_on_a_batch_made_from_its_inputs(models: dict[str, Any], name: str) -> None:
    import tensorflow as tf

    model = models[name]
    outputs = model(synthetic_inputs(model), training=False)
    assert tf.nest.map_structure(lambda t: tuple(t.shape), outputs) == OUTPUTS[name]
    assert _all_finite(outputs), f"{name}: non-finite outputs"
    assert len(model.losses) == LOSSES.get(name, 0)


@pytest.mark.parametrize("name", _names())
def test_each_shape_takes_a_finite_gradient_step(models: dict[str, Any], name: str) -> None:
    import tensorflow as tf
    import tf_keras as keras

    model = models[name]
    batch = synthetic_inputs(model, seed=1)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = tf.add_n([tf.reduce_mean(tf.cast(o, "float32")) for o in tf.nest.flatten(outputs)]
                        + [tf.cast(term, "float32") for term in model.losses])
    assert model.trainable_variables, f"{name}: nothing to train"
    grads = tape.gradient(loss, model.trainable_variables)
    missing = [v.name for v, g in zip(model.trainable_variables, grads) if g is None]
    assert not missing, f"{name}: no gradient for {missing}"
    assert _all_finite(loss) and _all_finite(grads), f"{name}: non-finite loss or gradients"
    keras.optimizers.SGD(0.01).apply_gradients(zip(grads, model.trainable_variables))
    assert _all_finite(model(batch, training=False)), f"{name}: non-finite outputs after the step"


def test_the_mixed_precision_builder_computes_in_float16_and_restores_the_policy_it_found(shapes: Any) -> None:
    import tf_keras as keras

    model = shapes.SHAPES["mixed_precision_mlp"]()
    assert keras.mixed_precision.global_policy().name == "float32"
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert {layer.compute_dtype for layer in dense} == {"float16"} and model.layers[-1].compute_dtype == "float32"
    assert {w.dtype.name for w in model.weights} == {"float32"}
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        shapes.SHAPES["mixed_precision_mlp"]()
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_the_stateful_shape_has_a_fixed_batch_and_state_outside_its_weights(models: dict[str, Any]) -> None:
    """What a planner must notice: the GRU is stateful, its batch fixed, and its state an (8, 256)
    variable in ``layer.states`` that ``model.weights`` does not list."""
    import tf_keras as keras

    model = models["stateful_char_gru"]
    assert model.inputs[0].shape[0] == 8
    (gru,) = [layer for layer in model.layers if isinstance(layer, keras.layers.GRU)]
    assert gru.stateful and [tuple(s.shape) for s in gru.states] == [(8, 256)]
    assert not {id(s) for s in gru.states} & {id(w) for w in model.weights}
