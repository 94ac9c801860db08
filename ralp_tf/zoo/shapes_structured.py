"""Recommender and structured-data models a new user brings, written from the Keras
structured-data examples and the TensorFlow Recommenders DCN tutorial: large id embeddings,
dict inputs, raw TensorFlow ops between layers, a subclassed model and a custom cross layer.

Each builder returns a fresh, built, uncompiled tf_keras model; integer inputs are ids below
the smallest Embedding vocabulary of the model.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["RecommenderNet", "Cross", "WIDE_DEEP_CATEGORICAL", "WIDE_DEEP_NUMERIC", "recommender_net", "wide_and_deep",
           "deep_cross_network"]


class RecommenderNet(keras.Model):
    """User and movie embeddings with per-id biases; the score is their dot product plus biases,
    squashed by a sigmoid. ``inputs`` is (batch, 2): user id, movie id."""

    def __init__(self, num_users: int, num_movies: int, embedding_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(num_users, embedding_size, embeddings_initializer="he_normal",
                                               embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size, embeddings_initializer="he_normal",
                                                embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs: Any) -> Any:
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        # As in the example: tensordot over both axes sums over the batch too (one scalar),
        # broadcast onto the (batch, 1) biases.
        dot_user_movie = tf.tensordot(user_vector, movie_vector, 2)
        x = dot_user_movie + user_bias + movie_bias
        return tf.nn.sigmoid(x)


def recommender_net() -> keras.Model:
    """The subclassed ``RecommenderNet`` for MovieLens small (610 users, 9724 movies, 50-d
    embeddings, L2 on the two embedding tables), built as the example's ``fit`` builds it: by a
    first call on an int64 (batch, 2) array of (user, movie) ids. Output (batch, 1).

    Follows the Keras example 'Collaborative Filtering for Movie Recommendations'
    (keras.io/examples/structured_data/collaborative_filtering_movielens), its tensordot included."""
    model = RecommenderNet(610, 9724, 50)
    model(tf.zeros((1, 2), dtype="int64"))
    return model


#: Categorical features of :func:`wide_and_deep`: name -> (vocabulary size, deep embedding size).
WIDE_DEEP_CATEGORICAL = {"user_id": (100_000, 32), "item_id": (50_000, 32), "item_category": (1_000, 8),
                         "hour_of_day": (24, 4)}
WIDE_DEEP_NUMERIC = ("price", "user_age")


def wide_and_deep() -> keras.Model:
    """Wide & deep CTR model with dict inputs: four scalar int64 id inputs (user 100k, item 50k,
    category 1k, hour 24) and two scalar float inputs (``shape=()``, expanded with ``tf.expand_dims``
    between layers as the example does). Wide part: a 1-d Embedding per id feature and a
    ``HashedCrossing`` of user x category into a 1-d Embedding of 10000 bins, summed; deep part:
    32/32/8/4-d Embeddings and the floats, concatenated, Dense 256-128. Output sigmoid (batch, 1).

    Follows the Keras example 'Wide, Deep, and Cross networks for structured data'
    (keras.io/examples/structured_data/wide_deep_cross_networks): ``create_model_inputs`` as a
    dict of named scalar inputs, wide and deep merged before the output. The user and item
    embeddings (4.8M of ~5.0M weights) dominate."""
    inputs = {name: layers.Input(name=name, shape=(), dtype="int64") for name in WIDE_DEEP_CATEGORICAL}
    inputs.update({name: layers.Input(name=name, shape=(), dtype="float32") for name in WIDE_DEEP_NUMERIC})
    crossed = layers.HashedCrossing(num_bins=10_000)((inputs["user_id"], inputs["item_category"]))
    wide_terms = [layers.Embedding(10_000, 1)(crossed)]
    deep_features = []
    for name, (vocabulary_size, embedding_dims) in WIDE_DEEP_CATEGORICAL.items():
        wide_terms.append(layers.Embedding(vocabulary_size, 1)(inputs[name]))
        deep_features.append(layers.Embedding(vocabulary_size, embedding_dims)(inputs[name]))
    for name in WIDE_DEEP_NUMERIC:
        deep_features.append(tf.expand_dims(inputs[name], -1))
    wide = layers.Add()(wide_terms)
    deep = layers.concatenate(deep_features)
    for units in (256, 128):
        deep = layers.Dense(units)(deep)
        deep = layers.BatchNormalization()(deep)
        deep = layers.ReLU()(deep)
        deep = layers.Dropout(0.1)(deep)
    merged = layers.concatenate([wide, deep])
    outputs = layers.Dense(units=1, activation="sigmoid")(merged)
    return keras.Model(inputs=inputs, outputs=outputs)


class Cross(layers.Layer):
    """A DCN cross layer, ``x0 * (x @ W + b) + x``, with its own (d, d) kernel and bias."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def build(self, input_shape: Any) -> None:
        last_dim = input_shape[-1]
        self.kernel = self.add_weight(shape=(last_dim, last_dim), initializer="glorot_uniform", trainable=True)
        self.bias = self.add_weight(shape=(last_dim,), initializer="zeros", trainable=True)

    def call(self, x0: Any, x: Any = None) -> Any:
        if x is None:
            x = x0
        return x0 * (tf.matmul(x, self.kernel) + self.bias) + x


def deep_cross_network() -> keras.Model:
    """A stacked deep & cross network on Criteo-like inputs: 8 hashed categorical fields (one
    int32 (batch, 8) input) through one shared 100000 x 16 Embedding, flattened and concatenated
    with 13 float features into x0 (141), three custom ``Cross`` layers called as ``cross(x0, x)``,
    Dense 256-256, Dense(1, sigmoid).

    Follows the TensorFlow Recommenders tutorial 'Deep & Cross Network (DCN)'
    (tensorflow.org/recommenders/examples/dcn), its ``tfrs.layers.dcn.Cross`` written as a plain
    Keras layer; the Embedding holds 1.6M of ~1.7M weights."""
    categorical = keras.Input(shape=(8,), dtype="int32", name="categorical")
    numeric = keras.Input(shape=(13,), name="numeric")  # named "dense", it collides with a fresh process's first Dense
    embeddings = layers.Embedding(100_000, 16)(categorical)
    x0 = layers.concatenate([layers.Flatten()(embeddings), numeric])
    x = x0
    for _ in range(3):
        x = Cross()(x0, x)
    for _ in range(2):
        x = layers.Dense(256, activation="relu")(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    return keras.Model([categorical, numeric], outputs)
