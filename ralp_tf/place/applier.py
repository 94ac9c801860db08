"""Apply a Plan to a tf_keras model under ParameterServerStrategy.

The model's units and their paths come from the one walk, :func:`ralp_tf.model.graph.walk`; a
plan names units by path (older plans by the Keras names earlier releases used, mapped where
unambiguous: :meth:`~ralp_tf.model.graph.ModelGraph.resolve`). For every unit the plan names:

* **variables**: created on the PS task(s) of the unit's home (:mod:`ralp_tf.place.colocation`):
  the task it computes on, or the task(s) the plan's ``storage`` names; other variables are
  spread by the strategy's round-robin as usual;
* **forward and gradient ops** of a PS-computed unit run on its task, its weight regularisers
  too (:mod:`ralp_tf.place.wrappers`); the math is unchanged, so losses and gradients equal the
  unplaced model's;
* a unit on ``/job:worker/device:GPU:0`` runs its forward on the GPU of whichever worker runs
  the step; compression settings narrow what crosses the network.

Three ways to get a placed model:

* :func:`place` takes a model instance: a Functional or Sequential model is re-created from its
  layers' configs under the strategy; a subclassed model not yet built is built in place; one
  already built is accepted when its variables already live where the plan says;
* :func:`place_from_builder` takes the function that builds the model (what the decorator and
  ``ralp_tf.train`` use): it builds the model again under the strategy, so it works for any
  model, custom layers without ``get_config`` included;
* :func:`placement` is the decorator: it builds, profiles and plans outside the strategy, then
  places with :func:`place_from_builder`.

After placing, one training step is traced and every placed unit's variables, forward ops and
gradient ops are checked against the plan (:func:`ralp_tf.place.verify.verify_placement`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections import Counter
from typing import Any, Callable, Iterator

from ralp_tf.errors import ModelError, PlanError
from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph, is_container, walk
from ralp_tf.model.data import TrainingSpec, training_spec
from ralp_tf.model.kinds import ps_refusal
from ralp_tf.model.profiler import check_tf_keras_model, profile
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.model.trace import input_signature
from ralp_tf.place.colocation import (CreationOrder, Homes, UnitScopes, create_at, homes_tasks, ps_anchors,
                                      record_creations, unit_of_variables, unit_homes)
from ralp_tf.place.evaluation import install_evaluation
from ralp_tf.place.isolation import outside_strategy
from ralp_tf.place.policies import PlacementPolicy, plan_with_policy
from ralp_tf.place.sharding import copy_weights as copy_weights_into
from ralp_tf.place.sharding import full_weights, weight_groups
from ralp_tf.place.split_layers import split_refusal_of
from ralp_tf.place.verify import GradientReference, verify_placement
from ralp_tf.place.op_placement import install_op_placement
from ralp_tf.place.wrappers import install_placement
from ralp_tf.plan.cluster import Cluster, Rates
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.plan.shards import split_refusal

__all__ = ["PlacementPolicy", "Prepared", "cluster_of", "check_strategy", "resolve_plan", "place", "prepare",
           "place_from_builder", "colocated_variables", "unplace", "placement"]


def cluster_of(strategy: Any, **rates: Any) -> Cluster:
    """The :class:`Cluster` a ParameterServerStrategy runs on."""
    resolver = keras_compat.cluster_resolver_of(strategy)
    if resolver is None:
        raise ModelError(f"{type(strategy).__name__} has no cluster_resolver; placement needs a "
                         "tf.distribute.ParameterServerStrategy")
    return Cluster.from_cluster_spec(resolver.cluster_spec(), **rates)


def check_strategy(strategy: Any) -> None:
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        raise ModelError(f"placement needs a tf.distribute.ParameterServerStrategy, got {type(strategy).__name__}")


def resolve_plan(plan: Plan, graph: ModelGraph, cluster: Cluster | None = None,
                 profile: ModelProfile | None = None) -> Plan:
    """``plan`` with every layer name it uses made a unit path of ``graph`` (an older plan's names
    mapped where unambiguous), checked against ``cluster`` and the units: a unit that cannot
    compute on a PS task (``profile``'s ``ps_refusal`` when given, else what the layer itself
    says) is refused from one with the reason. Raises PlanError naming the problem."""
    if not isinstance(plan, Plan):
        raise PlanError(f"place() takes a ralp_tf.Plan, got {type(plan).__name__}; build one with "
                        "Plan(placements={...}) or Plan.from_json(text)")
    fields = {"placements": _without_worker_op_records(plan, graph), "storage": dict(plan.storage),
              "compression": {k: v.to_dict() for k, v in plan.compression.items()}, "splits": dict(plan.splits)}
    names = {n for f in fields.values() for n in f if n != "*"}
    mapping = graph.resolve(sorted(names))
    renamed: dict[str, dict[str, Any]] = {}
    for field, entries in fields.items():
        out: dict[str, Any] = {}
        for name, value in entries.items():
            path = mapping.get(name, name)
            if path in out and out[path] != value:
                raise PlanError(f"plan gives {field} {out[path]!r} and {value!r} to parts of {path!r} ({name!r}, ...); "
                                f"ralp_tf places a layer that holds layers as a whole: name {path!r} once")
            out[path] = value
        renamed[field] = out
    unchanged = all(k == v for k, v in mapping.items()) and renamed["placements"] == dict(plan.placements)
    resolved = plan if unchanged else dataclasses.replace(plan, **renamed)
    resolved.validate(graph.paths, cluster)
    _check_splits(resolved, graph, profile)
    refusals = {l.name: l.ps_refusal for l in profile.layers} if profile is not None else {}
    for path in resolved.ps_layers():
        why = refusals.get(path) if profile is not None else ps_refusal(graph.layer(path))
        if why:
            raise PlanError(f"layer {path!r} cannot compute on a PS task: {why}; keep it on the workers")
    for path in set(unit_homes(resolved)):
        if len(graph.paths_by_layer.get(id(graph.layer(path)), [])) > 1:
            other = [p for p in graph.paths_by_layer[id(graph.layer(path))] if p != path][0]
            raise PlanError(f"layer {path!r} is also called at {other!r} (inside a nested model), where the plan "
                            f"cannot place it; keep {path!r} on the workers, or build the model without nesting it")
    return resolved


def _check_splits(plan: Plan, graph: ModelGraph, profile: ModelProfile | None) -> None:
    """PlanError, naming the layer and the fix, for a split the layer cannot take: the live layer's
    class, activation, regularisers and constraints (:func:`~ralp_tf.place.split_layers.split_refusal_of`)
    and, with a ``profile``, its variable shapes against the shard count
    (:func:`~ralp_tf.plan.shards.split_refusal`)."""
    for path, split in plan.splits.items():
        why = split_refusal_of(graph.layer(path), path, split)
        if not why and profile is not None:
            why = split_refusal(profile.layer(path), split.by, len(split.devices))
        if why:
            raise PlanError(why)


def _without_worker_op_records(plan: Plan, graph: ModelGraph) -> dict[str, str]:
    """``plan.placements`` without the profile's ``op:`` records (TensorFlow ops of a model's own
    ``call``, which are no units of the walk): wherever a plan names them, they compute with their
    inputs (:mod:`ralp_tf.place.op_placement`), as the cost model prices them."""
    return {name: device for name, device in plan.placements.items()
            if name in graph.paths or not name.rsplit("/", 1)[-1].startswith("op:")}


def place(model: Any, plan: Plan, strategy: Any, *, copy_weights: bool = True, verify: bool = True,
          input_shape: Any = None, sequence_length: int | None = None) -> Any:
    """The placed model under ``strategy`` (module docstring).

    A Sequential or Functional model (nested ones included) is re-created under the strategy:
    the copy has the same layers and, with ``copy_weights``, the same weights. A subclassed model
    cannot be re-created, so it is placed in place and returned: its planned units' variables
    are created on their PS task when it is built here (``input_shape``, without the batch
    dimension, tells how, unless the model knows); a model already built elsewhere is accepted
    only if its variables already live where the plan says. Raises PlanError for unknown layers
    or devices, ModelError for models that cannot be placed (use :func:`place_from_builder`, or
    the decorator, for models whose layers cannot be re-created from their configs).

    With ``verify`` (the default) one training step is traced and checked against the plan; a
    mismatch raises PlacementMismatchError naming the layer.
    """
    check_tf_keras_model(model)
    check_strategy(strategy)
    cluster = cluster_of(strategy)
    graph = walk(model)
    plan = resolve_plan(plan, graph, cluster)
    homes = unit_homes(plan)
    anchors = ps_anchors(strategy, homes_tasks(homes), cluster.num_ps)
    if keras_compat.is_graph_network(model):
        placed = _recreated(model, graph, strategy, homes, anchors, copy_weights)
    else:
        placed = _built_in_place(model, graph, strategy, homes, anchors, input_shape, sequence_length)
    return _finish(placed, plan, cluster, homes, graph.paths, verify=verify, input_shape=input_shape,
                   sequence_length=sequence_length)


def _recreated(model: Any, graph: ModelGraph, strategy: Any, homes: Homes, anchors: dict[int, Any],
               copy_weights: bool) -> Any:
    """``model`` re-created from its layers' configs under ``strategy``, nested Functional models
    included, each planned unit's variables created on its home."""
    import tf_keras

    scopes = UnitScopes(homes, anchors)

    def clone_layer(layer: Any) -> Any:
        if is_container(layer) and keras_compat.is_graph_network(layer):
            return tf_keras.models.clone_model(layer, clone_function=clone_layer)
        path = graph.path_of(layer) or layer.name
        try:
            new = layer.__class__.from_config(layer.get_config())
        except Exception as exc:
            raise ModelError(f"layer {path!r} ({type(layer).__name__}) cannot be re-created from its config "
                             f"({type(exc).__name__}: {str(exc)[:200]}); place the model with the function that "
                             "builds it instead (@ralp_tf.placement, or ralp_tf.place.applier.place_from_builder), "
                             "which builds it again under the strategy") from exc
        scopes.scope(new, path)
        return new

    try:
        with strategy.scope(), scopes.active():
            placed = tf_keras.models.clone_model(model, clone_function=clone_layer)
        if copy_weights:
            with strategy.scope():
                copy_weights_into(placed, model.get_weights())
    finally:
        scopes.close()
    return placed


