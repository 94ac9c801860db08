"""Resource types emulated on the testbed: a CPU quota per unit, a link rate and a price.

An *emulated catalog* (JSON) describes the types a schedule may be executed on::

    {"name": "emu_a", "coordinator_cores": 0.2,
     "types": [{"name": "big", "cores": 0.6, "link": "1gbit", "price_per_hour": 0.40, "max_units": 2},
               {"name": "small", "cores": 0.25, "link": "100mbit", "price_per_hour": 0.12, "max_units": 2,
                "roles": ["worker", "ps"]}]}

* ``cores``: the CPU quota of one unit (cgroup v1 ``cpu.cfs_quota_us = cores x period``), > 0;
* ``link``: the unit's link rate each way (``"100mbit"``, bits/s as a number), > 0 and finite;
* ``price_per_hour``: dollars per unit hour, > 0;
* ``max_units``: at most this many units of the type (as workers and PS tasks together), >= 1;
* ``roles``: which PSS jobs a unit may serve, default both (a CPU machine can be a worker or a PS).

**Honest emulation.** Every unit of every type at once, plus the coordinator's quota
(``coordinator_cores``, the PSS chief; it is not priced), must fit in the machine's cores:
``sum_r max_units_r x cores_r + coordinator_cores <= cores of this machine``. Otherwise the
emulated units would take CPU from each other and the measured rates would lie.

A type's FLOP rate is not in the file: it is *measured* under the type's quota
(:mod:`scheduler.execution.unitrate`), and :meth:`EmulatedCatalog.scheduler_catalog` builds the
scheduler's :class:`~scheduler.core.resources.Catalog` from those measurements.
"""
from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ralp_tf.plan import format_bandwidth, parse_bandwidth
from ralp_tf.errors import ValidationError, read_json_file
from scheduler.core.errors import CatalogError
from scheduler.core.resources import Catalog, ResourceType

__all__ = ["CATALOG_DIR", "ROLES", "UNIT_MEMORY_BYTES", "machine_cores", "EmulatedType", "EmulatedCatalog",
           "emulated_type_of", "catalog_from_dict", "builtin_catalogs", "load_catalog", "fastest"]

#: The emulated catalogs shipped with the package (``scheduler/catalogs/<name>.json``).
CATALOG_DIR = Path(__file__).resolve().parents[1] / "catalogs"
ROLES = ("worker", "ps")
#: Memory per unit the scheduler assumes (the testbed's tasks share the machine's memory).
UNIT_MEMORY_BYTES = 4e9
_FIELDS = {"name", "cores", "link", "price_per_hour", "max_units", "roles", "source"}
_REQUIRED = {"name", "cores", "link", "price_per_hour", "max_units"}


