"""Profile a tf_keras model layer by layer: ``model -> ModelProfile``.

For every layer, in topological order, a :class:`LayerProfile` records

* ``kind``: one of :data:`LAYER_KINDS`, from :func:`register_layer_kind`'s registry
  (unknown classes become ``"other"`` with a warning; "other" layers stay on workers);
* ``param_bytes`` (all weights) and ``var_bytes`` (each variable, in creation order);
* ``calls``: how many times the model calls the layer (a shared layer is called once per use);
* ``flops``: forward FLOPs per sample, summed over the calls. Analytic for conv
  (``2 * prod(kernel) * C_in/groups * output elements``), dense (``2 * d_in * units * rows``)
  and embedding (one copy per output element); otherwise TensorFlow's FLOP counter on the
  layer's graph;
* ``output_bytes``: the output activation of one call, per sample;
* ``inbound``: the names of the layers feeding any of its calls;
* ``measured_seconds``: optional forward+backward time for one batch on the local device, all
  calls together.

The model's activations are listed once per call in ``ModelProfile.tensors``: a
:class:`TensorProfile` per layer call, naming the layers that consume it, so a shared layer's
two outputs can go to different places. Profiles written without ``tensors`` (e.g. by hand)
get one tensor per layer, consumed by its successors.

Model inputs appear as layers of kind ``"input"`` with no parameters.
This module and the applier are the only ones that touch the TF runtime.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ralp_tf.errors import KerasVersionError, ModelError, ValidationError, parse_json

log = logging.getLogger(__name__)

LAYER_KINDS: tuple[str, ...] = (
    "input", "conv", "pool", "dense", "embedding", "normalization", "activation", "reshape", "other",
)
#: Kinds RALP may compute on a parameter-server task.
PS_PLACEABLE_KINDS = frozenset({"conv", "pool", "dense", "embedding", "normalization", "activation", "reshape"})
#: Kinds the RALP analyzer moves to PS tasks: weight-heavy, compute-light.
RALP_PS_KINDS = frozenset({"dense", "embedding"})

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


def _prod(xs: Iterable[int | None]) -> int:
    out = 1
    for x in xs:
        out *= int(x) if x is not None else 1
    return out


def _conv_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    kernel = layer.kernel_size
    groups = getattr(layer, "groups", 1) or 1
    c_in = ins[0][-1] if layer.data_format == "channels_last" else ins[0][0]
    return 2.0 * _prod(kernel) * (c_in / groups) * _prod(outs[0])


def _depthwise_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    return 2.0 * _prod(layer.kernel_size) * _prod(outs[0])


def _separable_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    c_in = ins[0][-1]
    spatial = _prod(outs[0][:-1])
    depthwise = 2.0 * _prod(layer.kernel_size) * c_in * layer.depth_multiplier * spatial
    pointwise = 2.0 * c_in * layer.depth_multiplier * _prod(outs[0])
    return depthwise + pointwise


def _conv_transpose_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    c_out = outs[0][-1]
    return 2.0 * _prod(layer.kernel_size) * c_out * _prod(ins[0])


def _dense_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    d_in = ins[0][-1]
    rows = _prod(ins[0][:-1])
    return 2.0 * d_in * layer.units * rows + (layer.units * rows if layer.use_bias else 0)


def _embedding_flops(layer: Any, ins: Sequence[tuple], outs: Sequence[tuple]) -> float:
    return float(_prod(outs[0]))


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


@dataclasses.dataclass(frozen=True)
class LayerProfile:
    """One layer of a profiled model. Sizes are bytes; ``flops`` and ``output_bytes`` are per sample."""

    name: str
    kind: str
    class_name: str
    param_bytes: int
    trainable_param_bytes: int
    var_bytes: tuple[int, ...]
    flops: float
    flops_source: str
    output_bytes: int
    inbound: tuple[str, ...]
    output_shape: tuple[int | None, ...] = ()
    measured_seconds: float | None = None
    calls: int = 1

    @property
    def has_params(self) -> bool:
        return self.param_bytes > 0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["var_bytes"] = list(self.var_bytes)
        d["inbound"] = list(self.inbound)
        d["output_shape"] = list(self.output_shape)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LayerProfile":
        """Read one layer; raise ValidationError naming the field on any malformed value."""
        if not isinstance(d, Mapping):
            raise ValidationError(f"a layer profile is a JSON object, got {type(d).__name__}")
        missing = {"name", "kind", "param_bytes", "flops", "output_bytes", "inbound"} - set(d)
        if missing:
            raise ValidationError(f"layer profile {d.get('name', '?')!r} lacks field(s) {sorted(missing)}")
        name = d["name"]
        if not isinstance(name, str) or not name:
            raise ValidationError(f"layer profile 'name' must be a non-empty string, got {name!r}")
        if not isinstance(d["kind"], str) or d["kind"] not in LAYER_KINDS:
            raise ValidationError(f"layer {name!r}: kind {d['kind']!r} is not one of {', '.join(LAYER_KINDS)}")
        param_bytes = _nonneg(d, "param_bytes", name, int)
        kw: dict[str, Any] = {
            "name": name, "kind": d["kind"], "class_name": str(d.get("class_name", d["kind"])),
            "param_bytes": param_bytes,
            "trainable_param_bytes": _nonneg(d, "trainable_param_bytes", name, int, default=param_bytes),
            "flops": _nonneg(d, "flops", name, float), "flops_source": str(d.get("flops_source", "given")),
            "output_bytes": _nonneg(d, "output_bytes", name, int),
        }
        var_bytes = d.get("var_bytes", [param_bytes] if param_bytes else [])
        inbound = d["inbound"]
        shape = d.get("output_shape", [])
        if not isinstance(var_bytes, list) or not all(_is_count(v) for v in var_bytes):
            raise ValidationError(f"layer {name!r}: 'var_bytes' must be a list of byte counts")
        if not isinstance(inbound, list) or not all(isinstance(u, str) for u in inbound):
            raise ValidationError(f"layer {name!r}: 'inbound' must be a list of layer names")
        if not isinstance(shape, list) or not all(v is None or _is_count(v) for v in shape):
            raise ValidationError(f"layer {name!r}: 'output_shape' must be a list of sizes")
        measured = d.get("measured_seconds")
        if measured is not None:
            measured = _nonneg(d, "measured_seconds", name, float)
        calls = _nonneg(d, "calls", name, int, default=1)
        if calls < 1:
            raise ValidationError(f"layer {name!r}: 'calls' must be at least 1, got {calls}")
        return cls(var_bytes=tuple(int(v) for v in var_bytes), inbound=tuple(inbound), output_shape=tuple(shape),
                   measured_seconds=measured, calls=calls, **kw)


@dataclasses.dataclass(frozen=True)
class TensorProfile:
    """The output of one call of ``producer``: ``bytes`` per sample, read by ``consumers``
    (layer names) and, when ``is_output``, by the loss."""

    producer: str
    bytes: int
    consumers: tuple[str, ...]
    is_output: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"producer": self.producer, "bytes": self.bytes, "consumers": list(self.consumers),
                "is_output": self.is_output}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TensorProfile":
        """Read one tensor; raise ValidationError naming the field on any malformed value."""
        if not isinstance(d, Mapping) or not isinstance(d.get("producer"), str):
            raise ValidationError("a tensor profile is a JSON object with a 'producer' layer name")
        consumers = d.get("consumers", [])
        if not isinstance(consumers, list) or not all(isinstance(c, str) for c in consumers):
            raise ValidationError(f"tensor of {d['producer']!r}: 'consumers' must be a list of layer names")
        is_output = d.get("is_output", False)
        if not isinstance(is_output, bool):
            raise ValidationError(f"tensor of {d['producer']!r}: 'is_output' must be true or false")
        return cls(producer=d["producer"], bytes=_nonneg(d, "bytes", d["producer"], int),
                   consumers=tuple(consumers), is_output=is_output)


@dataclasses.dataclass(frozen=True)
class ModelProfile:
    """A model as data: layers in topological order, for a given per-worker batch size."""

    model_name: str
    batch_size: int
    layers: tuple[LayerProfile, ...]
    outputs: tuple[str, ...]
    tensors: tuple[TensorProfile, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {l.name: i for i, l in enumerate(self.layers)})

    def activation_tensors(self) -> tuple[TensorProfile, ...]:
        """Every activation, one per layer call (see the module docstring)."""
        if self.tensors:
            return self.tensors
        return tuple(TensorProfile(l.name, l.output_bytes, tuple(self.successors(l.name)), l.name in self.outputs)
                     for l in self.layers)

    def layer(self, name: str) -> LayerProfile:
        try:
            return self.layers[self._index[name]]  # type: ignore[attr-defined]
        except KeyError:
            raise ValidationError(f"model {self.model_name!r} has no layer {name!r}") from None

    def index(self, name: str) -> int:
        return self._index[name]  # type: ignore[attr-defined]

    @property
    def names(self) -> list[str]:
        return [l.name for l in self.layers]

    @property
    def compute_layers(self) -> list[LayerProfile]:
        """All layers except model inputs."""
        return [l for l in self.layers if l.kind != "input"]

    @property
    def param_bytes(self) -> int:
        return sum(l.param_bytes for l in self.layers)

    @property
    def trainable_param_bytes(self) -> int:
        return sum(l.trainable_param_bytes for l in self.layers)

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample."""
        return sum(l.flops for l in self.layers)

    def successors(self, name: str) -> list[str]:
        return [l.name for l in self.layers if name in l.inbound]

    def is_chain(self) -> bool:
        return all(len(l.inbound) <= 1 for l in self.layers) and all(
            len(self.successors(l.name)) <= 1 for l in self.layers)

    def with_batch_size(self, batch_size: int) -> "ModelProfile":
        _check_batch_size(batch_size)
        scaled = self.scaled_compute(batch_size / self.batch_size)
        return dataclasses.replace(scaled, batch_size=batch_size)

    def scaled_compute(self, factor: float) -> "ModelProfile":
        """This profile with every measured layer time (``measured_seconds``) multiplied by
        ``factor``, e.g. the number of tasks sharing the cores; layers without a measured time
        and everything else are unchanged (``self`` itself when ``factor`` is 1)."""
        if factor == 1.0:
            return self
        return dataclasses.replace(self, layers=tuple(dataclasses.replace(
            l, measured_seconds=None if l.measured_seconds is None else l.measured_seconds * factor)
            for l in self.layers))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model_name": self.model_name, "batch_size": self.batch_size,
                             "outputs": list(self.outputs), "layers": [l.to_dict() for l in self.layers]}
        if self.tensors:
            d["tensors"] = [t.to_dict() for t in self.tensors]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ModelProfile":
        """Read a profile; raise ValidationError naming the problem on malformed input."""
        if not isinstance(d, Mapping) or not isinstance(d.get("layers"), list):
            raise ValidationError("a model profile is a JSON object with a 'layers' list")
        layers = tuple(LayerProfile.from_dict(l) for l in d["layers"])
        names = [l.name for l in layers]
        if len(set(names)) != len(names):
            raise ValidationError("model profile has duplicate layer names")
        seen: set[str] = set()
        for l in layers:
            unknown = [u for u in l.inbound if u not in seen]
            if unknown:
                raise ValidationError(f"layer {l.name!r} reads {unknown} which do not come before it; list layers in "
                                      "topological order and name only existing layers in 'inbound'")
            seen.add(l.name)
        outputs = d.get("outputs") or ([layers[-1].name] if layers else [])
        if not isinstance(outputs, list) or not all(isinstance(o, str) and o in seen for o in outputs):
            raise ValidationError("model profile 'outputs' must list names of its layers")
        batch = d.get("batch_size", 1)
        _check_batch_size(batch)
        raw_tensors = d.get("tensors", [])
        if not isinstance(raw_tensors, list):
            raise ValidationError("model profile 'tensors' must be a list")
        tensors = tuple(TensorProfile.from_dict(t) for t in raw_tensors)
        order = {name: i for i, name in enumerate(names)}
        for t in tensors:
            if t.producer not in order:
                raise ValidationError(f"tensor producer {t.producer!r} is not a layer of the profile")
            unknown = [c for c in t.consumers if c not in order]
            if unknown:
                raise ValidationError(f"tensor of {t.producer!r} is consumed by {unknown}, which are not layers of "
                                      "the profile; name only its layers in 'consumers'")
        return cls(model_name=str(d.get("model_name", "model")), batch_size=int(batch), layers=layers,
                   outputs=tuple(outputs), tensors=tensors)

    @classmethod
    def from_json(cls, text: str | bytes) -> "ModelProfile":
        return cls.from_dict(parse_json(text, ValidationError, "model profile"))

    def summary(self) -> str:
        """A fixed-width table of the profile."""
        rows = [f"{'layer':<24} {'kind':<13} {'params MB':>10} {'MFLOP/sample':>13} {'out KB/sample':>13}"]
        for l in self.layers:
            rows.append(f"{l.name[:24]:<24} {l.kind:<13} {l.param_bytes / 1e6:>10.3f} "
                        f"{l.flops / 1e6:>13.2f} {l.output_bytes / 1e3:>13.2f}")
        rows.append(f"{'total':<24} {'':<13} {self.param_bytes / 1e6:>10.3f} {self.flops / 1e6:>13.2f}")
        return "\n".join(rows)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _nonneg(d: Mapping[str, Any], key: str, layer: str, kind: type, default: Any = None) -> Any:
    v = d.get(key, default)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v and v != float("inf")
    if not ok or (kind is int and not float(v).is_integer()):
        raise ValidationError(f"layer {layer!r}: {key!r} must be a non-negative {'integer' if kind is int else 'number'}"
                              f", got {v!r}")
    return kind(v)


