"""Record a model's unit calls by running it once on symbolic inputs: the profiler's view of any
tf_keras model (Sequential, Functional, subclassed, nested).

:func:`trace_calls` calls the model once inside a ``tf.function`` trace (nothing runs), with a
recorder on the ``call`` of every unit of :func:`ralp_tf.model.graph.walk`:

* every call records its input and output tensors (positional and keyword arguments alike,
  masks included) and the types of the ops it created; an input produced by another unit's
  call is an edge from that call;
* tensors produced by plain TensorFlow ops in a container's own Python code (``x + y`` in a
  subclassed model's ``call``) become one *op* record each, named ``op:<OpType>`` (``_1``,
  ``_2`` ... after the first of a type; ``<container path>/op:...`` inside a nested model), fed by
  the calls it reads, so the cost model still sees where activations travel. Identity ops and
  dtype casts are looked through;
* calls appear in the order they ran, which is a topological order.

:func:`input_signature` says what the model is called with: the structure its ``call`` takes
(one tensor, a list, a dict), each input's stable name, and the length given to dimensions of
variable length (``keras.Input(shape=(None,))``).

A model whose ``call`` cannot be traced (Python control flow on tensor values, ops that need
concrete data) raises :class:`~ralp_tf.errors.ModelError` naming the unit that failed.
"""
from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, Hashable, Iterator, Sequence

from ralp_tf.errors import ModelError
from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph, is_container, is_generated_name, walk

__all__ = ["Gather", "LayerCall", "Trace", "InputSignature", "input_signature", "trace_calls", "TRANSPARENT_OPS"]

#: Ops whose outputs depend on a tensor's shape only, not its values.
_SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
#: Ops looked through when following a tensor back to the call that produced it (``Cast``: the
#: dtype casts tf_keras inserts before a layer's ``call`` under a mixed-precision policy).
TRANSPARENT_OPS = frozenset({"Identity", "IdentityN", "StopGradient", "Cast"})


@dataclasses.dataclass(frozen=True)
class Gather:
    """A row lookup a unit's call makes in one of its variables (``layer.weights[variable]``): ids
    taken from the data (``ids_per_sample`` per sample, from model input ``source`` when they come
    from one unchanged in value) or computed in the call (``ids_per_batch`` per batch, e.g. the
    positions ``tf.range(length)`` of a position embedding)."""

    variable: int
    ids_per_sample: int = 0
    ids_per_batch: int = 0
    source: int | None = None
    #: bytes per id (the ids' dtype)
    id_bytes: int = 4


