"""The resources a HeterPS problem places layers on: resource types, their catalog, and the
throughput/budget constraints (see :mod:`scheduler.core.problem` for how they are priced)."""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from ralp_tf.plan import Task
from scheduler.core.errors import CatalogError, ProblemError

__all__ = ["ROLES", "ResourceType", "Catalog", "Constraints"]

ROLES = ("worker", "ps")
_TEMPLATE = re.compile(r"^/job:(?P<job>[a-z_]+)(/replica:0)?(/task:(\d+|\{k\}))?/device:(?P<dev>CPU|GPU):\d+$")


def _finite_nonneg(value: Any, what: str, fix: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ProblemError(f"{what} must be a number, got {value!r}; {fix}") from None
    if math.isnan(v) or v < 0 or math.isinf(v):
        raise ProblemError(f"{what} must be a finite number >= 0, got {value!r}; {fix}")
    return v


@dataclasses.dataclass(frozen=True)
class ResourceType:
    """One kind of unit that layers can be placed on.

    ``device_template`` is the TF device string of a unit; ``{k}`` in it is replaced by the
    unit's task index (PS units). Its job decides the role: ``/job:ps/...`` units hold their
    stage's variables (role ``ps``); any other job runs data-parallel replicas (``worker``).
    """

    name: str
    device_template: str
    flops: float
    memory_bytes: float
    price_per_hour: float
    max_units: int
    bandwidth_bps: float
    overhead_s: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise CatalogError("a resource type needs a non-empty name")
        m = _TEMPLATE.match(self.device_template) if isinstance(self.device_template, str) else None
        if not m:
            raise CatalogError(f"resource type {self.name!r}: device template {self.device_template!r} is not a "
                               "TF device string; write e.g. '/job:worker/device:GPU:0' or "
                               "'/job:ps/replica:0/task:{k}/device:CPU:0'")
        for field, low in (("flops", 0.0), ("memory_bytes", 0.0), ("bandwidth_bps", 0.0)):
            v = getattr(self, field)
            if not isinstance(v, (int, float)) or math.isnan(v) or v <= low:
                raise CatalogError(f"resource type {self.name!r}: {field} must be a positive number, got {v!r}")
        v = self.price_per_hour
        if not isinstance(v, (int, float)) or math.isnan(v) or v <= 0 or math.isinf(v):
            raise CatalogError(f"resource type {self.name!r}: price_per_hour must be a finite number > 0 ($ per unit "
                               f"hour; a free type would make every schedule's cost 0), got {v!r}")
        for field in ("overhead_s",):
            v = getattr(self, field)
            if not isinstance(v, (int, float)) or math.isnan(v) or v < 0 or math.isinf(v):
                raise CatalogError(f"resource type {self.name!r}: {field} must be a finite number >= 0, "
                                   f"got {v!r}")
        if isinstance(self.max_units, bool) or not isinstance(self.max_units, (int, np.integer)) or self.max_units < 1:
            raise CatalogError(f"resource type {self.name!r}: max_units must be an integer >= 1, "
                               f"got {self.max_units!r}")

    @property
    def role(self) -> str:
        return "ps" if self.device_template.startswith("/job:ps") else "worker"

    @property
    def is_gpu(self) -> bool:
        return "/device:GPU:" in self.device_template

    def device(self, k: int = 0) -> str:
        """The device string of unit ``k``."""
        return self.device_template.replace("{k}", str(k))

    def task(self) -> Task:
        """A ralp_tf Task with this type's rates, for ralp_tf's cost-model functions."""
        return Task(job=self.role, index=0, address="catalog:0", bandwidth_bps=float(self.bandwidth_bps),
                    flops=float(self.flops), gpus=1 if self.is_gpu else 0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Catalog:
    """The resource types a problem may use (at least one)."""

    name: str
    types: tuple[ResourceType, ...]

    def __post_init__(self) -> None:
        types = tuple(self.types)
        if not types:
            raise CatalogError(f"catalog {self.name!r} is empty; give at least one ResourceType (see "
                               "scheduler.core.catalogs for examples)")
        for t in types:
            if not isinstance(t, ResourceType):
                raise CatalogError(f"catalog {self.name!r} holds {type(t).__name__}, not ResourceType")
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise CatalogError(f"catalog {self.name!r} lists a type name twice: {names}")
        object.__setattr__(self, "types", types)

    def __len__(self) -> int:
        return len(self.types)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.types]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise CatalogError(f"catalog {self.name!r} has no type {name!r}; types: {', '.join(self.names)}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "types": [t.to_dict() for t in self.types]}


@dataclasses.dataclass(frozen=True)
class Constraints:
    """A minimum throughput (samples/s, 0 = none) and an optional budget ($/hour of all units)."""

    min_throughput: float = 0.0
    budget_per_hour: float | None = None

    def __post_init__(self) -> None:
        _finite_nonneg(self.min_throughput, "min_throughput", "give samples per second, e.g. 500")
        if self.budget_per_hour is not None:
            b = _finite_nonneg(self.budget_per_hour, "budget_per_hour", "give dollars per hour, e.g. 20")
            if b == 0:
                raise ProblemError("budget_per_hour must be positive (or None for no budget)")
