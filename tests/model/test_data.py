"""What training jobs feed a model: inputs of variable length, dict and multiple inputs, and the
loss that matches each output (probabilities vs logits)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ralp_tf.errors import ModelError
from ralp_tf.model import input_signature, per_sample_loss, profile, synthetic_batch, training_spec


def variable_length() -> Any:
    import tf_keras as keras

    inp = keras.Input(shape=(None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(500, 8)(inp)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inp, keras.layers.Dense(3, activation="softmax")(x))


def test_variable_length_inputs_need_a_length_and_get_it() -> None:
    model = variable_length()
    with pytest.raises(ModelError, match=r"input 'tokens'.*variable length.*--sequence-length"):
        profile(model, 4)
    sig = input_signature(model, sequence_length=12)
    assert sig.names == ("tokens",) and tuple(sig.flat[0].shape) == (None, 12)
    prof = profile(model, 4, sequence_length=12)
    assert prof.layer("embedding").output_bytes == 12 * 8 * 4
    x, y = synthetic_batch(model, 4, sequence_length=12)
    assert x.shape == (4, 12) and x.max() < 500 and y.shape == (4,)


def test_the_length_an_embedding_declares_is_the_default() -> None:
    import tf_keras as keras

    inp = keras.Input(shape=(None,), dtype="int32")
    out = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 4, input_length=7)(inp)))
    assert tuple(input_signature(keras.Model(inp, out)).flat[0].shape) == (None, 7)


def test_softmax_and_sigmoid_outputs_are_scored_as_probabilities() -> None:
    import tensorflow as tf
    import tf_keras as keras

    model = variable_length()
    spec = training_spec(model, sequence_length=5)
    assert [o.probabilities for o in spec.outputs] == [True]
    x, y = synthetic_batch(spec, 6, seed=1)
    probs = model(x)
    expected = keras.losses.sparse_categorical_crossentropy(y, probs, from_logits=False)
    np.testing.assert_allclose(per_sample_loss(spec)(y, probs), expected, rtol=1e-6)
    inp = keras.Input((4,))
    logits = keras.Model(inp, keras.layers.Dense(3)(inp))
    assert not training_spec(logits).outputs[0].probabilities
    xl, yl = synthetic_batch(logits, 6)
    np.testing.assert_allclose(per_sample_loss(logits)(yl, logits(xl)),
                               keras.losses.sparse_categorical_crossentropy(yl, logits(xl), from_logits=True), rtol=1e-6)
    del tf


def test_dict_inputs_and_several_outputs() -> None:
    import tf_keras as keras

    ids = keras.Input((1,), dtype="int64", name="user")
    age = keras.Input((1,), name="age")
    h = keras.layers.Concatenate()([keras.layers.Flatten()(keras.layers.Embedding(30, 4)(ids)), age])
    model = keras.Model({"user": ids, "age": age},
                        [keras.layers.Dense(1, activation="sigmoid")(h), keras.layers.Dense(5)(h)])
    x, y = synthetic_batch(model, 8)
    assert set(x) == {"user", "age"} and x["user"].max() < 30 and len(y) == 2
    assert y[0].shape == (8, 1) and y[1].shape == (8,)
    loss = per_sample_loss(model)(y, model(x))
    assert loss.shape == (8,) and np.all(np.isfinite(loss))
    assert input_signature(model).names == ("age", "user")


def test_a_multi_input_batch_goes_into_a_dataset_as_one_structure() -> None:
    """ctr_dnn's inputs are a list of differently shaped arrays: tf.data reads a list as one tensor
    (non-rectangular), so the training jobs feed dataset_batch's tuples (the rings failed on it)."""
    import tensorflow as tf

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.data import dataset_batch

    model = resolve_model("ctr_dnn")()
    with pytest.raises(ValueError, match="non-rectangular"):
        tf.data.Dataset.from_tensors(synthetic_batch(model, 4))
    x, y = dataset_batch(model, 4)
    assert isinstance(x, tuple) and len(x) == len(model.inputs)
    (bx, by), = tf.data.Dataset.from_tensors((x, y)).take(1)
    assert model(bx).shape[0] == 4 and by.shape[0] == 4
