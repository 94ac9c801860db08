"""Models whose traffic is embedding rows and recurrent reads, written from the Keras examples and
guides a new user starts from (issue 39): text models whose embedding's consumers compute on the
workers, a two-tower retrieval model, a table worth partitioning over PS tasks, a hashing CTR
model, a variable-selection network of gated residual blocks, a siamese text model sharing one
embedding, a recurrent layer with a custom cell and the ConvLSTM next-frame model.

Each builder returns a fresh, built, uncompiled tf_keras model; integer inputs are ids below the
smallest Embedding vocabulary they feed; the hashing model reads strings (the synthetic data give
it ids as text). Where an example's ``StringLookup`` needs a vocabulary, the builder takes the ids
as integers.
"""
from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["kim_text_cnn", "text_bilstm_stack", "bilstm_dense_head", "two_tower_recommender", "partitioned_table_ctr",
           "hashing_ctr", "GatedLinearUnit", "GatedResidualNetwork", "VariableSelection", "grn_vsn_classifier",
           "siamese_text", "MinimalRNNCell", "custom_cell_rnn", "conv_lstm_frames"]


def kim_text_cnn() -> keras.Model:
    """Kim's CNN for sentence classification: a 20000 x 128 Embedding of 40 int64 ids read by three
    ``Conv1D(256, k)`` (k = 3, 4, 5), each max-pooled over time, concatenated, then Dense(2048) and
    a 2-way softmax. The embedding's output has three consumers.

    Follows Kim (2014), 'Convolutional Neural Networks for Sentence Classification', as the Keras
    examples write such a model (parallel Conv1D branches over one embedding, keras.io/examples/nlp),
    with 256 filters per width."""
    inputs = keras.Input((40,), dtype="int64")
    embedded = layers.Embedding(20000, 128)(inputs)
    branches = [layers.GlobalMaxPooling1D()(layers.Conv1D(256, k, activation="relu")(embedded)) for k in (3, 4, 5)]
    x = layers.Concatenate()(branches)
    x = layers.Dense(2048, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(2, activation="softmax")(x))


def text_bilstm_stack() -> keras.Model:
    """Two stacked ``Bidirectional(LSTM(128))`` over a 20000 x 128 Embedding of a variable-length
    int64 input, sigmoid output. Follows the example 'Bidirectional LSTM on IMDB'
    (keras.io/examples/nlp/bidirectional_lstm_imdb) with 128 units per direction."""
    inputs = keras.Input((None,), dtype="int64")
    x = layers.Embedding(20000, 128)(inputs)
    x = layers.Bidirectional(layers.LSTM(128, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(128))(x)
    return keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))


def bilstm_dense_head() -> keras.Model:
    """A 20000 x 128 Embedding of a variable-length int64 input, ``Bidirectional(LSTM(128))``, a
    Dense(2048) head and a sigmoid output: the IMDB example's encoder with a user's wide classifier."""
    inputs = keras.Input((None,), dtype="int64")
    x = layers.Embedding(20000, 128)(inputs)
    x = layers.Bidirectional(layers.LSTM(128))(x)
    x = layers.Dense(2048, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))


def two_tower_recommender() -> keras.Model:
    """A two-tower retrieval model: a 100000 x 64 user and a 50000 x 64 item Embedding of one id
    each, Flatten, a Dense(256)-Dense(64) tower per side, and their dot product as the score.

    Follows the two-tower models of the TensorFlow Recommenders retrieval tutorial
    (tensorflow.org/recommenders/examples/basic_retrieval) in plain tf_keras layers."""
    user = keras.Input((1,), dtype="int64", name="user")
    item = keras.Input((1,), dtype="int64", name="item")
    user_vector = layers.Flatten()(layers.Embedding(100000, 64)(user))
    item_vector = layers.Flatten()(layers.Embedding(50000, 64)(item))
    user_tower = layers.Dense(64)(layers.Dense(256, activation="relu")(user_vector))
    item_tower = layers.Dense(64)(layers.Dense(256, activation="relu")(item_vector))
    return keras.Model([user, item], layers.Dot(axes=1)([user_tower, item_tower]))