def _built_in_place(model: Any, graph: ModelGraph, strategy: Any, homes: Homes, anchors: dict[int, Any],
                    input_shape: Any, sequence_length: int | None) -> Any:
    """A subclassed ``model``, built under ``strategy`` with each planned unit's variables on its
    home (or, built elsewhere, returned to be checked)."""
    if model.weights:
        return model
    scopes = UnitScopes(homes, anchors)
    for unit in graph:
        scopes.scope(unit.layer, unit.path)
    try:
        with strategy.scope(), scopes.active():
            _build_by_tracing(model, input_shape, sequence_length, graph)
    finally:
        scopes.close()
    return model


def _build_by_tracing(model: Any, input_shape: Any, sequence_length: int | None, graph: ModelGraph | None = None
                      ) -> None:
    """Create ``model``'s variables by tracing one call (nothing runs)."""
    import tensorflow as tf

    signature = input_signature(model, input_shape, sequence_length, graph)
    tf.function(lambda *xs: model(signature.pack(xs), training=False),
                autograph=False).get_concrete_function(*signature.flat)


def _finish(model: Any, plan: Plan, cluster: Cluster, homes: Homes, expected_paths: list[str], *, verify: bool,
            input_shape: Any, sequence_length: int | None) -> Any:
    """Install the plan's per-unit wrappers on the placed ``model`` (and the tape's gradient sums
    colocated with their summands, :func:`keras_compat.sum_gradients_where_they_are`; a legacy
    optimizer's gradients left where they are computed, :func:`keras_compat.all_reduce_only_across_replicas`),
    check where its variables landed and, with ``verify``, the traced training step. Its ``evaluate``
    and ``predict`` take what a Keras user passes (:mod:`ralp_tf.place.evaluation`)."""
    keras_compat.sum_gradients_where_they_are()
    keras_compat.all_reduce_only_across_replicas()
    graph = walk(model)
    if graph.paths != expected_paths:
        raise ModelError(f"the placed model's layers ({', '.join(graph.paths[:6])}, ...) differ from the planned "
                         f"model's ({', '.join(expected_paths[:6])}, ...); build the same architecture every time")
    install_placement(graph, plan, cluster.worker_device)
    install_op_placement(graph)
    install_evaluation(model)
    model.ralp_plan = plan
    _check_unit_homes(graph, homes)
    if verify:
        verify_placement(model, plan, input_shape=input_shape, sequence_length=sequence_length)
    return model


