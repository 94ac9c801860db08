"""Image models a new user brings, written from the Keras vision examples and guides.

Each builder returns a fresh, built, uncompiled tf_keras model on small images (32x32x3, or the
example's 28x28x1), downloads no weights and reads nothing from disk. The code keeps the
examples' habits: layers without ``name=``, custom layers without ``get_config``, raw TensorFlow
ops inside ``call``, shared towers, a ``Lambda``, random augmentation inside the model.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["DistanceLayer", "CosineClassifier", "Patches", "PatchEncoder", "euclidean_distance",
           "time_distributed_frames", "siamese_triplet", "siamese_contrastive", "cosine_head", "regularized_cnn",
           "mobilenetv2_transfer", "xception_small", "vit_small"]


def time_distributed_frames() -> keras.Model:
    """A video classifier: ``TimeDistributed(Conv2D)``, pooling, flattening and ``TimeDistributed(Dense)``
    over 8 frames of 32x32x3, then an LSTM and a softmax over 5 classes.

    Follows the ``TimeDistributed`` API page (keras.io/api/layers/recurrent_layers/time_distributed)
    and the Keras example 'Video Classification with a CNN-RNN Architecture'
    (keras.io/examples/vision/video_classification): a per-frame feature extractor, then a
    recurrent layer over the frame features. The per-frame Dense (4096 x 256) holds most weights."""
    frames = keras.Input(shape=(8, 32, 32, 3))
    x = layers.TimeDistributed(layers.Conv2D(16, 3, padding="same", activation="relu"))(frames)
    x = layers.TimeDistributed(layers.MaxPooling2D())(x)
    x = layers.TimeDistributed(layers.Flatten())(x)
    x = layers.TimeDistributed(layers.Dense(256, activation="relu"))(x)
    x = layers.LSTM(64)(x)
    outputs = layers.Dense(5, activation="softmax")(x)
    return keras.Model(frames, outputs)


class DistanceLayer(layers.Layer):
    """Computes the distance between the anchor embedding and the positive embedding, and
    the anchor embedding and the negative embedding (as in the example: three tensor arguments)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def call(self, anchor: Any, positive: Any, negative: Any) -> Any:
        ap_distance = tf.reduce_sum(tf.square(anchor - positive), -1)
        an_distance = tf.reduce_sum(tf.square(anchor - negative), -1)
        return (ap_distance, an_distance)


def siamese_triplet() -> keras.Model:
    """A triplet siamese network: one embedding tower (a nested Functional model named
    ``Embedding``, as in the example) called on anchor, positive and negative 32x32x3 images, and a
    custom ``DistanceLayer`` taking three tensors and returning a tuple of two distances ``(B,)``.

    Follows the Keras example 'Image similarity estimation using a Siamese Network with a triplet
    loss' (keras.io/examples/vision/siamese_network), with a small conv trunk in place of the
    pretrained ResNet50; its head (Dense 512, BN, Dense 256, BN, Dense 256) is the example's."""
    base_input = layers.Input(shape=(32, 32, 3))
    x = layers.Conv2D(32, 3, padding="same", activation="relu")(base_input)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling2D()(x)
    flatten = layers.Flatten()(x)
    dense1 = layers.Dense(512, activation="relu")(flatten)
    dense1 = layers.BatchNormalization()(dense1)
    dense2 = layers.Dense(256, activation="relu")(dense1)
    dense2 = layers.BatchNormalization()(dense2)
    output = layers.Dense(256)(dense2)
    embedding = keras.Model(base_input, output, name="Embedding")

    anchor_input = layers.Input(name="anchor", shape=(32, 32, 3))
    positive_input = layers.Input(name="positive", shape=(32, 32, 3))
    negative_input = layers.Input(name="negative", shape=(32, 32, 3))
    distances = DistanceLayer()(embedding(anchor_input), embedding(positive_input), embedding(negative_input))
    return keras.Model(inputs=[anchor_input, positive_input, negative_input], outputs=distances)


def euclidean_distance(vects: Any) -> Any:
    """Euclidean distance between two vectors (the example's function, run by a ``Lambda``)."""
    x, y = vects
    sum_square = tf.reduce_sum(tf.square(x - y), axis=1, keepdims=True)
    return tf.sqrt(tf.maximum(sum_square, keras.backend.epsilon()))