def _check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValidationError(f"batch_size must be a positive integer, got {batch_size!r}; pass e.g. batch_size=32")


def check_tf_keras_model(model: Any) -> None:
    """Raise a clear error unless ``model`` is a built tf_keras Sequential or Functional model."""
    import tf_keras

    module = type(model).__module__
    if not isinstance(model, tf_keras.Model):
        if module.startswith("keras") and not module.startswith("keras.src.legacy"):
            raise KerasVersionError(
                f"{type(model).__name__} is a Keras 3 model; ParameterServerStrategy training needs tf_keras "
                "(Keras 2). Build it with `import tf_keras as keras` (pip install tf-keras==2.21.*), or set "
                "TF_USE_LEGACY_KERAS=1 before importing tensorflow so that tf.keras is tf_keras.")
        raise ModelError(f"expected a tf_keras.Model, got {type(model).__name__}")
    if not getattr(model, "_is_graph_network", False):
        if isinstance(model, tf_keras.Sequential) and not model.built:
            raise ModelError(f"Sequential model {model.name!r} is not built; give its first layer an "
                             "input_shape or call model.build((None, ...)) before profiling or placing it")
        raise ModelError(f"model {model.name!r} is subclassed and has no layer graph; write it as a "
                         "Sequential or Functional tf_keras model so its layers can be profiled and placed")


