"""Apply a Plan to a tf_keras model under ParameterServerStrategy (the graph-rewriting pass).

``place(model, plan, strategy)`` returns a placed copy of ``model`` (same layer names, same
initial weights) whose layers store and compute where the plan says:

* **variables** of a layer placed on PS task k are all created on task k
  (``strategy.extended.colocate_vars_with`` an anchor variable living there); other layers'
  variables are spread by the strategy's round-robin as usual;
* **forward ops** of a PS-placed layer run under ``tf.device(<PS k>)``;
* **gradient ops** of a PS-placed layer run on PS k too. ``tf.GradientTape`` creates gradient
  ops where ``tape.gradient`` is called, ignoring forward device scopes, so each placed layer's
  call is wrapped in ``tf.custom_gradient``: the forward pass is recorded by an inner tape, and
  the gradient function replays it under the same ``tf.device``. The math is unchanged (the
  same ops, on another device), so losses and gradients equal the unplaced model's;
* layers placed on ``/job:worker/device:GPU:0`` run their forward under ``tf.device('/device:GPU:0')``
  (merged with whichever worker runs the step); worker CPU layers get no scope.

Works with custom training loops (``ClusterCoordinator.schedule``) and with ``Model.fit``,
because the placement lives in the layers, not in the training step.

:func:`placement` is the decorator form: it builds, plans (RALP analyzer, a Plan, or any object
with ``plan(profile, cluster) -> Plan``) and places in one call.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from typing import Any, Callable, Iterator, Protocol

from ralp_tf.plan.analyzer import Analysis
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.compression import AUTO, parse_setting
from ralp_tf.errors import ModelError, PlanError
from ralp_tf.place.isolation import outside_strategy
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.place.wrappers import compression_of, gpu_call, narrow_weights_call, placed_build, ps_call
from ralp_tf.model.profiler import ModelProfile, check_tf_keras_model, profile
from ralp_tf.place.sharding import copy_weights as copy_weights_into
from ralp_tf.place.sharding import full_weights, sharded_build, sharded_creator
from ralp_tf.model.trace import input_specs, leaf_layers
from ralp_tf.place.verify import verify_placement

__all__ = ["PlacementPolicy", "cluster_of", "place", "variable_homes", "sharded_homes", "colocated_variables",
           "unplace", "plan_with_policy", "place_from_builder", "placement"]

log = logging.getLogger(__name__)


class PlacementPolicy(Protocol):
    """Anything that turns a profiled model and a cluster into a Plan (e.g. a scheduler solver)."""

    def plan(self, profile: ModelProfile, cluster: Cluster) -> Plan: ...


def cluster_of(strategy: Any, **rates: Any) -> Cluster:
    """The :class:`Cluster` a ParameterServerStrategy runs on."""
    resolver = getattr(strategy, "cluster_resolver", None) or getattr(strategy, "_cluster_resolver", None)
    if resolver is None:
        raise ModelError(f"{type(strategy).__name__} has no cluster_resolver; placement needs a "
                         "tf.distribute.ParameterServerStrategy")
    return Cluster.from_cluster_spec(resolver.cluster_spec(), **rates)


def _check_strategy(strategy: Any) -> None:
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        raise ModelError(f"placement needs a tf.distribute.ParameterServerStrategy, got {type(strategy).__name__}")


def _ps_anchors(strategy: Any, tasks: set[int]) -> dict[int, Any]:
    """One tiny variable on each PS task in ``tasks``, created through the strategy's round-robin."""
    import tensorflow as tf

    anchors: dict[int, Any] = {}
    num_ps = cluster_of(strategy).num_ps
    with strategy.scope():
        for _ in range(max(num_ps, 1)):
            v = tf.Variable(0, trainable=False, name="ralp_anchor", dtype=tf.int32)
            spec = tf.DeviceSpec.from_string(v.device)
            anchors.setdefault(int(spec.task or 0), v)
    missing = tasks - set(anchors)
    if missing:
        raise PlanError(f"plan uses PS task(s) {sorted(missing)} but the strategy has {num_ps} PS task(s)")
    return anchors


