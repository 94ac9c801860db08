"""Model builders from ``tf_keras.applications`` for benchmark commands, as a user would pass them:

    PYTHONPATH=benchmarks ralp-tf run --model applications:mobilenet_v2_cifar ...

No weights are downloaded (``weights=None``); the input is CIFAR-sized.
"""
from __future__ import annotations

from typing import Any


def mobilenet_v2_cifar() -> Any:
    """MobileNetV2 at width 0.35 on 32x32x3 inputs, 10 classes: 262 variables, most of them small
    (every BatchNorm has four)."""
    import tf_keras

    return tf_keras.applications.MobileNetV2(input_shape=(32, 32, 3), weights=None, classes=10, alpha=0.35)
