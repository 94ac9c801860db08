"""Plan: which device stores and computes each layer. Data, with JSON round-trip and validation.

A Plan maps layer names to full TF device strings, e.g.
``/job:ps/replica:0/task:1/device:CPU:0`` (the layer's variables live on that PS task and its
forward and gradient ops run there) or ``/job:worker/device:GPU:0`` (computed by whichever
worker runs the step; variables placed by ParameterServerStrategy as usual). Layers a plan
does not name are computed on the workers. ``provisioning`` optionally records the cluster
shape the plan assumes (tasks per job); ``notes`` carries the planner's predictions.

**storage** (format ``/2``; the per-variable form ``/3``) says where the variables of a layer
computed on the workers live. A layer computed on a PS task is stored where it computes, so it
cannot appear here. Layers it does not name are stored by ParameterServerStrategy's round-robin.
A value is one of:

* a PS device string: every variable of the layer whole on that task;
* a list of two or more distinct PS device strings (K of them): each variable is split along its
  first axis into ``min(K, rows)`` contiguous shards of :func:`~ralp_tf.plan.shards.shard_sizes`
  rows (``rows // K``, the first ``rows % K`` one longer), shard i on the i-th task; a variable
  with one row, or a scalar, is whole on the first task;
* ``{"variables": [entry, ...]}`` (format ``/3``): one entry per variable of the layer, in its
  weight order (``layer.weights``; the profile's ``var_bytes`` order). An entry is a PS device
  string (that variable whole on that task) or ``{"axis": a, "shards": [dev_0, ..., dev_{K-1}]}``:
  the variable split along axis ``a`` into K contiguous shards of ``shard_sizes(shape[a], K)``
  entries, shard i (entries ``[sum of the first i sizes, + size_i)`` along ``a``) a variable of
  its own on ``dev_i``. K is at most ``shape[a]``.

  *Applier contract.* The layer computes on the worker, which reads each variable as the
  concatenation of its shards along ``a`` (a ``Concat`` on the worker; each shard read from its
  task: what crosses is the shard, ``p_v * size_i / shape[a]`` bytes). The tape's gradient of
  that concatenation is one slice per shard; each slice is pushed to, and applied by the
  optimizer on, the shard's own task. A checkpoint stores the full variable (the shards are its
  slices), so a model restored from it may be partitioned differently or not at all. An
  Embedding table sharded along axis 0 is looked up shard by shard on the shard's task (the
  gather colocated with the shard), and only the gathered rows cross.

**splits** (format ``/3``) spreads the compute of a PS-computed layer over several PS tasks:
``{"layer": {"by": "columns" | "rows", "shards": [dev_0, ..., dev_{K-1}]}}``, K >= 2 distinct PS
devices. The layer's ``placements`` entry must be one of them: the *assembly task* A, where the
layer's whole output is formed when a consumer needs it whole. Shard i holds entries
``shard_sizes(n, K)[i]`` of the split axis (n: units, input features or table rows; see
:func:`~ralp_tf.plan.shards.split_refusal` for what can be split). Per shard i, on ``dev_i``:

* **Dense, by columns** (units split): ``dev_i`` holds the kernel's columns ``c_i`` (a
  ``[d_in, |c_i|]`` variable) and the bias entries ``c_i``. It receives the layer's whole input x
  (from the device producing x, unless that is ``dev_i``) and computes
  ``y_i = activation(x @ W_i + b_i)`` (the activation is applied per shard: it must be
  elementwise; the profile does not record the activation, so the applier refuses a column
  split of a Dense layer whose activation is not). The output is *column-sliced*: y_i stays on
  ``dev_i``. A consumer that needs it whole gets it concatenated along the last axis on the
  consumer's device (each ``y_i`` crosses ``dev_i -> consumer``); a row-split consumer over the
  same devices in the same order reads ``y_i`` where it is. Backward: ``dev_i`` gets ``dy_i``,
  computes ``dW_i, db_i`` (applied there: no variable gradient crosses) and a partial input
  gradient ``dx_i = dy_i @ W_i^T`` (the whole input's size), sent to the device of x's producer,
  which adds the K partials.
* **Dense, by rows** (input features split): ``dev_i`` holds the kernel's rows ``r_i`` (a
  ``[|r_i|, units]`` variable); the bias lives whole on A. ``dev_i`` receives the input's columns
  ``r_i`` (``x[..., r_i]``: no traffic when x is column-sliced on the same devices) and computes
  the partial sum ``z_i = x_i @ W_i`` (the whole output's size), sent to A. A computes
  ``y = activation(sum_i z_i + b)``. Backward: A computes ``dz = dy * activation'`` and ``db``,
  and sends ``dz`` to every ``dev_i``, which computes ``dW_i = x_i^T dz`` (applied there) and its
  input-gradient slice ``dx_i = dz @ W_i^T``, sent to the device that produced ``x_i``.
* **Embedding, by rows** (table rows split): ``dev_i`` holds the table rows ``r_i``. The ids go to
  A, which partitions them by row range (``dynamic_partition``) and sends each ``dev_i`` its ids
  (offset to the shard); ``dev_i`` gathers its rows and sends them to A, which stitches them
  back in id order (``dynamic_stitch``): A holds the whole output. The gradient is the
  ``IndexedSlices`` the worker builds (as for an embedding computed on a PS task), each shard's
  rows pushed to, and applied on, ``dev_i``.

Each shard's forward and gradient ops run on its device; the losses and gradients equal the
unsplit layer's.

``compression`` (format ``ralp_tf.plan/2``) says which traffic crosses the network in a
narrower dtype, for every layer (``"*"``) or per layer: see :mod:`ralp_tf.plan.compression`.

**Formats.** ``ralp_tf.plan/1`` (placements, provisioning, notes), ``/2`` (those plus storage in
the device and list forms, and compression) and ``/3`` (those plus per-variable storage and
splits) all load. A plan is written in the oldest format that holds what it uses: ``/1`` when it
uses no storage, compression or splits (its JSON does not change and older ralp_tf versions read
it), ``/2`` when it uses nothing of ``/3``. A document that uses a field or form its format does
not have is refused, naming the format to write. JSON keys are sorted, so two plans diff line by
line.

Example (``/3``: the head of a model split over two PS tasks, a conv kernel sharded by output
channels)::

    {"format": "ralp_tf.plan/3", "policy": "ralp",
     "placements": {"conv1": "/job:worker/device:GPU:0",
                    "fc1": "/job:ps/replica:0/task:0/device:CPU:0",
                    "fc2": "/job:ps/replica:0/task:0/device:CPU:0"},
     "splits": {"fc1": {"by": "columns", "shards": ["/job:ps/replica:0/task:0/device:CPU:0",
                                                     "/job:ps/replica:0/task:1/device:CPU:0"]},
                "fc2": {"by": "rows", "shards": ["/job:ps/replica:0/task:0/device:CPU:0",
                                                  "/job:ps/replica:0/task:1/device:CPU:0"]}},
     "storage": {"conv1": {"variables": [
         {"axis": 3, "shards": ["/job:ps/replica:0/task:0/device:CPU:0",
                                "/job:ps/replica:0/task:1/device:CPU:0"]},
         "/job:ps/replica:0/task:1/device:CPU:0"]}}}
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any, Mapping, Sequence

from ralp_tf.errors import PlanError, parse_json, read_json_file
from ralp_tf.plan.compression import parse_compression
from ralp_tf.plan.devices import DeviceName, parse_device
from ralp_tf.plan.shards import (LayerSplit, VariableStorage, parse_ps_device, parse_ps_devices, parse_split,
                                 parse_variable_storage, split_refusal, storage_refusal)

__all__ = ["PLAN_FORMAT_V1", "PLAN_FORMAT_V2", "PLAN_FORMAT_V3", "PLAN_FORMAT", "DeviceName", "parse_device", "Plan"]

PLAN_FORMAT_V1 = "ralp_tf.plan/1"
PLAN_FORMAT_V2 = "ralp_tf.plan/2"
PLAN_FORMAT_V3 = "ralp_tf.plan/3"
#: The format of plans with storage or compression and nothing of ``/3`` (kept under this name).
PLAN_FORMAT = PLAN_FORMAT_V2
_FIELDS = {PLAN_FORMAT_V1: ("format", "policy", "placements", "provisioning", "notes"),
           PLAN_FORMAT_V2: ("format", "policy", "placements", "provisioning", "notes", "storage", "compression"),
           PLAN_FORMAT_V3: ("format", "policy", "placements", "provisioning", "notes", "storage", "compression",
                            "splits")}
_ORDER = (PLAN_FORMAT_V1, PLAN_FORMAT_V2, PLAN_FORMAT_V3)


@dataclasses.dataclass(frozen=True)
class Plan:
    """Layer name -> device string, plus what the plan assumes and predicts."""

    placements: Mapping[str, str]
    policy: str = "manual"
    provisioning: Mapping[str, int] | None = None
    notes: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    storage: Mapping[str, str | Sequence[str] | VariableStorage] = dataclasses.field(default_factory=dict)
    compression: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    splits: Mapping[str, LayerSplit] = dataclasses.field(default_factory=dict)

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
        object.__setattr__(self, "splits", self._checked_splits())

    def _checked_splits(self) -> dict[str, LayerSplit]:
        """``splits`` parsed, each layer placed on one of its shards' devices (its assembly task)."""
        if not isinstance(self.splits, Mapping):
            raise PlanError("plan 'splits' must map layer names to {\"by\": ..., \"shards\": [...]}")
        out = {}
        for layer, value in self.splits.items():
            split = parse_split(layer, value)
            placed = self.placements.get(layer)
            if placed not in split.devices:
                raise PlanError(f"layer {layer!r} is split over {list(split.devices)} but placed on {placed!r}; place "
                                "it on one of its shards' PS devices (where its whole output is assembled)")
            out[layer] = split
        return out

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
        """Layer -> the PS task indices storing its variables (one, or one per shard; for the
        per-variable form, every task holding a part, in order of first appearance), for the
        layers ``storage`` names."""
        return {layer: devs.tasks if isinstance(devs, VariableStorage) else
                tuple(int(parse_device(d).task) for d in ((devs,) if isinstance(devs, str) else devs))  # type: ignore[misc]
                for layer, devs in self.storage.items()}

    def split_tasks(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Layer -> (``by``, the PS task indices of its shards) for the layers ``splits`` names."""
        return {layer: (split.by, split.tasks) for layer, split in self.splits.items()}

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
            unknown = [n for n in [*self.placements, *self.storage, *self.compression, *self.splits]
                       if n not in names and n != "*"]
            if unknown:
                hints = []
                for n in unknown[:5]:
                    close = difflib.get_close_matches(n, names, n=1)
                    hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
                raise PlanError(f"plan names {len(unknown)} layer(s) not in the model: {', '.join(hints)}; "
                                f"the model's layers are: {', '.join(names)}")
            if hasattr(model_or_profile, "batch_size") and hasattr(model_or_profile, "layer"):
                self._check_against(model_or_profile)
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
            for layer, tasks in self.split_tasks().items():
                missing = [k for _, ks in [tasks] for k in ks if k >= cluster.num_ps]
                if missing:
                    raise PlanError(f"plan splits layer {layer!r} over PS task(s) {missing}, but the cluster has "
                                    f"{cluster.num_ps} PS task(s); split it over existing PS tasks or add PS tasks")
        return self

    def _check_against(self, profile: Any) -> None:
        """Storage entries and splits checked against the profile's variables (shards.py)."""
        for layer, entry in self.storage.items():
            problem = storage_refusal(profile.layer(layer), entry)
            if problem:
                raise PlanError(problem)
        for layer, split in self.splits.items():
            problem = split_refusal(profile.layer(layer), split.by, len(split.devices))
            if problem:
                raise PlanError(problem)

    # ----------------------------------------------------------------- JSON
    @property
    def format(self) -> str:
        """The oldest format that holds what this plan uses (module docstring, *Formats*)."""
        if self.splits or any(isinstance(v, VariableStorage) for v in self.storage.values()):
            return PLAN_FORMAT_V3
        return PLAN_FORMAT_V2 if self.storage or self.compression else PLAN_FORMAT_V1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": self.format, "policy": self.policy, "placements": dict(self.placements)}
        if self.provisioning is not None:
            d["provisioning"] = dict(self.provisioning)
        if self.notes:
            d["notes"] = dict(self.notes)
        if self.storage:
            d["storage"] = {layer: devs if isinstance(devs, str) else
                            devs.to_json() if isinstance(devs, VariableStorage) else list(devs)
                            for layer, devs in self.storage.items()}
        if self.splits:
            d["splits"] = {layer: split.to_json() for layer, split in self.splits.items()}
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
        fmt = _format_of(d)
        if not isinstance(fmt, str) or fmt not in _FIELDS:
            raise PlanError(f"plan format {fmt!r} is not supported; expected one of {', '.join(sorted(_FIELDS))}")
        _check_fields(d, fmt)
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
        splits = d.get("splits", {})
        if not isinstance(splits, Mapping):
            raise PlanError("plan 'splits' must be an object mapping layer names to {\"by\": ..., \"shards\": [...]}")
        return cls(placements=d["placements"], policy=policy, provisioning=d.get("provisioning"), notes=notes,
                   storage=storage, compression=d.get("compression", {}), splits=splits)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Plan":
        return cls.from_dict(parse_json(text, PlanError, "plan"))

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path: str) -> "Plan":
        return cls.from_dict(read_json_file(path, PlanError, "plan file"))