def place(model: Any, plan: Plan, strategy: Any, *, copy_weights: bool = True, verify: bool = True,
          input_shape: Any = None) -> Any:
    """The placed model under ``strategy`` (see the module docstring).

    Layers are named by path (:func:`ralp_tf.model.trace.leaf_layers`): ``fc1``, or
    ``classifier/fc1`` inside a nested model. A Sequential or Functional model (nested ones
    included) is re-created under the strategy: the copy has the same layer names and, with
    ``copy_weights``, the same weights. A subclassed model cannot be re-created, so it is placed
    in place and returned: its planned layers' variables are created on their PS task when it is
    built here (``input_shape``, without the batch dimension, tells how, unless the model knows);
    a model already built elsewhere is accepted only if its variables already live where the plan
    says (build it under :func:`colocated_variables`, as the decorator does). Raises PlanError for
    unknown layers/devices, ModelError for models that cannot be placed.

    With ``verify`` (the default) one training step is traced and every placed layer's
    variables, forward ops and gradient ops are checked against the plan
    (:func:`ralp_tf.place.verify.verify_placement`): a mismatch raises PlacementMismatchError naming
    the layer. ``verify=False`` skips the check (about a second per model) for experts who
    have checked their model another way.
    """
    check_tf_keras_model(model)
    _check_strategy(strategy)
    if not isinstance(plan, Plan):
        raise PlanError(f"place() takes a ralp_tf.Plan, got {type(plan).__name__}; build one with "
                        "Plan(placements={...}) or Plan.from_json(text)")
    cluster = cluster_of(strategy)
    leaves = leaf_layers(model)
    inputs = [l.name for l in getattr(model, "layers", []) if type(l).__name__ == "InputLayer"]
    plan.validate([*inputs, *leaves], cluster)
    ps_layers = plan.ps_layers()
    for name in ps_layers:
        if name in inputs:
            raise PlanError(f"layer {name!r} is a model input; inputs stay on the workers")
    homes, shards = variable_homes(plan), sharded_homes(plan)
    _refuse_layers_at_two_paths(model, leaves, {**homes, **shards})
    tasks = set(homes.values()) | {k for ks in shards.values() for k in ks}
    anchors = _ps_anchors(strategy, tasks) if tasks else {}
    builders = {path: functools.partial(placed_build, strategy=strategy, anchor=anchors[k]) for path, k in homes.items()}
    builders.update({path: functools.partial(sharded_build, anchors=[anchors[k] for k in ks])
                     for path, ks in shards.items()})
    if getattr(model, "_is_graph_network", False):
        placed = _recreated(model, strategy, builders, copy_weights)
    else:
        placed = _built_in_place(model, strategy, builders, input_shape)
    for path, layer in leaf_layers(placed).items():
        if "build" in layer.__dict__:
            del layer.build  # the colocation wrapper was only needed while building
        setting = compression_of(plan, path, layer)
        d = parse_device(plan.placements.get(path, cluster.worker_device))
        if d.is_ps:
            layer.call = ps_call(layer, layer.call, d.canonical(), path, setting.activations)
            continue
        if setting.weights != "none" or setting.gradients != "none":
            layer.call = narrow_weights_call(layer, layer.call, setting.weights, path, setting.gradients)
        if d.device_type == "GPU":
            layer.call = gpu_call(layer.call, "GPU")
    placed.ralp_plan = plan
    _check_variable_homes(placed, homes, shards)
    if verify:
        verify_placement(placed, plan, input_shape=input_shape)
    return placed


def variable_homes(plan: Plan) -> dict[str, int]:
    """Layer path -> the PS task its variables are created on: the task of a PS-computed layer,
    or the one task the plan's ``storage`` names for a worker-computed layer (layers stored on
    several tasks are in :func:`sharded_homes`)."""
    homes = dict(plan.ps_layers())
    homes.update({path: tasks[0] for path, tasks in plan.stored_on().items() if len(tasks) == 1})
    return homes


def sharded_homes(plan: Plan) -> dict[str, tuple[int, ...]]:
    """Layer path -> the PS tasks holding the shards of its variables, for every worker-computed
    layer the plan's ``storage`` splits over several tasks (:mod:`ralp_tf.place.sharding`)."""
    return {path: tuple(tasks) for path, tasks in plan.stored_on().items() if len(tasks) > 1}


def _recreated(model: Any, strategy: Any, builders: dict[str, Callable[[Any], None]], copy_weights: bool) -> Any:
    """``model`` re-created from its layers' configs under ``strategy``, nested models included;
    ``builders[path](layer)`` makes a planned layer create its variables where the plan says."""
    import tf_keras

    def clone_layer(layer: Any, prefix: str) -> Any:
        path = f"{prefix}{layer.name}"
        if isinstance(layer, tf_keras.Model) and getattr(layer, "_is_graph_network", False):
            return tf_keras.models.clone_model(layer, clone_function=lambda l: clone_layer(l, f"{path}/"))
        try:
            new = layer.__class__.from_config(layer.get_config())
        except Exception as exc:
            raise ModelError(f"layer {path!r} ({type(layer).__name__}) cannot be re-created from its config "
                             f"({type(exc).__name__}: {exc}); give it get_config()/from_config(), or write the model "
                             "as a subclassed tf_keras.Model, which ralp_tf places in place") from exc
        if path in builders:
            builders[path](new)
        return new

    with strategy.scope():
        placed = tf_keras.models.clone_model(model, clone_function=lambda l: clone_layer(l, ""))
        if copy_weights:
            copy_weights_into(placed, model.get_weights())
    return placed


