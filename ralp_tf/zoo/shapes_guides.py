"""Models a new user writes from the Keras developer guides: a subclassed model, the Functional
API's multi-input multi-output and toy-ResNet models, mixed precision, and a layer adding a
loss in ``call``.

Each builder returns a fresh, built, uncompiled tf_keras model and leaves no global state
behind (the mixed-precision builder restores the global dtype policy it found).
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["ConvNet", "Sampling", "subclassed_cnn", "functional_multi_io", "mixed_precision_mlp", "vae_kl_loss",
           "functional_resnet"]


class ConvNet(keras.Model):
    """A small convnet written as the subclassing guide writes models: layers as attributes,
    created in ``__init__`` without names, used in ``call``."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = layers.Conv2D(32, 3, padding="same", activation="relu")
        self.pool1 = layers.MaxPooling2D()
        self.conv2 = layers.Conv2D(64, 3, padding="same", activation="relu")
        self.pool2 = layers.MaxPooling2D()
        self.flatten = layers.Flatten()
        self.dense1 = layers.Dense(512, activation="relu")
        self.dropout = layers.Dropout(0.5)
        self.classifier = layers.Dense(num_classes)

    def call(self, inputs: Any, training: bool = False) -> Any:
        x = self.pool1(self.conv1(inputs))
        x = self.pool2(self.conv2(x))
        x = self.dropout(self.dense1(self.flatten(x)), training=training)
        return self.classifier(x)


def subclassed_cnn() -> keras.Model:
    """The subclassed ``ConvNet`` on 32x32x3: two convs (32, 64) with pooling, Flatten (4096), a
    4096 x 512 Dense (2.1M of ~2.12M weights), Dropout, 10 logits; built by a first call on a
    batch, as ``fit`` or a custom training loop builds it. ``model.inputs`` is None.

    Follows the guides 'Making new layers and models via subclassing'
    (keras.io/guides/making_new_layers_and_models_via_subclassing) and 'Writing a training loop
    from scratch' (keras.io/guides/writing_a_training_loop_from_scratch)."""
    model = ConvNet()
    model(tf.zeros((1, 32, 32, 3)))
    return model


def functional_multi_io() -> keras.Model:
    """The ticket classifier of the Functional API guide: inputs ``title`` and ``body``
    (variable-length token ids, 10000 x 64 Embeddings, LSTM 128 and LSTM 32) and ``tags``
    (12 binary floats), concatenated into two outputs, a list: ``priority`` (Dense 1, a logit)
    and ``department`` (Dense 4, softmax).

    Follows the guide 'The Functional API' (keras.io/guides/functional_api), section 'Models with
    multiple inputs and outputs'; the guide leaves the title and body dtype at float32, int32 here.
    The two Embeddings hold 1.28M of ~1.39M weights."""
    num_tags, num_words, num_departments = 12, 10000, 4
    title_input = keras.Input(shape=(None,), dtype="int32", name="title")
    body_input = keras.Input(shape=(None,), dtype="int32", name="body")
    tags_input = keras.Input(shape=(num_tags,), name="tags")
    title_features = layers.Embedding(num_words, 64)(title_input)
    body_features = layers.Embedding(num_words, 64)(body_input)
    title_features = layers.LSTM(128)(title_features)
    body_features = layers.LSTM(32)(body_features)
    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(num_departments, activation="softmax", name="department")(x)
    return keras.Model(inputs=[title_input, body_input, tags_input], outputs=[priority_pred, department_pred])