def siamese_contrastive() -> keras.Model:
    """A pair siamese network on 28x28x1 digits: a shared tower (BN, two tanh convs, average
    pooling, BN, Dense 10) called on both images, a ``Lambda`` Euclidean distance, BN, sigmoid.

    Follows the Keras example 'Image similarity estimation using a Siamese Network with a
    contrastive loss' (keras.io/examples/vision/siamese_contrastive), as written there. Tiny
    (a few thousand weights): nothing worth moving, BatchNormalization on both sides of the Lambda."""
    input = layers.Input((28, 28, 1))
    x = layers.BatchNormalization()(input)
    x = layers.Conv2D(4, (5, 5), activation="tanh")(x)
    x = layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = layers.Conv2D(16, (5, 5), activation="tanh")(x)
    x = layers.AveragePooling2D(pool_size=(2, 2))(x)
    x = layers.Flatten()(x)
    x = layers.BatchNormalization()(x)
    x = layers.Dense(10, activation="tanh")(x)
    embedding_network = keras.Model(input, x)

    input_1 = layers.Input((28, 28, 1))
    input_2 = layers.Input((28, 28, 1))
    tower_1 = embedding_network(input_1)
    tower_2 = embedding_network(input_2)
    merge_layer = layers.Lambda(euclidean_distance, output_shape=(1,))([tower_1, tower_2])
    normal_layer = layers.BatchNormalization()(merge_layer)
    output_layer = layers.Dense(1, activation="sigmoid")(normal_layer)
    return keras.Model(inputs=[input_1, input_2], outputs=output_layer)


class CosineClassifier(layers.Layer):
    """A cosine-similarity classification head: logits are ``scale * cos(x, w_j)`` for a
    ``(input_dim, units)`` kernel made by ``add_weight`` in ``build``, like the guide's ``Linear``."""

    def __init__(self, units: int = 1000, scale: float = 16.0) -> None:
        super().__init__()
        self.units = units
        self.scale = scale

    def build(self, input_shape: Any) -> None:
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal", trainable=True)

    def call(self, inputs: Any) -> Any:
        x = tf.math.l2_normalize(inputs, axis=-1)
        w = tf.math.l2_normalize(self.w, axis=0)
        return self.scale * tf.matmul(x, w)


def cosine_head() -> keras.Model:
    """A small conv trunk (32, 64, 128 filters) on 32x32x3, flattened to 2048, and a custom
    ``CosineClassifier`` over 1000 classes whose 2048 x 1000 ``add_weight`` kernel holds ~95% of
    the weights, then a softmax.

    Follows the guide 'Making new layers and models via subclassing'
    (keras.io/guides/making_new_layers_and_models_via_subclassing): a layer creating its weight
    with ``add_weight`` in ``build``, here the cosine classifier of few-shot / face models."""
    inputs = keras.Input(shape=(32, 32, 3))
    x = inputs
    for filters in (32, 64, 128):
        x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = CosineClassifier(1000)(x)
    outputs = layers.Activation("softmax")(x)
    return keras.Model(inputs, outputs)


