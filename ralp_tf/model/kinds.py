"""Layer kinds and forward FLOP formulas: the registry the profiler and the planners share.

``register_layer_kind(class_name, kind, flops_fn)`` declares the kind of a layer class (one of
:data:`LAYER_KINDS`) and optionally its FLOP formula. Built-in formulas, forward FLOPs per
sample: conv ``2 * prod(kernel) * C_in/groups * output elements``; depthwise conv
``2 * prod(kernel) * output elements``; separable conv depthwise + pointwise; transposed conv
``2 * prod(kernel) * C_out * input elements``; dense ``2 * d_in * units * rows`` (+ the bias
adds); embedding one copy per output element; recurrent layers per sample
``2 * g * units * (d_in + units) * T`` over ``T`` steps with ``g`` = 4 (LSTM), 3 (GRU), 1 (SimpleRNN),
twice for ``Bidirectional``; multi-head attention ``2 T_q d_q h k + 2 T_v (d_k h k + d_v h v) +
2 T_q T_v h (k + v) + 2 T_q h v d_o`` (``h`` heads, key and value sizes ``k``, ``v``). A wrapper
(``TimeDistributed``) has its inner layer's kind. Other layers: TensorFlow's FLOP counter on the
layer's graph, or, where it counts nothing, one FLOP per output element for activations and
pools and four for normalizations.

:func:`ps_refusal` says why a layer cannot compute on a parameter-server task (a PS task is a
CPU device that serves every worker): a stateful recurrent layer keeps its state across steps,
an op without a CPU kernel cannot run there, and a loop the call runs itself (a ``tf.while_loop``
among its ops: ``SimpleRNN``, ``RNN(cell)``, ``ConvLSTM2D``; not ``LSTM``/``GRU``, whose loop is
inside a function) would have its gradient run on the worker.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Sequence

from ralp_tf.errors import ValidationError

__all__ = ["LAYER_KINDS", "PS_PLACEABLE_KINDS", "RALP_PS_KINDS", "FlopsFn", "register_layer_kind", "registered_kind",
           "layer_kind", "ps_refusal", "dense_activation", "shape_tuple", "dtype_size", "prod", "call_flops"]

log = logging.getLogger(__name__)

LAYER_KINDS: tuple[str, ...] = (
    "input", "conv", "pool", "dense", "embedding", "normalization", "activation", "reshape", "other",
    "recurrent", "attention",
)
#: Kinds that may compute on a parameter-server task (whether one layer can is its profile's
#: ``ps_refusal``: a stateful RNN, an op with no CPU kernel, a plain op of the model's own call cannot).
PS_PLACEABLE_KINDS = frozenset(LAYER_KINDS) - {"input"}
#: Kinds whose weights the RALP paper's rule moves to PS tasks (conv and normalization layers stay on
#: the workers): ``scheduler.ralp``'s baseline. ralp_tf's analyzer is not bound by it: any unit that
#: may compute on a PS is on its menu (:mod:`ralp_tf.plan.menu`).
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
for _name in ("Lambda", "Dot", "TFOpLambda", "SlicingOpLambda"):
    register_layer_kind(_name, "other")
register_layer_kind("InputLayer", "input")


def _rnn_flops(gates: int) -> FlopsFn:
    def flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
        steps, d_in = (ins[0][0] or 1), ins[0][-1]
        units = int(layer.units)
        return 2.0 * gates * units * (d_in + units) * steps

    return flops


_GATES = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}
for _name, _gates in _GATES.items():
    register_layer_kind(_name, "recurrent", _rnn_flops(_gates))


def _bidirectional_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    total = 0.0
    for rnn in (layer.forward_layer, layer.backward_layer):
        gates = _GATES.get(type(rnn).__name__)
        if gates is None:
            return 0.0  # an RNN of another cell: TensorFlow's counter
        total += _rnn_flops(gates)(rnn, ins, outs)
    return total


register_layer_kind("Bidirectional", "recurrent", _bidirectional_flops)
for _name in ("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "RNN"):
    register_layer_kind(_name, "recurrent")


def _attention_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    config = layer.get_config()
    heads, k = int(config["num_heads"]), int(config["key_dim"])
    v = int(config.get("value_dim") or k)
    t_q, d_q = (ins[0][0] or 1), ins[0][-1]
    value = ins[1] if len(ins) > 1 else ins[0]
    key = ins[2] if len(ins) > 2 and len(ins[2]) == len(value) else value
    t_v, d_v, d_k = (value[0] or 1), value[-1], key[-1]
    d_o = outs[0][-1]
    projections = 2.0 * t_q * d_q * heads * k + 2.0 * t_v * (d_k * heads * k + d_v * heads * v)
    return projections + 2.0 * t_q * t_v * heads * (k + v) + 2.0 * t_q * heads * v * d_o


register_layer_kind("MultiHeadAttention", "attention", _attention_flops)
for _name in ("Attention", "AdditiveAttention"):
    register_layer_kind(_name, "attention")

#: Wrapper layers whose kind is their inner layer's (``layer.layer``).
_WRAPPERS = frozenset({"TimeDistributed"})


#: FLOPs per output element where TF's counter knows none of a layer's ops.
_ELEMENTWISE_FLOPS: dict[str, float] = {"activation": 1.0, "normalization": 4.0, "pool": 1.0}


def registered_kind(layer: Any) -> str | None:
    """The kind registered for ``layer``'s class (by class name), or None."""
    return _KIND_BY_CLASS.get(type(layer).__name__)


