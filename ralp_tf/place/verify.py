"""Check a placed model against its Plan on a traced training step (the applier's post-condition).

:func:`verify_placement` traces, without running it, one training step of the placed model:
a forward pass on symbolic inputs of batch 2, a scalar loss on the worker plus ``model.losses``
(regularisers, ``add_loss``), and ``tf.GradientTape.gradient`` of that loss with respect to every
trainable variable, exactly as ``Model.fit`` and custom ``ClusterCoordinator`` loops do. For every
unit (:func:`ralp_tf.model.graph.walk`) the plan puts on a parameter-server task it then checks that

* every variable of the unit lives on that task (a split unit's shards on theirs: checked when
  placed, :func:`ralp_tf.place.applier.place`), and its ops on one of its split's tasks;
* every forward op and every gradient op of the unit (ops whose name scope contains the unit's
  nested Keras names: ``model/fc1/MatMul``, ``gradient_tape/model/fc1/MatMul/MatMul_1``, a
  sublayer's ``.../block/multi_head_attention/...``, its regularisers'
  ``.../fc1/kernel/Regularizer/...``) runs on it;
* no ``AddN`` that sums the gradients of the layer's variables over several calls runs
  elsewhere;

and, for every worker-computed layer whose variables the plan stores on a PS task
(``Plan.storage``), that they live there.

Ops that move no data are not checked: constants, no-ops, and ops whose every output is a
scalar (the tape's zero gradients for unused scalar outputs); nor are ops on a variable's
handle (reads, gathers), which TF's placer colocates with the variable, checked above; nor the
casts that compress a layer's input on the worker before it crosses (scope ``ralp_encode``), nor
the ops that route a split layer's tensors (scope ``ralp_route``, run where the data is). A mismatch raises
:class:`~ralp_tf.errors.PlacementMismatchError` naming the layer, the op and both devices.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

from ralp_tf.errors import PlacementMismatchError
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.model.graph import walk
from ralp_tf.model.trace import input_signature

__all__ = ["traced_training_step", "verify_placement", "GradientReference", "reference_gradients", "placed_gradients",
           "verify_gradients"]

#: Op types that never carry a layer's data (no check).
_UNCHECKED_OP_TYPES = frozenset({"Const", "NoOp", "Placeholder", "VarHandleOp", "Shape", "ShapeN", "Size", "Rank"})
#: Name scopes (TF makes a repeated one unique with ``_1``, ``_2``...) whose ops run on the device
#: sending the data by design: compression's encode, a split layer's routing.
_EXEMPT_SCOPE = re.compile(r"(ralp_encode|ralp_route)(_\d+)?")


def traced_training_step(model: Any, input_shape: Any = None, sequence_length: int | None = None) -> Any:
    """The graph of one traced (never executed) training step of ``model``: forward on a batch of
    2, a scalar loss plus ``model.losses`` (regularisers, ``add_loss``), and the tape's gradients
    with respect to ``model.trainable_variables``."""
    import tensorflow as tf

    signature = input_signature(model, input_shape, sequence_length)

    @tf.function(autograph=False)
    def step(*xs: Any) -> Any:
        with tf.GradientTape() as tape:
            y = model(signature.pack(xs), training=True)
            outputs = [tf.reduce_sum(tf.cast(o, tf.float32)) for o in tf.nest.flatten(y)
                       if isinstance(o, tf.Tensor) and o.dtype.is_floating]
            loss = tf.add_n(outputs + [tf.cast(l, tf.float32) for l in model.losses])
        return tape.gradient(loss, model.trainable_variables)

    batch = tf.nest.flatten(signature.with_batch(2))
    return step.get_concrete_function(*batch).graph


def _same_task(device: str, job: str, task: int) -> bool:
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(device or "")
    return spec.job == job and int(spec.task or 0) == task


def _carries_data(op: Any) -> bool:
    import tensorflow as tf

    if op.type in _UNCHECKED_OP_TYPES or not op.outputs:
        return False
    if any(_EXEMPT_SCOPE.fullmatch(scope) for scope in op.name.split("/")):
        return False  # compression's encode, a split layer's routing: on the sending device by design
    if any(i.dtype == tf.resource for i in op.inputs):
        return False  # reads and updates of a variable are colocated with it by TF's placer
    return any(o.shape.rank != 0 for o in op.outputs)


def _match_at(op_name: str, keras_path: str) -> int | None:
    """The index of the first of the op's name scopes at which the unit whose nested Keras names
    are ``keras_path`` ("fc1", "classifier/fc1") appears as consecutive scopes, or None."""
    scopes, parts = op_name.split("/")[:-1], keras_path.split("/")
    return next((i for i in range(len(scopes) - len(parts) + 1) if scopes[i:i + len(parts)] == parts), None)


def _in_scope(op_name: str, keras_path: str, others: Sequence[str] = ()) -> bool:
    """Whether ``op_name`` lies under the name scope of the unit ``keras_path`` and of no unit of
    ``others`` that matches it further out (or as far out, with a longer path): a layer named
    "relu" does not own the ops of a layer named "conv1/relu" (Keras allows "/" in names)."""
    at = _match_at(op_name, keras_path)
    if at is None:
        return False
    length = len(keras_path.split("/"))
    for other in others:
        o = _match_at(op_name, other) if other != keras_path else None
        if o is not None and (o < at or (o == at and len(other.split("/")) > length)):
            return False
    return True


def verify_placement(model: Any, plan: Plan, *, input_shape: Any = None, sequence_length: int | None = None) -> None:
    """Raise PlacementMismatchError unless every PS-placed unit's variables, forward ops and
    gradient ops are on its planned task (see the module docstring); the plan's names are read
    as :func:`ralp_tf.place.applier.resolve_plan` reads them."""
    graph = walk(model)
    mapping = graph.resolve([*plan.placements, *plan.storage])
    ps_units = {mapping[name]: parse_device(dev) for name, dev in plan.placements.items() if parse_device(dev).is_ps}
    stored = {mapping[name]: tasks[0] for name, tasks in plan.stored_on().items() if len(tasks) == 1}
    allowed = {path: {int(d.task)} for path, d in ps_units.items()}  # type: ignore[arg-type]
    for name, (_, tasks) in plan.split_tasks().items():
        allowed[mapping.get(name, name)] |= set(tasks)
    if not ps_units and not stored:
        return
    for path, task in [*((p, d.task) for p, d in ps_units.items() if len(allowed[p]) == 1), *stored.items()]:
        for v in graph.layer(path).weights:
            if not _same_task(v.device, "ps", task):
                raise PlacementMismatchError(
                    f"layer {path!r}: variable {v.name} is on {v.device or 'no device'}, not PS task {task} as planned")
    if not ps_units:
        return
    step = traced_training_step(model, input_shape, sequence_length)
    scopes = {path: graph.units[path].keras_path for path in ps_units}
    every = [unit.keras_path for unit in graph.units.values()]
    var_shapes = {path: {tuple(v.shape) for v in graph.layer(path).trainable_weights} for path in ps_units}
    for op in step.get_operations():
        if not _carries_data(op):
            continue
        for path, dev in ps_units.items():
            misplaced = not any(_same_task(op.device, "ps", k) for k in allowed[path])
            if misplaced and _in_scope(op.name, scopes[path], every):
                where = dev.canonical() if len(allowed[path]) == 1 else f"its split's PS tasks {sorted(allowed[path])}"
                raise PlacementMismatchError(
                    f"layer {path!r}: op {op.name} ({op.type}) runs on {op.device or 'the worker'}, not on "
                    f"{where} as planned")
            if misplaced and op.type == "AddN" and var_shapes[path] and all(
                    _in_scope(i.op.name, scopes[path]) and tuple(i.shape) in var_shapes[path] for i in op.inputs):
                raise PlacementMismatchError(
                    f"layer {path!r}: the sum of its calls' weight gradients ({op.name}) runs on "
                    f"{op.device or 'the worker'}, not on {dev.canonical()}; its weight gradients would cross "
                    "the network")


@dataclasses.dataclass(frozen=True)
class GradientReference:
    """The unplaced model's loss and gradients on one batch (:func:`reference_gradients`), taken
    before this process connects to a cluster (its variables live on ``/job:localhost``)."""

    loss: float
    gradients: list[Any]
    names: list[str]
    #: False when the model's own evaluations disagree (eagerly and as a ``tf.function``): a layer
    #: that samples, or a model so ill-conditioned that the order of float32 sums decides its
    #: output (EfficientNetV2L at its random initial weights: loss 3392.7 eagerly, 16.1 traced).
    #: Nothing can be compared then.
    reproducible: bool


def reference_gradients(base: Any, loss: Any, x: Any, y: Any, *, rtol: float = 1e-4) -> GradientReference:
    """``base``'s loss and gradients on ``(x, y)`` in inference mode (no dropout; BatchNormalization
    on its moving statistics), eagerly, and whether a traced evaluation agrees with them within
    ``rtol`` (:func:`verify_gradients`' tolerance)."""
    import numpy as np
    import tensorflow as tf

    def once() -> tuple[Any, list[Any]]:
        with tf.GradientTape() as tape:
            value = loss(y, base(x, training=False))
        return value, tape.gradient(value, base.trainable_variables)

    value, grads = once()
    traced_value, traced = tf.function(once)()
    names = [v.name for v in base.trainable_variables]
    reference = GradientReference(float(np.asarray(value)), _dense(grads), names, True)
    agree = _difference(float(np.asarray(traced_value)), _dense(traced), reference, rtol) is None
    return dataclasses.replace(reference, reproducible=agree)


def _dense(grads: Sequence[Any]) -> list[Any]:
    import numpy as np
    import tensorflow as tf

    return [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in grads]


def _difference(loss: float, grads: Sequence[Any], reference: GradientReference, rtol: float) -> str | None:
    """How ``loss`` and ``grads`` differ from ``reference`` beyond :func:`verify_gradients`' tolerance,
    or None."""
    import numpy as np

    if not np.isclose(loss, reference.loss, rtol=rtol, atol=rtol):
        return f"the loss is {loss:.6g}, the unplaced model's {reference.loss:.6g}"
    overall = max((float(np.max(np.abs(w))) for w in reference.gradients if w is not None and w.size), default=0.0)
    for name, g, w in zip(reference.names, grads, reference.gradients):
        if (w is None) != (g is None):
            return f"variable {name}: a gradient on one side only (here: {g is not None}, unplaced: {w is not None})"
        if w is None:
            continue
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        error = float(np.max(np.abs(g - w))) if w.size and g.shape == w.shape else float("inf")
        if error > rtol * scale + 0.1 * rtol * overall:
            return f"variable {name}: the gradient differs from the unplaced model's by {error:.3g} (largest entry {scale:.3g})"
    return None


def placed_gradients(placed: Any, loss: Any, x: Any, y: Any, coordinator: Any) -> tuple[float, list[Any]]:
    """One step of ``placed`` on the cluster (through ``coordinator``) on the batch ``(x, y)``, in
    inference mode: its loss (``loss(labels, outputs)``) and the gradient of every trainable
    variable, in ``placed.trainable_variables``' order (``IndexedSlices`` where sparse)."""
    import tensorflow as tf

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            value = loss(yb, placed(xb, training=False))
        return value, tape.gradient(value, placed.trainable_variables)

    got_loss, got = coordinator.schedule(step, args=(tf.nest.map_structure(tf.constant, x),
                                                     tf.nest.map_structure(tf.constant, y))).fetch()
    return float(got_loss), list(got)


def verify_gradients(placed: Any, loss: Any, x: Any, y: Any, coordinator: Any, reference: GradientReference, *,
                     rtol: float = 1e-4) -> bool:
    """Check that one step of ``placed`` (on the cluster, through ``coordinator``), with the weights
    the unplaced model had, gives ``reference``'s loss and gradients on the same batch ``(x, y)``,
    in inference mode; ``loss`` is the placed model's training loss, ``model.losses`` included.
    Each gradient ``g`` must be within ``rtol * max|w| + 0.1 * rtol * G`` of the reference ``w``
    (elementwise, largest difference), ``G`` the largest entry of any reference gradient: a
    gradient that should be zero (a BatchNormalization beta under a later normalisation, an
    attention key's bias) is float32 noise from sums taken in another order, at about 1e-7 of
    the summands.

    Returns True when compared, False when the reference is not reproducible (nothing can be
    compared). Raises PlacementMismatchError naming the first variable whose gradient differs."""
    if not reference.reproducible:
        return False
    got_loss, got = placed_gradients(placed, loss, x, y, coordinator)
    difference = _difference(got_loss, _dense(got), reference, rtol)
    if difference is not None:
        raise PlacementMismatchError(f"the placed model's first step differs from the unplaced model's on the same "
                                     f"batch and weights: {difference}")
    return True