@dataclasses.dataclass
class LayerCall:
    """One call of a unit (``layer`` None for a model input or a plain-op record).

    ``arguments`` is ``(args, kwargs)`` of the call as made, symbolic tensors inside, so the call
    can be repeated on other tensors (:meth:`rebuild`); ``op_types`` the types of the ops it
    created in the traced graph; ``gathers`` the row lookups it made in its variables; ``loop_reads``
    per variable of the layer, how often one call reads it (1, or the iterations of a loop whose
    body reads it: a ``SimpleRNN``'s or a generic ``RNN(cell)``'s kernel, once per timestep)."""

    name: str
    layer: Any
    inputs: list[Any]
    outputs: list[Any]
    in_keys: list[Hashable]
    out_key: Hashable
    op_type: str | None = None
    arguments: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})
    op_types: tuple[str, ...] = ()
    gathers: tuple[Gather, ...] = ()
    loop_reads: tuple[int, ...] = ()

    def rebuild(self, tensors: Sequence[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``arguments`` with its tensors, in order, replaced by ``tensors``."""
        import tensorflow as tf

        flat = tf.nest.flatten(self.arguments)
        it = iter(tensors)
        replaced = [next(it) if tf.is_symbolic_tensor(x) else x for x in flat]
        return tf.nest.pack_sequence_as(self.arguments, replaced)


@dataclasses.dataclass
class Trace:
    """Every call, in the order it ran; the keys and tensors of what the model returns."""

    calls: list[LayerCall]
    output_keys: set[Hashable]
    outputs: list[Any] = dataclasses.field(default_factory=list)
    output_structure: Any = None


@dataclasses.dataclass(frozen=True)
class InputSignature:
    """What a model is called with: ``structure`` (a ``tf.TensorSpec``, or a list, tuple or dict of
    them, batch dimension None), the stable name of each input in ``tf.nest.flatten`` order, and
    the ``sequence_length`` given to its dimensions of variable length (None: it has none)."""

    structure: Any
    names: tuple[str, ...]
    sequence_length: int | None = None

    @property
    def flat(self) -> list[Any]:
        import tensorflow as tf

        return list(tf.nest.flatten(self.structure))

    def with_batch(self, batch_size: int | None) -> Any:
        """``structure`` with the batch dimension set to ``batch_size``."""
        import tensorflow as tf

        return tf.nest.map_structure(lambda s: tf.TensorSpec([batch_size, *s.shape[1:]], s.dtype, s.name),
                                     self.structure)

    def pack(self, flat: Sequence[Any]) -> Any:
        """``flat`` values (in ``names`` order) in the structure the model's ``call`` takes."""
        import tensorflow as tf

        return tf.nest.pack_sequence_as(self.structure, list(flat))


def input_signature(model: Any, input_shape: Any = None, sequence_length: int | None = None,
                    graph: ModelGraph | None = None) -> InputSignature:
    """The :class:`InputSignature` of ``model``: from ``input_shape`` (a shape or a list of shapes,
    with or without a leading None batch dimension; float32), else the model's own inputs
    (Functional), the inputs it was last called with, or its build shape. Dimensions of variable
    length get ``sequence_length``, or the one ``input_length`` the model's Embedding layers
    declare; with neither, ModelError names the input and the fix."""
    import tensorflow as tf

    structure = _raw_structure(model, input_shape)
    flat = list(tf.nest.flatten(structure))
    names = _input_names(model, structure, len(flat))
    needs_length = [n for n, s in zip(names, flat) if any(d is None for d in s.shape[1:])]
    length = None
    if needs_length:
        length = sequence_length or _declared_length(graph or walk(model))
        if length is None:
            raise ModelError(
                f"input {needs_length[0]!r} of model {model.name!r} has a dimension of variable length (shape "
                f"{tuple(flat[names.index(needs_length[0])].shape)}); pass sequence_length=N (command line: "
                "--sequence-length N), the length ralp_tf profiles, plans and trains it at")
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ModelError(f"sequence_length must be a positive integer, got {length!r}")
    fixed = tf.nest.map_structure(
        lambda s: tf.TensorSpec([None, *[length if d is None else d for d in s.shape[1:]]], s.dtype, s.name),
        structure)
    return InputSignature(fixed, tuple(names), length if needs_length else None)


def _raw_structure(model: Any, input_shape: Any) -> Any:
    import tensorflow as tf

    if input_shape is not None:
        shapes = input_shape if input_shape and isinstance(input_shape[0], (list, tuple)) else [input_shape]
        specs = [tf.TensorSpec(list(s) if s and s[0] is None else [None, *s], tf.float32) for s in shapes]
        return specs if len(specs) > 1 else specs[0]
    if keras_compat.is_graph_network(model):
        return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), model.input)
    spec = model.save_spec()
    if spec is not None:
        args, _ = spec
        return tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape[1:]], s.dtype), args[0])
    shape = (model.get_build_config() or {}).get("input_shape")
    if shape is not None:
        return _raw_structure(model, tuple(shape) if not isinstance(shape, (list, tuple)) else shape)
    raise ModelError(f"model {model.name!r} has never been called and has no input shape; pass input_shape=(...) "
                     "(without the batch dimension), or call model.build((None, ...)) first")


def _input_names(model: Any, structure: Any, count: int) -> list[str]:
    """Dict keys for dict inputs; else the input layers' own names where the user gave them, by
    position (``input``, ``input_1``, ...) otherwise (tf_keras's own ``input_3``, or a Sequential
    model's ``<first layer>_input`` when that layer's name is generated)."""
    import tensorflow as tf

    if isinstance(structure, dict):
        return [str(k) for k in sorted(structure)]
    given = list(getattr(model, "input_names", None) or []) if keras_compat.is_graph_network(model) else []
    names: list[str] = []
    for i in range(count):
        name = given[i] if i < len(given) and not _generated_input_name(given[i]) else None
        names.append(name or ("input" if i == 0 else f"input_{i}"))
    return names


def _generated_input_name(name: str) -> bool:
    if re.fullmatch(r"input(_\d+)?", name):
        return True
    return name.endswith("_input") and is_generated_name(name[: -len("_input")])


def _declared_length(graph: ModelGraph) -> int | None:
    lengths = {int(u.layer.input_length) for u in graph if getattr(u.layer, "input_length", None)}
    return lengths.pop() if len(lengths) == 1 else None