def machine_cores() -> int:
    """CPUs this process may run on (its affinity mask): what every quota shares."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class EmulatedType:
    """One emulated resource type (see the module docstring for the fields)."""

    name: str
    cores: float
    link_bps: float
    price_per_hour: float
    max_units: int
    roles: tuple[str, ...] = ROLES
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise CatalogError(f"emulated type name {self.name!r} must be a short identifier (letters, digits, _)")
        for field, fix in (("cores", "a CPU quota per unit in cores, e.g. 0.5"),
                           ("link_bps", "a link rate, e.g. '100mbit'"),
                           ("price_per_hour", "dollars per unit hour, e.g. 0.25")):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise CatalogError(f"emulated type {self.name!r}: {field} must be a finite number > 0, got {v!r}; "
                                   f"give {fix}")
        if self.cores < 0.05:
            raise CatalogError(f"emulated type {self.name!r}: cores {self.cores!r} is below 0.05; a TensorFlow "
                               "task under a smaller quota spends its time in start-up; give at least 0.05")
        if isinstance(self.max_units, bool) or not isinstance(self.max_units, int) or self.max_units < 1:
            raise CatalogError(f"emulated type {self.name!r}: max_units must be an integer >= 1, "
                               f"got {self.max_units!r}")
        roles = tuple(self.roles)
        if not roles or any(r not in ROLES for r in roles) or len(set(roles)) != len(roles):
            raise CatalogError(f"emulated type {self.name!r}: roles must be a non-empty subset of {list(ROLES)}, "
                               f"got {list(roles)}")
        object.__setattr__(self, "roles", roles)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cores": self.cores, "link": format_bandwidth(self.link_bps),
                "price_per_hour": self.price_per_hour, "max_units": self.max_units, "roles": list(self.roles),
                "source": self.source}


@dataclasses.dataclass(frozen=True)
class EmulatedCatalog:
    """Emulated types plus the coordinator's quota; validated against ``cores`` of the machine."""

    name: str
    types: tuple[EmulatedType, ...]
    coordinator_cores: float = 0.2
    cores: float = dataclasses.field(default_factory=lambda: float(machine_cores()))

    def __post_init__(self) -> None:
        types = tuple(self.types)
        if not types:
            raise CatalogError(f"emulated catalog {self.name!r} lists no types; give at least one")
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise CatalogError(f"emulated catalog {self.name!r} lists a type name twice: {names}")
        if not any("worker" in t.roles for t in types):
            raise CatalogError(f"emulated catalog {self.name!r} has no type that may serve as a worker")
        if not any("ps" in t.roles for t in types):
            raise CatalogError(f"emulated catalog {self.name!r} has no type that may serve as a PS "
                               "(ParameterServerStrategy needs one)")
        c = self.coordinator_cores
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0.05:
            raise CatalogError(f"emulated catalog {self.name!r}: coordinator_cores must be a number >= 0.05 "
                               f"(the PSS chief's quota), got {c!r}")
        total = sum(t.max_units * t.cores for t in types) + c
        if total > self.cores + 1e-9:
            parts = " + ".join(f"{t.max_units} x {t.cores:g} ({t.name})" for t in types)
            raise CatalogError(
                f"emulated catalog {self.name!r} asks for {parts} + {c:g} (coordinator) = {total:g} cores, but "
                f"this machine has {self.cores:g}: the units would take CPU from each other and the measured "
                "rates would lie. Lower max_units or cores so that the sum fits")
        object.__setattr__(self, "types", types)

    def type(self, name: str) -> EmulatedType:
        for t in self.types:
            if t.name == name:
                return t
        raise CatalogError(f"emulated catalog {self.name!r} has no type {name!r}; types: "
                           f"{', '.join(t.name for t in self.types)}")

    def scheduler_catalog(self, flops: Mapping[str, float]) -> Catalog:
        """The scheduler's Catalog: per emulated type, a worker type ``<name>`` and a PS type
        ``<name>_ps`` (as its roles allow), with the FLOP rate ``flops[name]`` measured under the
        type's quota, its link rate and price; ``max_units`` is the type's (the caller keeps one
        type's units as worker and PS within it)."""
        out = []
        for t in self.types:
            if t.name not in flops:
                raise CatalogError(f"no measured FLOP rate for emulated type {t.name!r}; measure it first "
                                   "(scheduler.execution.unitrate)")
            common = dict(flops=float(flops[t.name]), memory_bytes=UNIT_MEMORY_BYTES, price_per_hour=t.price_per_hour,
                          max_units=t.max_units, bandwidth_bps=t.link_bps, overhead_s=0.0,
                          source=f"emulated: {t.cores:g} cores (cgroup quota), {format_bandwidth(t.link_bps)}, "
                                 f"FLOP rate measured under the quota")
            if "worker" in t.roles:
                out.append(ResourceType(name=t.name, device_template="/job:worker/device:CPU:0", **common))
            if "ps" in t.roles:
                out.append(ResourceType(name=f"{t.name}_ps", device_template="/job:ps/replica:0/task:{k}/device:CPU:0",
                                        **common))
        return Catalog(self.name, tuple(out))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "coordinator_cores": self.coordinator_cores,
                "types": [t.to_dict() for t in self.types]}


