"""Heads a new user writes around the dense layers that hold the weights: normalization, dropout
and constraints inside the head, and heads joined by plain TensorFlow ops in a subclassed model's
``call``. Each is a cut the analyzer must be able to make through what sits between its layers.

Each builder returns a fresh, built, uncompiled tf_keras model and leaves no global state behind.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["bn_head_cnn", "layernorm_head", "OpJoinedHeads", "op_joined_heads"]


def bn_head_cnn() -> keras.Model:
    """Two convs with pooling on 32x32x3, Flatten (4096), then the head of the common
    "Dense without bias, then BatchNormalization" recipe: Dense(4096, use_bias=False) ->
    BatchNormalization -> ReLU -> Dropout(0.5) -> Dense(2048, max_norm(3) kernel constraint) ->
    Dense(10): 25.3M of 25.4M weights in the head, a moving mean and variance among them, and a
    constraint the optimizer applies after each update.

    Follows the BatchNormalization-after-Dense head of the Keras guide 'Transfer learning &
    fine-tuning' (keras.io/guides/transfer_learning) and the max-norm constraint of the Dropout
    paper's recipe (keras.io/api/layers/constraints)."""
    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(4096, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(2048, activation="relu", kernel_constraint=keras.constraints.max_norm(3.0))(x)
    return keras.Model(inputs, layers.Dense(10)(x))


def layernorm_head() -> keras.Model:
    """A small conv stem (two strided convs, GlobalAveragePooling to 128), then an MLP head with
    LayerNormalization and GELU between its layers (128 -> 4096 -> LN -> GELU -> Dropout -> 4096
    -> LN -> GELU -> 10), as a ConvNeXt or ViT head writes it: 17.4M of 17.5M weights in the head.

    Follows the MLP head of the Keras example 'Image classification with Vision Transformer'
    (keras.io/examples/vision/image_classification_with_vision_transformer), LayerNormalization
    before each Dense."""
    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Conv2D(64, 3, strides=2, activation="relu")(inputs)
    x = layers.Conv2D(128, 3, strides=2, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    for units in (4096, 4096):
        x = layers.Dense(units)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        x = layers.Activation("gelu")(x)
        x = layers.Dropout(0.1)(x)
    return keras.Model(inputs, layers.Dense(10)(x))


class OpJoinedHeads(keras.Model):
    """A subclassed model whose two dense heads sit in a dict attribute and meet in plain TF ops of
    its ``call``: their sum, one head's features reversed and scaled, concatenated, then the output
    layer. No layer has a name."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv = layers.Conv2D(32, 3, activation="relu")
        self.pool = layers.MaxPooling2D()
        self.flatten = layers.Flatten()
        self.heads = {"a": layers.Dense(2048, activation="relu"), "b": layers.Dense(2048, activation="relu")}
        self.classifier = layers.Dense(num_classes)

    def call(self, inputs: Any) -> Any:
        x = self.flatten(self.pool(self.conv(inputs)))
        a, b = self.heads["a"](x), self.heads["b"](x)
        return self.classifier(tf.concat([a + b, 0.5 * b[:, ::-1]], axis=-1))


def op_joined_heads() -> keras.Model:
    """:class:`OpJoinedHeads` on 32x32x3, built by a first call: two 7200 x 2048 heads (29.5M of
    29.5M weights) joined by ``+``, slicing, a product and ``tf.concat`` in ``call``.

    Follows the subclassing guide's models ('Making new layers and models via subclassing',
    keras.io/guides/making_new_layers_and_models_via_subclassing), with two heads joined in call."""
    model = OpJoinedHeads()
    model(tf.zeros((1, 32, 32, 3)))
    return model
