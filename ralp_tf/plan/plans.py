"""Plan: which device stores and computes each layer. Data, with JSON round-trip and validation.

A Plan maps layer names to full TF device strings, e.g.
``/job:ps/replica:0/task:1/device:CPU:0`` (the layer's variables live on that PS task and its
forward and gradient ops run there) or ``/job:worker/device:GPU:0`` (computed by whichever
worker runs the step; variables placed by ParameterServerStrategy as usual). Layers a plan
does not name are computed on the workers. ``provisioning`` optionally records the cluster
shape the plan assumes (tasks per job); ``notes`` carries the planner's predictions.

``storage`` (format ``ralp_tf.plan/2``) says which PS task stores the variables of a layer
computed on the workers: a PS device string, or a list of two or more distinct PS device
strings, meaning every variable of the layer is partitioned along its first axis into that many
equal shards, shard i on the i-th task. Layers it does not name are stored by
ParameterServerStrategy's round-robin, as before. A layer computed on a PS task is stored where
it computes, so it cannot appear in ``storage``.

``compression`` (format ``ralp_tf.plan/2``) says which traffic crosses the network in a
narrower dtype, for every layer (``"*"``) or per layer: see :mod:`ralp_tf.plan.compression`.

**Formats.** ``ralp_tf.plan/1`` (placements, provisioning, notes) and ``ralp_tf.plan/2``
(those plus storage and compression) both load. A plan is written as ``/1`` when it uses
neither, so a plan that uses nothing new stays readable by older ralp_tf versions and its JSON
does not change; otherwise it is written as ``/2``. A ``/1`` document with a ``storage`` or
``compression`` field is refused (it was written by hand or by a tool that mislabelled it). JSON keys are sorted, so two
plans diff line by line.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import re
from typing import Any, Mapping, Sequence

from ralp_tf.plan.compression import parse_compression
from ralp_tf.errors import PlanError, parse_json, read_json_file

__all__ = ["PLAN_FORMAT_V1", "PLAN_FORMAT", "DeviceName", "parse_device", "Plan"]

_DEVICE = re.compile(
    r"^/job:(?P<job>[a-z_]+)(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?"
    r"/device:(?P<type>CPU|GPU):(?P<id>\d+)$")

PLAN_FORMAT_V1 = "ralp_tf.plan/1"
PLAN_FORMAT = "ralp_tf.plan/2"
_FIELDS = {PLAN_FORMAT_V1: ("format", "policy", "placements", "provisioning", "notes"),
           PLAN_FORMAT: ("format", "policy", "placements", "provisioning", "notes", "storage", "compression")}


@dataclasses.dataclass(frozen=True)
class DeviceName:
    """A parsed device string."""

    job: str
    task: int | None
    device_type: str
    device_id: int

    @property
    def is_ps(self) -> bool:
        return self.job == "ps"

    @property
    def is_worker(self) -> bool:
        return self.job == "worker"

    @property
    def task_key(self) -> str | None:
        return None if self.task is None else f"{self.job}:{self.task}"

    def canonical(self) -> str:
        if self.task is None:
            return f"/job:{self.job}/device:{self.device_type}:{self.device_id}"
        return f"/job:{self.job}/replica:0/task:{self.task}/device:{self.device_type}:{self.device_id}"


def parse_device(device: str) -> DeviceName:
    """Parse a full device string; raise PlanError naming the expected shape."""
    m = _DEVICE.match(device) if isinstance(device, str) else None
    if not m:
        raise PlanError(f"device {device!r} is not a full TF device string; write e.g. "
                        "'/job:ps/replica:0/task:0/device:CPU:0' or '/job:worker/device:GPU:0'")
    if m.group("replica") not in (None, "0"):
        raise PlanError(f"device {device!r}: replica must be 0")
    if m.group("job") == "ps" and m.group("task") is None:
        raise PlanError(f"device {device!r} names no PS task; add '/replica:0/task:K'")
    return DeviceName(job=m.group("job"), task=None if m.group("task") is None else int(m.group("task")),
                      device_type=m.group("type"), device_id=int(m.group("id")))


@dataclasses.dataclass(frozen=True)
class Plan:
    """Layer name -> device string, plus what the plan assumes and predicts."""

    placements: Mapping[str, str]
    policy: str = "manual"
    provisioning: Mapping[str, int] | None = None
    notes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    storage: Mapping[str, str | Sequence[str]] = dataclasses.field(default_factory=dict)
    compression: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.placements, Mapping):
            raise PlanError("plan 'placements' must be an object mapping layer names to device strings")
        canon = {}
        for layer, dev in self.placements.items():
            if not isinstance(layer, str) or not layer:
                raise PlanError(f"plan layer name {layer!r} must be a non-empty string")
            try:
                canon[layer] = parse_device(dev).canonical()
            except PlanError as exc:
                raise PlanError(f"layer {layer!r}: {exc}") from None
        object.__setattr__(self, "placements", dict(canon))
        if self.provisioning is not None:
            if not isinstance(self.provisioning, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for k, v in self.provisioning.items()):
                raise PlanError("plan 'provisioning' must map job names to task counts (integers >= 0)")
            object.__setattr__(self, "provisioning", dict(self.provisioning))
        object.__setattr__(self, "storage", _canonical_storage(self.storage))
        object.__setattr__(self, "compression", parse_compression(self.compression))
        computed_on_ps = sorted(set(self.storage) & set(self.ps_layers()))
        if computed_on_ps:
            raise PlanError(f"plan stores layer(s) {computed_on_ps} explicitly, but they compute on a PS task, where "
                            "their variables live; remove them from 'storage'")

    # ----------------------------------------------------------------- queries
    def device_of(self, layer: str, default: str = "/job:worker/device:CPU:0") -> str:
        return self.placements.get(layer, default)

    def ps_layers(self) -> dict[str, int]:
        """Layer -> PS task index, for layers placed on PS tasks."""
        out = {}
        for layer, dev in self.placements.items():
            d = parse_device(dev)
            if d.is_ps:
                out[layer] = int(d.task)  # type: ignore[arg-type]
        return out

    def stored_on(self) -> dict[str, tuple[int, ...]]:
        """Layer -> the PS task indices storing its variables (one, or one per shard), for the
        layers ``storage`` names."""
        return {layer: tuple(int(parse_device(d).task) for d in ((devs,) if isinstance(devs, str) else devs))  # type: ignore[arg-type]
                for layer, devs in self.storage.items()}

    @property
    def is_split(self) -> bool:
        return bool(self.ps_layers())

    def diff(self, other: "Plan") -> dict[str, tuple[str | None, str | None]]:
        """Layers whose device differs between two plans: ``{layer: (self's, other's)}``."""
        names = set(self.placements) | set(other.placements)
        return {n: (self.placements.get(n), other.placements.get(n)) for n in sorted(names)
                if self.placements.get(n) != other.placements.get(n)}

    # ----------------------------------------------------------------- validation
    def validate(self, model_or_profile: Any = None, cluster: Any = None) -> "Plan":
        """Check every layer exists in the model and every device exists in the cluster."""
        if model_or_profile is not None:
            names = _layer_names(model_or_profile)
            unknown = [n for n in [*self.placements, *self.storage, *self.compression] if n not in names and n != "*"]
            if unknown:
                hints = []
                for n in unknown[:5]:
                    close = difflib.get_close_matches(n, names, n=1)
                    hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
                raise PlanError(f"plan names {len(unknown)} layer(s) not in the model: {', '.join(hints)}; "
                                f"the model's layers are: {', '.join(names)}")
        if cluster is not None:
            devices = set(cluster.devices())
            ps = self.ps_layers()
            if ps and cluster.num_ps == 0:
                raise PlanError(f"plan places {len(ps)} layer(s) on PS tasks but the cluster has no 'ps' job; "
                                "add PS tasks (e.g. LocalCluster(workers=2, ps=1)) or use a worker-only plan")
            for layer, dev in self.placements.items():
                if dev not in devices:
                    raise PlanError(f"layer {layer!r} is placed on {dev}, which is not in the cluster "
                                    f"({cluster.describe()}); valid devices: {', '.join(sorted(devices))}")
            for layer, tasks in self.stored_on().items():
                for k in tasks:
                    if k >= cluster.num_ps:
                        raise PlanError(f"plan stores layer {layer!r} on PS task {k} (/job:ps/replica:0/task:{k}), but "
                                        f"the cluster has {cluster.num_ps} PS task(s)"
                                        + (f" (tasks 0..{cluster.num_ps - 1})" if cluster.num_ps else "")
                                        + "; store it on an existing PS task or add PS tasks")
        return self

    # ----------------------------------------------------------------- JSON
    @property
    def format(self) -> str:
        """The format this plan is written in: ``/2`` when it stores anything explicitly, else ``/1``."""
        return PLAN_FORMAT if self.storage or self.compression else PLAN_FORMAT_V1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": self.format, "policy": self.policy, "placements": dict(self.placements)}
        if self.provisioning is not None:
            d["provisioning"] = dict(self.provisioning)
        if self.notes:
            d["notes"] = dict(self.notes)
        if self.storage:
            d["storage"] = {layer: devs if isinstance(devs, str) else list(devs) for layer, devs in self.storage.items()}
        if self.compression:
            d["compression"] = {layer: setting.to_dict() for layer, setting in self.compression.items()}
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """The plan as JSON with sorted keys (diffable)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Any) -> "Plan":
        if not isinstance(d, Mapping):
            raise PlanError(f"a plan is a JSON object, got {type(d).__name__}")
        if "placements" not in d:
            raise PlanError("plan JSON lacks 'placements' (an object mapping layer names to device strings)")
        fmt = d.get("format", PLAN_FORMAT if {"storage", "compression"} & set(d) else PLAN_FORMAT_V1)
        if not isinstance(fmt, str) or fmt not in _FIELDS:
            raise PlanError(f"plan format {fmt!r} is not supported; expected one of {', '.join(sorted(_FIELDS))}")
        unknown = set(d) - set(_FIELDS[fmt])
        newer = unknown & set(_FIELDS[PLAN_FORMAT])
        if newer:
            raise PlanError(f"plan of format {fmt!r} has field(s) {sorted(newer)}, which that format does not have; "
                            f"set \"format\": \"{PLAN_FORMAT}\" to use them")
        if unknown:
            raise PlanError(f"plan JSON has unknown field(s) {sorted(unknown)}; allowed: {', '.join(_FIELDS[fmt])}")
        policy = d.get("policy", "manual")
        if not isinstance(policy, str):
            raise PlanError("plan 'policy' must be a string")
        notes = d.get("notes", {})
        if not isinstance(notes, Mapping):
            raise PlanError("plan 'notes' must be an object")
        storage = d.get("storage", {})
        if not isinstance(storage, Mapping):
            raise PlanError("plan 'storage' must be an object mapping layer names to a PS device string or a list "
                            "of PS device strings")
        return cls(placements=d["placements"], policy=policy, provisioning=d.get("provisioning"), notes=notes,
                   storage=storage, compression=d.get("compression", {}))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Plan":
        return cls.from_dict(parse_json(text, PlanError, "plan"))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path: str) -> "Plan":
        return cls.from_dict(read_json_file(path, PlanError, "plan file"))


