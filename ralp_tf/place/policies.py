"""Named placement policies: the one table through which planners are found by name, from Python
(:func:`ralp_tf.place.applier.plan_with_policy`, ``@ralp_tf.placement("rl")``) and from the command
line (``ralp-tf plan|run --policy NAME [--policy-option KEY=VALUE ...]``, ``python -m
ralp_tf.cli.train_job --policy NAME``) alike.

A *policy factory* takes keyword options and returns a placement policy, i.e. any object with
``plan(profile, cluster) -> Plan`` (:class:`PlacementPolicy`)::

    from ralp_tf.place.policies import register_policy, resolve_policy

    register_policy("mine", lambda **options: MyPlanner(**options))
    plan = resolve_policy("mine", seed=1).plan(profile, cluster)

**Names.** A name is looked up in this order (:func:`canonical_policy_name`):

1. a registered name: ``"ralp"`` (:class:`RalpPolicy`, the analyzer's plan; option
   ``min_speedup``), ``"ps"`` (:class:`StockPolicy`, stock PSS, nothing placed), and every
   plugin's names, e.g. ``"scheduler.exact"``, ``"scheduler.rl"``;
2. an alias from :data:`ALIASES`: ``"none"`` and ``"stock"`` mean ``"ps"``;
3. a short name: the last dotted part of exactly one registered name, so ``"rl"`` means
   ``"scheduler.rl"``. A registered name wins over a short name (``"ralp"`` is the built-in;
   the scheduler's is ``"scheduler.ralp"``), and a short name two plugins share is refused.

**Options** are checked against the factory's signature before it is called: an option it does
not take raises :class:`~ralp_tf.errors.PlanError` naming the option, the options the policy
takes, and the policies that do take it (:func:`accepted_options`).

**Plugins** add policies through the setuptools entry point group ``ralp_tf.policies``: each
entry point names a function without arguments that calls :func:`register_policy` (the
``scheduler`` package registers its solvers as ``scheduler.<solver>``). ralp_tf never imports
such a package by name: the entry points are loaded lazily, the first time a name is not found
or :func:`policy_names` is asked, and an error raised while loading one (an ``ImportError``
included) propagates to the caller.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import os
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

from ralp_tf.errors import PlanError, RalpError
from ralp_tf.plan.compression import AUTO, parse_setting
from ralp_tf.plan.plans import Plan

__all__ = ["PlacementPolicy", "ENTRY_POINT_GROUP", "ALIASES", "PolicyFactory", "RalpPolicy", "StockPolicy", "ConfiguredPolicy",
           "register_policy", "canonical_policy_name", "accepted_options", "check_policy_options",
           "resolve_policy", "policy_from_spec", "policy_names", "describe_policy_names", "load_plugins", "plan_with_policy"]

if TYPE_CHECKING:
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.plan.analyzer import Analysis
    from ralp_tf.plan.cluster import Cluster


class PlacementPolicy(Protocol):
    """Anything that turns a profiled model and a cluster into a Plan (e.g. a scheduler solver)."""

    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan: ...


#: The setuptools entry point group whose entries register policies.
ENTRY_POINT_GROUP = "ralp_tf.policies"

#: Other names of registered policies, accepted wherever a policy name is.
ALIASES: dict[str, str] = {"none": "ps", "stock": "ps"}

PolicyFactory = Callable[..., "PlacementPolicy"]

_factories: dict[str, PolicyFactory] = {}
_loaded_entry_points: set[str] = set()


class RalpPolicy:
    """The built-in ``"ralp"`` policy: the analyzer's plan (:func:`ralp_tf.plan.analyzer.analyze`),
    which splits the model only when the predicted speedup is at least ``min_speedup``;
    ``partition`` and ``split`` are the analyzer's options of the same names: partitioned storage
    and head splits over PS tasks are candidates by default (the applier builds both;
    ``split=False`` leaves the head's layers whole, each on one PS task)."""

    def __init__(self, *, min_speedup: float = 1.05, partition: bool | None = None, split: bool = True) -> None:
        """Raises :class:`~ralp_tf.errors.PlanError` naming the option for a ``min_speedup`` that is
        not a finite number > 0, or a ``partition``/``split`` that is not true/false (or null)."""
        if isinstance(min_speedup, bool) or not isinstance(min_speedup, (int, float)) \
                or not math.isfinite(min_speedup) or min_speedup <= 0:
            raise PlanError(f"the ralp policy's min_speedup must be a finite number > 0 (the predicted speed-up a "
                            f"split must reach), got {min_speedup!r}; pass e.g. min_speedup=1.05")
        for option, value in (("partition", partition), ("split", split)):
            if not isinstance(value, bool) and not (option == "partition" and value is None):
                raise PlanError(f"the ralp policy's {option} must be true or false"
                                + (" (or null: the analyzer decides)" if option == "partition" else "")
                                + f", got {value!r}; pass e.g. {option}=false")
        self.min_speedup, self.partition, self.split = min_speedup, partition, split

    def analyze(self, profile: ModelProfile, cluster: Cluster, compression: Any = None) -> Analysis:
        """The analyzer's decision (``compression`` as in :func:`ralp_tf.plan.analyzer.analyze`); its
        ``plan`` is this policy's plan."""
        from ralp_tf.plan.analyzer import analyze

        return analyze(profile, cluster, min_speedup=self.min_speedup, compression=compression,
                       partition=self.partition, split=self.split)

    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan:
        return self.analyze(profile, cluster).plan

    def __repr__(self) -> str:
        return f"RalpPolicy(min_speedup={self.min_speedup}, partition={self.partition}, split={self.split})"


class StockPolicy:
    """The built-in ``"ps"`` policy (aliases ``"none"``, ``"stock"``): stock
    ParameterServerStrategy, nothing placed; reads neither the profile nor the cluster."""

    def plan(self, profile: ModelProfile | None, cluster: Cluster | None) -> Plan:
        return Plan(placements={}, policy="ps")

    def __repr__(self) -> str:
        return "StockPolicy()"


class ConfiguredPolicy:
    """A registered policy built with options, keeping the name it was asked by: what
    ``--policy NAME --policy-option KEY=VALUE`` builds. ``policy`` is that name (as on a
    :class:`~ralp_tf.plan.plans.Plan`, so results are labelled by it), ``instance`` the policy object;
    :meth:`plan` is the instance's."""

    def __init__(self, name: str, **options: Any) -> None:
        self.policy = name
        self.options = dict(options)
        self.instance = resolve_policy(name, **options)

    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan:
        return self.instance.plan(profile, cluster)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"ConfiguredPolicy({self.policy!r}{', ' + opts if opts else ''})"


def register_policy(name: str, factory: PolicyFactory, *, replace: bool = False) -> None:
    """Make ``resolve_policy(name, **options)`` return ``factory(**options)``.

    Registering the same factory twice under one name is a no-op; a different factory under a
    taken name raises :class:`~ralp_tf.errors.PlanError` unless ``replace`` is true, and so does
    a name of :data:`ALIASES`.
    """
    if not isinstance(name, str) or not name.strip():
        raise PlanError(f"a policy name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise PlanError(f"the factory of policy {name!r} must be callable, got {type(factory).__name__}")
    if name in ALIASES:
        raise PlanError(f"{name!r} is an alias of the placement policy {ALIASES[name]!r}; pick another name")
    taken = _factories.get(name)
    if taken is not None and taken is not factory and not replace:
        raise PlanError(f"placement policy {name!r} is already registered (by {_describe(taken)}); "
                        "pick another name or pass replace=True")
    _factories[name] = factory


def canonical_policy_name(name: str) -> str:
    """The registered name that ``name`` means (registered name, alias or unique short name, in
    that order; see the module docstring). Raises :class:`~ralp_tf.errors.PlanError` listing
    the known names when it means none, or the candidates when a short name is ambiguous."""
    if not isinstance(name, str):
        raise PlanError(f"a policy name must be a string, got {type(name).__name__}")
    if name not in _factories:
        load_plugins()
    if name in _factories:
        return name
    if name in ALIASES:
        return ALIASES[name]
    matches = sorted(n for n in _factories if "." in n and n.rsplit(".", 1)[1] == name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PlanError(f"placement policy {name!r} is ambiguous: it may mean {' or '.join(map(repr, matches))}; "
                        "give the full name")
    raise PlanError(f"unknown placement policy {name!r}; known policies: {describe_policy_names()}")


def accepted_options(name: str) -> list[str] | None:
    """The keyword options the factory of policy ``name`` (any accepted spelling) takes, sorted;
    ``None`` when it takes any (a ``**options`` that goes nowhere checkable). For a class, the
    ``__init__`` chain is followed through ``**kwargs`` passed up to base classes."""
    factory = _factories[canonical_policy_name(name)]
    functions: list[Callable[..., Any]]
    if inspect.isclass(factory):
        functions = [klass.__dict__["__init__"] for klass in factory.__mro__
                     if klass is not object and "__init__" in klass.__dict__]
    else:
        functions = [factory]
    names: set[str] = set()
    for function in functions:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):  # a builtin without a signature: cannot tell
            return None
        names.update(p.name for p in parameters if p.name != "self"
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return sorted(names)
    return None if not inspect.isclass(factory) else sorted(names)


def check_policy_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`~ralp_tf.errors.PlanError` if policy ``name`` does not take one of
    ``options``; the message names the option, the options it takes, and the policies that do
    take that option."""
    accepted = accepted_options(name)
    if accepted is None:
        return
    canonical = canonical_policy_name(name)
    for option in options:
        if option in accepted:
            continue
        owners = [n for n in policy_names() if n != canonical and option in (accepted_options(n) or ())]
        elsewhere = f"; {option!r} is an option of {', '.join(owners)}" if owners else ""
        takes = ", ".join(accepted) if accepted else "no options"
        raise PlanError(f"placement policy {canonical!r} does not take the option {option!r}{elsewhere}. "
                        f"{canonical!r} takes: {takes}")


def resolve_policy(name: str, **options: Any) -> PlacementPolicy:
    """``factory(**options)`` for the policy ``name`` means (:func:`canonical_policy_name`),
    loading the entry points of :data:`ENTRY_POINT_GROUP` first if needed. Raises
    :class:`~ralp_tf.errors.PlanError` for an unknown name, an option the policy does not take
    (:func:`check_policy_options`), or an option value its factory refuses with
    ``TypeError``/``ValueError``; a :class:`~ralp_tf.errors.RalpError` of the factory propagates."""
    canonical = canonical_policy_name(name)
    check_policy_options(canonical, options)
    try:
        return _factories[canonical](**options)
    except RalpError:
        raise
    except (TypeError, ValueError) as exc:
        raise PlanError(f"placement policy {canonical!r} refused its options {options!r}: "
                        f"{type(exc).__name__}: {exc}") from None


def policy_from_spec(spec: str, options: Mapping[str, Any] | None = None) -> str | Plan | ConfiguredPolicy:
    """What a command line's ``--policy SPEC`` (with ``--policy-option`` ``options``) asks for:

    * a plan JSON file when ``spec`` ends in ``.json`` or contains a path separator: the loaded
      :class:`~ralp_tf.plan.plans.Plan` (options are refused: a plan has none);
    * else a policy name: checked (:func:`canonical_policy_name`) and, without options, returned
      as given (an alias as the name it stands for), so results are labelled by it; with options,
      a :class:`ConfiguredPolicy`.

    Raises :class:`~ralp_tf.errors.PlanError` naming the problem."""
    options = dict(options or {})
    if spec.endswith(".json") or os.sep in spec or (os.altsep and os.altsep in spec):
        if options:
            raise PlanError(f"--policy-option {', '.join(options)}: a plan file ({spec}) takes no options; "
                            "give a policy name instead, or drop the options")
        return Plan.load(spec)
    try:
        canonical_policy_name(spec)
    except PlanError as exc:
        raise PlanError(f"{exc}; or give a plan JSON file (a path ending in .json)") from None
    if not options:
        return ALIASES.get(spec, spec)
    return ConfiguredPolicy(spec, **options)


def policy_names() -> list[str]:
    """Every registered policy name (plugins loaded), sorted; aliases and short names are not
    listed (:func:`describe_policy_names` lists them)."""
    load_plugins()
    return sorted(_factories)


def describe_policy_names() -> str:
    """``"ps (also: none, stock), ralp, scheduler.rl (also: rl), ..."``: every name and its other
    spellings, for help texts and error messages."""
    names = policy_names()
    short = [n.rsplit(".", 1)[1] for n in names if "." in n]
    parts = []
    for name in names:
        others = sorted(a for a, target in ALIASES.items() if target == name)
        if "." in name:
            tail = name.rsplit(".", 1)[1]
            if tail not in _factories and short.count(tail) == 1:
                others.append(tail)
        parts.append(f"{name} (also: {', '.join(others)})" if others else name)
    return ", ".join(parts)


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


register_policy("ralp", RalpPolicy)
register_policy("ps", StockPolicy)


def plan_with_policy(policy: Any, prof: ModelProfile, cluster: Cluster, *, min_speedup: float = 1.05,
                     compression: Any = None) -> tuple[Plan, Analysis | None]:
    """Resolve ``policy`` to a Plan for ``prof`` on ``cluster``; return ``(plan, analysis)``.

    ``policy`` is a Plan (returned as is), a policy name of :mod:`ralp_tf.place.policies` (``"ralp"``,
    ``"ps"`` and its aliases ``"none"``/``"stock"``, ``"scheduler.rl"`` or its short name
    ``"rl"``, ...; resolved with :func:`~ralp_tf.place.policies.resolve_policy`, ``min_speedup`` going
    to ``"ralp"``), or an object with ``plan(profile, cluster)`` such as a scheduler solver.
    ``analysis`` is the analyzer's decision for :class:`~ralp_tf.place.policies.RalpPolicy`, else None.
    Raises :class:`PlanError` for an unknown name, a failing policy, or one returning no Plan.

    ``compression`` (a setting of :mod:`ralp_tf.plan.compression`, or ``"auto"``) is weighed by the
    RALP analyzer, and set on every layer of any other policy's plan (``"auto"``: fp16).
    """
    plan, analysis = _plan_of(policy, prof, cluster, min_speedup, compression)
    if compression is not None and analysis is None:
        plan = dataclasses.replace(plan, compression={"*": AUTO if compression == "auto" else
                                                      parse_setting(compression, "compression")})
    return plan, analysis


def _plan_of(policy: Any, prof: ModelProfile, cluster: Cluster, min_speedup: float, compression: Any
             ) -> tuple[Plan, Analysis | None]:
    if isinstance(policy, Plan):
        return policy, None
    if isinstance(policy, str):
        name = canonical_policy_name(policy)
        policy = resolve_policy(name, min_speedup=min_speedup) if name == "ralp" else resolve_policy(name)
    if isinstance(policy, ConfiguredPolicy):
        policy = policy.instance
    if isinstance(policy, RalpPolicy):
        analysis = policy.analyze(prof, cluster, compression=compression)
        return analysis.plan, analysis
    if hasattr(policy, "plan") and callable(policy.plan):
        try:
            plan = policy.plan(prof, cluster)
        except Exception as exc:
            raise PlanError(f"placement policy {type(policy).__name__} failed to plan {prof.model_name!r}: "
                            f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(plan, Plan):
            raise PlanError(f"{type(policy).__name__}.plan() returned {type(plan).__name__}, not a ralp_tf.Plan")
        return plan, None
    raise PlanError(f"placement policy {policy!r} is not a policy name, a Plan, or an object with plan()")