@dataclasses.dataclass
class Prepared:
    """A model built outside the strategy (``base``), its profile, the order its variables were
    created in (:class:`~ralp_tf.place.colocation.CreationOrder`), its initial weights as arrays
    and what training feeds it (:class:`~ralp_tf.model.data.TrainingSpec`): what placing and
    training it again needs. The arrays and the spec stay usable after this process connects to a
    cluster, when ``base``'s own variables (on ``/job:localhost``) no longer are."""

    base: Any
    profile: ModelProfile
    order: CreationOrder
    graph: ModelGraph
    weights: list[Any]
    spec: TrainingSpec
    #: the unplaced model's first-step gradients, when a job will compare its own with them
    #: (:func:`ralp_tf.place.verify.reference_gradients`)
    reference: GradientReference | None = None


def prepare(build: Callable[[], Any], batch_size: int = 32, *, input_shape: Any = None,
            sequence_length: int | None = None, measure: bool = False) -> Prepared:
    """Build ``build()``'s model outside any strategy (:func:`ralp_tf.place.isolation.outside_strategy`),
    build it by tracing when it builds itself lazily, profile it (``measure``: with measured layer
    times), and record which unit each of its variables belongs to, in creation order."""

    def run() -> Prepared:
        def built() -> tuple[Any, ModelProfile, ModelGraph]:
            model = build()
            check_tf_keras_model(model)
            graph = walk(model)
            prof = profile(model, batch_size, measure=measure, input_shape=input_shape,
                           sequence_length=sequence_length, graph=graph)
            return model, prof, graph

        (model, prof, graph), created = record_creations(built)
        check_trains_under_pss(model)
        return Prepared(base=model, profile=prof, order=unit_of_variables(graph, created), graph=graph,
                        weights=model.get_weights(), spec=training_spec(model, input_shape, sequence_length))

    return outside_strategy(run)


