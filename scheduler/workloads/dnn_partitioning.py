"""Importer of the dnn-partitioning workload JSON (Tarnawski et al., NeurIPS 2020, MIT licence).

Format (see ``shared/data/dnn-partitioning/README.md``): top-level ``maxSizePerFPGA``,
``maxFPGAs``, ``maxCPUs``, ``nodes`` (``id``, ``supportedOnFpga``, ``cpuLatency``,
``fpgaLatency``, ``isBackwardNode``, optional ``colorClass`` (default: the node alone), ``size``
(default 0) and ``name``), ``edges`` (``sourceId``, ``destId``, ``cost``; every edge leaving
one node has the same cost). The result of a solver is written in the package's result shape
``{"cpus": [{"nodes": [...]}], "fpgas": [{"nodes": [...]}, ...]}``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping

from ralp_tf.errors import read_json_file
from scheduler.core.errors import WorkloadError
from scheduler.core.maxload import MaxLoadProblem

__all__ = ["PUBLISHED_OPTIMUM", "shared_dir", "shared_workloads", "from_dict", "load"]

#: Published optimum max-load of the contiguous-split DP (table in the data's README).
PUBLISHED_OPTIMUM: dict[str, float] = {
    "bert24_inference": 17.7899,
    "bert24_training": 41.7458,
    "resnet50_inference": 33.7747,
    "resnet50_training": 78.6318,
}

_TOP = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")
_NODE = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode")
_EDGE = ("sourceId", "destId", "cost")


def shared_dir(repo_root: str | os.PathLike[str] | None = None) -> Path | None:
    """The dnn-partitioning data folder: ``$RALP_SHARED_DIR/data/dnn-partitioning`` if set, else
    ``../shared/data/dnn-partitioning`` beside the repository root; None when absent."""
    env = os.environ.get("RALP_SHARED_DIR")
    root = Path(repo_root) if repo_root is not None else Path(__file__).resolve().parents[2]
    for base in ([Path(env)] if env else []) + [root.parent / "shared"]:
        d = base / "data" / "dnn-partitioning"
        if d.is_dir():
            return d
    return None


def shared_workloads() -> dict[str, Path]:
    """Name -> path of every shared workload JSON present (empty when the folder is absent)."""
    d = shared_dir()
    if d is None:
        return {}
    return {p.stem: p for p in sorted(d.glob("*.json"))}


def _num(value: Any, where: str, *, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WorkloadError(f"{where} must be a number, got {value!r}")
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise WorkloadError(f"{where} must be a finite number >= 0, got {value!r}")
    if integer and int(value) != value:
        raise WorkloadError(f"{where} must be an integer, got {value!r}")
    return value


def from_dict(data: Any, name: str = "workload") -> MaxLoadProblem:
    """Validate ``data`` (the parsed JSON) and build a :class:`MaxLoadProblem`."""
    if not isinstance(data, Mapping):
        raise WorkloadError(f"workload {name!r} must be a JSON object with fields {', '.join(_TOP)}")
    missing = [k for k in _TOP if k not in data]
    if missing:
        raise WorkloadError(f"workload {name!r} lacks field(s) {missing}; a dnn-partitioning workload has "
                            f"{', '.join(_TOP)}")
    if not isinstance(data["nodes"], list) or not isinstance(data["edges"], list):
        raise WorkloadError(f"workload {name!r}: 'nodes' and 'edges' must be lists")
    max_size = float(_num(data["maxSizePerFPGA"], f"workload {name!r} maxSizePerFPGA"))
    max_fpgas = int(_num(data["maxFPGAs"], f"workload {name!r} maxFPGAs", integer=True))
    max_cpus = int(_num(data["maxCPUs"], f"workload {name!r} maxCPUs", integer=True))
    ids, cpu, fpga, size, sup, bwd, color, names = [], [], [], [], [], [], [], []
    for k, node in enumerate(data["nodes"]):
        if not isinstance(node, Mapping):
            raise WorkloadError(f"workload {name!r}: node #{k} is not an object")
        miss = [f for f in _NODE if f not in node]
        if miss:
            raise WorkloadError(f"workload {name!r}: node #{k} (id {node.get('id', '?')}) lacks field(s) {miss}")
        nid = node["id"]
        if isinstance(nid, bool) or not isinstance(nid, int):
            raise WorkloadError(f"workload {name!r}: node #{k} id {nid!r} is not an integer")
        ids.append(nid)
        where = f"workload {name!r} node {nid}"
        cpu.append(_num(node["cpuLatency"], f"{where} cpuLatency"))
        fpga.append(_num(node["fpgaLatency"], f"{where} fpgaLatency"))
        size.append(_num(node.get("size", 0.0), f"{where} size"))
        sup.append(bool(node["supportedOnFpga"]))
        bwd.append(bool(node["isBackwardNode"]))
        cc = node.get("colorClass", None)
        if cc is not None and (isinstance(cc, bool) or not isinstance(cc, int)):
            raise WorkloadError(f"{where}: colorClass {cc!r} is not an integer")
        color.append(cc)
        names.append(str(node.get("name", nid)))
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise WorkloadError(f"workload {name!r}: node id {dup} appears twice; ids must be unique")
    # Nodes without a colour class get a fresh one of their own.
    fresh = max([c for c in color if c is not None] + [0]) + 1
    for k, c in enumerate(color):
        if c is None:
            color[k] = fresh
            fresh += 1
    known = set(ids)
    edges, out_cost = [], {}
    for k, e in enumerate(data["edges"]):
        if not isinstance(e, Mapping):
            raise WorkloadError(f"workload {name!r}: edge #{k} is not an object")
        miss = [f for f in _EDGE if f not in e]
        if miss:
            raise WorkloadError(f"workload {name!r}: edge #{k} lacks field(s) {miss}")
        s, d = e["sourceId"], e["destId"]
        for end, v in (("sourceId", s), ("destId", d)):
            if isinstance(v, bool) or not isinstance(v, int) or v not in known:
                raise WorkloadError(f"workload {name!r}: edge #{k} {end} {v!r} is not the id of any node; add the "
                                    "node or fix the edge")
        if s == d:
            raise WorkloadError(f"workload {name!r}: edge #{k} is a self-loop on node {s}")
        c = float(_num(e["cost"], f"workload {name!r} edge #{k} cost"))
        if s in out_cost and abs(out_cost[s] - c) > 1e-6:
            raise WorkloadError(f"workload {name!r}: node {s} has two different outgoing edge costs "
                                f"({out_cost[s]} and {c}); the format charges one cost per source node")
        out_cost.setdefault(s, c)
        edges.append((s, d))
    return MaxLoadProblem(name, ids, cpu, fpga, size, sup, bwd, color, edges, out_cost, max_size, max_fpgas,
                          max_cpus, node_names=names)


def load(path: str | os.PathLike[str], name: str | None = None) -> MaxLoadProblem:
    """Read and validate a workload JSON file; any problem (unreadable, oversize, too deeply nested,
    non-finite numbers, malformed) raises :class:`WorkloadError`."""
    return from_dict(read_json_file(path, WorkloadError, "workload file"), name or Path(path).stem)