def _built_in_place(model: Any, strategy: Any, builders: dict[str, Callable[[Any], None]], input_shape: Any) -> Any:
    """A subclassed ``model``, built under ``strategy`` with each planned layer's variables on its
    PS task (or checked to be there already)."""
    import tensorflow as tf

    if model.weights:
        return model  # built elsewhere: _check_variable_homes says whether its variables are where planned
    leaves = leaf_layers(model)
    for path, build in builders.items():
        build(leaves[path])
    specs = input_specs(model, input_shape)
    with strategy.scope():
        tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0], training=False),
                    autograph=False).get_concrete_function(*specs)
    return model


@contextlib.contextmanager
def colocated_variables(plan: Plan, strategy: Any) -> Iterator[None]:
    """While active (inside ``strategy.scope()``), variables created under the name scope of a layer
    whose variables the plan puts on PS task k (:func:`variable_homes`) are created on task k, and
    those of a layer it splits over several tasks (:func:`sharded_homes`) as shards on them. For
    models whose layers are created and built in one go (a subclassed model built in its
    constructor); matched by the layer's own name (the last part of its path), so those names
    must be unique in the plan."""
    import tensorflow as tf

    homes, shards = variable_homes(plan), sharded_homes(plan)
    tasks = set(homes.values()) | {k for ks in shards.values() for k in ks}
    anchors = _ps_anchors(strategy, tasks) if tasks else {}
    by_leaf: dict[str, Callable[..., Any]] = {
        path.rsplit("/", 1)[-1]: sharded_creator([anchors[k] for k in ks]) for path, ks in shards.items()}

    def on_task(k: int) -> Callable[..., Any]:
        return lambda next_creator, **kwargs: next_creator(**dict(kwargs, colocate_with=anchors[k], use_resource=True))

    by_leaf.update({path.rsplit("/", 1)[-1]: on_task(k) for path, k in homes.items()})

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        scope = tf.get_current_name_scope().rstrip("/").split("/")
        create = by_leaf.get(scope[-1]) if scope and scope[-1] else None
        return create(next_creator, **kwargs) if create is not None else next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        yield


def _refuse_layers_at_two_paths(model: Any, leaves: dict[str, Any], ps_layers: dict[str, int]) -> None:
    """Refuse a plan that places a layer the model also calls at another path (e.g. inside a
    nested model): the copy would not share it, and the plan could not place every call."""
    paths_of: dict[int, list[str]] = {}
    for path, layer in leaves.items():
        paths_of.setdefault(id(layer), []).append(path)
    for path in sorted(ps_layers):
        others = [p for p in paths_of.get(id(leaves.get(path)), []) if p != path]
        if others:
            raise PlanError(f"layer {path!r} is also called at {others[0]!r} (inside a nested model), where the plan "
                            f"cannot place it; keep {path!r} on the workers, or build the model without nesting it")


def _check_variable_homes(model: Any, ps_layers: dict[str, int], shards: dict[str, tuple[int, ...]]) -> None:
    """Every variable of a planned layer is on its PS task; a sharded layer's on its tasks, the
    shards of its largest variable on all of them."""
    import tensorflow as tf

    leaves = leaf_layers(model)
    homes = {**{path: (k,) for path, k in ps_layers.items()}, **shards}
    for path, tasks in homes.items():
        used = set()
        for v in leaves[path].weights:
            spec = tf.DeviceSpec.from_string(v.device)
            used.add(int(spec.task or 0))
            if spec.job != "ps" or int(spec.task or 0) not in tasks:
                where = f"PS task {tasks[0]}" if len(tasks) == 1 else f"PS tasks {list(tasks)}"
                raise PlanError(
                    f"variable {v.name} of layer {path!r} landed on {v.device}, not {where}. A subclassed model "
                    "must reach place() unbuilt (ralp_tf builds it), or be built under "
                    "ralp_tf.place.applier.colocated_variables(plan, strategy), as @ralp_tf.placement does; a layer "
                    "that creates variables outside build() cannot be colocated: keep it on the workers")
        if len(tasks) > 1 and leaves[path].weights and used != set(tasks):
            raise PlanError(f"layer {path!r} is split over PS tasks {list(tasks)} but its variables landed on "
                            f"{sorted(used)} only: its variables have fewer rows than shards; store it on fewer tasks")