def check_trains_under_pss(model: Any) -> None:
    """ModelError, naming the layer and the fix, for what tf.distribute's ParameterServerStrategy
    cannot train (tf_keras raises only at the first step, after a cluster has started): a layer
    under a ``mixed_*`` dtype policy, and a stateful RNN."""
    import tf_keras

    for layer in [*(m for m in model.submodules if isinstance(m, tf_keras.layers.Layer)), model]:
        policy = getattr(getattr(layer, "dtype_policy", None), "name", "") or ""
        if policy.startswith("mixed_"):
            raise ModelError(f"layer {layer.name!r} computes under the {policy!r} dtype policy, and tf_keras does not "
                             "support mixed precision with ParameterServerStrategy; build the model under the "
                             "'float32' policy (tf_keras.mixed_precision.set_global_policy('float32'))")
        if not isinstance(layer, tf_keras.Model) and getattr(layer, "stateful", False) is True:
            raise ModelError(f"layer {layer.name!r} is a stateful RNN, which tf.distribute strategies do not support; "
                             "build it with stateful=False (carry the state in the inputs if you need it)")


def place_from_builder(build: Callable[[], Any], prepared: Prepared, plan: Plan, strategy: Any, *,
                       input_shape: Any = None, sequence_length: int | None = None, verify: bool = True) -> Any:
    """The model ``build()`` makes, placed per ``plan``: ``build()`` runs again under the strategy,
    each variable created on the home of the unit it belonged to when :func:`prepare` built it
    (the i-th variable created is the i-th recorded); the placed model starts from the prepared
    model's weights. Any model the function builds the same way twice can be placed so."""
    check_strategy(strategy)
    cluster = cluster_of(strategy)
    plan = resolve_plan(plan, prepared.graph, cluster, prepared.profile)
    homes = unit_homes(plan)
    anchors = ps_anchors(strategy, homes_tasks(homes), cluster.num_ps)
    with strategy.scope():
        with prepared.order.active(homes, anchors) as created:
            model = build()
            check_tf_keras_model(model)
            if not keras_compat.is_graph_network(model):
                _build_by_tracing(model, input_shape, sequence_length)
        prepared.order.check(created)
        copy_weights_into(model, prepared.weights)
    return _finish(model, plan, cluster, homes, prepared.graph.paths, verify=verify, input_shape=input_shape,
                   sequence_length=sequence_length)


@contextlib.contextmanager
def colocated_variables(plan: Plan, strategy: Any) -> Iterator[None]:
    """While active (inside ``strategy.scope()``), a variable created under the name scope of a
    layer the plan gives a home (:func:`~ralp_tf.place.colocation.unit_homes`) is created
    there: matched by the last part of the layer's path against the innermost name scope, so for
    layers whose paths end in the names the user gave them. For building a subclassed model
    yourself before :func:`place`; the decorator and :func:`place_from_builder` need no such scope."""
    import tensorflow as tf

    homes = unit_homes(plan)
    anchors = ps_anchors(strategy, homes_tasks(homes), cluster_of(strategy).num_ps)
    by_name = {path.rsplit("/", 1)[-1]: (path, home) for path, home in homes.items()}
    created: Counter[str] = Counter()

    def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        scope = tf.get_current_name_scope().rstrip("/").split("/")
        found = by_name.get(scope[-1]) if scope and scope[-1] else None
        if found is None:
            return next_creator(**kwargs)
        path, home = found
        created[path] += 1
        return create_at(home.of(created[path] - 1, path), anchors, next_creator, kwargs)

    with tf.variable_creator_scope(creator):
        yield


