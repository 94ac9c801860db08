r"""Max-load placement problem (the dnn-partitioning format of Tarnawski et al., NeurIPS 2020).

Nodes carry a CPU latency, an accelerator latency, a size and a colour class; each edge's
``cost`` is the time to move its source node's output between an accelerator and CPU memory.
A placement puts every node on one of ``maxCPUs`` CPUs or ``maxFPGAs`` accelerators
("FPGA" = any accelerator). Nodes of one colour class (a layer's forward and backward node)
share a device, so the decisions are the colour classes (*groups*).

**Load of a device** ``d``: ``sum_{u on d} lat_d(u)`` (CPU or accelerator latency) plus, on an
accelerator only, communication: for every node ``u`` with an edge to a node on another
device, ``u``'s outgoing cost ``c_u`` is charged once to ``u``'s device and once to each
distinct other device that receives it.

**Objective**: ``max_load = max_d load(d)`` (time per sample of the pipelined split), lower is
better. **Constraints**: ``sum_{u on accelerator a} size(u) <= maxSizePerFPGA``; nodes with
``supportedOnFpga = 0`` stay on CPUs.

Group order: a topological order of the groups along the forward edges (backward nodes
follow their colour class; backward edges only cost communication). A *contiguous* split puts
on each device a set ``I \ J`` of two ideals ``J ⊆ I`` (downward-closed group sets), which is
the space of the published dynamic programme; consecutive runs in the group order are such
sets. The throughput reported for a schedule is ``1 / max_load`` samples per time unit.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from scheduler.core.errors import ProblemError, WorkloadError

__all__ = ["IDEALS_LIMIT", "MaxLoadEvaluation", "MaxLoadProblem"]

#: At most this many ideals are enumerated by :meth:`MaxLoadProblem.ideals`.
IDEALS_LIMIT = 200_000


@dataclasses.dataclass(frozen=True)
class MaxLoadEvaluation:
    max_load: float
    loads: np.ndarray
    feasible: bool
    reason: str

    @property
    def objective(self) -> float:
        return self.max_load if self.feasible else math.inf


class MaxLoadProblem:
    """A validated max-load workload. Build it with
    :func:`scheduler.workloads.dnn_partitioning.load` (from JSON) or directly from arrays."""

    objective_name = "max_load"

    def __init__(self, name: str, node_ids: Sequence[int], cpu_latency: Sequence[float],
                 fpga_latency: Sequence[float], size: Sequence[float], supported: Sequence[bool],
                 backward: Sequence[bool], color: Sequence[int], edges: Sequence[tuple[int, int]],
                 out_cost: Mapping[int, float], max_size: float, max_fpgas: int, max_cpus: int,
                 node_names: Sequence[str] | None = None) -> None:
        self.name = str(name)
        self.node_ids = [int(i) for i in node_ids]
        N = len(self.node_ids)
        if N == 0:
            raise WorkloadError(f"workload {name!r} has no nodes")
        if len(set(self.node_ids)) != N:
            raise WorkloadError(f"workload {name!r} lists a node id twice")
        self.pos = {nid: i for i, nid in enumerate(self.node_ids)}
        self.node_names = list(node_names) if node_names is not None else [str(i) for i in self.node_ids]
        arrs = {}
        for what, vals in (("cpuLatency", cpu_latency), ("fpgaLatency", fpga_latency), ("size", size)):
            a = np.asarray(vals, dtype=np.float64)
            if a.shape != (N,) or np.isnan(a).any() or (a < 0).any() or np.isinf(a).any():
                raise WorkloadError(f"workload {name!r}: every node's {what} must be a finite number >= 0")
            arrs[what] = a
        self.cpu_lat, self.fpga_lat, self.size = arrs["cpuLatency"], arrs["fpgaLatency"], arrs["size"]
        self.supported = np.asarray(supported, dtype=bool)
        self.backward = np.asarray(backward, dtype=bool)
        _check_devices(name, max_size, max_fpgas, max_cpus)
        self.max_size, self.max_fpgas, self.max_cpus = float(max_size), max_fpgas, max_cpus
        # Edges (positions), outgoing cost per node.
        src, dst = [], []
        for s, d in edges:
            src.append(self.pos[s])
            dst.append(self.pos[d])
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.cost = np.zeros(N)
        for nid, c in out_cost.items():
            self.cost[self.pos[nid]] = float(c)
        if np.isnan(self.cost).any() or (self.cost < 0).any() or np.isinf(self.cost).any():
            raise WorkloadError(f"workload {name!r}: edge costs must be finite numbers >= 0")
        self._check_acyclic()
        # Groups = colour classes (those on a forward cycle fused, as the reference DP does), in topological order.
        group_list, gpred, self.fused_classes = _class_graph(color, self.src, self.dst, self.backward)
        gof = np.zeros(N, dtype=np.int64)
        for g, members in enumerate(group_list):
            gof[members] = g
        G = len(group_list)
        order = _toposort(gpred, key=lambda g: min(group_list[g]))
        assert order is not None, "the class graph is acyclic once its strongly connected classes are fused"
        self.groups = [group_list[g] for g in order]
        remap = {g: k for k, g in enumerate(order)}
        self.group_of = np.array([remap[int(g)] for g in gof], dtype=np.int64)
        self.group_pred = [sorted(remap[p] for p in gpred[g]) for g in order]
        self.group_fpga = np.array([self.fpga_lat[m].sum() for m in self.groups])
        self.group_cpu = np.array([self.cpu_lat[m].sum() for m in self.groups])
        self.group_size = np.array([self.size[m].sum() for m in self.groups])
        self.group_supported = np.array([bool(self.supported[m].all()) for m in self.groups])
        # More devices than colour classes cannot change the optimum (a device with no class is
        # empty); clamping also keeps a workload declaring 10**12 devices from exhausting memory.
        self.declared_fpgas, self.declared_cpus = self.max_fpgas, self.max_cpus
        self.max_fpgas, self.max_cpus = min(self.max_fpgas, G), min(self.max_cpus, G)
        self.allowed = np.ones((G, self.num_choices), dtype=bool)
        self.allowed[~self.group_supported, self.max_cpus:] = False
        if self.max_cpus == 0 and (~self.group_supported).any():
            bad = self.node_ids[self.groups[int(np.argmax(~self.group_supported))][0]]
            raise WorkloadError(f"workload {name!r}: node {bad} is not supported on an accelerator and there is "
                                "no CPU (maxCPUs = 0); allow a CPU")
        too_big = np.flatnonzero(self.group_supported & (self.group_size > self.max_size))
        for g in too_big:
            self.allowed[g, self.max_cpus:] = False
        if self.max_cpus == 0 and too_big.size:
            g = int(too_big[0])
            raise WorkloadError(f"workload {name!r}: colour class of node {self.node_ids[self.groups[g][0]]} needs "
                                f"{self.group_size[g]:.4g} bytes, more than maxSizePerFPGA = {self.max_size:.4g}, and "
                                "there is no CPU: no placement satisfies the memory limit")
        self._ideals: tuple[list[int], np.ndarray] | None = None
        self._comm_tables: tuple[np.ndarray, ...] | None = None

    def with_colors(self, color: Sequence[int]) -> "MaxLoadProblem":
        """The same nodes, edges and devices with colour class ``color[i]`` for node ``i``."""
        edges = [(self.node_ids[s], self.node_ids[d]) for s, d in zip(self.src.tolist(), self.dst.tolist())]
        out_cost = {self.node_ids[i]: float(c) for i, c in enumerate(self.cost) if c}
        return MaxLoadProblem(self.name, self.node_ids, self.cpu_lat, self.fpga_lat, self.size, self.supported,
                              self.backward, [int(c) for c in color], edges, out_cost, self.max_size,
                              self.declared_fpgas, self.declared_cpus, node_names=self.node_names)

    # ----------------------------------------------------------------- shape
    @property
    def num_decisions(self) -> int:
        return len(self.groups)

    @property
    def num_choices(self) -> int:
        """Devices: CPUs ``0..maxCPUs-1``, then accelerators."""
        return self.max_cpus + self.max_fpgas

    @property
    def decision_names(self) -> list[str]:
        return ["+".join(str(self.node_ids[i]) for i in g) for g in self.groups]

    def is_fpga(self, device: int) -> bool:
        return device >= self.max_cpus

    def _check_acyclic(self) -> None:
        N = len(self.node_ids)
        preds: list[set[int]] = [set() for _ in range(N)]
        for s, d in zip(self.src, self.dst):
            preds[int(d)].add(int(s))
        if _toposort(preds, key=lambda i: i) is None:
            # Name a node on a cycle: repeatedly strip sources and sinks.
            alive = set(range(N))
            changed = True
            while changed:
                changed = False
                for v in list(alive):
                    if not (preds[v] & alive) or not any(v in preds[w] for w in alive):
                        alive.discard(v)
                        changed = True
            some = self.node_ids[min(alive)] if alive else "?"
            raise WorkloadError(f"workload {self.name!r} has a cycle through node {some}; a layer graph must be a "
                                "DAG: remove the edge that closes the cycle")

    # ----------------------------------------------------------------- evaluation
    def node_devices(self, assignment: Any) -> np.ndarray:
        a = np.asarray(assignment, dtype=np.int64).reshape(-1)
        if a.shape != (self.num_decisions,):
            raise ProblemError(f"an assignment gives one device per colour class ({self.num_decisions}), "
                               f"got {a.size}")
        if (a < 0).any() or (a >= self.num_choices).any():
            raise ProblemError(f"device indices must be in 0..{self.num_choices - 1}")
        return a[self.group_of]

    def evaluate(self, assignment: Any) -> MaxLoadEvaluation:
        """Loads of every device and the max-load (module docstring)."""
        dev = self.node_devices(assignment)
        D = self.num_choices
        is_acc = np.arange(D) >= self.max_cpus
        lat = np.where(is_acc[dev], self.fpga_lat, self.cpu_lat)
        loads = np.bincount(dev, weights=lat, minlength=D).astype(np.float64)
        cross = dev[self.src] != dev[self.dst]
        if cross.any():
            us = np.unique(self.src[cross])
            own = dev[us]
            loads += np.bincount(own, weights=self.cost[us] * is_acc[own], minlength=D)
            pairs = np.unique(self.src[cross] * D + dev[self.dst[cross]])
            pu, pd = pairs // D, pairs % D
            loads += np.bincount(pd, weights=self.cost[pu] * is_acc[pd], minlength=D)
        reasons = []
        sizes = np.bincount(dev, weights=self.size, minlength=D)
        over = np.flatnonzero(is_acc & (sizes > self.max_size * (1 + 1e-12)))
        if over.size:
            reasons.append(f"accelerator {int(over[0]) - self.max_cpus} holds {sizes[over[0]]:.4g} bytes > "
                           f"{self.max_size:.4g}")
        if (is_acc[dev] & ~self.supported).any():
            reasons.append("a node not supported on accelerators is on one")
        return MaxLoadEvaluation(max_load=float(loads.max()), loads=loads, feasible=not reasons,
                                 reason="; ".join(reasons))

    def objective(self, assignment: Any) -> float:
        return self.evaluate(assignment).objective

    def reference_load(self) -> float:
        """Scale: the ideal balance ``sum of accelerator latencies / maxFPGAs`` (CPU total if none)."""
        if self.max_fpgas:
            return max(float(self.group_fpga.sum()) / self.max_fpgas, 1e-12)
        return max(float(self.group_cpu.sum()) / max(self.max_cpus, 1), 1e-12)

    def penalized(self, assignment: Any) -> float:
        """``max_load / reference_load``, plus 4 when infeasible (memory or support)."""
        return self.scores(assignment)[1]

    def scores(self, assignment: Any) -> tuple[float, float]:
        """``(objective, penalized)`` of ``assignment`` from one evaluation."""
        ev = self.evaluate(assignment)
        val = ev.max_load / self.reference_load()
        return ev.objective, (val if ev.feasible else val + 4.0)

    # ----------------------------------------------------------------- contiguous splits
    def from_cuts(self, boundaries: Sequence[int]) -> np.ndarray:
        """Assignment putting groups ``[b_i, b_{i+1})`` on accelerator ``i`` (in group order);
        groups an accelerator cannot hold go to CPU 0."""
        a = np.zeros(self.num_decisions, dtype=np.int64)
        bounds = [0, *sorted(int(b) for b in boundaries), self.num_decisions]
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            a[lo:hi] = self.max_cpus + min(i, self.max_fpgas - 1)
        if self.max_cpus:
            a[~self.allowed[np.arange(self.num_decisions), a]] = 0
        return a

    def random_assignments(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` random contiguous splits over 1..maxFPGAs accelerators (cut points uniform)."""
        n = self.num_decisions
        out = np.zeros((count, n), dtype=np.int64)
        for c in range(count):
            if self.max_fpgas == 0:
                continue
            k = int(rng.integers(1, min(self.max_fpgas, n) + 1))
            cuts = rng.choice(np.arange(1, n), size=k - 1, replace=False) if k > 1 else []
            out[c] = self.from_cuts(cuts)
        return out

    def encode_dim(self) -> int:
        return max(self.max_fpgas - 1, 1)

    def decode(self, x: np.ndarray) -> np.ndarray:
        """``x`` in ``[0,1]^(F-1)``: cut where the cumulative accelerator latency crosses ``x_i``
        of the total (sorted), giving a contiguous split over at most F accelerators."""
        cum = np.cumsum(self.group_fpga)
        total = cum[-1] if cum[-1] > 0 else 1.0
        cuts = sorted({int(np.searchsorted(cum / total, float(v), side="left")) for v in np.clip(x, 0, 1)})
        cuts = [c for c in cuts if 0 < c < self.num_decisions]
        return self.from_cuts(cuts)

    def ideals(self) -> tuple[list[int], np.ndarray]:
        """All ideals of the group order as bit masks (ascending size), and their bool matrix."""
        if self._ideals is None:
            G = self.num_decisions
            pred_mask = [sum(1 << p for p in ps) for ps in self.group_pred]
            seen = {0}
            stack = [0]
            while stack:
                I = stack.pop()
                for v in range(G):
                    bit = 1 << v
                    if not I & bit and pred_mask[v] & I == pred_mask[v]:
                        J = I | bit
                        if J not in seen:
                            seen.add(J)
                            stack.append(J)
                            if len(seen) > IDEALS_LIMIT:
                                raise ProblemError(f"workload {self.name!r} has more than {IDEALS_LIMIT} ideals; "
                                                   "the exact contiguous DP is out of reach, use another solver")
            masks = sorted(seen, key=lambda m: (bin(m).count("1"), m))
            mat = np.array([[(m >> v) & 1 for v in range(G)] for m in masks], dtype=bool)
            self._ideals = (masks, mat)
        return self._ideals

    def set_comm(self, group_sets: np.ndarray) -> np.ndarray:
        """Accelerator communication cost of each group set (rows of ``group_sets``): the sum of
        ``c_u`` over nodes ``u`` with an edge crossing the set's boundary (either way)."""
        return self.set_comm_columns(np.ascontiguousarray(np.asarray(group_sets, dtype=bool).T))

    def set_comm_columns(self, sets_t: np.ndarray) -> np.ndarray:
        """:meth:`set_comm` of the group sets given as the *columns* of ``sets_t`` ``[groups, m]``.

        Computed on the group graph: the distinct (sender ``u``, destination group ``h``) pairs
        with ``c_u > 0`` and ``h`` not ``u``'s group, sorted by sender;
        ``crossing[e] = S(g_u) != S(h)``; a sender pays when any of its pairs crosses
        (an OR over its rows), and ``comm = c @ hit``."""
        if self._comm_tables is None:
            pairs = sorted({(int(u), int(self.group_of[v])) for u, v in zip(self.src, self.dst)
                            if self.cost[u] > 0 and self.group_of[u] != self.group_of[v]})
            us = np.array([u for u, _ in pairs], dtype=np.int64)
            starts = np.flatnonzero(np.r_[True, us[1:] != us[:-1]]) if us.size else np.zeros(0, dtype=np.int64)
            counts = np.diff(np.r_[starts, us.size])
            self._comm_tables = (self.group_of[us], np.array([h for _, h in pairs], dtype=np.int64), starts,
                                 counts, self.cost[us[starts]] if us.size else np.zeros(0))
        pg, dg, starts, counts, cost = self._comm_tables
        if not pg.size:
            return np.zeros(sets_t.shape[1])
        cross = sets_t[pg] != sets_t[dg]                      # [pairs, m]
        hit = cross[starts]                                   # [senders, m]: OR over each sender's rows
        for t in range(1, int(counts.max())):
            more = np.flatnonzero(counts > t)
            hit[more] |= cross[starts[more] + t]
        return cost @ hit

    # ----------------------------------------------------------------- schedules
    def device_name(self, d: int) -> str:
        if d < self.max_cpus:
            return f"/job:chief/replica:0/task:{d}/device:CPU:0"
        return f"/job:worker/replica:0/task:{d - self.max_cpus}/device:GPU:0"

    def result_shape(self, assignment: Any) -> dict[str, list[dict[str, list[int]]]]:
        """``{"cpus": [{"nodes": [...]}], "fpgas": [{"nodes": [...]}, ...]}`` (used devices only)."""
        dev = self.node_devices(assignment)
        out: dict[str, list[dict[str, list[int]]]] = {"cpus": [], "fpgas": []}
        for d in range(self.num_choices):
            ids = sorted(self.node_ids[i] for i in np.flatnonzero(dev == d))
            if ids:
                out["cpus" if d < self.max_cpus else "fpgas"].append({"nodes": ids})
        return out

    def make_schedule(self, assignment: np.ndarray, solver: str, seconds: float,
                      notes: Mapping[str, Any] | None = None) -> "Schedule":
        from scheduler.core.schedule import Schedule

        ev = self.evaluate(assignment)
        dev = self.node_devices(assignment)
        used = sorted(set(int(d) for d in dev))
        units = {"cpu": sum(1 for d in used if d < self.max_cpus), "fpga": sum(1 for d in used if d >= self.max_cpus)}
        n = dict(notes or {})
        if ev.reason:
            n.setdefault("violations", ev.reason)
        n["loads"] = {("cpu%d" % d if d < self.max_cpus else "fpga%d" % (d - self.max_cpus)): float(ev.loads[d])
                      for d in used}
        return Schedule(solver=solver, problem=self.name, objective_name="max_load", objective=ev.objective,
                        cost=None, throughput=(1.0 / ev.max_load) if ev.max_load > 0 else None,
                        constraint_met=ev.feasible, feasible=ev.feasible, solve_seconds=float(seconds),
                        placement={str(self.node_ids[i]): self.device_name(int(dev[i])) for i in range(len(dev))},
                        units=units, assignment=[int(x) for x in assignment],
                        provisioning={"worker": units["fpga"], "chief": units["cpu"]}, notes=n,
                        max_load=ev.max_load, result=self.result_shape(assignment))

    def describe(self) -> str:
        return (f"{self.name}: {len(self.node_ids)} nodes in {self.num_decisions} colour classes, "
                f"{self.max_fpgas} accelerators, {self.max_cpus} CPUs")


