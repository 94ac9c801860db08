"""A model as data: ``ModelProfile``, its layers (``LayerProfile``) and activations
(``TensorProfile``), with JSON round trip and validation. Pure: no TensorFlow.

For every layer (a unit of :mod:`ralp_tf.model.graph`, named by its path), in topological order,
a :class:`LayerProfile` records

* ``kind``: one of :data:`~ralp_tf.model.kinds.LAYER_KINDS`;
* ``param_bytes`` (all weights), ``var_bytes`` (each variable, in the layer's weight order) and
  ``var_shapes`` (each variable's shape; empty in profiles written without shapes);
* ``calls``: how many times the model calls the layer (a shared layer is called once per use);
* ``flops``: forward FLOPs per sample, summed over the calls (:mod:`ralp_tf.model.kinds`);
* ``output_bytes``: the output activation of one call, per sample;
* ``inbound``: the names of the layers feeding any of its calls;
* ``gathered``: per variable, how many of its rows the layer's calls look up (ids per sample
  and per batch; an embedding table, a composite layer's token and position tables), where the
  variable is not read whole;
* ``constraint_reads``: per variable, how often its constraint reads it (the optimizer applies it
  after each update, where the step runs);
* ``ps_refusal``: why the layer cannot compute on a PS task, empty when it can (model inputs,
  the plain TensorFlow ops of a model's own ``call``, stateful recurrent layers and layers with
  an op that has no CPU kernel cannot);
* ``measured_seconds``: optional forward+backward time for one batch on the local device, all
  calls together;
* ``device_seconds``: optional forward+backward times for one batch on a cluster's devices, by task
  (``"ps:1"``) or job (``"worker"``), measured there by ``ralp-tf calibrate``
  (:mod:`ralp_tf.plan.calibration`); they win over ``measured_seconds`` and FLOP rates for that task.

The model's activations are listed once per call in ``ModelProfile.tensors``: a
:class:`TensorProfile` per layer call, naming the layers that consume it, so a shared layer's
two outputs can go to different places. Profiles written without ``tensors`` (e.g. by hand)
get one tensor per layer, consumed by its successors. Model inputs appear as layers of kind
``"input"`` with no parameters. Reading a model into a profile is :mod:`ralp_tf.model.profiler`.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Sequence

import numpy as np

from ralp_tf.errors import ValidationError, parse_json
from ralp_tf.model.kinds import LAYER_KINDS
from ralp_tf.model.optimizers import DEFAULT_OPTIMIZER, sparse_update

__all__ = ["INPUT_REFUSAL", "OP_REFUSAL", "follows_inputs", "default_refusal", "gradient_flows", "LayerProfile", "TensorProfile",
           "ModelProfile", "check_batch_size"]


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
    var_shapes: tuple[tuple[int, ...], ...] = ()
    #: why the layer cannot compute on a PS task ("": it can)
    ps_refusal: str = ""
    #: per variable, the rows its calls look up: (ids per sample, ids per batch); (0, 0): read whole
    gathered: tuple[tuple[int, int], ...] = ()
    #: per variable, whether a weight regulariser of the layer reads it (then it is read whole
    #: where the loss is computed, and its gradient is dense)
    regularised: tuple[bool, ...] = ()
    #: per variable, how many times its constraint (``kernel_constraint=``, run by the optimizer after
    #: each update) reads it; 0: no constraint
    constraint_reads: tuple[int, ...] = ()
    #: a Dense layer's activation function by name ("": not recorded); a column split needs an
    #: elementwise one (:func:`ralp_tf.plan.shards.split_refusal`)
    activation: str = ""
    #: bytes per id of its row lookups (the ids' dtype: 8 for int64, 4 for int32 or the int32 an
    #: Embedding casts float ids to); what its ids and its sparse gradient's indices cost on the wire
    id_bytes: int = 4
    #: per variable, how often one call reads it (a recurrent loop's body reads it once per
    #: timestep: ``SimpleRNN``, ``RNN(cell)``, ``ConvLSTM2D``); () or 1: once
    loop_reads: tuple[int, ...] = ()
    #: forward+backward seconds for one batch on a cluster's device, by task key (``"ps:1"``) or job
    #: (``"worker"``), as ``(key, seconds)`` pairs; () when not calibrated
    device_seconds: tuple[tuple[str, float], ...] = ()

    def seconds_on(self, task: str, job: str) -> float | None:
        """The calibrated seconds of this layer on task ``task`` (``"worker:0"``), else on its job
        (``"worker"``); None when neither was measured."""
        found = dict(self.device_seconds)
        return found.get(task, found.get(job))

    @property
    def has_params(self) -> bool:
        return self.param_bytes > 0

    @property
    def untrainable_variables(self) -> int:
        """How many variables are not trainable: the trailing ones (Keras lists a layer's trainable
        weights first) whose bytes make up ``param_bytes - trainable_param_bytes``."""
        left, count = self.param_bytes - self.trainable_param_bytes, 0
        for v in reversed(self.var_bytes):
            if left <= 0:
                break
            left -= v
            count += 1
        return count

    def reads(self, index: int) -> int:
        """How often one step's calls read variable ``index`` whole: ``calls`` times its ``loop_reads``."""
        return self.calls * (self.loop_reads[index] if index < len(self.loop_reads) else 1)

    @property
    def looks_up_rows(self) -> bool:
        """Whether a call reads rows of a variable (an embedding, or ``gathered``), not it whole."""
        return self.kind == "embedding" or any(per_sample or per_batch for per_sample, per_batch in self.gathered)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["var_bytes"] = list(self.var_bytes)
        d["var_shapes"] = [list(s) for s in self.var_shapes]
        if d["ps_refusal"] == default_refusal(self.kind, self.name):
            del d["ps_refusal"]
        if any(a or b for a, b in self.gathered):
            d["gathered"] = [list(g) for g in self.gathered]
        else:
            del d["gathered"]
        if any(self.regularised):
            d["regularised"] = list(self.regularised)
        else:
            del d["regularised"]
        if any(self.constraint_reads):
            d["constraint_reads"] = list(self.constraint_reads)
        else:
            del d["constraint_reads"]
        if not self.activation:
            del d["activation"]
        if self.id_bytes == 4:
            del d["id_bytes"]
        if any(r > 1 for r in self.loop_reads):
            d["loop_reads"] = list(self.loop_reads)
        else:
            del d["loop_reads"]
        if self.device_seconds:
            d["device_seconds"] = dict(self.device_seconds)
        else:
            del d["device_seconds"]
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
        var_shapes = d.get("var_shapes", [])
        if not isinstance(var_shapes, list) or not all(
                isinstance(s, list) and all(_is_count(n) for n in s) for s in var_shapes) or (
                var_shapes and len(var_shapes) != len(var_bytes)):
            raise ValidationError(f"layer {name!r}: 'var_shapes' must be a list of shapes (lists of sizes), one per "
                                  "entry of 'var_bytes'")
        if not isinstance(inbound, list) or not all(isinstance(u, str) for u in inbound):
            raise ValidationError(f"layer {name!r}: 'inbound' must be a list of layer names")
        if not isinstance(shape, list) or not all(v is None or _is_count(v) for v in shape):
            raise ValidationError(f"layer {name!r}: 'output_shape' must be a list of sizes")
        measured = d.get("measured_seconds")
        if measured is not None:
            measured = _nonneg(d, "measured_seconds", name, float)
        gathered = d.get("gathered", [])
        if not isinstance(gathered, list) or not all(
                isinstance(g, list) and len(g) == 2 and all(_is_count(n) for n in g) for g in gathered) or (
                gathered and len(gathered) != len(var_bytes)):
            raise ValidationError(f"layer {name!r}: 'gathered' must be one [ids per sample, ids per batch] pair per "
                                  "entry of 'var_bytes'")
        regularised = d.get("regularised", [])
        if not isinstance(regularised, list) or not all(isinstance(r, bool) for r in regularised) or (
                regularised and len(regularised) != len(var_bytes)):
            raise ValidationError(f"layer {name!r}: 'regularised' must be one true/false per entry of 'var_bytes'")
        reads = d.get("constraint_reads", [])
        if not isinstance(reads, list) or not all(_is_count(r) for r in reads) or (reads and len(reads) != len(var_bytes)):
            raise ValidationError(f"layer {name!r}: 'constraint_reads' must be one count per entry of 'var_bytes'")
        refusal = d.get("ps_refusal", default_refusal(d["kind"], name))
        if not isinstance(refusal, str):
            raise ValidationError(f"layer {name!r}: 'ps_refusal' must be a string (empty: it can compute on a PS)")
        activation = d.get("activation", "")
        if not isinstance(activation, str):
            raise ValidationError(f"layer {name!r}: 'activation' must be the name of its activation function")
        id_bytes = d.get("id_bytes", 4)
        if id_bytes not in (4, 8) or isinstance(id_bytes, bool):
            raise ValidationError(f"layer {name!r}: 'id_bytes' must be 4 (int32 ids) or 8 (int64), got {id_bytes!r}")
        loops = d.get("loop_reads", [])
        if not isinstance(loops, list) or not all(_is_count(r) and r >= 1 for r in loops) or (
                loops and len(loops) != len(var_bytes)):
            raise ValidationError(f"layer {name!r}: 'loop_reads' must be one count (at least 1) per entry of "
                                  "'var_bytes'")
        calls = _nonneg(d, "calls", name, int, default=1)
        if calls < 1:
            raise ValidationError(f"layer {name!r}: 'calls' must be at least 1, got {calls}")
        return cls(var_bytes=tuple(int(v) for v in var_bytes), var_shapes=tuple(tuple(s) for s in var_shapes),
                   inbound=tuple(inbound), output_shape=tuple(shape),
                   measured_seconds=measured, calls=calls, ps_refusal=refusal,
                   gathered=tuple((int(a), int(b)) for a, b in gathered), regularised=tuple(regularised),
                   constraint_reads=tuple(int(r) for r in reads), activation=activation, id_bytes=int(id_bytes),
                   loop_reads=tuple(int(r) for r in loops),
                   device_seconds=_device_seconds(d.get("device_seconds", {}), name), **kw)


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
    """A model as data: layers in topological order, for a given per-worker batch size and the
    optimizer its step is priced with (a :data:`ralp_tf.model.optimizers.SPARSE_UPDATES` name).
    ``variable_order`` is every variable as ``(layer, index)`` in the order the model created them
    (ParameterServerStrategy's round-robin follows it; the topological order can differ: ctr_dnn's
    tables are created ``emb0`` first and listed ``emb3`` first); empty: the layers' order."""

    model_name: str
    batch_size: int
    layers: tuple[LayerProfile, ...]
    outputs: tuple[str, ...]
    tensors: tuple[TensorProfile, ...] = ()
    optimizer: str = DEFAULT_OPTIMIZER
    variable_order: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        sparse_update(self.optimizer)
        object.__setattr__(self, "_index", {l.name: i for i, l in enumerate(self.layers)})
        for name, i in self.variable_order:
            if name not in self._index or not 0 <= i < len(self.layer(name).var_bytes):  # type: ignore[attr-defined]
                raise ValidationError(f"model profile 'variable_order' names variable {i} of {name!r}, which the "
                                      "profile's layers do not hold; list [layer, index] pairs of its variables")

    def variables_in_creation_order(self) -> list[tuple[str, int]]:
        """Every ``(layer, index)``: ``variable_order``, then any it leaves out in the layers' order."""
        listed = list(dict.fromkeys(self.variable_order))
        seen = set(listed)
        return listed + [(l.name, i) for l in self.layers for i in range(len(l.var_bytes)) if (l.name, i) not in seen]

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
    def num_variables(self) -> int:
        return sum(len(l.var_bytes) for l in self.layers)

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample."""
        return sum(l.flops for l in self.layers)

    def gradient_flows(self) -> dict[str, bool]:
        """Layer -> whether a gradient flows into its output (:func:`gradient_flows`)."""
        order = {l.name: i for i, l in enumerate(self.layers)}
        flows = gradient_flows([l.trainable_param_bytes > 0 for l in self.layers],
                               [[order[u] for u in l.inbound] for l in self.layers])
        return {l.name: f for l, f in zip(self.layers, flows)}

    def successors(self, name: str) -> list[str]:
        return [l.name for l in self.layers if name in l.inbound]

    def is_chain(self) -> bool:
        return all(len(l.inbound) <= 1 for l in self.layers) and all(
            len(self.successors(l.name)) <= 1 for l in self.layers)

    def with_batch_size(self, batch_size: int) -> "ModelProfile":
        check_batch_size(batch_size)
        scaled = self.scaled_compute(batch_size / self.batch_size)
        return dataclasses.replace(scaled, batch_size=batch_size)

    def with_optimizer(self, optimizer: str) -> "ModelProfile":
        """This profile priced with ``optimizer`` (:mod:`ralp_tf.model.optimizers`)."""
        return self if optimizer == self.optimizer else dataclasses.replace(self, optimizer=optimizer)

    def scaled_compute(self, factor: float) -> "ModelProfile":
        """This profile with every measured layer time (``measured_seconds`` and ``device_seconds``)
        multiplied by ``factor``, e.g. the number of tasks sharing the cores; layers without a measured
        time and everything else are unchanged (``self`` itself when ``factor`` is 1)."""
        if factor == 1.0:
            return self
        return dataclasses.replace(self, layers=tuple(dataclasses.replace(
            l, measured_seconds=None if l.measured_seconds is None else l.measured_seconds * factor,
            device_seconds=tuple((k, v * factor) for k, v in l.device_seconds))
            for l in self.layers))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model_name": self.model_name, "batch_size": self.batch_size,
                             "outputs": list(self.outputs), "layers": [l.to_dict() for l in self.layers]}
        if self.tensors:
            d["tensors"] = [t.to_dict() for t in self.tensors]
        if self.optimizer != DEFAULT_OPTIMIZER:
            d["optimizer"] = self.optimizer
        if self.variable_order:
            d["variable_order"] = [[name, i] for name, i in self.variable_order]
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
        check_batch_size(batch)
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
        optimizer = d.get("optimizer", DEFAULT_OPTIMIZER)
        sparse_update(optimizer)
        raw_order = d.get("variable_order", [])
        if not isinstance(raw_order, list) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], int)
                and not isinstance(e[1], bool) for e in raw_order):
            raise ValidationError("model profile 'variable_order' must be a list of [layer name, variable index] pairs")
        return cls(model_name=str(d.get("model_name", "model")), batch_size=int(batch), layers=layers,
                   outputs=tuple(outputs), tensors=tensors, optimizer=optimizer,
                   variable_order=tuple((name, i) for name, i in raw_order))

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


#: ``ps_refusal`` of a model input.
INPUT_REFUSAL = "a model input: inputs stay on the workers"
#: ``ps_refusal`` of a plain TensorFlow op in a model's own ``call`` (an ``op:`` record): no
#: decision of a plan, it computes with its inputs (:func:`follows_inputs`).
OP_REFUSAL = ("a TensorFlow op of the model's own call, which computes with its inputs: on the PS task of its first "
              "input when every input is computed on a PS task, else on the worker")


def follows_inputs(layer: "LayerProfile") -> bool:
    """Whether ``layer`` is an ``op:`` record, which computes where its inputs are (on the PS task
    of its first producer when every producer computes on a PS task, else on the worker), whatever
    a plan says of it (:func:`ralp_tf.plan.traffic.resolve_placements`, :mod:`ralp_tf.place.op_placement`)."""
    return layer.kind == "other" and layer.name.rsplit("/", 1)[-1].startswith("op:") and layer.ps_refusal == OP_REFUSAL


def default_refusal(kind: str, name: str) -> str:
    """``ps_refusal`` of a profile layer written without one: inputs and ``op:`` records cannot
    compute on a PS; every other layer can."""
    if kind == "input":
        return INPUT_REFUSAL
    return OP_REFUSAL if kind == "other" and name.rsplit("/", 1)[-1].startswith("op:") else ""


def gradient_flows(trainable: Sequence[bool], inbound: Sequence[Sequence[int]]) -> list[bool]:
    """For layers in topological order: whether a gradient flows into layer i's output, i.e. layer
    i or a layer it is computed from has trainable parameters (``trainable[i]``; ``inbound[i]``: the
    indices of the layers feeding it, all before i)."""
    flows: list[bool] = []
    for i, preds in enumerate(inbound):
        flows.append(bool(trainable[i]) or any(flows[u] for u in preds))
    return flows


def _device_seconds(given: Any, layer: str) -> tuple[tuple[str, float], ...]:
    """A layer's ``device_seconds`` read from JSON (``{"worker": s, "ps:1": s}``); ValidationError otherwise."""
    if not isinstance(given, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in given.items()):
        raise ValidationError(f"layer {layer!r}: 'device_seconds' must map task keys or jobs (\"ps:1\", \"worker\") "
                              "to seconds >= 0")
    return tuple((k, float(v)) for k, v in given.items())


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _nonneg(d: Mapping[str, Any], key: str, layer: str, kind: type, default: Any = None) -> Any:
    v = d.get(key, default)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v and v != float("inf")
    if not ok or (kind is int and not float(v).is_integer()):
        raise ValidationError(f"layer {layer!r}: {key!r} must be a non-negative {'integer' if kind is int else 'number'}"
                              f", got {v!r}")
    return kind(v)


def check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValidationError(f"batch_size must be a positive integer, got {batch_size!r}; pass e.g. batch_size=32")