def _check_unit_homes(graph: ModelGraph, homes: Homes) -> None:
    """Every variable of a unit with a home is where the home says: whole on its task, or its
    shards on their tasks in order (a variable too small to split whole on the first)."""
    import tensorflow as tf

    for path, home in homes.items():
        layer = graph.layer(path)
        for index, shards in enumerate(weight_groups(layer)):
            want = home.of(index, path).tasks
            specs = [tf.DeviceSpec.from_string(v.device) for v in shards]
            got = [(spec.job, int(spec.task or 0)) for spec in specs]
            if got != [("ps", k) for k in want[:len(shards)]]:
                where = f"PS task {want[0]}" if len(want) == 1 else f"PS tasks {list(want)}"
                order = (" (the plan's per-variable storage counts variables in the order of layer.weights, "
                         "and this layer created them in another order)" if home.variables else "")
                raise PlanError(
                    f"variable {shards[0].name} of layer {path!r} landed on {shards[0].device}, not {where}{order}. "
                    "A subclassed model must reach place() unbuilt (ralp_tf builds it), or be placed with the "
                    "function that builds it (@ralp_tf.placement, place_from_builder); a variable created outside "
                    "the layer's build() and call() cannot be colocated by place(): keep the layer on the workers")
        tasks = home.default.tasks if home.default else ()
        used = {int(tf.DeviceSpec.from_string(v.device).task or 0) for v in layer.weights}
        if len(tasks) > 1 and layer.weights and used != set(tasks):
            raise PlanError(f"layer {path!r} is split over PS tasks {list(tasks)} but its variables landed on "
                            f"{sorted(used)} only: its variables have fewer rows than shards; store it on fewer tasks")


def unplace(model: Any, build: Callable[[], Any] | None = None) -> Any:
    """A single-machine copy of a (placed) model: same architecture and weights, no device pins,
    no strategy. Use it to save, export or serve a model trained with placement. A Functional or
    Sequential model is re-created from its layers' configs; any other (a subclassed model, layers
    without ``get_config``) needs ``build``, the function that builds it, called outside any
    strategy."""
    import tf_keras

    check_tf_keras_model(model)
    if build is not None:
        clone = outside_strategy(build)
        check_tf_keras_model(clone)
        if not clone.weights:
            outside_strategy(_build_by_tracing, clone, None, None)
    else:
        try:
            clone = outside_strategy(tf_keras.models.clone_model, model)
        except Exception as exc:
            raise ModelError(f"model {model.name!r} cannot be re-created from its layers' configs "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); pass build=, the function "
                             "that builds it, to unplace()") from exc
    clone.set_weights(full_weights(model))
    return clone


def placement(policy: Any = "ralp", *, strategy: Any = None, batch_size: int = 32, bandwidth: Any = None,
              flops: Any = None, min_speedup: float = 1.05, input_shape: Any = None, sequence_length: int | None = None,
              compression: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@placement(policy)`` on a model-building function returns a placed model.

    The strategy is ``strategy`` or the one whose scope is active when the function is called.
    The function is first called outside the strategy to profile and plan (:func:`prepare`); the
    placed model is then built under it (:func:`place_from_builder`), so no unused copy's
    variables are left on the parameter servers. ``batch_size`` (per worker), ``bandwidth`` and
    ``flops`` feed the planner's cost model; ``input_shape`` (without the batch dimension) is
    needed only for a subclassed model that its function does not build, ``sequence_length`` for
    inputs of variable length. ``compression`` (e.g. ``"fp16"``, ``"auto"``; see
    :mod:`ralp_tf.plan.compression`) goes to the planner (:func:`ralp_tf.place.policies.plan_with_policy`).
    The returned model carries ``ralp_plan`` and, for "ralp", ``ralp_analysis``.
    """

    def decorate(build: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(build)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            import tensorflow as tf

            strat = strategy or (tf.distribute.get_strategy() if tf.distribute.has_strategy() else None)
            if strat is None:
                raise ModelError("@ralp_tf.placement needs a ParameterServerStrategy: pass strategy=... or call "
                                 "the decorated function inside `with strategy.scope():`")
            check_strategy(strat)
            cluster = cluster_of(strat, **Rates(bandwidth, flops).kwargs())
            bound = functools.partial(build, *args, **kwargs)
            prepared = prepare(bound, batch_size, input_shape=input_shape, sequence_length=sequence_length)
            plan, analysis = plan_with_policy(policy, prepared.profile, cluster, min_speedup=min_speedup,
                                              compression=compression)
            placed = place_from_builder(bound, prepared, plan, strat, input_shape=input_shape,
                                        sequence_length=sequence_length)
            placed.ralp_analysis = analysis
            return placed

        return wrapper

    return decorate
