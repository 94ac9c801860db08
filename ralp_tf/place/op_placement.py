"""Plain TensorFlow ops of a model's own ``call``, placed with their inputs, forward and gradient.

A subclassed model (or a model nested as a layer) may combine its units' outputs with plain ops
(``heads["a"](x) + heads["b"](x)``, slicing, ``tf.concat``, ``tf.nn`` calls). The profile records
them as ``op:`` records (:mod:`ralp_tf.model.trace`), which no plan decides: each computes with
its inputs (:func:`ralp_tf.model.profiles.follows_inputs`). This module makes TensorFlow do so.

* **Forward.** :func:`install_op_placement` wraps the ``call`` of each container of the walk in a
  device function. An op the container's own code creates (its name directly under the
  container's name scope, not under one of its units' scopes) whose every input but constants is
  on a PS task runs on the task of its first such input; any other op keeps its placement. A
  chain of such ops follows its first op.
* **Gradient.** ``tf.GradientTape`` creates gradient ops where ``tape.gradient`` is called. The
  tape's gradient function is wrapped once, process-wide (:func:`_register_gradient_function`):
  for the gradient of an op created in a wrapped container's own scope, when every forward tensor
  the tape kept and every incoming gradient (constants aside) are on PS tasks, the gradient ops
  run on the task of the first of them (a forward input's, where the op ran). So an ``AddV2`` joining two heads on a PS task, and its gradient, move nothing
  between the workers and the PS. Any other gradient is untouched.

Private: ``tensorflow.python.eager.backprop._gradient_function`` and
``pywrap_tfe.TFE_Py_RegisterGradientFunction`` (what the tape calls), through
:mod:`ralp_tf.model.keras_compat`. Public stand-in: none (``tf.gradients`` colocated gradients with
their ops in TF 1; the tape has no such option).
"""
from __future__ import annotations

import re
import weakref
from typing import Any, Callable

from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph, is_container

__all__ = ["install_op_placement", "container_scopes"]

#: a name scope TensorFlow made unique by a suffix (a layer called twice in one graph: ``dense_1``)
_UNIQUIFIED = re.compile(r"_\d+$")
#: graph -> {the name scope of a wrapped container's call in it: its units' own scope names}
_SCOPES: "weakref.WeakKeyDictionary[Any, dict[str, frozenset[str]]]" = weakref.WeakKeyDictionary()


def container_scopes(graph: Any) -> dict[str, frozenset[str]]:
    """The name scopes wrapped containers' calls ran in, in ``graph``, with their units' scope names."""
    return dict(_SCOPES.get(graph, {}))


def _own_op(name: str, scope: str, units: frozenset[str]) -> bool:
    """Whether an op (or a forward scope) named ``name`` belongs to the container's own code at
    ``scope``: directly under it, not under one of its units' scopes."""
    if scope:
        if name != scope and not name.startswith(scope + "/"):
            return False
        name = name[len(scope) + 1:]
    first = name.split("/", 1)[0]
    return bool(name) and first not in units and _UNIQUIFIED.sub("", first) not in units


def _ps_device_of(tensors: list[Any]) -> str:
    """The device of the first tensor when every tensor not made by a constant is on a PS task, else ""."""
    devices = [t.device for t in tensors if t.op.type != "Const"]
    if devices and all("/job:ps" in d for d in devices):
        return devices[0]
    return ""


def _device_function(scope: str, units: frozenset[str]) -> Callable[[Any], str]:
    def place(op: Any) -> str:
        if op.device or not _own_op(op.name, scope, units):
            return op.device
        return _ps_device_of(list(op.inputs))

    return place


def _wrapped_call(call: Callable[..., Any], units: frozenset[str]) -> Callable[..., Any]:
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if tf.executing_eagerly():
            return call(*args, **kwargs)
        graph = tf.compat.v1.get_default_graph()
        scope = graph.get_name_scope()
        _SCOPES.setdefault(graph, {})[scope] = units
        with graph.device(_device_function(scope, units)):
            return call(*args, **kwargs)

    return wrapped


def _register_gradient_function() -> None:
    """Wrap the tape's gradient function (module docstring); idempotent."""
    import tensorflow as tf

    def on_device(tape_gradient: Callable[..., Any]) -> Callable[..., Any]:
        def gradient(op_name: str, attr_tuple: Any, num_inputs: int, inputs: Any, outputs: Any, out_grads: Any,
                     skip_input_indices: Any, forward_pass_name_scope: str) -> Any:
            args = (op_name, attr_tuple, num_inputs, inputs, outputs, out_grads, skip_input_indices,
                    forward_pass_name_scope)
            graph = tf.compat.v1.get_default_graph()
            scopes = _SCOPES.get(graph) if not tf.executing_eagerly() else None
            if not scopes or not any(_own_op(forward_pass_name_scope or "", s, u) or forward_pass_name_scope == s
                                     for s, u in scopes.items()):
                return tape_gradient(*args)
            kept = [t for t in [*(inputs or ()), *(outputs or ()), *(out_grads or ())]
                    if t is not None and hasattr(t, "device") and hasattr(t, "op")]
            device = _ps_device_of(kept)
            if not device:
                return tape_gradient(*args)
            with tf.device(device):
                return tape_gradient(*args)

        return gradient

    keras_compat.wrap_tape_gradient_function("ralp_tf.op_placement", on_device)


def install_op_placement(graph: ModelGraph) -> None:
    """Wrap the ``call`` of ``graph``'s model and of every model nested in it (module docstring)."""
    from ralp_tf.model.graph import children

    _register_gradient_function()

    def visit(container: Any) -> None:
        kids = children(container)
        if not keras_compat.is_graph_network(container) and not keras_compat.overridden(container, "call"):
            names = frozenset(str(k.name) for k in kids)
            keras_compat.override_method(container, "call", _wrapped_call(container.call, names))
        for kid in kids:
            if is_container(kid):
                visit(kid)

    visit(graph.model)