def _check_devices(name: str, max_size: Any, max_fpgas: Any, max_cpus: Any) -> None:
    """Refuse a device description that no placement can use (naming the field)."""
    if not isinstance(max_size, (int, float)) or math.isnan(max_size) or max_size <= 0:
        raise WorkloadError(f"workload {name!r}: maxSizePerFPGA must be a positive number, got {max_size!r}")
    if isinstance(max_fpgas, bool) or not isinstance(max_fpgas, int) or max_fpgas < 0:
        raise WorkloadError(f"workload {name!r}: maxFPGAs must be an integer >= 0, got {max_fpgas!r}")
    if isinstance(max_cpus, bool) or not isinstance(max_cpus, int) or max_cpus < 0:
        raise WorkloadError(f"workload {name!r}: maxCPUs must be an integer >= 0, got {max_cpus!r}")
    if max_fpgas + max_cpus == 0:
        raise WorkloadError(f"workload {name!r} has no devices (maxFPGAs = maxCPUs = 0)")


def _class_graph(color: Sequence[int], src: np.ndarray, dst: np.ndarray, backward: np.ndarray
                 ) -> tuple[list[list[int]], list[set[int]], int]:
    """Node lists of the colour classes, their forward predecessors (edges between forward nodes
    of different classes; backward edges only cost communication), and how many classes were
    fused: classes on a cycle of that graph must share a device on any contiguous split, so each
    strongly connected set of classes becomes one class (the reference DP fuses them too)."""
    classes: dict[int, list[int]] = {}
    for i, c in enumerate(color):
        classes.setdefault(int(c), []).append(i)
    group_list = list(classes.values())
    gof = np.zeros(len(color), dtype=np.int64)
    for g, members in enumerate(group_list):
        gof[members] = g
    pairs = {(int(gof[s]), int(gof[d])) for s, d in zip(src, dst)
             if gof[s] != gof[d] and not backward[s] and not backward[d]}
    comp = _strong_components(len(group_list), pairs)
    fused = len(group_list) - (max(comp) + 1 if comp else 0)
    if fused:
        merged: dict[int, list[int]] = {}
        for g, members in enumerate(group_list):
            merged.setdefault(comp[g], []).extend(members)
        group_list = [sorted(m) for _, m in sorted(merged.items(), key=lambda kv: min(kv[1]))]
        for g, members in enumerate(group_list):
            gof[members] = g
        pairs = {(int(gof[s]), int(gof[d])) for s, d in zip(src, dst)
                 if gof[s] != gof[d] and not backward[s] and not backward[d]}
    gpred: list[set[int]] = [set() for _ in group_list]
    for a, b in pairs:
        gpred[b].add(a)
    return group_list, gpred, fused


def _strong_components(n: int, edges: set[tuple[int, int]]) -> list[int]:
    """Component label per vertex (Tarjan, iterative), labels 0..k-1."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
    index, low, on, stack, label = [-1] * n, [0] * n, [False] * n, [], [-1] * n
    counter = comps = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on[v] = True
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if index[w] < 0:
                    work.append((w, 0))
                elif on[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    label[w] = comps
                    if w == v:
                        break
                comps += 1
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return label


def _toposort(preds: Sequence[set[int] | Sequence[int]], key: Any) -> list[int] | None:
    """Kahn's algorithm, ties broken by ``key``; None when there is a cycle."""
    import heapq

    n = len(preds)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for v, ps in enumerate(preds):
        for p in set(ps):
            succ[p].append(v)
            indeg[v] += 1
    heap = [(key(v), v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (key(w), w))
    return out if len(out) == n else None
