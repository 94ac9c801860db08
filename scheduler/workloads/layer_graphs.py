r"""Generated layer graphs in the dnn-partitioning format (max-load workloads), with parallel branches.

The shared dnn-partitioning workloads (BERT-24, ResNet-50) have at most two parallel paths, so
they have few ideals (39 and 242). Inception-style graphs with several parallel branches per
block are where the contiguous DP's state space (ideals, and pairs of nested ideals) grows;
:func:`branchy_graph` makes them, seeded, as plain JSON-ready dicts that
:func:`scheduler.workloads.dnn_partitioning.from_dict` (and the authors' reference DP) read.

**Shape.** A stem node, then ``blocks`` blocks: the block's input fans out into ``branches``
chains of ``1..branch_len`` nodes each (uniform), joined by a concat node, which is the next
block's input. Forward nodes: ``1 + blocks * (sum of chain lengths + 1)``.

**Numbers** (loosely after the shared ResNet-50/BERT profiles): accelerator latency
``fpgaLatency ~ LogNormal(0, 0.8)`` (a concat: 5% of that), CPU latency 8-12 times it; size
``~ LogNormal(log 2e7, 0.7)`` bytes; every node's outgoing edge cost is ``0.02-0.2`` times its
accelerator latency. ``maxSizePerFPGA`` is ``size_slack`` times the total size over
``fpgas`` (``size_slack < 1.5`` makes memory bind). **Training** graphs add a backward node per
forward node (same colour class, latency 2x, size 0) and the reversed edges between backward
nodes, as the shared training graphs do.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.core.errors import WorkloadError

__all__ = ["branchy_graph", "leafy_graph", "training_layer_graphs"]


def branchy_graph(*, blocks: int, branches: int, branch_len: int, training: bool = False, fpgas: int = 6,
                  cpus: int = 1, size_slack: float = 2.0, seed: int = 0, name: str | None = None) -> dict[str, Any]:
    """An inception-style layer graph in the dnn-partitioning JSON format (module docstring)."""
    for what, v, low in (("blocks", blocks, 1), ("branches", branches, 1), ("branch_len", branch_len, 1),
                         ("fpgas", fpgas, 0), ("cpus", cpus, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise WorkloadError(f"branchy_graph: {what} must be an integer >= {low}, got {v!r}")
    if not size_slack > 0:
        raise WorkloadError(f"branchy_graph: size_slack must be > 0, got {size_slack!r}")
    rng = np.random.default_rng(seed)
    fwd: list[dict[str, Any]] = []
    edges: list[tuple[int, int]] = []

    def node(concat: bool = False) -> int:
        nid = len(fwd) + 1
        lat = float(rng.lognormal(0.0, 0.8)) * (0.05 if concat else 1.0)
        fwd.append({"name": f"{'concat' if concat else 'op'}{nid}", "id": nid, "supportedOnFpga": 1,
                    "fpgaLatency": round(lat, 6), "cpuLatency": round(lat * float(rng.uniform(8, 12)), 6),
                    "isBackwardNode": 0, "colorClass": nid,
                    "size": 0.0 if concat else round(float(rng.lognormal(np.log(2e7), 0.7)))})
        return nid

    prev = node()
    for _ in range(blocks):
        ends = []
        for _ in range(branches):
            u = prev
            for _ in range(int(rng.integers(1, branch_len + 1))):
                v = node()
                edges.append((u, v))
                u = v
            ends.append(u)
        join = node(concat=True)
        edges += [(e, join) for e in ends]
        prev = join
    cost = {n["id"]: round(n["fpgaLatency"] * float(rng.uniform(0.02, 0.2)), 6) for n in fwd}
    nodes = list(fwd)
    out_edges = [{"sourceId": u, "destId": v, "cost": cost[u]} for u, v in edges]
    if training:
        off = len(fwd)
        for n in fwd:
            nodes.append({**n, "name": n["name"] + "grad", "id": n["id"] + off, "isBackwardNode": 1,
                          "fpgaLatency": round(2 * n["fpgaLatency"], 6), "cpuLatency": round(2 * n["cpuLatency"], 6),
                          "size": 0.0})
        out_edges += [{"sourceId": v + off, "destId": u + off, "cost": cost[v]} for u, v in edges]
    total = sum(n["size"] for n in nodes)
    label = name or (f"branchy_b{blocks}x{branches}x{branch_len}{'_training' if training else ''}_s{seed}")
    return {"name": label, "maxSizePerFPGA": float(size_slack * total / max(fpgas, 1)), "maxFPGAs": fpgas,
            "maxCPUs": cpus, "nodes": nodes, "edges": out_edges}


def leafy_graph(*, blocks: int, branches: int, branch_len: int, leaves: int, training: bool = False,
                fpgas: int = 6, cpus: int = 1, size_slack: float = 2.0, seed: int = 0,
                name: str | None = None) -> dict[str, Any]:
    """:func:`branchy_graph` plus up to ``leaves`` constants per forward op node (module docstring)."""
    if isinstance(leaves, bool) or not isinstance(leaves, int) or leaves < 0:
        raise WorkloadError(f"leafy_graph: leaves must be an integer >= 0, got {leaves!r}")
    g = branchy_graph(blocks=blocks, branches=branches, branch_len=branch_len, training=training, fpgas=fpgas,
                      cpus=cpus, size_slack=size_slack, seed=seed)
    rng = np.random.default_rng(seed + 7_919)
    ops = [n for n in g["nodes"] if not n["isBackwardNode"] and n["name"].startswith("op")]
    next_id = max(n["id"] for n in g["nodes"]) + 1
    for op in ops:
        for _ in range(int(rng.integers(0, leaves + 1))):
            g["nodes"].append({"name": f"const{next_id}", "id": next_id, "supportedOnFpga": 1, "fpgaLatency": 0.0,
                               "cpuLatency": 0.0, "isBackwardNode": 0, "colorClass": next_id, "size": 0.0})
            g["edges"].append({"sourceId": next_id, "destId": op["id"],
                               "cost": round(op["fpgaLatency"] * float(rng.uniform(0.01, 0.05)), 6)})
            next_id += 1
    g["name"] = name or (f"leafy_b{blocks}x{branches}x{branch_len}l{leaves}{'_training' if training else ''}"
                         f"_s{seed}")
    return g


def training_layer_graphs(count: int, seed: int = 0, *, min_nodes: int = 20,
                          max_nodes: int = 200) -> list[dict[str, Any]]:
    """``count`` seeded :func:`branchy_graph` s for pretraining a max-load policy, varied like
    real layer graphs: 1-3 parallel branches of 1-4 nodes (chains like BERT, two paths like
    ResNet, wider like Inception), 2-8 accelerators, 0-1 CPU, memory slack 1.2-3 x the even
    share, inference or training (forward + backward). Draws whose forward node count is
    outside ``[min_nodes, max_nodes]`` are redrawn (blocks are chosen to land there)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise WorkloadError(f"training_layer_graphs: count must be an integer >= 0, got {count!r}")
    if not 1 <= min_nodes <= max_nodes:
        raise WorkloadError(f"training_layer_graphs: need 1 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        branches = int(rng.choice([1, 2, 2, 3]))
        branch_len = int(rng.integers(1, 5))
        per_block = branches * (branch_len + 1) / 2 + 1
        target = float(rng.uniform(min_nodes, max_nodes))
        blocks = max(1, int(round((target - 1) / per_block)))
        g = branchy_graph(blocks=blocks, branches=branches, branch_len=branch_len, training=bool(rng.integers(2)),
                          fpgas=int(rng.integers(2, 9)), cpus=int(rng.integers(0, 2)),
                          size_slack=float(rng.uniform(1.2, 3.0)), seed=int(rng.integers(2**31)),
                          name=f"train_graph{seed}_{len(out)}")
        forward = sum(1 for n in g["nodes"] if not n["isBackwardNode"])
        if min_nodes <= forward <= max_nodes:
            out.append(g)
    return out
