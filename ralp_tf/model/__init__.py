"""Reading a tf_keras model: its layers (kinds, FLOP formulas), the profiler, built-in models.

Nothing here touches a cluster; only :func:`profile` (and the built-in builders) touch the
TensorFlow runtime, and they import it lazily.
"""
from ralp_tf.model.builtin import (BUILTIN_MODELS, per_sample_loss, resolve_model, synthetic_batch,
                                   weights_checksum)
from ralp_tf.model.kinds import LAYER_KINDS, PS_PLACEABLE_KINDS, RALP_PS_KINDS, register_layer_kind
from ralp_tf.model.profiler import (LayerProfile, ModelProfile, TensorProfile, check_tf_keras_model, gradient_flows,
                                    profile)
from ralp_tf.model.trace import input_specs, leaf_layers

__all__ = [
    "BUILTIN_MODELS", "per_sample_loss", "resolve_model", "synthetic_batch", "weights_checksum",
    "LAYER_KINDS", "PS_PLACEABLE_KINDS", "RALP_PS_KINDS", "register_layer_kind",
    "LayerProfile", "ModelProfile", "TensorProfile", "check_tf_keras_model", "gradient_flows", "profile",
    "input_specs", "leaf_layers",
]