def _model_nodes(model: Any) -> list[Any]:
    """The model's own nodes, inputs first (topological order)."""
    nodes: list[Any] = []
    for depth in sorted(model._nodes_by_depth.keys(), reverse=True):
        nodes.extend(model._nodes_by_depth[depth])
    return nodes


def _shape_tuple(t: Any) -> tuple[int | None, ...]:
    return tuple(None if d is None else int(d) for d in t.shape)


def _dtype_size(t: Any) -> int:
    import tensorflow as tf

    return tf.as_dtype(t.dtype).size


def _layer_kind(layer: Any, warn: bool) -> str:
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

    specs = [tf.TensorSpec([1] + list(_shape_tuple(t)[1:]), t.dtype) for t in in_tensors]
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


def _node_key(t: Any) -> tuple[str, int]:
    """(layer name, call index) of the layer call that produced the symbolic tensor ``t``."""
    history = t._keras_history
    return history.layer.name, int(history.node_index)


def _call_profile(layer: Any, node: Any, kind: str) -> tuple[list[Any], list[tuple], list[Any], float, str, int]:
    """Inputs, output shapes, outputs, forward FLOPs per sample (and their source) and output bytes
    per sample of one call of ``layer``."""
    outs = _flatten(node.outputs)
    ins = _flatten(node.keras_inputs) if kind != "input" else []
    in_shapes = [_shape_tuple(t)[1:] for t in ins]
    out_shapes = [_shape_tuple(t)[1:] for t in outs]
    flops_fn = _FLOPS_BY_CLASS.get(type(layer).__name__)
    if kind == "input":
        flops, source = 0.0, "none"
    elif flops_fn is not None:
        flops, source = float(flops_fn(layer, in_shapes, out_shapes)), "analytic"
    else:
        flops, source = _tf_counted_flops(layer, ins, single=len(ins) == 1), "tf_profiler"
        if flops == 0.0 and kind in _ELEMENTWISE_FLOPS:
            # TF's counter has no statistics for e.g. Relu or FusedBatchNorm: count per element.
            flops = _ELEMENTWISE_FLOPS[kind] * sum(_prod(s) for s in out_shapes)
            source = "elementwise"
    out_bytes = int(sum(_prod(s) * _dtype_size(t) for s, t in zip(out_shapes, outs)))
    return ins, out_shapes, outs, flops, source, out_bytes