def regularized_cnn() -> keras.Model:
    """A Sequential CNN on 32x32x3 with L2 kernel regularisers on every conv and dense layer,
    BatchNormalization after each conv, and a dense head Dense(1024) + BN + Dropout(0.5) +
    Dense(10, softmax); the regularisers add four terms to ``model.losses``.

    Follows the Keras example 'Simple MNIST convnet' (keras.io/examples/vision/mnist_convnet)
    with the regularisers of the 'Layer weight regularizers' page (keras.io/api/layers/regularizers)."""
    l2 = keras.regularizers.l2(1e-4)
    return keras.Sequential([
        keras.Input(shape=(32, 32, 3)),
        layers.Conv2D(32, kernel_size=(3, 3), kernel_regularizer=l2),
        layers.BatchNormalization(),
        layers.Activation("relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), kernel_regularizer=l2),
        layers.BatchNormalization(),
        layers.Activation("relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dense(1024, activation="relu", kernel_regularizer=l2),
        layers.BatchNormalization(),
        layers.Dropout(0.5),
        layers.Dense(10, activation="softmax", kernel_regularizer=l2),
    ])


def mobilenetv2_transfer() -> keras.Model:
    """Transfer learning: ``MobileNetV2(weights=None, include_top=False, input_shape=(32, 32, 3))``
    nested as one layer and called with ``training=False`` (its BatchNormalization stays in
    inference mode), GlobalAveragePooling, then Dense 4096-4096-10 (~22M of the ~24M weights).

    Follows the guide 'Transfer learning & fine-tuning' (keras.io/guides/transfer_learning) in
    its fine-tuning phase: the base stays trainable, the guide's Rescaling to [-1, 1] first."""
    base_model = keras.applications.MobileNetV2(weights=None, include_top=False, input_shape=(32, 32, 3))
    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Rescaling(scale=1 / 127.5, offset=-1)(inputs)
    x = base_model(x, training=False)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(4096, activation="relu")(x)
    x = layers.Dense(4096, activation="relu")(x)
    outputs = layers.Dense(10)(x)
    return keras.Model(inputs, outputs)


def xception_small() -> keras.Model:
    """A small Xception on 32x32x3: random flip and rotation inside the model (a nested
    Sequential), Rescaling, a strided conv, three residual blocks of SeparableConv2D + BN with
    1x1 strided shortcuts (256, 512, 728), SeparableConv2D(1024), GAP, Dropout, one logit.

    Follows the Keras example 'Image classification from scratch'
    (keras.io/examples/vision/image_classification_from_scratch), ``make_model`` as written there
    (augmentation in the model, its first option), on 32x32 instead of 180x180 images."""
    data_augmentation = keras.Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)])
    inputs = keras.Input(shape=(32, 32, 3))
    x = data_augmentation(inputs)
    x = layers.Rescaling(1.0 / 255)(x)
    x = layers.Conv2D(128, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x  # Set aside residual
    for size in [256, 512, 728]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual
    x = layers.SeparableConv2D(1024, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(1, activation=None)(x)
    return keras.Model(inputs, outputs)


class Patches(layers.Layer):
    """Cuts images into ``patch_size`` x ``patch_size`` patches with ``tf.image.extract_patches``."""

    def __init__(self, patch_size: int) -> None:
        super().__init__()
        self.patch_size = patch_size

    def call(self, images: Any) -> Any:
        batch_size = tf.shape(images)[0]
        patches = tf.image.extract_patches(images=images, sizes=[1, self.patch_size, self.patch_size, 1],
                                           strides=[1, self.patch_size, self.patch_size, 1], rates=[1, 1, 1, 1],
                                           padding="VALID")
        patch_dims = patches.shape[-1]
        return tf.reshape(patches, [batch_size, -1, patch_dims])


class PatchEncoder(layers.Layer):
    """Projects each patch with a Dense and adds a learned position Embedding of the patch index."""

    def __init__(self, num_patches: int, projection_dim: int) -> None:
        super().__init__()
        self.num_patches = num_patches
        self.projection = layers.Dense(units=projection_dim)
        self.position_embedding = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)

    def call(self, patch: Any) -> Any:
        positions = tf.range(start=0, limit=self.num_patches, delta=1)
        return self.projection(patch) + self.position_embedding(positions)


def _mlp(x: Any, hidden_units: list[int], dropout_rate: float) -> Any:
    for units in hidden_units:
        x = layers.Dense(units, activation=tf.nn.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def vit_small() -> keras.Model:
    """A Vision Transformer on 32x32x3: custom ``Patches`` (4x4, 64 patches) and ``PatchEncoder``
    (a Dense and a position Embedding inside a custom layer), 8 pre-norm blocks of
    MultiHeadAttention (4 heads) and a gelu MLP written inline, then Flatten (64 x 64 = 4096) and the
    example's MLP head [2048, 1024] (~10.5M of ~11.2M weights), 10 logits.

    Follows the Keras example 'Image classification with Vision Transformer'
    (keras.io/examples/vision/image_classification_with_vision_transformer) with its
    hyperparameters, on 32x32 images and without its augmentation (which adapts a
    Normalization layer to the training data)."""
    num_patches, projection_dim = (32 // 4) ** 2, 64
    inputs = layers.Input(shape=(32, 32, 3))
    patches = Patches(4)(inputs)
    encoded_patches = PatchEncoder(num_patches, projection_dim)(patches)
    for _ in range(8):
        x1 = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
        attention_output = layers.MultiHeadAttention(num_heads=4, key_dim=projection_dim, dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, encoded_patches])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = _mlp(x3, hidden_units=[projection_dim * 2, projection_dim], dropout_rate=0.1)
        encoded_patches = layers.Add()([x3, x2])
    representation = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
    representation = layers.Flatten()(representation)
    representation = layers.Dropout(0.5)(representation)
    features = _mlp(representation, hidden_units=[2048, 1024], dropout_rate=0.5)
    logits = layers.Dense(10)(features)
    return keras.Model(inputs=inputs, outputs=logits)
