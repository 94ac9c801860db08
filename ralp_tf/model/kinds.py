"""Layer kinds and forward FLOP formulas: the registry the profiler and the planners share.

``register_layer_kind(class_name, kind, flops_fn)`` declares the kind of a layer class (one of
:data:`LAYER_KINDS`) and optionally its FLOP formula. Built-in formulas, forward FLOPs per
sample: conv ``2 * prod(kernel) * C_in/groups * output elements``; depthwise conv
``2 * prod(kernel) * output elements``; separable conv depthwise + pointwise; transposed conv
``2 * prod(kernel) * C_out * input elements``; dense ``2 * d_in * units * rows`` (+ the bias
adds); embedding one copy per output element. Other layers: TensorFlow's FLOP counter on the
layer's graph, or, where it counts nothing, one FLOP per output element for activations and
pools and four for normalizations.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Iterable, Sequence

from ralp_tf.errors import ValidationError

__all__ = ["LAYER_KINDS", "PS_PLACEABLE_KINDS", "RALP_PS_KINDS", "FlopsFn", "register_layer_kind", "layer_kind",
           "shape_tuple", "dtype_size", "prod", "call_flops"]

log = logging.getLogger(__name__)

LAYER_KINDS: tuple[str, ...] = (
    "input", "conv", "pool", "dense", "embedding", "normalization", "activation", "reshape", "other",
    "recurrent", "attention",
)
#: Kinds that may compute on a parameter-server task (whether one layer can is its profile's
#: ``ps_refusal``: a stateful RNN, an op with no CPU kernel, a plain op of the model's own call cannot).
PS_PLACEABLE_KINDS = frozenset(LAYER_KINDS) - {"input"}
#: Kinds whose weights the RALP analyzer may move to PS tasks, priced by the cost model (conv and
#: normalization layers stay on the workers, as in RALP).
RALP_PS_KINDS = frozenset({"dense", "embedding", "recurrent", "attention", "other"})

FlopsFn = Callable[[Any, Sequence[tuple], Sequence[tuple]], float]

_KIND_BY_CLASS: dict[str, str] = {}
_FLOPS_BY_CLASS: dict[str, FlopsFn] = {}


def register_layer_kind(class_name: str, kind: str, flops_fn: FlopsFn | None = None) -> None:
    """Declare the kind of a layer class (by class name), and optionally its FLOP formula.

    ``flops_fn(layer, input_shapes, output_shapes)`` returns forward FLOPs per sample; shapes
    exclude the batch dimension. Registering a custom layer silences the "unknown kind"
    warning and lets the planners move it.
    """
    if kind not in LAYER_KINDS:
        raise ValidationError(f"unknown layer kind {kind!r}; use one of {', '.join(LAYER_KINDS)}")
    _KIND_BY_CLASS[class_name] = kind
    if flops_fn is not None:
        _FLOPS_BY_CLASS[class_name] = flops_fn


def _conv_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    kernel = layer.kernel_size
    groups = getattr(layer, "groups", 1) or 1
    c_in = ins[0][-1] if layer.data_format == "channels_last" else ins[0][0]
    return 2.0 * prod(kernel) * (c_in / groups) * prod(outs[0])


def _depthwise_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    return 2.0 * prod(layer.kernel_size) * prod(outs[0])


def _separable_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    c_in = ins[0][-1]
    spatial = prod(outs[0][:-1])
    depthwise = 2.0 * prod(layer.kernel_size) * c_in * layer.depth_multiplier * spatial
    pointwise = 2.0 * c_in * layer.depth_multiplier * prod(outs[0])
    return depthwise + pointwise


def _conv_transpose_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    c_out = outs[0][-1]
    return 2.0 * prod(layer.kernel_size) * c_out * prod(ins[0])


def _dense_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    d_in = ins[0][-1]
    rows = prod(ins[0][:-1])
    return 2.0 * d_in * layer.units * rows + (layer.units * rows if layer.use_bias else 0)


def _embedding_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    return float(prod(outs[0]))


for _name in ("Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D", "Convolution3D"):
    register_layer_kind(_name, "conv", _conv_flops)
for _name in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"):
    register_layer_kind(_name, "conv", _conv_transpose_flops)
register_layer_kind("DepthwiseConv2D", "conv", _depthwise_flops)
register_layer_kind("DepthwiseConv1D", "conv", _depthwise_flops)
register_layer_kind("SeparableConv1D", "conv", _separable_flops)
register_layer_kind("SeparableConv2D", "conv", _separable_flops)
register_layer_kind("Dense", "dense", _dense_flops)
register_layer_kind("Embedding", "embedding", _embedding_flops)
for _name in ("MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
              "AveragePooling3D", "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
              "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "MaxPool2D", "AvgPool2D"):
    register_layer_kind(_name, "pool")
for _name in ("BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization",
              "Normalization"):
    register_layer_kind(_name, "normalization")
for _name in ("Activation", "ReLU", "Softmax", "LeakyReLU", "PReLU", "ELU", "ThresholdedReLU", "Dropout",
              "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise", "GaussianDropout", "AlphaDropout",
              "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Rescaling"):
    register_layer_kind(_name, "activation")
for _name in ("Flatten", "Reshape", "Permute", "RepeatVector", "Concatenate", "Cropping1D", "Cropping2D",
              "ZeroPadding1D", "ZeroPadding2D", "UpSampling1D", "UpSampling2D"):
    register_layer_kind(_name, "reshape")
# Known layers that run arbitrary or unusual code: kept on workers, no warning.
for _name in ("Lambda", "Dot", "TFOpLambda", "SlicingOpLambda"):
    register_layer_kind(_name, "other")
register_layer_kind("InputLayer", "input")


#: FLOPs per output element where TF's counter knows none of a layer's ops.
_ELEMENTWISE_FLOPS: dict[str, float] = {"activation": 1.0, "normalization": 4.0, "pool": 1.0}


def layer_kind(layer: Any, warn: bool) -> str:
    """The registered kind of ``layer``'s class; "other" (with a warning when ``warn``) if none."""
    name = type(layer).__name__
    kind = _KIND_BY_CLASS.get(name)
    if kind is None:
        if warn:
            warnings.warn(f"layer {layer.name!r} of class {name} has no registered kind; profiled as 'other', "
                          "it stays on the workers. Call ralp_tf.register_layer_kind("
                          f"{name!r}, KIND) to let the planners move it.", stacklevel=3)
        return "other"
    return kind


