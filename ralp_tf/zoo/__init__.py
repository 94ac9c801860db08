"""The model zoo: user model shapes written from the Keras examples and guides, to profile,
plan, place and train next to ``tf_keras.applications`` (docs/architecture.md: zoo sits at the
rank of bench).

:data:`SHAPES` (name -> builder, :mod:`ralp_tf.zoo.shapes`) imports TensorFlow and is loaded on
first use; :data:`EXPECT` (name -> what a planner should find interesting,
:mod:`ralp_tf.zoo.expect`) is plain data and does not.
"""
from __future__ import annotations

from typing import Any

from ralp_tf.zoo.expect import EXPECT

__all__ = ["SHAPES", "EXPECT"]


def __getattr__(name: str) -> Any:
    """``ralp_tf.zoo.SHAPES`` imports the builders (and TensorFlow) when first asked for."""
    if name == "SHAPES":
        from ralp_tf.zoo.shapes import SHAPES

        return SHAPES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