def profile(model: Any, batch_size: int = 32, *, measure: bool = False, measure_repeats: int = 5,
            warn_unknown: bool = True) -> ModelProfile:
    """Profile a built tf_keras Sequential or Functional model (see the module docstring)."""
    _check_batch_size(batch_size)
    check_tf_keras_model(model)
    calls: dict[str, list[tuple[Any, ...]]] = {}
    tensors: dict[tuple[str, int], dict[str, Any]] = {}
    for node in _model_nodes(model):  # topological order: every call's inputs are known before it
        layer = node.layer
        kind = _layer_kind(layer, warn_unknown and layer.name not in calls)
        info = _call_profile(layer, node, kind)
        calls.setdefault(layer.name, []).append((layer, kind, *info))
        ins, outs = info[0], info[2]
        for t in ins:
            consumers = tensors[_node_key(t)]["consumers"]
            if layer.name not in consumers:
                consumers.append(layer.name)
        tensors[_node_key(outs[0])] = {"producer": layer.name, "bytes": info[5], "consumers": []}
    layers: list[LayerProfile] = []
    for name, infos in calls.items():
        layer, kind, ins, out_shapes, _, _, source, out_bytes = infos[0]
        earlier = {l.name for l in layers}
        inbound = [_node_key(t)[0] for info in infos for t in info[2]]
        var_bytes = tuple(int(np.prod(v.shape)) * v.dtype.size for v in layer.weights)
        trainable = sum(int(np.prod(v.shape)) * v.dtype.size for v in layer.trainable_weights)
        measured = None
        if measure and kind != "input":
            measured = _measure_layer(layer, ins, batch_size, measure_repeats) * len(infos)
        layers.append(LayerProfile(
            name=name, kind=kind, class_name=type(layer).__name__, param_bytes=sum(var_bytes),
            trainable_param_bytes=trainable, var_bytes=var_bytes, flops=sum(info[5] for info in infos),
            flops_source=source, output_bytes=out_bytes,
            inbound=tuple(dict.fromkeys(u for u in inbound if u in earlier)),
            output_shape=out_shapes[0] if len(out_shapes) == 1 else (), measured_seconds=measured,
            calls=len(infos)))
    output_keys = {_node_key(t) for t in _flatten(model.outputs)}
    outputs = tuple(dict.fromkeys(key[0] for key in sorted(output_keys, key=lambda k: list(calls).index(k[0]))))
    tensor_profiles = tuple(TensorProfile(t["producer"], t["bytes"], tuple(t["consumers"]), key in output_keys)
                            for key, t in tensors.items())
    return ModelProfile(model_name=model.name, batch_size=int(batch_size), layers=tuple(layers), outputs=outputs,
                        tensors=tensor_profiles)