def partitioned_table_ctr() -> keras.Model:
    """A CTR model whose 800,000 x 32 table (102 MB) is the model: ten int64 ids per sample,
    Flatten, Dense(256), a logit. With several PS tasks a planner should partition the table
    (ParameterServerStrategy's ``variable_partitioner``, or a plan's storage). Follows the sharded
    tables of the guide 'Parameter server training with ParameterServerStrategy'
    (tensorflow.org/tutorials/distribute/parameter_server_training)."""
    inputs = keras.Input((10,), dtype="int64")
    x = layers.Flatten()(layers.Embedding(800_000, 32)(inputs))
    x = layers.Dense(256, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(1)(x))


def hashing_ctr() -> keras.Model:
    """A hashing-trick CTR model: eight string categorical features hashed into 200000 bins
    (``layers.Hashing``), a 200000 x 16 Embedding, Flatten, Dense(512), a logit.

    Follows the hashing of the guide 'Working with preprocessing layers'
    (keras.io/guides/preprocessing_layers): its strings are hashed inside the model."""
    inputs = keras.Input((8,), dtype="string")
    hashed = layers.Hashing(num_bins=200000)(inputs)
    x = layers.Flatten()(layers.Embedding(200000, 16)(hashed))
    x = layers.Dense(512, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(1)(x))


class GatedLinearUnit(layers.Layer):
    """``linear(x) * sigmoid_dense(x)``."""

    def __init__(self, units: int) -> None:
        super().__init__()
        self.linear = layers.Dense(units)
        self.sigmoid = layers.Dense(units, activation="sigmoid")

    def call(self, inputs: Any) -> Any:
        return self.linear(inputs) * self.sigmoid(inputs)


class GatedResidualNetwork(layers.Layer):
    """ELU Dense, linear Dense, Dropout, a gated linear unit added to the (projected) input, LayerNorm."""

    def __init__(self, units: int, dropout_rate: float) -> None:
        super().__init__()
        self.units = units
        self.elu_dense = layers.Dense(units, activation="elu")
        self.linear_dense = layers.Dense(units)
        self.dropout = layers.Dropout(dropout_rate)
        self.gated_linear_unit = GatedLinearUnit(units)
        self.layer_norm = layers.LayerNormalization()
        self.project = layers.Dense(units)

    def call(self, inputs: Any) -> Any:
        x = self.elu_dense(inputs)
        x = self.linear_dense(x)
        x = self.dropout(x)
        if inputs.shape[-1] != self.units:
            inputs = self.project(inputs)
        x = inputs + self.gated_linear_unit(x)
        return self.layer_norm(x)


class VariableSelection(layers.Layer):
    """A GRN per feature, softmax weights from a GRN over their concatenation, the weighted sum."""

    def __init__(self, num_features: int, units: int, dropout_rate: float) -> None:
        super().__init__()
        self.grns = [GatedResidualNetwork(units, dropout_rate) for _ in range(num_features)]
        self.grn_concat = GatedResidualNetwork(units, dropout_rate)
        self.softmax = layers.Dense(units=num_features, activation="softmax")

    def call(self, inputs: Sequence[Any]) -> Any:
        v = layers.concatenate(inputs)
        v = self.grn_concat(v)
        v = tf.expand_dims(self.softmax(v), axis=-1)
        x = tf.stack([grn(x) for grn, x in zip(self.grns, inputs)], axis=1)
        return tf.squeeze(tf.matmul(v, x, transpose_a=True), axis=1)


#: (name, vocabulary) of the GRN/VSN classifier's categorical features (the census income data's,
#: with vocabularies rounded up), then its numeric features.
VSN_CATEGORICAL = (("workclass", 10), ("education", 17), ("marital_status", 8), ("occupation", 16),
                   ("relationship", 7), ("race", 6), ("country", 42))
VSN_NUMERIC = ("age", "wage_per_hour", "capital_gains", "capital_losses", "dividends", "weeks_worked")