def _tf_counted_flops(layer: Any, in_tensors: Sequence[Any], single: bool) -> float:
    """Forward FLOPs per sample of ``layer`` counted by TF's profiler on a batch of 1."""
    import tensorflow as tf

    specs = [tf.TensorSpec([1] + list(shape_tuple(t)[1:]), t.dtype) for t in in_tensors]
    if any(d is None for s in specs for d in s.shape):
        return 0.0

    @tf.function
    def fn(*xs: Any) -> Any:
        return layer(xs[0] if single else list(xs), training=False)

    try:
        graph = fn.get_concrete_function(*specs).graph
        opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        opts["output"] = "none"
        stats = tf.compat.v1.profiler.profile(graph, options=opts)
        return float(stats.total_float_ops)
    except Exception as exc:  # TF's profiler has no stats for some ops; count nothing, say so.
        log.debug("FLOP counter failed on %s: %s", layer.name, exc)
        return 0.0


def shape_tuple(t: Any) -> tuple[int | None, ...]:
    """A tensor's shape as a tuple (None for unknown dimensions)."""
    return tuple(None if d is None else int(d) for d in t.shape)


def dtype_size(t: Any) -> int:
    import tensorflow as tf

    return tf.as_dtype(t.dtype).size


def prod(xs: Iterable[int | None]) -> int:
    """Product of sizes; unknown (None) dimensions count as 1."""
    out = 1
    for x in xs:
        out *= int(x) if x is not None else 1
    return out


def call_flops(layer: Any, kind: str, ins: Sequence[Any], outs: Sequence[Any]) -> tuple[float, str]:
    """Forward FLOPs per sample of one call of ``layer`` on tensors ``ins`` -> ``outs`` and where
    the figure comes from ("analytic", "tf_profiler", "elementwise" or "none")."""
    in_shapes = [shape_tuple(t)[1:] for t in ins]
    out_shapes = [shape_tuple(t)[1:] for t in outs]
    flops_fn = _FLOPS_BY_CLASS.get(type(layer).__name__)
    if kind == "input":
        return 0.0, "none"
    if flops_fn is not None:
        return float(flops_fn(layer, in_shapes, out_shapes)), "analytic"
    flops = _tf_counted_flops(layer, ins, single=len(ins) == 1)
    if flops == 0.0 and kind in _ELEMENTWISE_FLOPS:
        # TF's counter has no statistics for e.g. Relu or FusedBatchNorm: count per element.
        return _ELEMENTWISE_FLOPS[kind] * sum(prod(s) for s in out_shapes), "elementwise"
    return flops, "tf_profiler"