def trace_calls(model: Any, signature: InputSignature, graph: ModelGraph | None = None) -> Trace:
    """Call ``model`` once on ``signature`` inside a ``tf.function`` trace and record every unit
    call (module docstring)."""
    import tensorflow as tf

    graph = graph or walk(model)
    recorder = _Recorder()
    units: dict[int, Any] = {}
    for u in graph:
        units.setdefault(id(u.layer), u)
    containers = _nested_containers(model, graph)
    for unit in units.values():
        keras_compat.override_method(unit.layer, "call", recorder.unit_call(unit.path, unit.layer, unit.layer.call))
    for prefix, container in containers:
        keras_compat.override_method(container, "call", recorder.container_call(prefix, container.call))

    @tf.function(autograph=False)
    def run(*flat: Any) -> Any:
        for i, (x, name) in enumerate(zip(flat, signature.names)):
            recorder.add_input(name, i, x)
        return model(signature.pack(flat), training=False)

    try:
        concrete = run.get_concrete_function(*signature.flat)
    except ModelError:
        raise
    except Exception as exc:
        where = f"in layer {recorder.failing[-1]!r}" if recorder.failing else "in the model's own call"
        raise ModelError(f"model {model.name!r} cannot be traced ({where}): {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:300]}. ralp_tf profiles a model by tracing one call; "
                         "control flow that depends on tensor values must use tf.cond/tf.while_loop") from exc
    finally:
        for unit in units.values():
            keras_compat.restore_method(unit.layer, "call")
        for _, container in containers:
            keras_compat.restore_method(container, "call")
    structured = concrete.graph.structured_outputs
    outputs = [t for t in tf.nest.flatten(structured) if isinstance(t, tf.Tensor)]
    keys = {recorder.producer_key(t) for t in outputs}
    return Trace(calls=recorder.calls, output_keys=keys, outputs=outputs, output_structure=structured)


def _prod(dims: Sequence[Any]) -> int:
    out = 1
    for d in dims:
        out *= int(d) if d is not None else 1
    return out


def _nested_containers(model: Any, graph: ModelGraph) -> list[tuple[str, Any]]:
    """(path prefix, container) of every model nested in ``model``."""
    from ralp_tf.model.graph import children, segments

    out: list[tuple[str, Any]] = []

    def visit(container: Any, prefix: str) -> None:
        kids = children(container)
        for child, segment in zip(kids, segments(container, kids)):
            if is_container(child):
                out.append((prefix + segment + "/", child))
                visit(child, prefix + segment + "/")

    visit(model, "")
    return out


class _Recorder:
    """The calls of one trace, the producer of every tensor seen, and the op records."""

    def __init__(self) -> None:
        self.calls: list[LayerCall] = []
        self.producers: dict[Hashable, Hashable] = {}
        self.failing: list[str] = []
        self.prefix: list[str] = [""]
        self.op_counts: collections.Counter[str] = collections.Counter()

    def add_input(self, name: str, index: int, x: Any) -> None:
        key = ("input", index)
        self.calls.append(LayerCall(name, None, [], [x], [], key))
        self.producers[x.ref()] = key

    def unit_call(self, path: str, layer: Any, call: Any) -> Any:
        import tensorflow as tf

        @tf.autograph.experimental.do_not_convert
        def recorded(*args: Any, **kwargs: Any) -> Any:
            flat_in = [t for t in tf.nest.flatten((args, kwargs)) if tf.is_symbolic_tensor(t)]
            in_keys = [self.producer_key(t) for t in flat_in]
            graph = tf.compat.v1.get_default_graph()
            before = len(graph.get_operations())
            self.failing.append(path)
            out = call(*args, **kwargs)
            self.failing.pop()
            created = graph.get_operations()[before:]
            op_types = tuple(sorted({op.type for op in created}))
            gathers = tuple(self._gathers(graph, layer, created))
            loops = loop_reads(graph, layer, created, flat_in) if {"While", "StatelessWhile"} & set(op_types) else ()
            flat_out = [t for t in tf.nest.flatten(out) if tf.is_symbolic_tensor(t)]
            key = ("call", len(self.calls))
            self.calls.append(LayerCall(path, layer, flat_in, flat_out, in_keys, key, arguments=(args, kwargs),
                                        op_types=op_types, gathers=gathers, loop_reads=loops))
            for t in flat_out:
                self.producers[t.ref()] = key
            return out

        return recorded

    def _gathers(self, graph: Any, layer: Any, created: list[Any]) -> Iterator[Gather]:
        """The row lookups among ``created`` (the ops of one call of ``layer``) in its variables."""
        lookups = [op for op in created if op.type == "ResourceGather"]
        if not lookups:
            return
        external = {id(internal): ext for ext, internal in getattr(graph, "captures", [])}
        weights = {id(keras_compat.base_variable(w).handle): k for k, w in enumerate(layer.weights)}
        for op in lookups:
            handle = external.get(id(op.inputs[0]), op.inputs[0])
            k = weights.get(id(handle))
            if k is None:
                continue
            ids = op.inputs[1]
            source = self._data_source(ids)
            dims = [d for d in ids.shape]
            if source is not None or (dims and dims[0] is None and len(dims) > 1):
                yield Gather(k, ids_per_sample=_prod(dims[1:]), source=source, id_bytes=ids.dtype.size)
            else:
                rows = int(layer.weights[k].shape[0])
                yield Gather(k, ids_per_batch=min(_prod(dims), rows) if all(d is not None for d in dims) else rows,
                             id_bytes=ids.dtype.size)

    def _data_source(self, t: Any) -> int | None:
        """The model input whose values ``t`` is computed from (through plain ops and the calls
        that feed them; shapes alone do not count), or None."""
        frontier, seen = [t], set()
        while frontier:
            x = frontier.pop()
            if x.ref() in seen:
                continue
            seen.add(x.ref())
            key = self.producers.get(x.ref())
            if key is not None:
                if key[0] == "input":
                    return int(key[1])
                call = self.calls[key[1]]
                frontier.extend(call.inputs if key[0] == "call" else list(call.outputs[0].op.inputs))
                continue
            if x.op.type not in _SHAPE_OPS and x.dtype.name != "resource":
                frontier.extend(x.op.inputs)
        return None

    def container_call(self, prefix: str, call: Any) -> Any:
        import tensorflow as tf

        @tf.autograph.experimental.do_not_convert
        def scoped(*args: Any, **kwargs: Any) -> Any:
            self.prefix.append(prefix)
            try:
                return call(*args, **kwargs)
            finally:
                self.prefix.pop()

        return scoped

    def producer_key(self, t: Any) -> Hashable:
        """The key of the call that produced ``t``; a new op record when plain ops made it."""
        key = self.producers.get(t.ref())
        if key is not None:
            return key
        op = t.op
        if op.type in TRANSPARENT_OPS and op.inputs:
            source = op.inputs[min(t.value_index, len(op.inputs) - 1)]
            key = self.producer_key(source)
            self.producers[t.ref()] = key
            return key
        feeding = list(dict.fromkeys(self._known_ancestors(t)))
        base = f"{self.prefix[-1]}op:{op.type}"
        n = self.op_counts[base]
        self.op_counts[base] += 1
        key = ("op", len(self.calls))
        self.calls.append(LayerCall(base if n == 0 else f"{base}_{n}", None, [], [t], feeding, key, op_type=op.type))
        self.producers[t.ref()] = key
        return key

    def _known_ancestors(self, t: Any) -> Iterator[Hashable]:
        """Keys of the recorded tensors ``t`` is computed from through plain ops (breadth first)."""
        seen: set[Any] = set()
        frontier = list(t.op.inputs)
        while frontier:
            x = frontier.pop(0)
            if x.ref() in seen:
                continue
            seen.add(x.ref())
            key = self.producers.get(x.ref())
            if key is not None:
                yield key
            elif x.dtype.name != "resource":
                frontier.extend(x.op.inputs)


