"""Typed records of the Plan fields that spread one layer over several PS tasks (format
``ralp_tf.plan/3``), their JSON, and the checks against a profile.

* :class:`Sharded`: one variable split along ``axis`` into contiguous shards, shard i on the i-th
  device (sizes by :func:`shard_sizes`).
* :class:`VariableStorage`: where each variable of a worker-computed layer is stored, one entry
  per variable in the layer's weight order (the profile's ``var_bytes`` / ``var_shapes`` order): a
  PS device string (the variable whole on that task) or a :class:`Sharded`.
* :class:`LayerSplit`: a PS-computed layer whose compute is spread over several PS tasks, ``by``
  ``"columns"`` (a Dense layer's output units) or ``"rows"`` (a Dense layer's input features, or
  an Embedding table's rows). What each device holds and computes, and what crosses the network,
  is stated in :mod:`ralp_tf.plan.plans`.

:func:`split_refusal` says why a layer cannot be split (``""`` when it can), and
:func:`storage_refusal` why a storage entry does not fit a layer's variables; both name the
fix, and :meth:`ralp_tf.plan.plans.Plan.validate` raises them.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

from ralp_tf.errors import PlanError
from ralp_tf.plan.devices import parse_device
from ralp_tf.model.profiles import LayerProfile

__all__ = ["SPLIT_BY", "SPLITTABLE_DENSE", "SPLITTABLE_EMBEDDING", "ELEMENTWISE_ACTIVATIONS", "column_split_refusal", "shard_sizes", "shard_fractions", "Sharded",
           "VariableStorage", "LayerSplit", "parse_ps_device", "parse_ps_devices", "parse_variable_storage", "parse_split",
           "split_limit", "split_refusal", "storage_refusal"]

#: How a layer may be split: ``"columns"`` (a Dense layer's units) or ``"rows"`` (a Dense kernel's
#: input features, an Embedding table's rows).
SPLIT_BY = ("columns", "rows")
#: The layer class whose kernel a split may cut by columns or rows.
SPLITTABLE_DENSE = "Dense"
#: The layer class whose table a split may cut by rows.
SPLITTABLE_EMBEDDING = "Embedding"
#: Activations that act entry by entry, so each column shard of a Dense layer can apply its own.
ELEMENTWISE_ACTIVATIONS = frozenset({
    "linear", "relu", "relu6", "sigmoid", "hard_sigmoid", "tanh", "elu", "selu", "gelu", "swish", "silu",
    "softplus", "softsign", "exponential", "leaky_relu", "mish"})
#: The device string a stored variable is given: a PS task's CPU (where PSS keeps variables).
PS_STORE = "/job:ps/replica:0/task:{task}/device:CPU:0"


def shard_sizes(n: int, k: int) -> list[int]:
    """Entries of each of ``min(k, n)`` contiguous shards of ``n`` entries: ``n // K`` each, the
    first ``n % K`` one more (TensorFlow's even split, as ``variable_partitioner`` makes it)."""
    k = max(1, min(int(k), int(n)))
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def shard_fractions(n: int | None, k: int) -> list[float]:
    """Share of each of the shards of :func:`shard_sizes` (``k`` equal shares when ``n`` is unknown)."""
    if n is None:
        return [1.0 / k] * k
    return [s / n for s in shard_sizes(n, k)]


def parse_ps_device(value: Any, where: str) -> str:
    """The canonical PS-task device string of ``value``; PlanError naming ``where`` otherwise."""
    try:
        d = parse_device(value)
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None
    if not d.is_ps:
        raise PlanError(f"{where} is {value!r}, not a PS task; write a PS device, e.g. "
                        "'/job:ps/replica:0/task:0/device:CPU:0'")
    return PS_STORE.format(task=d.task)


def _task(device: str) -> int:
    return int(device.split("/task:")[1].split("/")[0])


def parse_ps_devices(value: Any, where: str) -> tuple[str, ...]:
    """Two or more distinct PS device strings, canonical; PlanError naming ``where`` otherwise."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or len(value) < 2:
        raise PlanError(f"{where} must list two or more distinct PS device strings, got {value!r}")
    devices = tuple(parse_ps_device(v, where) for v in value)
    if len(set(devices)) != len(devices):
        raise PlanError(f"{where} names a PS task twice ({list(value)!r}); list each task once")
    return devices


@dataclasses.dataclass(frozen=True)
class Sharded:
    """One variable split along ``axis`` into ``len(devices)`` contiguous shards of
    :func:`shard_sizes` entries, shard i on ``devices[i]``."""

    devices: tuple[str, ...]
    axis: int = 0

    @functools.cached_property
    def tasks(self) -> tuple[int, ...]:
        return tuple(_task(d) for d in self.devices)

    def to_json(self) -> dict[str, Any]:
        return {"axis": self.axis, "shards": list(self.devices)}


@dataclasses.dataclass(frozen=True)
class VariableStorage:
    """Per-variable storage of a worker-computed layer: ``variables[i]`` is where its i-th variable
    (weight order) lives, a PS device string or a :class:`Sharded`."""

    variables: tuple[str | Sharded, ...]

    @functools.cached_property
    def tasks(self) -> tuple[int, ...]:
        """Every PS task holding a part of the layer, in order of first appearance."""
        out: list[int] = []
        for entry in self.variables:
            for k in (entry.tasks if isinstance(entry, Sharded) else (_task(entry),)):
                if k not in out:
                    out.append(k)
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return {"variables": [e.to_json() if isinstance(e, Sharded) else e for e in self.variables]}


@dataclasses.dataclass(frozen=True)
class LayerSplit:
    """A PS-computed layer spread over ``devices`` (shard i on ``devices[i]``), ``by`` one of
    :data:`SPLIT_BY` (the semantics are in :mod:`ralp_tf.plan.plans`)."""

    by: str
    devices: tuple[str, ...]

    @functools.cached_property
    def tasks(self) -> tuple[int, ...]:
        return tuple(_task(d) for d in self.devices)

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by, "shards": list(self.devices)}


def parse_variable_storage(layer: str, value: Any) -> VariableStorage:
    """``{"variables": [device | {"axis": a, "shards": [device, ...]}, ...]}`` -> VariableStorage."""
    where = f"storage of layer {layer!r}"
    if not isinstance(value, (dict, VariableStorage)) or (isinstance(value, dict) and set(value) != {"variables"}):
        raise PlanError(f"{where} must be a PS device string, a list of them, or {{\"variables\": [...]}} with one "
                        f"entry per variable; got {value!r}")
    if isinstance(value, VariableStorage):
        return value
    entries = value["variables"]
    if not isinstance(entries, (list, tuple)) or not entries:
        raise PlanError(f"{where}: 'variables' must list one entry per variable of the layer, got {entries!r}")
    out: list[str | Sharded] = []
    for i, entry in enumerate(entries):
        at = f"{where}, variable {i}"
        if isinstance(entry, Sharded):
            out.append(entry)
        elif isinstance(entry, str):
            out.append(parse_ps_device(entry, at))
        elif isinstance(entry, dict) and set(entry) <= {"axis", "shards"} and "shards" in entry:
            axis = entry.get("axis", 0)
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise PlanError(f"{at}: 'axis' must be an integer >= 0 (the axis the shards split), got {axis!r}")
            out.append(Sharded(parse_ps_devices(entry["shards"], f"{at} shards"), axis))
        else:
            raise PlanError(f"{at} must be a PS device string or {{\"axis\": A, \"shards\": [PS devices]}}, "
                            f"got {entry!r}")
    return VariableStorage(tuple(out))


def parse_split(layer: str, value: Any) -> LayerSplit:
    """``{"by": "columns" | "rows", "shards": [PS device, ...]}`` -> LayerSplit."""
    where = f"split of layer {layer!r}"
    if isinstance(value, LayerSplit):
        return value
    if not isinstance(value, dict) or set(value) != {"by", "shards"}:
        raise PlanError(f"{where} must be {{\"by\": \"columns\" or \"rows\", \"shards\": [two or more PS devices]}}, "
                        f"got {value!r}")
    if value["by"] not in SPLIT_BY:
        raise PlanError(f"{where}: 'by' is {value['by']!r}; use one of {', '.join(SPLIT_BY)}")
    return LayerSplit(value["by"], parse_ps_devices(value["shards"], f"{where} shards"))


def split_limit(layer: LayerProfile, by: str) -> int:
    """The most shards ``layer`` can be split into ``by`` columns or rows (0: it cannot be)."""
    if split_refusal(layer, by, 2):
        return 0
    kernel = layer.var_shapes[0]
    return int(kernel[-1] if by == "columns" else kernel[0])


def column_split_refusal(name: str, activation: str, fix: str) -> str:
    """Why a Dense layer ``name`` with ``activation`` cannot be split by columns (``""`` when it
    can: the activation acts entry by entry, :data:`ELEMENTWISE_ACTIVATIONS`)."""
    if activation in ELEMENTWISE_ACTIVATIONS:
        return ""
    return (f"{name} has activation {activation!r}, which does not act entry by entry, so its output cannot be "
            f"computed by columns; split it by rows (the activation then runs whole on the assembly task), or {fix}")


def split_refusal(layer: LayerProfile, by: str, shards: int) -> str:
    """Why ``layer`` cannot be split ``by`` columns/rows into ``shards`` shards, with the fix
    (``""`` when it can): a Dense layer (kernel ``[d_in, units]``, optional bias ``[units]``)
    splits by columns into at most ``units`` shards or by rows into at most ``d_in``; an
    Embedding table ``[rows, dim]`` by rows into at most ``rows``; a layer called more than once
    (shared) is not split."""
    fix = "remove it from 'splits'"
    name = f"layer {layer.name!r} ({layer.class_name})"
    if layer.class_name not in (SPLITTABLE_DENSE, SPLITTABLE_EMBEDDING):
        return (f"{name} cannot be split: only Dense layers (by columns or rows) and Embedding tables (by rows) "
                f"can; {fix}")
    if not layer.var_shapes:
        return (f"{name} cannot be checked for a split: its profile records no variable shapes (var_shapes); "
                "profile the model again with this ralp_tf, or " + fix)
    if layer.calls != 1:
        return f"{name} is called {layer.calls} times (a shared layer), and shared layers are not split; {fix}"
    if any(layer.regularised):
        return f"{name} has a weight regulariser, which reads the whole variable; {fix}"
    if by == "columns" and layer.activation:
        return column_split_refusal(name, layer.activation, fix)
    kernel = layer.var_shapes[0]
    if layer.class_name == SPLITTABLE_EMBEDDING:
        if by != "rows" or len(kernel) != 2 or len(layer.var_shapes) != 1:
            return f"{name} is an embedding table: it splits by rows only, not {by}; use \"by\": \"rows\""
        limit, what = kernel[0], "rows"
    else:
        units = kernel[-1] if len(kernel) == 2 else None
        if units is None or any(s != (units,) for s in layer.var_shapes[1:]) or len(layer.var_shapes) > 2:
            return (f"{name} has variables of shapes {[list(s) for s in layer.var_shapes]}, not a kernel [d_in, "
                    f"units] and an optional bias [units]; {fix}")
        limit, what = (kernel[1], "output units (columns)") if by == "columns" else (kernel[0], "input features (rows)")
    if shards > limit:
        return (f"{name} has {limit} {what}, fewer than the {shards} shards planned; split it over at most {limit} "
                "PS tasks")
    return ""


def storage_refusal(layer: LayerProfile, entry: VariableStorage | Sequence[str] | str) -> str:
    """Why storage ``entry`` does not fit ``layer``'s variables (``""`` when it does): a per-variable
    entry needs one entry per variable, an axis each variable has, and no more shards than the
    variable has entries along that axis. The layer-wide forms always fit (a variable with fewer
    rows than listed tasks takes fewer shards, :mod:`ralp_tf.plan.plans`)."""
    if not isinstance(entry, VariableStorage):
        return ""
    name = f"storage of layer {layer.name!r}"
    if len(entry.variables) != len(layer.var_bytes):
        return (f"{name} lists {len(entry.variables)} variable(s) but the layer has {len(layer.var_bytes)}; give one "
                "entry per variable, in the layer's weight order")
    for i, e in enumerate(entry.variables):
        if not isinstance(e, Sharded):
            continue
        if not layer.var_shapes:
            return (f"{name}: variable {i} is sharded but the profile records no variable shapes (var_shapes); profile "
                    "the model again with this ralp_tf")
        shape = layer.var_shapes[i]
        if e.axis >= len(shape):
            return f"{name}: variable {i} of shape {list(shape)} has no axis {e.axis}; shard it along 0..{len(shape) - 1}"
        if len(e.devices) > shape[e.axis]:
            return (f"{name}: variable {i} of shape {list(shape)} has {shape[e.axis]} entries along axis {e.axis}, "
                    f"fewer than its {len(e.devices)} shards; use at most {shape[e.axis]} shards or another axis")
    return ""
