"""Record a model's layer calls by running it once: the profiler's way into subclassed and nested models.

Sequential and Functional models carry their layer graph; a subclassed ``tf_keras.Model``
computes its graph in Python, and a Functional model nested in another is one opaque layer
of its parent. :func:`trace_calls` therefore calls the model once, on symbolic inputs inside a
``tf.function`` trace (nothing runs), with a recorder on the ``call`` of every *leaf* layer:

* leaves are the layers ralp_tf profiles and places; they are named by their path from the
  model: ``fc1`` for the model's own layers, ``classifier/fc1`` inside a nested model or a
  container layer. A layer whose class has a registered kind is a leaf even if it has
  sublayers; a layer with sublayers and no registered kind (a nested model, a user's block)
  is opened;
* every call records its input and output tensors; an input produced by another leaf's call
  is an edge from that call. Tensors produced by plain TensorFlow ops in the model's Python
  code (``x + y``, ``tf.nn.relu(x)``) become one *op* record each, of kind "other", fed by the
  leaf calls it reads, so the cost model still sees where activations travel. Identity ops
  are looked through;
* calls appear in the order they ran, which is a topological order.

A model whose ``call`` cannot be traced (Python control flow on tensor values, ops that need
concrete data) raises :class:`~ralp_tf.errors.ModelError` naming the layer that failed.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Iterator, Sequence

from ralp_tf.errors import ModelError
from ralp_tf.model.kinds import _KIND_BY_CLASS

__all__ = ["LayerCall", "Trace", "leaf_layers", "input_specs", "trace_calls"]

#: Ops looked through when following a tensor back to the call that produced it.
_TRANSPARENT_OPS = frozenset({"Identity", "IdentityN", "StopGradient"})


@dataclasses.dataclass
class LayerCall:
    """One call of a leaf layer (``layer`` None for a model input or a plain-op record)."""

    name: str
    layer: Any
    inputs: list[Any]
    outputs: list[Any]
    in_keys: list[Hashable]
    out_key: Hashable
    op_type: str | None = None


@dataclasses.dataclass
class Trace:
    """Every call, in the order it ran, and the keys of the tensors the model returns."""

    calls: list[LayerCall]
    output_keys: set[Hashable]


def leaf_layers(model: Any) -> dict[str, Any]:
    """Path -> layer for every leaf of ``model`` (see the module docstring)."""
    out: dict[str, Any] = {}

    def visit(container: Any, prefix: str) -> None:
        for layer in _children(container):
            path = f"{prefix}{layer.name}"
            if _is_leaf(layer):
                if path in out and out[path] is not layer:
                    raise ModelError(f"two layers of {model.name!r} have the path {path!r}; give them distinct names")
                out[path] = layer
            else:
                visit(layer, f"{path}/")

    visit(model, "")
    return out


def _children(container: Any) -> list[Any]:
    if getattr(container, "_is_graph_network", False):
        return [l for l in container.layers if type(l).__name__ != "InputLayer"]
    return list(container._flatten_layers(include_self=False, recursive=False))


def _is_leaf(layer: Any) -> bool:
    if type(layer).__name__ in _KIND_BY_CLASS:
        return True
    return not list(layer._flatten_layers(include_self=False, recursive=False))


def input_specs(model: Any, input_shape: Any = None) -> list[Any]:
    """TensorSpecs of the model's inputs: from ``input_shape`` (a shape, or a list of shapes, with
    or without the batch dimension as None), else from the model's own inputs or build shape."""
    import tensorflow as tf

    if input_shape is not None:
        shapes = input_shape if input_shape and isinstance(input_shape[0], (list, tuple)) else [input_shape]
        return [tf.TensorSpec(list(s) if s and s[0] is None else [None, *s], tf.float32) for s in shapes]
    if getattr(model, "inputs", None):
        return [tf.TensorSpec(t.shape, t.dtype) for t in model.inputs]
    spec = getattr(model, "_saved_model_inputs_spec", None)
    if spec is not None:
        return [tf.TensorSpec(s.shape, s.dtype) for s in tf.nest.flatten(spec)]
    shape = getattr(model, "_build_input_shape", None)
    if shape is not None:
        return input_specs(model, tuple(shape) if not isinstance(shape, (list, tuple)) else shape)
    raise ModelError(f"model {model.name!r} has never been called and has no input shape; pass input_shape=(...) "
                     "(without the batch dimension), or call model.build((None, ...)) first")