def grn_vsn_classifier() -> keras.Model:
    """A variable selection network over seven categorical features (an Embedding of 16 each, ids
    already indexed) and six numeric ones (a Dense(16) each, on the feature expanded to one
    column), a ``VariableSelection`` of gated residual networks, and a sigmoid output.

    Follows the Keras example 'Classification with Gated Residual and Variable Selection Networks'
    (keras.io/examples/structured_data/classification_with_grn_and_vsn) with encoding size 16 and
    dict inputs; its ``StringLookup`` is left out (the ids are integers)."""
    encoding_size = 16
    inputs = {name: keras.Input((1,), name=name, dtype="int64") for name, _ in VSN_CATEGORICAL}
    inputs.update({name: keras.Input((1,), name=name, dtype="float32") for name in VSN_NUMERIC})
    encoded = []
    for name, vocabulary in VSN_CATEGORICAL:
        encoded.append(layers.Flatten()(layers.Embedding(vocabulary, encoding_size)(inputs[name])))
    for name in VSN_NUMERIC:
        encoded.append(layers.Dense(encoding_size)(inputs[name]))
    features = VariableSelection(len(encoded), encoding_size, 0.15)(encoded)
    return keras.Model(inputs, layers.Dense(1, activation="sigmoid")(features))


def siamese_text() -> keras.Model:
    """A siamese text matcher: one 10000 x 64 Embedding and one LSTM(64) shared by two 20-id int64
    inputs, the two encodings with their absolute difference concatenated, Dense(256), a logit.
    The table's rows are looked up twice per step, once per call. Follows the shared layers of the
    guide 'The Functional API' (keras.io/guides/functional_api, 'Shared layers')."""
    left = keras.Input((20,), dtype="int64")
    right = keras.Input((20,), dtype="int64")
    embedding = layers.Embedding(10000, 64)
    encoder = layers.LSTM(64)
    a, b = encoder(embedding(left)), encoder(embedding(right))
    x = layers.Concatenate()([a, b, tf.abs(a - b)])
    x = layers.Dense(256, activation="relu")(x)
    return keras.Model([left, right], layers.Dense(1)(x))


class MinimalRNNCell(layers.Layer):
    """The guide's minimal cell: ``h_t = x_t W + h_{t-1} U``."""

    def __init__(self, units: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape: Any) -> None:
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), initializer="uniform",
                                                name="recurrent_kernel")
        self.built = True

    def call(self, inputs: Any, states: Any) -> Any:
        output = tf.matmul(inputs, self.kernel) + tf.matmul(states[0], self.recurrent_kernel)
        return output, [output]


def custom_cell_rnn() -> keras.Model:
    """``layers.RNN(MinimalRNNCell(256))`` over a variable-length sequence of 64 floats, then a
    Dense(1). Follows the custom cell of the guide 'Working with RNNs' (keras.io/guides/working_with_rnns,
    'RNN layers and RNN cells'). Its cell reads its two kernels at every time step."""
    inputs = keras.Input((None, 64))
    x = layers.RNN(MinimalRNNCell(256))(inputs)
    return keras.Model(inputs, layers.Dense(1)(x))


def conv_lstm_frames() -> keras.Model:
    """Next-frame prediction: two ``ConvLSTM2D(16, 3, return_sequences=True)`` over a
    variable-length sequence of 16 x 16 one-channel frames, BatchNormalization between them, a
    ``Conv3D(1, 3)`` sigmoid output per frame.

    Follows the Keras example 'Next-Frame Video Prediction with Convolutional LSTMs'
    (keras.io/examples/vision/conv_lstm) with 16 filters and 16 x 16 frames. A ConvLSTM2D reads
    its cell's kernels at every time step."""
    inputs = keras.Input((None, 16, 16, 1))
    x = layers.ConvLSTM2D(16, 3, padding="same", return_sequences=True, activation="relu")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ConvLSTM2D(16, 3, padding="same", return_sequences=True, activation="relu")(x)
    x = layers.Conv3D(1, 3, padding="same", activation="sigmoid")(x)
    return keras.Model(inputs, x)