def mixed_precision_mlp() -> keras.Model:
    """The mixed-precision MLP: 784 inputs, Dense 4096 relu, Dense 4096 relu, Dense 10 under the
    ``mixed_float16`` policy (float16 compute, float32 variables), the softmax in float32
    (``Activation("softmax", dtype="float32")``). ~20M weights, the 4096 x 4096 Dense 16.8M.

    Follows the guide 'Mixed precision' (tensorflow.org/guide/mixed_precision), its model and
    layer names. The global policy is set while building, as the guide does, and restored to
    the one found before returning (float32 normally), so nothing built later is affected."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inputs = keras.Input(shape=(784,), name="digits")
        num_units = 4096
        dense1 = layers.Dense(num_units, activation="relu", name="dense_1")
        x = dense1(inputs)
        dense2 = layers.Dense(num_units, activation="relu", name="dense_2")
        x = dense2(x)
        x = layers.Dense(10, name="dense_logits")(x)
        outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
        return keras.Model(inputs=inputs, outputs=outputs)
    finally:
        keras.mixed_precision.set_global_policy(previous)


class Sampling(layers.Layer):
    """Uses (z_mean, z_log_var) to sample z, the vector encoding a digit, and adds the KL
    divergence of the posterior from the unit Gaussian as a loss (``self.add_loss`` in ``call``)."""

    def call(self, inputs: Any) -> Any:
        z_mean, z_log_var = inputs
        batch = tf.shape(z_mean)[0]
        dim = tf.shape(z_mean)[1]
        epsilon = keras.backend.random_normal(shape=(batch, dim))
        kl_loss = -0.5 * tf.reduce_mean(z_log_var - tf.square(z_mean) - tf.exp(z_log_var) + 1)
        self.add_loss(kl_loss)
        return z_mean + tf.exp(0.5 * z_log_var) * epsilon


def vae_kl_loss() -> keras.Model:
    """A Functional variational autoencoder of 784-d digits: a nested ``encoder`` model (Dense 64,
    ``z_mean`` and ``z_log_var`` Dense 32, a custom ``Sampling`` layer that samples with a random
    op and adds the KL term with ``self.add_loss``) and a nested ``decoder`` model (Dense 64,
    Dense 784 sigmoid). ``model.losses`` holds the KL term after every call.

    Follows the guide 'Making new layers and models via subclassing'
    (keras.io/guides/making_new_layers_and_models_via_subclassing), 'Putting it all together' and
    its Functional version, the KL term moved into the layer as the guide's
    ``ActivityRegularizationLayer`` adds its loss."""
    original_dim, intermediate_dim, latent_dim = 784, 64, 32
    original_inputs = keras.Input(shape=(original_dim,), name="encoder_input")
    x = layers.Dense(intermediate_dim, activation="relu")(original_inputs)
    z_mean = layers.Dense(latent_dim, name="z_mean")(x)
    z_log_var = layers.Dense(latent_dim, name="z_log_var")(x)
    z = Sampling()((z_mean, z_log_var))
    encoder = keras.Model(inputs=original_inputs, outputs=z, name="encoder")

    latent_inputs = keras.Input(shape=(latent_dim,), name="z_sampling")
    x = layers.Dense(intermediate_dim, activation="relu")(latent_inputs)
    outputs = layers.Dense(original_dim, activation="sigmoid")(x)
    decoder = keras.Model(inputs=latent_inputs, outputs=outputs, name="decoder")

    outputs = decoder(encoder(original_inputs))
    return keras.Model(inputs=original_inputs, outputs=outputs, name="vae")


def functional_resnet() -> keras.Model:
    """The toy ResNet of the Functional API guide on 32x32x3: two convs and pooling, two residual
    blocks of two convs joined by ``layers.add``, a conv, GAP, Dense 256, Dropout, 10 logits.
    ~0.22M weights, spread over convs: nothing dominant.

    Follows the guide 'The Functional API' (keras.io/guides/functional_api), section 'A toy
    ResNet model', as written there."""
    inputs = keras.Input(shape=(32, 32, 3), name="img")
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    x = layers.Conv2D(64, 3, activation="relu")(x)
    block_1_output = layers.MaxPooling2D(3)(x)

    x = layers.Conv2D(64, 3, activation="relu", padding="same")(block_1_output)
    x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
    block_2_output = layers.add([x, block_1_output])

    x = layers.Conv2D(64, 3, activation="relu", padding="same")(block_2_output)
    x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
    block_3_output = layers.add([x, block_2_output])

    x = layers.Conv2D(64, 3, activation="relu")(block_3_output)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(256, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(10)(x)
    return keras.Model(inputs, outputs, name="toy_resnet")
