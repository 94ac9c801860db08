r"""Baechi's fast memory-constrained placers, m-ETF and m-SCT (Jeon et al., SoCC 2020), from the
paper's description, behind the :class:`~scheduler.solvers.base.Solver` interface.

Both are list schedulers of one sample's graph (minimising its makespan, the model-parallel step
time Baechi optimises) under per-device memory limits; the placement they produce is then
priced by the problem's own objective (max-load, or the HeterPS cost).

**The graph** (:func:`graph_of`). *Max-load problems*: nodes are the colour classes (groups) in
their forward order, a node's time on a CPU / accelerator is its CPU / accelerator latency, an
edge ``g -> h`` (forward group order) costs the outgoing costs ``c_u`` of the nodes ``u`` of ``g``
with an edge into ``h``, accelerators hold at most ``maxSizePerFPGA`` bytes, CPUs are unlimited,
and groups unsupported on accelerators stay on CPUs. *HeterPS problems*: nodes are the layers,
devices the resource types, a layer's time on ``r`` is ``c(l, r)``, an edge ``u -> v`` costs the
activation and, where a gradient flows, its gradient over the slower link
(``transfer_seconds(b a_u (1 + g_u), min(B_r, B_s))``), a worker type holds ``M_r`` (every unit
holds its whole stage) and a PS type ``U_r M_r``, and ``allowed`` is the problem's.

**m-ETF** (earliest task first): repeatedly, over every ready node ``v`` (all predecessors
placed) and every device ``d`` that may run it and has memory left for it, the start time
``est(v, d) = max(free(d), max_u (finish(u) + [d_u != d] c(u, v)))``; place the pair with the
least ``(est, -priority, finish, v, d)``, where the priority is the bottom level (the longest
path to a sink, mean times plus communication): the earliest start, ties to the most urgent
node, then to the device that finishes it first. A node that fits nowhere goes to the allowed
device with the most memory left (the placement is then infeasible and priced so).

**m-SCT** (small communication times): first the LP relaxation of SCT's favourite-child
programme (Hanen and Munier): start times ``s``, edge variables ``x_e in [0, 1]`` (0: the child
runs right after its parent on the same device), ``s_v >= s_u + p_u + c_e x_e``,
``sum_{children} x >= outdeg - 1`` and ``sum_{parents} x >= indeg - 1`` (at most one favourite child
and parent), minimise the makespan ``W >= s_v + p_v``, ``p`` the node's least time over its
devices; solved by HiGHS (:func:`scipy.optimize.linprog`). An edge with ``x_e < 1/2`` makes the
child its parent's favourite (the least ``x`` per parent and per child). Then m-ETF, except that a
favourite child goes to its parent's device when that device has memory for it and runs it at
its least time (SCT's processors are identical; on a CPU/accelerator mix, following a parent onto
a slower device would drag whole chains there).

Work: ``O(n^2 D)`` start-time evaluations (``n`` nodes, ``D`` devices); one LP for m-SCT.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ralp_tf.plan import transfer_seconds
from scheduler.solvers.base import Solver
from scheduler.core.errors import SolverNotApplicableError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem

__all__ = ["TaskGraph", "graph_of", "bottom_levels", "list_schedule", "favourite_children", "METF", "MSCT"]


@dataclasses.dataclass(frozen=True)
class TaskGraph:
    """A placement problem as a task graph: ``time[v, d]`` seconds, ``edges`` ``(u, v, c)`` in
    topological order of ``u < v``, ``memory[v]`` bytes, ``capacity[d]`` bytes, ``allowed[v, d]``."""

    time: np.ndarray
    edges: tuple[tuple[int, int, float], ...]
    memory: np.ndarray
    capacity: np.ndarray
    allowed: np.ndarray

    @property
    def n(self) -> int:
        return self.time.shape[0]

    @property
    def devices(self) -> int:
        return self.time.shape[1]


def graph_of(problem: Any) -> TaskGraph:
    """The task graph of a max-load or HeterPS problem (module docstring)."""
    if isinstance(problem, MaxLoadProblem):
        p = problem
        C, F = p.max_cpus, p.max_fpgas
        time = np.hstack([np.repeat(p.group_cpu[:, None], C, 1), np.repeat(p.group_fpga[:, None], F, 1)])
        comm = {(u, v): 0.0 for v, preds in enumerate(p.group_pred) for u in preds}
        seen: set[tuple[int, int]] = set()
        for src, dst in zip(p.src.tolist(), p.dst.tolist()):
            g, h = int(p.group_of[src]), int(p.group_of[dst])
            pair = (min(g, h), max(g, h))
            if g != h and pair in comm and (src, h) not in seen:  # each sender once per receiving group
                seen.add((src, h))
                comm[pair] += float(p.cost[src])
        edges = tuple((u, v, c) for (u, v), c in sorted(comm.items()))
        capacity = np.r_[np.full(C, np.inf), np.full(F, p.max_size)]
        return TaskGraph(time, edges, p.group_size.astype(np.float64), capacity, p.allowed.copy())
    if isinstance(problem, Problem):
        p = problem
        types = p.catalog.types
        time = p.compute.copy()
        slow = min(t.bandwidth_bps for t in types)
        edges = tuple((u, v, transfer_seconds(p.batch_size * p.output_bytes[u] * (2.0 if p.grad[u] else 1.0), slow))
                      for u, v in p.edges)
        capacity = np.array([t.memory_bytes * (t.max_units if t.role == "ps" else 1) for t in types])
        return TaskGraph(time, edges, p.memory.copy(), capacity, p.allowed.copy())
    raise SolverNotApplicableError(f"Baechi's placers schedule a task graph on devices; {type(problem).__name__} "
                                   f"{getattr(problem, 'name', '')!r} has none (use greedy, random, bo or rl)")


def bottom_levels(g: TaskGraph) -> np.ndarray:
    """The longest path from each node to a sink: mean time over its allowed devices plus, per
    edge, its communication cost."""
    mean = np.array([g.time[v, g.allowed[v]].mean() for v in range(g.n)])
    out: list[list[tuple[int, float]]] = [[] for _ in range(g.n)]
    for u, v, c in g.edges:
        out[u].append((v, c))
    bl = mean.copy()
    for v in range(g.n - 1, -1, -1):
        bl[v] = mean[v] + max((c + bl[w] for w, c in out[v]), default=0.0)
    return bl


def list_schedule(g: TaskGraph, favourite_parent: np.ndarray | None = None) -> tuple[np.ndarray, float, bool]:
    """m-ETF (module docstring); with ``favourite_parent[v]`` (``-1``: none) the m-SCT rule.
    Returns the device per node, the makespan and whether every node fitted in memory."""
    n, D = g.n, g.devices
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for u, v, c in g.edges:
        preds[v].append((u, c))
        indeg[v] += 1
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v, _ in g.edges:
        succ[u].append(v)
    prio = bottom_levels(g)
    least = np.array([g.time[v, g.allowed[v]].min() for v in range(n)])
    free = np.zeros(D)
    used = np.zeros(D)
    device = np.full(n, -1, dtype=np.int64)
    finish = np.zeros(n)
    ready = [v for v in range(n) if indeg[v] == 0]
    fits_all = True
    while ready:
        best: tuple[Any, ...] | None = None
        for v in ready:
            cands = np.flatnonzero(g.allowed[v] & (used + g.memory[v] <= g.capacity * (1 + 1e-12)))
            fp = -1 if favourite_parent is None else int(favourite_parent[v])
            if fp >= 0 and device[fp] in cands and g.time[v, device[fp]] <= least[v] * (1 + 1e-9):
                cands = np.array([device[fp]])
            for d in cands:
                est = max([free[d]] + [finish[u] + (c if device[u] != d else 0.0) for u, c in preds[v]])
                key = (est, -prio[v], est + g.time[v, d], v, int(d))
                if best is None or key < best:
                    best = key
        if best is None:  # nothing ready fits anywhere: the most urgent node on the roomiest allowed device
            v = max(ready, key=lambda x: (prio[x], -x))
            opts = np.flatnonzero(g.allowed[v])
            d = int(opts[np.argmax(g.capacity[opts] - used[opts])])
            est = max([free[d]] + [finish[u] + (c if device[u] != d else 0.0) for u, c in preds[v]])
            best = (est, -prio[v], est + g.time[v, d], v, d)
            fits_all = False
        est, _, end, v, d = best
        device[v], finish[v] = d, end
        free[d] = end
        used[d] += g.memory[v]
        ready.remove(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return device, float(finish.max()) if n else 0.0, fits_all


def favourite_children(g: TaskGraph) -> np.ndarray:
    """``favourite_parent[v]`` (``-1``: none) from SCT's LP relaxation (module docstring)."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    n, E = g.n, len(g.edges)
    favourite = np.full(n, -1, dtype=np.int64)
    if E == 0:
        return favourite
    p = np.array([g.time[v, g.allowed[v]].min() for v in range(n)])
    W = n + E  # variables: s_0..s_{n-1}, x_0..x_{E-1}, W
    rows: list[tuple[dict[int, float], float]] = []
    out_e: list[list[int]] = [[] for _ in range(n)]
    in_e: list[list[int]] = [[] for _ in range(n)]
    for e, (u, v, c) in enumerate(g.edges):
        rows.append(({u: 1.0, v: -1.0, n + e: c}, -p[u]))  # s_u + p_u + c x_e <= s_v
        out_e[u].append(e)
        in_e[v].append(e)
    for es in (out_e, in_e):
        for lst in es:
            if lst:
                rows.append(({n + e: -1.0 for e in lst}, -(len(lst) - 1.0)))
    for v in range(n):
        rows.append(({v: 1.0, W: -1.0}, -p[v]))
    A = lil_matrix((len(rows), W + 1))
    b = np.zeros(len(rows))
    for i, (coef, rhs) in enumerate(rows):
        for j, a in coef.items():
            A[i, j] = a
        b[i] = rhs
    cost = np.zeros(W + 1)
    cost[W] = 1.0
    bounds = [(0, None)] * n + [(0, 1)] * E + [(0, None)]
    res = linprog(cost, A_ub=A.tocsr(), b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        return favourite
    x = res.x[n:n + E]
    best_child: dict[int, tuple[float, int]] = {}
    for e, (u, v, _) in enumerate(g.edges):
        if x[e] < 0.5 and (u not in best_child or (x[e], v) < best_child[u]):
            best_child[u] = (float(x[e]), v)
    taken: dict[int, tuple[float, int]] = {}
    for u, (xe, v) in best_child.items():
        if v not in taken or (xe, u) < taken[v]:
            taken[v] = (xe, u)
    for v, (_, u) in taken.items():
        favourite[v] = u
    return favourite


class _Baechi(Solver):
    """Shared body of :class:`METF` and :class:`MSCT`."""

    sct = False

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        g = graph_of(problem)
        fav = favourite_children(g) if self.sct else None
        device, makespan, fits = list_schedule(g, fav)
        notes: dict[str, Any] = {"method": "m-SCT" if self.sct else "m-ETF", "makespan": makespan,
                                 "fits_memory": fits}
        if fav is not None:
            notes["favourite_children"] = int((fav >= 0).sum())
        if not math.isfinite(makespan):
            notes["makespan"] = None
        return device, notes


class METF(_Baechi):
    """Baechi's m-ETF (module docstring)."""

    name = "metf"


class MSCT(_Baechi):
    """Baechi's m-SCT (module docstring)."""

    name = "msct"
    sct = True