def trace_calls(model: Any, specs: Sequence[Any]) -> Trace:
    """Call ``model`` once on ``specs`` inside a ``tf.function`` trace and record every leaf call."""
    import tensorflow as tf

    leaves = leaf_layers(model)
    calls: list[LayerCall] = []
    producers: dict[Hashable, str] = {}
    failing: list[str] = []

    def recorder(path: str, layer: Any, call: Any) -> Any:
        @tf.autograph.experimental.do_not_convert
        def recorded(inputs: Any, *args: Any, **kwargs: Any) -> Any:
            flat_in = [t for t in tf.nest.flatten(inputs) if isinstance(t, tf.Tensor)]
            in_keys = [_producer_key(t, producers, calls) for t in flat_in]
            failing.append(path)
            out = call(inputs, *args, **kwargs)
            failing.pop()
            flat_out = [t for t in tf.nest.flatten(out) if isinstance(t, tf.Tensor)]
            key = ("call", len(calls))
            calls.append(LayerCall(path, layer, flat_in, flat_out, in_keys, key))
            for t in flat_out:
                producers[t.ref()] = key  # type: ignore[assignment]
            return out

        return recorded

    saved = {path: layer.__dict__.get("call") for path, layer in leaves.items()}
    for path, layer in leaves.items():
        layer.call = recorder(path, layer, layer.call)

    @tf.function(autograph=False)
    def run(*xs: Any) -> Any:
        for i, x in enumerate(xs):
            key = ("input", i)
            calls.append(LayerCall(_input_name(model, i), None, [], [x], [], key))
            producers[x.ref()] = key  # type: ignore[assignment]
        return model(list(xs) if len(xs) > 1 else xs[0], training=False)

    try:
        graph = run.get_concrete_function(*specs).graph
    except ModelError:
        raise
    except Exception as exc:
        where = f"in layer {failing[-1]!r}" if failing else "in the model's own call"
        raise ModelError(f"model {model.name!r} cannot be traced ({where}): {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:300]}. ralp_tf profiles a model by tracing one call; "
                         "control flow that depends on tensor values must use tf.cond/tf.while_loop") from exc
    finally:
        for path, layer in leaves.items():
            if saved[path] is None:
                layer.__dict__.pop("call", None)
            else:
                layer.call = saved[path]
    outputs = [t for t in tf.nest.flatten(graph.structured_outputs) if isinstance(t, tf.Tensor)]
    return Trace(calls=calls, output_keys={_producer_key(t, producers, calls) for t in outputs})


def _input_name(model: Any, i: int) -> str:
    names = getattr(model, "input_names", None)
    if names and i < len(names):
        return str(names[i])
    return "input" if i == 0 else f"input_{i}"


def _producer_key(t: Any, producers: dict[Hashable, Any], calls: list[LayerCall]) -> Hashable:
    """The key of the call that produced ``t``; a new op record when plain ops made it."""
    key = producers.get(t.ref())
    if key is not None:
        return key
    op = t.op
    if op.type in _TRANSPARENT_OPS and op.inputs:
        source = op.inputs[min(t.value_index, len(op.inputs) - 1)]
        key = _producer_key(source, producers, calls)
        producers[t.ref()] = key
        return key
    feeding = list(dict.fromkeys(_known_ancestors(t, producers)))
    key = ("op", len(calls))
    calls.append(LayerCall(f"op:{op.name}", None, [], [t], feeding, key, op_type=op.type))
    producers[t.ref()] = key
    return key


def _known_ancestors(t: Any, producers: dict[Hashable, Any]) -> Iterator[Hashable]:
    """Keys of the recorded tensors ``t`` is computed from through plain ops (breadth first)."""
    seen: set[Any] = set()
    frontier = list(t.op.inputs)
    while frontier:
        x = frontier.pop(0)
        if x.ref() in seen:
            continue
        seen.add(x.ref())
        key = producers.get(x.ref())
        if key is not None:
            yield key
        elif x.dtype.name != "resource":
            frontier.extend(x.op.inputs)
