"""Reading a tf_keras model: the one walk over its layers (placeable units and stable paths), the
profiler, layer kinds and FLOP formulas, built-in models, and what training jobs feed a model.

Nothing here touches a cluster; only :func:`profile` (and the built-in builders) touch the
TensorFlow runtime, and they import it lazily. Every private TensorFlow/Keras access of ralp_tf
is in :mod:`ralp_tf.model.keras_compat`.
"""
from ralp_tf.model.builtin import BUILTIN_MODELS, resolve_model
from ralp_tf.model.data import (OutputSpec, TrainingSpec, output_losses, output_units, per_sample_loss, synthetic_batch,
                                training_spec, weights_checksum)
from ralp_tf.model.graph import ModelGraph, Unit, walk
from ralp_tf.model.kinds import LAYER_KINDS, PS_PLACEABLE_KINDS, RALP_PS_KINDS, layer_kind, register_layer_kind
from ralp_tf.model.profiler import check_tf_keras_model, profile
from ralp_tf.model.profiles import LayerProfile, ModelProfile, TensorProfile, gradient_flows
from ralp_tf.model.trace import InputSignature, input_signature

__all__ = [
    "BUILTIN_MODELS", "resolve_model", "OutputSpec", "TrainingSpec", "output_losses", "output_units",
    "per_sample_loss", "synthetic_batch", "training_spec", "weights_checksum", "ModelGraph", "Unit", "walk",
    "LAYER_KINDS", "PS_PLACEABLE_KINDS", "RALP_PS_KINDS", "layer_kind", "register_layer_kind",
    "check_tf_keras_model", "profile", "LayerProfile", "ModelProfile", "TensorProfile", "gradient_flows",
    "InputSignature", "input_signature",
]