def _canonical_storage(storage: Any) -> dict[str, str | tuple[str, ...] | VariableStorage]:
    """``storage`` with canonical PS device strings (a tuple for a layer-wide partition, a
    VariableStorage for the per-variable form); raises PlanError naming the layer and the fix on
    anything else."""
    if not isinstance(storage, Mapping):
        raise PlanError("plan 'storage' must map layer names to a PS device string or a list of them")
    out: dict[str, str | tuple[str, ...] | VariableStorage] = {}
    for layer, devs in storage.items():
        if not isinstance(layer, str) or not layer:
            raise PlanError(f"plan storage layer name {layer!r} must be a non-empty string")
        where = f"storage of layer {layer!r}"
        if isinstance(devs, (Mapping, VariableStorage)):
            out[layer] = parse_variable_storage(layer, dict(devs) if isinstance(devs, Mapping) else devs)
        elif isinstance(devs, str):
            out[layer] = parse_ps_device(devs, where)
        elif not isinstance(devs, (list, tuple)) or len(devs) < 2:
            raise PlanError(f"{where} must be a PS device string, or a list of two or more to partition it, "
                            f"got {devs!r}")
        else:
            out[layer] = parse_ps_devices(devs, where)
    return out


def _format_of(d: Mapping[str, Any]) -> str:
    """The format a document declares, or the oldest that holds its fields when it declares none."""
    if "format" in d:
        return d["format"]
    storage = d.get("storage")
    if "splits" in d or (isinstance(storage, Mapping) and any(isinstance(v, Mapping) for v in storage.values())):
        return PLAN_FORMAT_V3
    return PLAN_FORMAT_V2 if {"storage", "compression"} & set(d) else PLAN_FORMAT_V1


