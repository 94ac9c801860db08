"""Plan: which device stores and computes each layer. Data, with JSON round-trip and validation.

A Plan maps layer names to full TF device strings, e.g.
``/job:ps/replica:0/task:1/device:CPU:0`` (the layer's variables live on that PS task and its
forward and gradient ops run there) or ``/job:worker/device:GPU:0`` (computed by whichever
worker runs the step; variables placed by ParameterServerStrategy as usual). Layers a plan
does not name are computed on the workers. ``provisioning`` optionally records the cluster
shape the plan assumes (tasks per job); ``notes`` carries the planner's predictions.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import re
from typing import Any, Mapping

from ralp_tf.errors import PlanError, parse_json, read_json_file

_DEVICE = re.compile(
    r"^/job:(?P<job>[a-z_]+)(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?"
    r"/device:(?P<type>CPU|GPU):(?P<id>\d+)$")

PLAN_FORMAT = "ralp_tf.plan/1"


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
            unknown = [n for n in self.placements if n not in names]
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
        return self

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": PLAN_FORMAT, "policy": self.policy, "placements": dict(self.placements)}
        if self.provisioning is not None:
            d["provisioning"] = dict(self.provisioning)
        if self.notes:
            d["notes"] = dict(self.notes)
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, d: Any) -> "Plan":
        if not isinstance(d, Mapping):
            raise PlanError(f"a plan is a JSON object, got {type(d).__name__}")
        if "placements" not in d:
            raise PlanError("plan JSON lacks 'placements' (an object mapping layer names to device strings)")
        fmt = d.get("format", PLAN_FORMAT)
        if fmt != PLAN_FORMAT:
            raise PlanError(f"plan format {fmt!r} is not supported; expected {PLAN_FORMAT!r}")
        unknown = set(d) - {"format", "policy", "placements", "provisioning", "notes"}
        if unknown:
            raise PlanError(f"plan JSON has unknown field(s) {sorted(unknown)}; allowed: format, policy, "
                            "placements, provisioning, notes")
        policy = d.get("policy", "manual")
        if not isinstance(policy, str):
            raise PlanError("plan 'policy' must be a string")
        notes = d.get("notes", {})
        if not isinstance(notes, Mapping):
            raise PlanError("plan 'notes' must be an object")
        return cls(placements=d["placements"], policy=policy, provisioning=d.get("provisioning"), notes=notes)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Plan":
        return cls.from_dict(parse_json(text, PlanError, "plan"))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path: str) -> "Plan":
        return cls.from_dict(read_json_file(path, PlanError, "plan file"))


def _layer_names(model_or_profile: Any) -> list[str]:
    if hasattr(model_or_profile, "names") and hasattr(model_or_profile, "layers") and not callable(
            getattr(model_or_profile, "names")):
        return list(model_or_profile.names)
    if hasattr(model_or_profile, "layers"):
        return [l.name for l in model_or_profile.layers]
    return list(model_or_profile)