def layer_kind(layer: Any) -> str:
    """``layer``'s kind: its class's registered kind; a wrapper's (``TimeDistributed``) is its inner
    layer's; "other" for a class with no registered kind (priced on its measured parameters, FLOPs
    and activations like any other layer)."""
    if type(layer).__name__ in _WRAPPERS and getattr(layer, "layer", None) is not None:
        return layer_kind(layer.layer)
    return registered_kind(layer) or "other"


def dense_activation(layer: Any) -> str:
    """The name of a ``Dense`` layer's activation function (``relu``, ``softmax``), else ``""``."""
    import tf_keras

    if not isinstance(layer, tf_keras.layers.Dense):
        return ""
    fn = getattr(layer, "activation", None)
    return str(getattr(fn, "__name__", type(fn).__name__))


def ps_refusal(layer: Any, op_types: Iterable[str] = ()) -> str:
    """Why ``layer`` cannot compute on a PS task ("" when it can; module docstring); ``op_types``
    are the types of the ops its call creates."""
    inner = [layer, getattr(layer, "layer", None), getattr(layer, "forward_layer", None),
             getattr(layer, "backward_layer", None)]
    if any(getattr(l, "stateful", False) is True for l in inner if l is not None):
        return ("a stateful recurrent layer: its state carries from one batch to the next of the worker that "
                "runs it, so it stays on the workers")
    from ralp_tf.model.keras_compat import kernel_devices

    op_types = tuple(op_types)
    if {"While", "StatelessWhile"} & set(op_types):
        return ("its call runs a loop of its own (a recurrent layer's timesteps: SimpleRNN, RNN(cell), "
                "ConvLSTM2D); computed on a PS task, TensorFlow builds the loop's gradient in a function "
                "without a device, which runs on the worker and moves the loop's state every iteration "
                "(measured: SimpleRNN(256) on the PS, 140 MB a step), so it stays on the workers")
    for op_type in op_types:
        try:
            devices = kernel_devices(op_type)
        except Exception:  # an op TensorFlow cannot look up: judged when it runs, like any other
            continue
        if devices and "CPU" not in devices:
            return f"its op {op_type} has no CPU kernel ({', '.join(sorted(devices))} only), and PS tasks run on CPUs"
    return ""


def _tf_counted_flops(layer: Any, call: Any) -> float:
    """Forward FLOPs per sample of ``layer`` counted by TF's profiler on a batch of 1 (``call``: the
    recorded :class:`~ralp_tf.model.trace.LayerCall`, repeated on batch-1 inputs)."""
    import tensorflow as tf

    specs = [tf.TensorSpec([1] + list(shape_tuple(t)[1:]), t.dtype) for t in call.inputs]
    if any(d is None for s in specs for d in s.shape):
        return 0.0

    @tf.function
    def fn(*xs: Any) -> Any:
        args, kwargs = call.rebuild(xs)
        if "training" in kwargs:
            kwargs = dict(kwargs, training=False)
        return layer(*args, **kwargs)

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


def call_flops(layer: Any, kind: str, call: Any) -> tuple[float, str]:
    """Forward FLOPs per sample of one recorded call of ``layer`` (a
    :class:`~ralp_tf.model.trace.LayerCall`) and where the figure comes from ("analytic",
    "tf_profiler", "elementwise" or "none")."""
    in_shapes = [shape_tuple(t)[1:] for t in call.inputs]
    out_shapes = [shape_tuple(t)[1:] for t in call.outputs]
    flops_fn = _FLOPS_BY_CLASS.get(type(layer).__name__)
    if kind == "input":
        return 0.0, "none"
    if flops_fn is not None:
        return float(flops_fn(layer, in_shapes, out_shapes)), "analytic"
    flops = _tf_counted_flops(layer, call)
    if flops == 0.0 and kind in _ELEMENTWISE_FLOPS:
        # TF's counter has no statistics for e.g. Relu or FusedBatchNorm: count per element.
        return _ELEMENTWISE_FLOPS[kind] * sum(prod(s) for s in out_shapes), "elementwise"
    return flops, "tf_profiler"
