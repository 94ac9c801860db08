"""Workloads: built-in tf_keras models (profiled through ralp_tf) and outside formats.

:func:`load_workload` resolves a name or a path:

* a built-in name (:data:`BUILTIN_WORKLOADS`) -> a HeterPS :class:`~scheduler.core.problem.Problem`
  on a catalog (default :data:`scheduler.core.catalogs.CLOUD`);
* a shared dnn-partitioning name (``bert24_inference``, ...) or a path to such a JSON ->
  a :class:`~scheduler.core.maxload.MaxLoadProblem`;
* a path to a ralp_tf ModelProfile JSON -> a Problem;
* a harder generated workload (:data:`scheduler.workloads.hard.HARD_WORKLOADS`);
* a HeterPS-scale workload (:data:`scheduler.workloads.large.LARGE_WORKLOADS`: 200-300 layers).

The default throughput constraint of a HeterPS workload is :data:`DEFAULT_THROUGHPUT_FRACTION`
of its best achievable throughput on the catalog, rounded down to two significant digits
(:func:`~scheduler.core.problem.default_throughput`, re-exported here).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ralp_tf.errors import ValidationError, read_json_file
from ralp_tf.model import ModelProfile
from scheduler.core.errors import WorkloadError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import DEFAULT_THROUGHPUT_FRACTION, Problem, default_throughput
from scheduler.core.resources import Catalog, Constraints
from scheduler.workloads import dnn_partitioning
from scheduler.workloads.builtin import BUILTIN_WORKLOADS, load_profile

__all__ = ["BUILTIN_WORKLOADS", "DEFAULT_THROUGHPUT_FRACTION", "builtin_problem", "default_throughput",
           "load_workload", "load_profile", "dnn_partitioning", "workload_names"]


def problem_from_profile(profile: ModelProfile, catalog: Catalog | None = None, throughput: float | None = None,
                         budget: float | None = None, name: str | None = None) -> Problem:
    from scheduler.core.catalogs import CLOUD

    catalog = catalog or CLOUD
    free = Problem.from_profile(profile, catalog, Constraints(0.0, None), name=name, check=True)
    x = default_throughput(free) if throughput is None else float(throughput)
    return free.with_constraints(Constraints(x, budget))


def builtin_problem(name: str, catalog: Catalog | None = None, throughput: float | None = None,
                    budget: float | None = None) -> Problem:
    """The HeterPS problem of a built-in workload."""
    return problem_from_profile(load_profile(name), catalog, throughput, budget, name=name)


def workload_names() -> dict[str, list[str]]:
    return {"builtin": list(BUILTIN_WORKLOADS), "shared": list(dnn_partitioning.shared_workloads())}


def load_workload(name_or_path: str, *, catalog: Catalog | None = None, throughput: float | None = None,
                  budget: float | None = None) -> Problem | MaxLoadProblem:
    """Resolve a workload name or path (module docstring)."""
    if not isinstance(name_or_path, str) or not name_or_path:
        raise WorkloadError("a workload is a built-in name, a shared dnn-partitioning name or a JSON path")
    if name_or_path in BUILTIN_WORKLOADS:
        return builtin_problem(name_or_path, catalog, throughput, budget)
    shared = dnn_partitioning.shared_workloads()
    if name_or_path in shared:
        return dnn_partitioning.load(shared[name_or_path])
    from scheduler.workloads.hard import HARD_WORKLOADS, hard_workload
    from scheduler.workloads.large import LARGE_WORKLOADS, large_problem

    if name_or_path in HARD_WORKLOADS:
        return hard_workload(name_or_path)
    if name_or_path in LARGE_WORKLOADS:
        return large_problem(name_or_path, catalog, throughput)
    p = Path(name_or_path)
    if p.suffix == ".json" or p.exists():
        data: Any = read_json_file(name_or_path, WorkloadError, "workload file")
        if isinstance(data, dict) and "layers" in data:
            try:
                prof = ModelProfile.from_dict(data)
            except (ValidationError, TypeError, ValueError) as exc:
                raise WorkloadError(f"profile file {name_or_path!r} is invalid: {exc}") from None
            return problem_from_profile(prof, catalog, throughput, budget, name=p.stem)
        return dnn_partitioning.from_dict(data, p.stem)
    names = list(BUILTIN_WORKLOADS) + list(shared) + list(HARD_WORKLOADS) + list(LARGE_WORKLOADS)
    raise WorkloadError(f"unknown workload {name_or_path!r}; use one of {', '.join(names)} or a path to a "
                        "dnn-partitioning or ModelProfile JSON file")
