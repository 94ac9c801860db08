"""Every model of ``tf_keras.applications``, as a builder at a small input size, without weights.

``ralp_tf.zoo.applications:ResNet50`` is a model reference like any other (``ralp-tf run --model
ralp_tf.zoo.applications:ResNet50``): this module answers every name of :data:`APPLICATIONS` with
a builder (module ``__getattr__``). Each model is built with ``weights=None``, its default top
(1000 classes, a softmax output) and the smallest square input it accepts, at least
:data:`MIN_SIZE` (plain data: importing this module imports no TensorFlow).
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["MIN_SIZE", "APPLICATIONS", "builder"]

#: The input size used unless a model needs a larger one (CIFAR-like, small enough for a CPU).
MIN_SIZE = 32
#: Models whose constructor refuses inputs below this size: their smallest accepted input.
_LARGER = {"InceptionV3": 75, "InceptionResNetV2": 75, "Xception": 71}

#: Every constructor of tf_keras.applications (tf_keras 2.21), in its own order of families.
APPLICATIONS: tuple[str, ...] = (
    "ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge",
    "DenseNet121", "DenseNet169", "DenseNet201",
    "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5",
    "EfficientNetB6", "EfficientNetB7",
    "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S",
    "EfficientNetV2M", "EfficientNetV2L",
    "InceptionResNetV2", "InceptionV3",
    "MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
    "NASNetMobile", "NASNetLarge",
    "RegNetX002", "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040", "RegNetX064",
    "RegNetX080", "RegNetX120", "RegNetX160", "RegNetX320",
    "RegNetY002", "RegNetY004", "RegNetY006", "RegNetY008", "RegNetY016", "RegNetY032", "RegNetY040", "RegNetY064",
    "RegNetY080", "RegNetY120", "RegNetY160", "RegNetY320",
    "ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2",
    "ResNetRS50", "ResNetRS101", "ResNetRS152", "ResNetRS200", "ResNetRS270", "ResNetRS350", "ResNetRS420",
    "VGG16", "VGG19", "Xception",
)


def builder(name: str) -> Callable[[], Any]:
    """A builder of ``tf_keras.applications.<name>`` (module docstring)."""
    if name not in APPLICATIONS:
        raise AttributeError(f"tf_keras.applications has no model {name!r} in ralp_tf's zoo; one of "
                             f"{', '.join(APPLICATIONS)}")
    size = _LARGER.get(name, MIN_SIZE)

    def build() -> Any:
        import tf_keras

        return getattr(tf_keras.applications, name)(weights=None, input_shape=(size, size, 3))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"tf_keras.applications.{name}(weights=None, input_shape=({size}, {size}, 3))"
    return build


def __getattr__(name: str) -> Any:
    if name in APPLICATIONS:
        return builder(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