def unplace(model: Any) -> Any:
    """A single-machine copy of a (placed) model: same architecture and weights, no device pins,
    no strategy. Use it to save, export or serve a model trained with placement."""
    import tf_keras

    check_tf_keras_model(model)
    clone = tf_keras.models.clone_model(model)  # re-created from layer configs: no wrappers, no pins
    clone.set_weights(full_weights(model))
    return clone


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
    from ralp_tf.place.policies import ConfiguredPolicy, RalpPolicy, canonical_policy_name, resolve_policy

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


def place_from_builder(build: Callable[[], Any], base: Any, plan: Plan, strategy: Any, *, input_shape: Any = None,
                       verify: bool = True) -> Any:
    """Place the model ``build()`` makes, given ``base``: an instance it made earlier, outside the
    strategy, that was profiled and planned.

    A Sequential/Functional ``base`` is re-created under the strategy (:func:`place`). A
    subclassed model cannot be, so ``build()`` makes a new instance under the strategy and
    :func:`colocated_variables`, and the plan's layer paths are carried over from ``base``'s
    layers to the new instance's by position (auto-generated layer names differ between two
    instances). The placed model starts from ``base``'s weights either way.
    """
    if getattr(base, "_is_graph_network", False):
        return place(base, plan, strategy, verify=verify)
    before = list(leaf_layers(base))
    with strategy.scope():
        model = build()
    check_tf_keras_model(model)
    after = list(leaf_layers(model))
    if len(before) != len(after):
        raise ModelError(f"the model-building function made {len(before)} and then {len(after)} layers; it must "
                         "build the same architecture every time it is called")
    plan = _renamed(plan, dict(zip(before, after)))
    if model.weights:  # built by its constructor: rebuild it with the plan's colocation
        with strategy.scope(), colocated_variables(plan, strategy):
            model = build()
    placed = place(model, plan, strategy, verify=verify, input_shape=input_shape)
    placed.set_weights(base.get_weights())  # start from base's weights, as a re-created model does
    return placed


def _renamed(plan: Plan, names: dict[str, str]) -> Plan:
    """``plan`` with its layer paths renamed by ``names`` (paths not in ``names`` unchanged)."""
    fields = {f.name for f in dataclasses.fields(plan)}
    changes: dict[str, Any] = {"placements": {names.get(k, k): v for k, v in plan.placements.items()}}
    if "storage" in fields:
        changes["storage"] = {names.get(k, k): v for k, v in plan.storage.items()}
    return dataclasses.replace(plan, **changes)


def placement(policy: Any = "ralp", *, strategy: Any = None, batch_size: int = 32, bandwidth: Any = None,
              flops: Any = None, min_speedup: float = 1.05, input_shape: Any = None, compression: Any = None
              ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@placement(policy)`` on a model-building function returns a placed model.

    The strategy is ``strategy`` or the one whose scope is active when the function is called.
    The function is first called outside the strategy (:func:`ralp_tf.place.isolation.outside_strategy`)
    to profile and plan; the placed model is then created under it (:func:`place_from_builder`),
    so no unused copy's variables are left on the parameter servers. ``batch_size`` (per
    worker), ``bandwidth`` and ``flops`` feed the planner's cost model; ``input_shape`` (without
    the batch dimension) is needed only for a subclassed model that its function does not build.
    ``compression`` (e.g. ``"fp16"``, ``"auto"``; see :mod:`ralp_tf.plan.compression`) goes to the
    planner (:func:`plan_with_policy`). The returned model carries ``ralp_plan`` and, for "ralp", ``ralp_analysis``.
    """

    def decorate(build: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(build)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            import tensorflow as tf

            strat = strategy or (tf.distribute.get_strategy() if tf.distribute.has_strategy() else None)
            if strat is None:
                raise ModelError("@ralp_tf.placement needs a ParameterServerStrategy: pass strategy=... or call "
                                 "the decorated function inside `with strategy.scope():`")
            _check_strategy(strat)
            rates: dict[str, Any] = {}
            if bandwidth is not None:
                rates["bandwidth"] = bandwidth
            if flops is not None:
                rates["flops"] = flops
            cluster = cluster_of(strat, **rates)
            base = outside_strategy(build, *args, **kwargs)
            check_tf_keras_model(base)
            prof = outside_strategy(profile, base, batch_size=batch_size, input_shape=input_shape)
            plan, analysis = plan_with_policy(policy, prof, cluster, min_speedup=min_speedup,
                                              compression=compression)
            placed = place_from_builder(functools.partial(build, *args, **kwargs), base, plan, strat,
                                        input_shape=input_shape)
            placed.ralp_analysis = analysis
            return placed

        return wrapper

    return decorate