def loop_reads(graph: Any, layer: Any, created: list[Any], inputs: Sequence[Any] = ()) -> tuple[int, ...]:
    """Per variable of ``layer``, how often one call (its ops ``created`` in ``graph``, on ``inputs``)
    reads it: the iterations of each ``While`` whose body reads the variable's handle (a
    ``ReadVariableOp`` of the body's argument), the count its ``maximum_iterations`` input holds
    when static, else the timesteps of a recurrent layer's input (the static time axis of its first
    input); else 1. Under ParameterServerStrategy each iteration's read is a transfer from the
    variable's PS task."""
    import tensorflow as tf

    if layer is None or not layer.weights:
        return ()
    index = {id(keras_compat.base_variable(w).handle): k for k, w in enumerate(layer.weights)}
    external = {id(internal): ext for ext, internal in getattr(graph, "captures", [])}
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    reads = [1] * len(layer.weights)
    for op in created:
        if op.type not in ("While", "StatelessWhile"):
            continue
        body = library.get(op.get_attr("body").name)
        iterations = tf.get_static_value(op.inputs[1]) if len(op.inputs) > 1 else None
        if iterations is None or int(iterations) < 1:
            iterations = _timesteps(layer, inputs)
        if body is None or iterations is None or int(iterations) < 1:
            continue
        args = [a.name for a in body.signature.input_arg]
        read = {n.input[0].split(":")[0] for n in body.node_def if n.op == "ReadVariableOp" and n.input}
        for i, t in enumerate(op.inputs):
            k = index.get(id(external.get(id(t), t)))
            if k is not None and i < len(args) and args[i] in read:
                reads[k] = max(reads[k], int(iterations))
    return tuple(reads) if any(r > 1 for r in reads) else ()


def _timesteps(layer: Any, inputs: Sequence[Any]) -> int | None:
    """The static length of the time axis a recurrent ``layer`` (or one inside it, as in
    ``Bidirectional``) loops over: axis 0 of its first input when ``time_major``, else axis 1."""
    import tf_keras

    rnns = [m for m in [layer, *getattr(layer, "submodules", ())] if isinstance(m, tf_keras.layers.RNN)]
    if not rnns or not inputs or inputs[0].shape.rank is None or inputs[0].shape.rank < 2:
        return None
    return inputs[0].shape[0 if rnns[0].time_major else 1]