def _flatten(x: Any) -> list[Any]:
    import tensorflow as tf

    return list(tf.nest.flatten(x))


def _random_input(t: Any, batch_size: int, layer: Any) -> Any:
    import tensorflow as tf

    shape = [batch_size] + [d or 1 for d in _shape_tuple(t)[1:]]
    dtype = tf.as_dtype(t.dtype)
    if dtype.is_integer:
        high = int(getattr(layer, "input_dim", 2))
        return tf.random.uniform(shape, 0, max(high, 1), dtype=dtype)
    return tf.random.normal(shape, dtype=dtype)


def _measure_layer(layer: Any, ins: Sequence[Any], batch_size: int, repeats: int) -> float:
    """Median wall time of one forward+backward pass of ``layer`` on a batch, local device."""
    import tensorflow as tf

    xs = [_random_input(t, batch_size, layer) for t in ins]
    single = len(xs) == 1

    @tf.function
    def step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            for x in xs:
                if x.dtype.is_floating:
                    tape.watch(x)
            y = layer(xs[0] if single else list(xs), training=True)
            loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in tf.nest.flatten(y)])
        sources = [x for x in xs if x.dtype.is_floating] + list(layer.trainable_weights)
        grads = tape.gradient(loss, sources) if sources else []
        return [g for g in grads if g is not None] or [loss]

    step(*xs)
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = step(*xs)
        _ = [o.numpy() if hasattr(o, "numpy") else o for o in tf.nest.flatten(out)]
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