def _canonical_storage(storage: Any) -> dict[str, str | tuple[str, ...]]:
    """``storage`` with canonical PS device strings (a tuple for a partitioned layer); raises
    PlanError naming the layer and the fix on anything else."""
    if not isinstance(storage, Mapping):
        raise PlanError("plan 'storage' must map layer names to a PS device string or a list of them")
    out: dict[str, str | tuple[str, ...]] = {}
    for layer, devs in storage.items():
        if not isinstance(layer, str) or not layer:
            raise PlanError(f"plan storage layer name {layer!r} must be a non-empty string")
        many = not isinstance(devs, str)
        if many and (not isinstance(devs, (list, tuple)) or len(devs) < 2):
            raise PlanError(f"storage of layer {layer!r} must be a PS device string, or a list of two or more to "
                            f"partition it, got {devs!r}")
        names = []
        for dev in (devs if many else [devs]):
            try:
                d = parse_device(dev)
            except PlanError as exc:
                raise PlanError(f"storage of layer {layer!r}: {exc}") from None
            if not d.is_ps:
                raise PlanError(f"storage of layer {layer!r} is {dev!r}, not a PS task; variables are stored on PS "
                                "tasks, e.g. '/job:ps/replica:0/task:0/device:CPU:0'")
            names.append(_PS_STORE.format(task=d.task))
        if len(set(names)) != len(names):
            raise PlanError(f"storage of layer {layer!r} names a PS task twice ({devs!r}); list each task once")
        out[layer] = tuple(names) if many else names[0]
    return out


#: The device string a stored variable is given: a PS task's CPU (where PSS keeps variables).
_PS_STORE = "/job:ps/replica:0/task:{task}/device:CPU:0"


def _layer_names(model_or_profile: Any) -> list[str]:
    if hasattr(model_or_profile, "names") and hasattr(model_or_profile, "layers") and not callable(
            getattr(model_or_profile, "names")):
        return list(model_or_profile.names)
    if hasattr(model_or_profile, "layers"):
        return [l.name for l in model_or_profile.layers]
    return list(model_or_profile)
