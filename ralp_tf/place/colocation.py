"""Where a placed model's variables are created: on the PS task(s) its plan names for each unit.

ParameterServerStrategy spreads variables over PS tasks round-robin; ``tf.device`` does not change
that, but a variable created with ``colocate_with=<a variable on task k>`` lands on task k. So
:func:`ps_anchors` first creates one tiny anchor variable on each PS task the plan uses, and a
variable creator (``tf.variable_creator_scope``) gives every variable of a planned unit its
unit's anchor, or, for a unit whose storage the plan partitions over K tasks, creates it as K
shards along one axis (:mod:`ralp_tf.place.sharding`); per-variable storage gives each variable,
counted in creation order within its unit, its own home.

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
from collections import Counter
from typing import Any, Callable, Iterator, Mapping, Sequence

from ralp_tf.errors import ModelError, PlanError
from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph
from ralp_tf.place.sharding import create_sharded
from ralp_tf.place.split_layers import split_homes
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.plan.shards import Sharded, VariableStorage

__all__ = ["VariableHome", "UnitHome", "Homes", "unit_homes", "homes_tasks", "ps_anchors", "create_at", "UnitScopes",
           "CreationOrder", "record_creations",
           "unit_of_variables"]

@dataclasses.dataclass(frozen=True)
class VariableHome:
    """Where one variable lives: whole on PS task ``tasks[0]`` (one task), or split along ``axis``
    into shards on ``tasks`` (:func:`ralp_tf.place.sharding.create_sharded`)."""

    tasks: tuple[int, ...]
    axis: int = 0


@dataclasses.dataclass(frozen=True)
class UnitHome:
    """Where a unit's variables live: every variable at ``default``, or, when ``variables`` is
    given (a plan's per-variable storage), the i-th variable (weight order) at ``variables[i]``."""

    default: VariableHome | None = None
    variables: tuple[VariableHome, ...] = ()

    def of(self, index: int, path: str) -> VariableHome:
        """The home of the unit's ``index``-th variable; PlanError when the plan lists fewer."""
        if not self.variables:
            assert self.default is not None
            return self.default
        if index >= len(self.variables):
            raise PlanError(f"layer {path!r} creates more variables than the {len(self.variables)} its storage "
                            "lists; list one entry per variable, in the order of layer.weights")
        return self.variables[index]

    @property
    def tasks(self) -> set[int]:
        return {k for h in ((self.default,) if self.default else ()) + self.variables for k in h.tasks}


#: Unit path -> where its variables live.
Homes = Mapping[str, UnitHome]


def _task_of(device: str) -> int:
    return int(parse_device(device).task)


def unit_homes(plan: Plan) -> dict[str, UnitHome]:
    """Unit path -> where its variables live: the task of a PS-computed unit (a split one's shards:
    :func:`ralp_tf.place.split_layers.split_homes`); for a worker-computed
    one, what the plan's ``storage`` says (one task; K tasks: every variable in shards along axis
    0; the per-variable form: each variable whole on a task or in shards along its own axis)."""
    homes = {path: UnitHome(VariableHome((k,))) for path, k in plan.ps_layers().items()}
    for path, split in plan.splits.items():
        homes[path] = UnitHome(variables=tuple(VariableHome(tasks, axis)
                                               for tasks, axis in split_homes(split, plan.ps_layers()[path])))
    for path, value in plan.storage.items():
        if isinstance(value, VariableStorage):
            homes[path] = UnitHome(variables=tuple(
                VariableHome(e.tasks, e.axis) if isinstance(e, Sharded) else VariableHome((_task_of(e),))
                for e in value.variables))
        else:
            devices = (value,) if isinstance(value, str) else tuple(value)
            homes[path] = UnitHome(VariableHome(tuple(_task_of(d) for d in devices)))
    return homes


def homes_tasks(homes: Homes) -> set[int]:
    """Every PS task some unit of ``homes`` stores a variable on."""
    return {k for home in homes.values() for k in home.tasks}


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


def create_at(home: VariableHome, anchors: Mapping[int, Any], next_creator: Callable[..., Any],
              kwargs: dict[str, Any]) -> Any:
    """The variable ``kwargs`` describe, created at ``home`` (``anchors``: one variable per PS task)."""
    if len(home.tasks) > 1:
        return create_sharded(next_creator, kwargs, [anchors[k] for k in home.tasks], home.axis)
    return next_creator(**dict(kwargs, colocate_with=anchors[home.tasks[0]], use_resource=True))


class UnitScopes:
    """Creates each variable on the home of the planned unit whose ``build`` or ``call`` is
    running (module docstring). :meth:`scope` installs the scopes on a unit; :meth:`active` is
    the variable creator; :meth:`close` takes the scopes off again."""

    def __init__(self, homes: Homes, anchors: Mapping[int, Any]) -> None:
        self.homes, self.anchors = homes, anchors
        self._stack: list[str] = []
        self._scoped: list[Any] = []
        self._created: Counter[str] = Counter()

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
        path = self._stack[-1] if self._stack else None
        home = self.homes.get(path) if path else None
        if home is None:
            return next_creator(**kwargs)
        index = self._created[path]
        self._created[path] += 1
        return create_at(home.of(index, path), self.anchors, next_creator, kwargs)

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
        per_unit: Counter[str] = Counter()

        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            i = len(created)
            unit = self.units[i] if i < len(self.units) else None
            home = homes.get(unit) if unit else None
            if home is None:
                v = next_creator(**kwargs)
            else:
                v = create_at(home.of(per_unit[unit], unit), anchors, next_creator, kwargs)
                per_unit[unit] += 1
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