def emulated_type_of(resource_type_name: str) -> str:
    """The emulated type behind a scheduler type name (``big_ps`` -> ``big``)."""
    return resource_type_name[:-3] if resource_type_name.endswith("_ps") else resource_type_name


def catalog_from_dict(data: Any, *, cores: float | None = None) -> EmulatedCatalog:
    """An :class:`EmulatedCatalog` from JSON data; raises :class:`CatalogError` naming the field."""
    if not isinstance(data, Mapping) or not isinstance(data.get("types"), list):
        raise CatalogError('an emulated catalog is a JSON object {"name": ..., "types": [...]} (see '
                           "scheduler/execution/emulated.py)")
    name = data.get("name", "emulated")
    if not isinstance(name, str):
        raise CatalogError("emulated catalog 'name' must be a string")
    unknown_top = set(data) - {"name", "types", "coordinator_cores", "source"}
    if unknown_top:
        raise CatalogError(f"emulated catalog {name!r} has unknown field(s) {sorted(unknown_top)}")
    types = []
    for i, t in enumerate(data["types"]):
        if not isinstance(t, Mapping):
            raise CatalogError(f"emulated catalog {name!r} type #{i} must be an object with {sorted(_REQUIRED)}")
        label = t.get("name", f"#{i}")
        missing, unknown = _REQUIRED - set(t), set(t) - _FIELDS
        if missing:
            raise CatalogError(f"emulated catalog {name!r} type {label!r} lacks field(s) {sorted(missing)}")
        if unknown:
            raise CatalogError(f"emulated catalog {name!r} type {label!r} has unknown field(s) {sorted(unknown)}; "
                               f"allowed: {sorted(_FIELDS)}")
        try:
            link = parse_bandwidth(t["link"]) if not isinstance(t["link"], bool) else None
        except ValidationError as exc:
            raise CatalogError(f"emulated catalog {name!r} type {label!r}: link {t['link']!r}: {exc}") from None
        if link is None or not math.isfinite(link) or link <= 0:
            raise CatalogError(f"emulated catalog {name!r} type {label!r}: link must be a finite rate > 0 "
                               f"(e.g. '100mbit'), got {t['link']!r}")
        roles = t.get("roles", list(ROLES))
        if not isinstance(roles, list):
            raise CatalogError(f"emulated catalog {name!r} type {label!r}: roles must be a list, e.g. ['worker']")
        types.append(EmulatedType(name=t["name"], cores=t["cores"], link_bps=link, price_per_hour=t["price_per_hour"],
                                  max_units=t["max_units"], roles=tuple(roles), source=str(t.get("source", ""))))
    kw: dict[str, Any] = {}
    if "coordinator_cores" in data:
        kw["coordinator_cores"] = data["coordinator_cores"]
    if cores is not None:
        kw["cores"] = float(cores)
    return EmulatedCatalog(name, tuple(types), **kw)


def builtin_catalogs() -> list[str]:
    """Names of the emulated catalogs shipped in ``scheduler/catalogs/``."""
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))


def load_catalog(ref: str, *, cores: float | None = None) -> EmulatedCatalog:
    """An emulated catalog by built-in name (``scheduler/catalogs/<name>.json``) or JSON path."""
    path = CATALOG_DIR / f"{ref}.json" if ref in builtin_catalogs() else Path(ref)
    if not path.is_file():
        raise CatalogError(f"unknown emulated catalog {ref!r}: not a built-in ({', '.join(builtin_catalogs())}) "
                           "nor a JSON file")
    return catalog_from_dict(read_json_file(path, CatalogError, "emulated catalog"), cores=cores)


def fastest(catalog: EmulatedCatalog, flops: Mapping[str, float], roles: Sequence[str] = ROLES) -> EmulatedType:
    """The type with the highest measured FLOP rate among those that may take every role in ``roles``."""
    cands = [t for t in catalog.types if all(r in t.roles for r in roles)]
    if not cands:
        raise CatalogError(f"emulated catalog {catalog.name!r} has no type for roles {list(roles)}")
    return max(cands, key=lambda t: flops[t.name])
