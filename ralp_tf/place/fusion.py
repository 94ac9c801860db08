"""Fused transfers: one pull and one push per PS task for the variables a worker computes with.

Under ParameterServerStrategy a worker step reads every variable it computes with in a message of
its own and pushes each gradient in another, so a model of many small variables (resnet_cifar's
107) pays the fixed cost of a message hundreds of times per step (docs/costmodel.md, *The step
floor*). A fused step (:func:`train_on_batch` with the groups of :func:`fused_groups`) moves,
per PS task and per step:

* **pull:** the task's fused variables flattened and concatenated there, one tensor, split on the
  worker into the variables' values. While the step traces its forward and backward, every read of
  a fused variable (``value()``, ``read_value()``, its conversion to a tensor) returns its value
  from that split, so a layer called twice still reads once; reads of other variables, and reads
  outside a fused step, are untouched;
* **push:** the gradients of its trainable fused variables, concatenated on the worker, one
  tensor, split on the task and applied there by the optimizer.

The math is the unfused step's: the gradients equal it (tests/place/test_fusion.py). What it gives up is
the overlap of a variable's transfer with the compute of the layers before it: the whole pull
ends before the forward starts, and the push starts after the backward ends (the cost model
prices both, :mod:`ralp_tf.plan.traffic`, *Fused transfers*).

A variable is fused when it is a plain variable on a PS task (not sharded) and its unit computes on
the worker, unsplit, and is :func:`ralp_tf.plan.traffic.fusable` by its profile (reads its
variables whole, no weights or gradients codec), as the cost model prices it; anything else moves
as before. Variables of one PS task are grouped by dtype.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, Callable, Sequence

from ralp_tf.model import keras_compat
from ralp_tf.model.graph import walk
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.compression import setting_of
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.plan.traffic import fusable

__all__ = ["FusedGroup", "fused_groups", "train_on_batch"]


@dataclasses.dataclass(frozen=True)
class FusedGroup:
    """The fused variables of one PS task and dtype, in the model's order; ``device`` the task's."""

    device: str
    variables: tuple[Any, ...]

    def sizes(self, variables: Sequence[Any] | None = None) -> list[int]:
        return [int(v.shape.num_elements()) for v in (self.variables if variables is None else variables)]


class _Reads(threading.local):
    """id(variable) -> its value in the fused step being traced on this thread."""

    values: dict[int, Any] = {}


_reads = _Reads()


def _read_from_fused_step(v: Any) -> None:
    """Make ``v``'s reads return its fused value while a fused step is traced (once per variable)."""
    if getattr(v, "_ralp_fused_reads", False):
        return
    cls = type(v)

    def reader(method: str) -> Callable[..., Any]:
        def read(*args: Any, **kwargs: Any) -> Any:
            value = _reads.values.get(id(v))
            return value if value is not None else getattr(cls, method)(v, *args, **kwargs)
        return read

    def to_tensor(dtype: Any = None, name: Any = None, as_ref: bool = False) -> Any:
        value = _reads.values.get(id(v))
        if value is not None and not as_ref and (dtype is None or dtype == value.dtype):
            return value
        return cls._dense_var_to_tensor(v, dtype=dtype, name=name, as_ref=as_ref)

    v.value, v.read_value, v._dense_var_to_tensor = reader("value"), reader("read_value"), to_tensor
    v._ralp_fused_reads = True


def _is_plain_ps_variable(v: Any) -> bool:
    from tensorflow.python.distribute import ps_values

    return isinstance(v, ps_values.CachingVariable) and "/job:ps" in (v.device or "")


def fused_groups(model: Any, plan: Plan, profile: ModelProfile) -> list[FusedGroup]:
    """The groups a fused step moves for ``model`` (profiled as ``profile``) placed by ``plan``
    (module docstring)."""
    on_ps = {path for path, device in plan.placements.items() if parse_device(device).is_ps}
    layers = {l.name: l for l in profile.layers}
    excluded: set[int] = set()
    for unit in walk(model):
        layer = layers.get(unit.path)
        if (unit.path in on_ps or unit.path in plan.splits or layer is None
                or not fusable(layer, setting_of(plan.compression, unit.path))):
            excluded.update(id(keras_compat.base_variable(w)) for w in unit.layer.weights)
    groups: dict[tuple[str, Any], list[Any]] = collections.defaultdict(list)
    for v in model.variables:
        v = keras_compat.base_variable(v)
        if id(v) not in excluded and _is_plain_ps_variable(v) and v.dtype.is_floating:
            groups[(v.device, v.dtype)].append(v)
    for vs in groups.values():
        for v in vs:
            _read_from_fused_step(v)
    return [FusedGroup(device, tuple(vs)) for (device, _), vs in groups.items()]


def train_on_batch(model: Any, loss_fn: Callable[[Any, Any], Any], optimizer: Any, x: Any, y: Any,
                   groups: Sequence[FusedGroup] = ()) -> Any:
    """One training step of ``model`` on ``(x, y)`` inside a step function; returns the loss. With
    ``groups``, their variables move fused (module docstring); without, as stock PSS moves them."""
    import tensorflow as tf

    train = model.trainable_variables
    if not groups:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, train), train))
        return loss
    values: dict[int, Any] = {}
    with tf.GradientTape() as tape:
        for g in groups:
            with tf.device(g.device):
                flat = tf.concat([tf.reshape(v.get().read_value(), [-1]) for v in g.variables], 0)
            tape.watch(flat)
            for v, part in zip(g.variables, tf.split(flat, g.sizes())):
                values[id(v)] = tf.reshape(part, v.shape)
        _reads.values = values
        try:
            loss = loss_fn(y, model(x, training=True))
        finally:
            _reads.values = {}
    grads = tape.gradient(loss, [values.get(id(keras_compat.base_variable(v)), v) for v in train])
    fused = {id(v): i for i, g in enumerate(groups) for v in g.variables}
    pushed: dict[int, list[tuple[Any, Any]]] = collections.defaultdict(list)  # group index -> (variable, gradient)
    applied = []
    for v, grad in zip(train, grads):
        i = fused.get(id(keras_compat.base_variable(v)))
        if i is None or grad is None:
            applied.append((grad, v))
        else:
            pushed[i].append((v, grad))
    for i, pairs in pushed.items():
        flat = tf.concat([tf.reshape(tf.convert_to_tensor(g), [-1]) for _, g in pairs], 0)
        with tf.device(groups[i].device):
            parts = tf.split(flat, groups[i].sizes([v for v, _ in pairs]))
            applied += [(tf.reshape(p, v.shape), v) for p, (v, _) in zip(parts, pairs)]
    optimizer.apply_gradients(applied)
    return loss
