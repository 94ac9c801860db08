"""Read a tf_keras model into a :class:`~ralp_tf.model.profiles.ModelProfile` (the one place
besides the applier that touches the TensorFlow runtime on a model).

:func:`profile` walks the model once (:func:`ralp_tf.model.graph.walk`: its units and their
stable paths), traces one call of it on symbolic inputs (:func:`ralp_tf.model.trace.trace_calls`:
every unit call, in topological order, and the plain ops between them), and assembles the
profile: per unit its kind, weights, FLOPs (:mod:`ralp_tf.model.kinds`), activations, the units
feeding it and whether it may compute on a PS task; optionally its measured forward+backward
time on this machine. Every kind of model is read this way: Sequential, Functional, subclassed,
nested. TensorFlow is imported lazily, inside the functions.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np

from ralp_tf.errors import KerasVersionError, ModelError
from ralp_tf.model.graph import ModelGraph, walk
from ralp_tf.model.kinds import call_flops, dense_activation, dtype_size, layer_kind, prod, ps_refusal, shape_tuple
from ralp_tf.model.optimizers import optimizer_name
from ralp_tf.model.profiles import INPUT_REFUSAL, OP_REFUSAL, LayerProfile, ModelProfile, TensorProfile, check_batch_size
from ralp_tf.model.trace import InputSignature, LayerCall, Trace, input_signature, trace_calls

__all__ = ["check_tf_keras_model", "profile", "random_input", "layer_gradients"]


def check_tf_keras_model(model: Any, source: str = "") -> None:
    """Raise a clear error unless ``model`` is a tf_keras model (Sequential ones built);
    ``source`` names where it came from (e.g. a model reference) in the message."""
    import tf_keras

    module = type(model).__module__
    made = f"{source} returned " if source else ""
    if not isinstance(model, tf_keras.Model):
        if module.startswith("keras") and not module.startswith("keras.src.legacy"):
            raise KerasVersionError(
                f"{made}{type(model).__name__}, a Keras 3 model; ParameterServerStrategy training needs tf_keras "
                "(Keras 2). Build it with `import tf_keras as keras` (pip install tf-keras==2.21.*), or set "
                "TF_USE_LEGACY_KERAS=1 before importing tensorflow so that tf.keras is tf_keras.")
        if made:
            raise ModelError(f"{made}{type(model).__name__}, not a tf_keras.Model; the function must build and "
                             "return the model")
        raise ModelError(f"expected a tf_keras.Model, got {type(model).__name__}")
    if isinstance(model, tf_keras.Sequential) and not model.built:
        raise ModelError(f"Sequential model {model.name!r} is not built; give its first layer an "
                         "input_shape or call model.build((None, ...)) before profiling or placing it")


def profile(model: Any, batch_size: int = 32, *, measure: bool = False, measure_repeats: int = 5,
            input_shape: Any = None, sequence_length: int | None = None, graph: ModelGraph | None = None,
            signature: InputSignature | None = None) -> ModelProfile:
    """Profile a tf_keras model (module docstring); layers are named by their paths.

    ``input_shape`` (without the batch dimension) is needed only for a subclassed model that was
    never built or called; ``sequence_length`` for inputs with a dimension of variable length
    (:func:`ralp_tf.model.trace.input_signature`). ``graph`` and ``signature`` skip working them
    out again when the caller has them.
    """
    check_batch_size(batch_size)
    check_tf_keras_model(model)
    graph = graph or walk(model)
    signature = signature or input_signature(model, input_shape, sequence_length, graph)
    trace = _with_static_shapes(model, signature, graph, trace_calls(model, signature, graph), int(batch_size))
    prof = _assemble(model.name, int(batch_size), trace, measure=measure, repeats=measure_repeats,
                     model_variables=getattr(model, "variables", ()))
    optimizer = getattr(model, "optimizer", None)  # a compiled model's: its sparse updates are priced
    return prof if optimizer is None else prof.with_optimizer(optimizer_name(optimizer))


def _unknown(tensors: list[Any]) -> bool:
    return any(d is None for t in tensors for d in shape_tuple(t)[1:])


def _with_static_shapes(model: Any, signature: InputSignature, graph: ModelGraph, trace: Trace,
                        batch_size: int) -> Trace:
    """``trace`` with the tensors of calls whose shapes it does not know beyond the batch (a
    ``tf.reshape(x, [tf.shape(x)[0], -1, d])``) taken from a second trace at a fixed batch, where
    TensorFlow infers them; ``trace`` itself when it knows every shape, or when the second trace's
    calls do not line up with it."""
    if not any(_unknown(c.inputs) or _unknown(c.outputs) for c in trace.calls):
        return trace
    fixed = trace_calls(model, dataclasses.replace(signature, structure=signature.with_batch(batch_size)), graph)
    if [c.name for c in fixed.calls] != [c.name for c in trace.calls]:
        return trace
    calls = [dataclasses.replace(c, inputs=f.inputs, outputs=f.outputs)
             if (_unknown(c.inputs) or _unknown(c.outputs)) and len(f.inputs) == len(c.inputs)
             and len(f.outputs) == len(c.outputs) else c for c, f in zip(trace.calls, fixed.calls)]
    return dataclasses.replace(trace, calls=calls)


def _assemble(model_name: str, batch_size: int, trace: Trace, *, measure: bool, repeats: int,
              model_variables: Sequence[Any] = ()) -> ModelProfile:
    """Layers (calls grouped by name, in first-call order), one tensor per call, and the variables'
    creation order (:func:`creation_order`)."""
    by_name: dict[str, list[LayerCall]] = {}
    tensors: dict[Any, dict[str, Any]] = {}
    for call in trace.calls:
        by_name.setdefault(call.name, []).append(call)
        for key in call.in_keys:
            consumers = tensors[key]["consumers"]
            if call.name not in consumers:
                consumers.append(call.name)
        out_bytes = int(sum(prod(shape_tuple(t)[1:]) * dtype_size(t) for t in call.outputs))
        tensors[call.out_key] = {"producer": call.name, "bytes": out_bytes, "consumers": []}
    layers: list[LayerProfile] = []
    owned: list[tuple[str, int, Any]] = []
    for name, calls in by_name.items():
        first = calls[0]
        layer = first.layer
        if layer is None:  # a model input or a plain TF op of the model's own code
            kind, class_name = ("input", "InputLayer") if first.op_type is None else ("other", first.op_type)
            weights: list[Any] = []
            trainable_weights: list[Any] = []
            flops = [0.0 if kind == "input" else float(sum(prod(shape_tuple(t)[1:]) for t in c.outputs))
                     for c in calls]
            source = "none" if kind == "input" else "elementwise"
            refusal = INPUT_REFUSAL if kind == "input" else OP_REFUSAL
        else:
            kind = layer_kind(layer)
            class_name, weights, trainable_weights = type(layer).__name__, layer.weights, layer.trainable_weights
            counted = [call_flops(layer, kind, c) for c in calls]
            flops, source = [f for f, _ in counted], counted[0][1]
            refusal = ps_refusal(layer, {op for c in calls for op in c.op_types})
        earlier = {l.name for l in layers}
        inbound = [tensors[k]["producer"] for c in calls for k in c.in_keys]
        owned.extend((name, i, v) for i, v in enumerate(weights))
        var_bytes = tuple(int(np.prod(v.shape)) * v.dtype.size for v in weights)
        var_shapes = tuple(tuple(int(d) for d in v.shape) for v in weights)
        gathered = [[0, 0] for _ in weights]
        for c in calls:
            for g in c.gathers:
                gathered[g.variable][0] += g.ids_per_sample
                gathered[g.variable][1] += g.ids_per_batch
        measured = None
        if measure and layer is not None and kind != "input":
            measured = _measure_layer(layer, first, batch_size, repeats) * len(calls)
        out_shapes = [shape_tuple(t)[1:] for t in first.outputs]
        layers.append(LayerProfile(
            name=name, kind=kind, class_name=class_name, param_bytes=sum(var_bytes),
            trainable_param_bytes=sum(int(np.prod(v.shape)) * v.dtype.size for v in trainable_weights),
            var_bytes=var_bytes, var_shapes=var_shapes, flops=sum(flops), flops_source=source,
            output_bytes=tensors[first.out_key]["bytes"],
            inbound=tuple(dict.fromkeys(u for u in inbound if u in earlier)),
            output_shape=out_shapes[0] if len(out_shapes) == 1 else (), measured_seconds=measured,
            calls=len(calls), ps_refusal=refusal,
            gathered=tuple((a, b) for a, b in gathered) if any(a or b for a, b in gathered) else (),
            regularised=_regularised(layer, weights) if layer is not None else (),
            constraint_reads=_constraint_reads(weights),
            activation=dense_activation(layer),
            id_bytes=max((g.id_bytes for c in calls for g in c.gathers), default=4),
            loop_reads=_loop_reads(calls, len(weights))))
    order = list(by_name)
    outputs = tuple(dict.fromkeys(sorted((tensors[k]["producer"] for k in trace.output_keys), key=order.index)))
    tensor_profiles = tuple(TensorProfile(t["producer"], t["bytes"], tuple(t["consumers"]), key in trace.output_keys)
                            for key, t in tensors.items())
    return ModelProfile(model_name=model_name, batch_size=batch_size, layers=tuple(layers), outputs=outputs,
                        tensors=tensor_profiles, variable_order=creation_order(owned, model_variables))


def creation_order(owned: Sequence[tuple[str, int, Any]], model_variables: Sequence[Any] = ()
                   ) -> tuple[tuple[str, int], ...]:
    """``(layer, index)`` of each of ``owned`` (layer name, index, variable) in the order the
    variables were created: TensorFlow numbers each eager variable's handle with a process-wide
    counter (``ResourceVariable._unique_id``, ``<name>_<n>``); where a variable has no such number,
    every variable goes by its place in ``model_variables`` (the model's ``variables``), then the
    layers' order."""
    def number(v: Any) -> int | None:
        tail = str(getattr(v, "_unique_id", "")).rpartition("_")[2]
        return int(tail) if tail.isdigit() else None

    numbers = [number(v) for _, _, v in owned]
    if all(n is not None for n in numbers):
        keys = numbers
    else:
        place = {id(v): k for k, v in enumerate(model_variables)}
        keys = [place.get(id(v), len(place) + k) for k, (_, _, v) in enumerate(owned)]
    ranked = sorted(range(len(owned)), key=lambda k: (keys[k], k))
    return tuple((owned[k][0], owned[k][1]) for k in ranked)


def random_input(t: Any, batch_size: int, layer: Any) -> Any:
    """A random tensor of symbolic ``t``'s shape (``batch_size`` rows) and dtype (ids below ``layer``'s
    ``input_dim``), made on the current device."""
    import tensorflow as tf

    shape = [batch_size] + [d or 1 for d in shape_tuple(t)[1:]]
    dtype = tf.as_dtype(t.dtype)
    if dtype.is_integer:
        high = int(getattr(layer, "input_dim", 2))
        return tf.random.uniform(shape, 0, max(high, 1), dtype=dtype)
    if dtype.is_bool:
        return tf.ones(shape, dtype=dtype)
    return tf.random.normal(shape, dtype=dtype)


def _measure_layer(layer: Any, call: LayerCall, batch_size: int, repeats: int) -> float:
    """Median wall time of one forward+backward pass of ``layer`` on a batch, local device: the
    recorded ``call`` repeated on random inputs of its shapes."""
    import tensorflow as tf

    xs = [random_input(t, batch_size, layer) for t in call.inputs]

    @tf.function
    def step(*xs: Any) -> Any:
        return layer_gradients(layer, call, xs)

    step(*xs)
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = step(*xs)
        _ = [o.numpy() if hasattr(o, "numpy") else o for o in tf.nest.flatten(out)]
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def layer_gradients(layer: Any, call: LayerCall, xs: Sequence[Any]) -> list[Any]:
    """One forward+backward pass of ``layer``'s recorded ``call`` on tensors ``xs`` (traced inside
    the caller's ``tf.function``): the gradients of its outputs' sum with respect to its float inputs
    and trainable weights (or the sum, when there are none)."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        for x in xs:
            if x.dtype.is_floating:
                tape.watch(x)
        args, kwargs = call.rebuild(xs)
        if "training" in kwargs:
            kwargs = dict(kwargs, training=True)
        y = layer(*args, **kwargs)
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in tf.nest.flatten(y)
                         if isinstance(o, tf.Tensor) and (o.dtype.is_floating or o.dtype.is_integer)])
    sources = [x for x in xs if x.dtype.is_floating] + list(layer.trainable_weights)
    grads = tape.gradient(loss, sources) if sources else []
    return [g for g in grads if g is not None] or [loss]


def _regularised(layer: Any, weights: list[Any]) -> tuple[bool, ...]:
    """Per weight of ``layer``, whether one of its weight regularisers (its own or a sublayer's
    ``add_loss(callable)``) reads it: each regulariser is traced once and its captured variables read."""
    import tensorflow as tf

    from ralp_tf.model import keras_compat
    from ralp_tf.model.graph import layer_and_sublayers

    losses = [fn for sub in layer_and_sublayers(layer) for fn in keras_compat.weight_loss_callables(sub)]
    if not losses or not weights:
        return ()
    read: set[int] = set()
    for fn in losses:
        graph = tf.function(fn, autograph=False).get_concrete_function().graph
        read.update(id(keras_compat.base_variable(v)) for v in graph.variables)
    flags = tuple(id(keras_compat.base_variable(w)) in read for w in weights)
    return flags if any(flags) else ()



def _constraint_reads(weights: list[Any]) -> tuple[int, ...]:
    """Per weight, how many reads of it its constraint makes (each traced once: the ``ReadVariableOp``
    of its handle in the graph); () when no weight has a constraint."""
    import tensorflow as tf

    from ralp_tf.model import keras_compat

    counts = []
    for w in weights:
        constraint = getattr(keras_compat.base_variable(w), "constraint", None)
        if constraint is None:
            counts.append(0)
            continue
        graph = tf.function(lambda: constraint(w), autograph=False).get_concrete_function().graph
        counts.append(max(1, sum(op.type == "ReadVariableOp" for op in graph.get_operations())))
    return tuple(counts) if any(counts) else ()


def _loop_reads(calls: list[Any], count: int) -> tuple[int, ...]:
    """Per variable, the most reads one of ``calls`` makes of it (:func:`ralp_tf.model.trace.loop_reads`)."""
    reads = [max((c.loop_reads[i] for c in calls if i < len(c.loop_reads)), default=1) for i in range(count)]
    return tuple(reads) if any(r > 1 for r in reads) else ()