def _check_fields(d: Mapping[str, Any], fmt: str) -> None:
    """Refuse fields, and the per-variable storage form, that ``fmt`` does not have, naming the
    format to write."""
    unknown = set(d) - set(_FIELDS[fmt])
    newer = unknown & set(_FIELDS[PLAN_FORMAT_V3])
    if newer:
        needed = next(f for f in _ORDER if newer <= set(_FIELDS[f]))
        raise PlanError(f"plan of format {fmt!r} has field(s) {sorted(newer)}, which that format does not have; "
                        f"set \"format\": \"{needed}\" to use them")
    if unknown:
        raise PlanError(f"plan JSON has unknown field(s) {sorted(unknown)}; allowed: {', '.join(_FIELDS[fmt])}")
    storage = d.get("storage", {})
    per_variable = sorted(k for k, v in storage.items() if isinstance(v, Mapping)) if isinstance(storage, Mapping) else []
    if per_variable and fmt != PLAN_FORMAT_V3:
        raise PlanError(f"plan of format {fmt!r} stores layer(s) {per_variable} per variable, a form of "
                        f"{PLAN_FORMAT_V3}; set \"format\": \"{PLAN_FORMAT_V3}\" to use it")


def _layer_names(model_or_profile: Any) -> list[str]:
    if hasattr(model_or_profile, "names") and hasattr(model_or_profile, "layers") and not callable(
            getattr(model_or_profile, "names")):
        return list(model_or_profile.names)
    if hasattr(model_or_profile, "layers"):
        return [l.name for l in model_or_profile.layers]
    return list(model_or_profile)
