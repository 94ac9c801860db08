"""Where a placed model's variables are created: on the PS task(s) its plan names for each unit.

ParameterServerStrategy spreads variables over PS tasks round-robin; ``tf.device`` does not change
that, but a variable created with ``colocate_with=<a variable on task k>`` lands on task k. So
:func:`ps_anchors` first creates one tiny anchor variable on each PS task the plan uses, and a
variable creator (``tf.variable_creator_scope``) gives every variable of a planned unit its
unit's anchor, or, for a unit whose storage the plan partitions over K tasks, creates it as K
shards along axis 0 (:mod:`ralp_tf.place.sharding`).

The creator must know, when a variable is created, which unit it belongs to. Two ways:

* :class:`UnitScopes` (a model whose layers exist before they are built: a subclassed model
  not yet built, or the layers of a Functional model being re-created from their configs):
  each planned unit's ``build`` and ``call`` run under its scope, so every variable created while
  it builds or first runs, its sublayers' included, is the unit's;
* :class:`CreationOrder` (a model-building function that builds as it constructs, a Functional
  model or a subclassed one built in its constructor): the function is called twice, once
  outside the strategy (:func:`record_creations`, which says which unit each created variable
  belongs to, in creation order) and once under it, where the i-th variable created belongs to
  the i-th recorded unit. The two builds must create the same variables in the same order;
  anything else is refused (ModelError).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator, Mapping, Sequence

from ralp_tf.errors import ModelError, PlanError
from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph
from ralp_tf.place.sharding import sharded_creator
from ralp_tf.plan.plans import Plan

__all__ = ["unit_homes", "ps_anchors", "Homes", "UnitScopes", "CreationOrder", "record_creations",
           "unit_of_variables"]

#: Unit path -> the PS tasks holding its variables: one task, or one per shard.
Homes = Mapping[str, tuple[int, ...]]


def unit_homes(plan: Plan) -> dict[str, tuple[int, ...]]:
    """Unit path -> the PS tasks holding its variables: the task of a PS-computed unit, the task(s)
    the plan's ``storage`` names for a worker-computed one (several: shards along axis 0)."""
    homes = {path: (k,) for path, k in plan.ps_layers().items()}
    homes.update({path: tuple(tasks) for path, tasks in plan.stored_on().items()})
    return homes


def ps_anchors(strategy: Any, tasks: set[int], num_ps: int) -> dict[int, Any]:
    """One tiny variable on each PS task in ``tasks``, created through the strategy's round-robin."""
    import tensorflow as tf

    anchors: dict[int, Any] = {}
    if not tasks:
        return anchors
    with strategy.scope():
        for _ in range(max(num_ps, 1)):
            v = tf.Variable(0, trainable=False, name="ralp_anchor", dtype=tf.int32)
            anchors.setdefault(int(tf.DeviceSpec.from_string(v.device).task or 0), v)
    missing = tasks - set(anchors)
    if missing:
        raise PlanError(f"plan uses PS task(s) {sorted(missing)} but the strategy has {num_ps} PS task(s)")
    return anchors


def _create_at(home: tuple[int, ...], anchors: Mapping[int, Any], next_creator: Callable[..., Any],
               kwargs: dict[str, Any]) -> Any:
    if len(home) > 1:
        return sharded_creator([anchors[k] for k in home])(next_creator, **kwargs)
    return next_creator(**dict(kwargs, colocate_with=anchors[home[0]], use_resource=True))


class UnitScopes:
    """Creates each variable on the home of the planned unit whose ``build`` or ``call`` is
    running (module docstring). :meth:`scope` installs the scopes on a unit; :meth:`active` is
    the variable creator; :meth:`close` takes the scopes off again."""

    def __init__(self, homes: Homes, anchors: Mapping[int, Any]) -> None:
        self.homes, self.anchors = homes, anchors
        self._stack: list[str] = []
        self._scoped: list[Any] = []

    def scope(self, layer: Any, path: str) -> None:
        """Run ``layer``'s ``build`` and ``call`` under the scope of unit ``path`` (planned or not)."""
        for name in ("build", "call"):
            keras_compat.override_method(layer, name, self._scoped_method(path, getattr(layer, name)))
        self._scoped.append(layer)

    def _scoped_method(self, path: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            self._stack.append(path)
            try:
                return method(*args, **kwargs)
            finally:
                self._stack.pop()

        return run

    def _creator(self, next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        home = self.homes.get(self._stack[-1]) if self._stack else None
        return next_creator(**kwargs) if home is None else _create_at(home, self.anchors, next_creator, kwargs)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        import tensorflow as tf

        with tf.variable_creator_scope(self._creator):
            yield

    def close(self) -> None:
        for layer in self._scoped:
            keras_compat.restore_method(layer, "build")
            keras_compat.restore_method(layer, "call")
        self._scoped.clear()


@dataclasses.dataclass
class CreationOrder:
    """The i-th variable created belongs to ``units[i]`` (a unit path, or None for a variable of no
    unit) with shape ``shapes[i]``; :meth:`active` creates each on its unit's home."""

    units: list[str | None]
    shapes: list[tuple[int, ...]]

    @contextlib.contextmanager
    def active(self, homes: Homes, anchors: Mapping[int, Any]) -> Iterator[list[Any]]:
        """While active, variables are created on their homes in order; yields the list of the
        variables created, to be checked with :meth:`check`."""
        import tensorflow as tf

        created: list[Any] = []

        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            i = len(created)
            home = homes.get(self.units[i]) if i < len(self.units) and self.units[i] else None
            v = next_creator(**kwargs) if home is None else _create_at(home, anchors, next_creator, kwargs)
            created.append(v)
            return v

        with tf.variable_creator_scope(creator):
            yield created

    def check(self, created: Sequence[Any]) -> None:
        """ModelError unless ``created`` are as many variables of the same shapes, in order."""
        if len(created) != len(self.units):
            raise ModelError(f"the model-building function created {len(self.units)} variables the first time and "
                             f"{len(created)} the second; it must build the same architecture every time it is called")
        for i, (v, shape) in enumerate(zip(created, self.shapes)):
            if tuple(int(d) for d in v.shape) != shape:
                raise ModelError(f"the model-building function's variable {i} ({v.name}) has shape "
                                 f"{tuple(v.shape)} the second time and {shape} the first; it must build the same "
                                 "architecture every time it is called")


def record_creations(fn: Callable[[], Any]) -> tuple[Any, list[Any]]:
    """``fn()`` and the variables created while it ran, in creation order."""
    import tensorflow as tf

    created: list[Any] = []

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        v = next_creator(**kwargs)
        created.append(v)
        return v

    with tf.variable_creator_scope(creator):
        result = fn()
    return result, created


def unit_of_variables(graph: ModelGraph, created: Sequence[Any]) -> CreationOrder:
    """The :class:`CreationOrder` of ``created`` (variables of ``graph.model``, in creation order):
    which unit holds each of them."""
    owner: dict[int, str] = {}
    for unit in graph:
        for w in unit.layer.weights:
            owner.setdefault(id(keras_compat.base_variable(w)), unit.path)
    return CreationOrder(units=[owner.get(id(v)) for v in created],
                         shapes=[tuple(int(d) for d in v.shape) for v in created])
