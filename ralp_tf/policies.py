"""Named placement policies: the extension point through which planners are found by name.

A *policy factory* takes keyword options and returns a placement policy, i.e. any object with
``plan(profile, cluster) -> Plan`` (:class:`ralp_tf.applier.PlacementPolicy`)::

    from ralp_tf.policies import register_policy, resolve_policy

    register_policy("mine", lambda **options: MyPlanner(**options))
    plan = resolve_policy("mine", seed=1).plan(profile, cluster)

Built in: ``"ralp"`` (the analyzer's plan) and ``"ps"`` (stock PSS, nothing placed), both handled
by :func:`ralp_tf.applier.plan_with_policy`. Other packages add theirs through the setuptools
entry point group ``ralp_tf.policies``: each entry point names a function without arguments
that calls :func:`register_policy` (the ``scheduler`` package registers its solvers as
``scheduler.<solver>``). ralp_tf never imports such a package by name: the entry points are
loaded lazily, the first time a name is not found or :func:`policy_names` is asked, and an
error raised while loading one (an ``ImportError`` included) propagates to the caller.
"""
from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ralp_tf.errors import PlanError

if TYPE_CHECKING:
    from ralp_tf.cluster import Cluster
    from ralp_tf.applier import PlacementPolicy
    from ralp_tf.plan import Plan
    from ralp_tf.profiler import ModelProfile

#: The setuptools entry point group whose entries register policies.
ENTRY_POINT_GROUP = "ralp_tf.policies"

PolicyFactory = Callable[..., "PlacementPolicy"]

_factories: dict[str, PolicyFactory] = {}
_loaded_entry_points: set[str] = set()


class BuiltinPolicy:
    """``"ralp"`` or ``"ps"`` as a policy object: ``plan`` is
    ``plan_with_policy(name, profile, cluster, min_speedup=min_speedup)[0]``."""

    def __init__(self, name: str, *, min_speedup: float = 1.05) -> None:
        self.name = name
        self.min_speedup = min_speedup

    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan:
        from ralp_tf.applier import plan_with_policy

        return plan_with_policy(self.name, profile, cluster, min_speedup=self.min_speedup)[0]

    def __repr__(self) -> str:
        return f"BuiltinPolicy({self.name!r}, min_speedup={self.min_speedup})"


def register_policy(name: str, factory: PolicyFactory, *, replace: bool = False) -> None:
    """Make ``resolve_policy(name, **options)`` return ``factory(**options)``.

    Registering the same factory twice under one name is a no-op; a different factory under a
    taken name raises :class:`~ralp_tf.errors.PlanError` unless ``replace`` is true.
    """
    if not isinstance(name, str) or not name.strip():
        raise PlanError(f"a policy name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise PlanError(f"the factory of policy {name!r} must be callable, got {type(factory).__name__}")
    taken = _factories.get(name)
    if taken is not None and taken is not factory and not replace:
        raise PlanError(f"placement policy {name!r} is already registered (by {_describe(taken)}); "
                        "pick another name or pass replace=True")
    _factories[name] = factory


def resolve_policy(name: str, **options: Any) -> PlacementPolicy:
    """``factory(**options)`` for the policy registered as ``name``, loading the entry points of
    :data:`ENTRY_POINT_GROUP` first if ``name`` is not registered yet. Raises
    :class:`~ralp_tf.errors.PlanError` listing the known names when it is nowhere."""
    if name not in _factories:
        load_plugins()
    factory = _factories.get(name)
    if factory is None:
        raise PlanError(f"unknown placement policy {name!r}; known policies: {', '.join(policy_names())}")
    return factory(**options)


def policy_names() -> list[str]:
    """Every registered policy name (plugins loaded), sorted."""
    load_plugins()
    return sorted(_factories)


def load_plugins() -> None:
    """Call the function behind every entry point of :data:`ENTRY_POINT_GROUP` not called yet.
    Whatever it raises propagates; a failed entry point is tried again on the next call."""
    for entry_point in _entry_points():
        key = f"{entry_point.name}={entry_point.value}"
        if key in _loaded_entry_points:
            continue
        entry_point.load()()
        _loaded_entry_points.add(key)


def _entry_points() -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def _describe(factory: PolicyFactory) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', type(factory).__name__)}"


def _builtin_factory(name: str) -> PolicyFactory:
    def make(**options: Any) -> BuiltinPolicy:
        return BuiltinPolicy(name, **options)

    make.__qualname__ = f"builtin[{name}]"
    return make


for _name in ("ralp", "ps"):
    register_policy(_name, _builtin_factory(_name))
