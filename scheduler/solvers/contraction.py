r"""Contracting a max-load graph before the exact DP, as the dnn-partitioning reference DP does.

The reference DP (Tarnawski et al.) merges, repeatedly until none is left, every colour class
``g`` that

* has no latency: every forward node's CPU and accelerator latency, and its backward nodes'
  latencies, are below :data:`ZERO` (``1e-6``),
* has no edge to or from a backward node, and
* touches exactly one other class ``h`` through forward edges (a leaf of the forward class graph:
  a constant or weight feeding one op, or an output read by one op),

into that class ``h``. Such a leaf only ever adds communication when it sits on another device
than its one neighbour, so on a contiguous split it goes with ``h``; merging removes the
ideals it multiplies (a leaf source may join an ideal at any time before its consumer, so ``k``
of them multiply the ideal count by up to ``2^k``). When every merged class holds no memory
(``size`` 0) and may run wherever its neighbour runs, the optimum of the contracted graph is
the original's; otherwise it is the optimum over placements that keep each leaf with its
neighbour, the space the reference DP searches (:func:`contract` reports both counts).

:func:`contract` returns the contracted problem and, per original colour class, its class in
the contracted one, so a placement of the contracted problem maps back by
:func:`expand`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from scheduler.core.maxload import MaxLoadProblem

__all__ = ["ZERO", "Contraction", "contract", "expand"]

#: Latencies below this are zero (the reference's threshold).
ZERO = 1e-6


@dataclasses.dataclass(frozen=True)
class Contraction:
    """``problem`` with leaf classes merged; ``group_map[g]`` is the contracted class of original
    class ``g``; ``merged`` classes were merged, ``merged_with_memory`` of them hold memory or may
    not run on accelerators (only then can the contracted optimum exceed the original's)."""

    problem: MaxLoadProblem
    group_map: np.ndarray
    merged: int
    merged_with_memory: int


def _mergeable(p: MaxLoadProblem, members: list[int], bwd_touch: np.ndarray) -> bool:
    lat = p.cpu_lat[members] + p.fpga_lat[members]
    return bool((p.cpu_lat[members] < ZERO).all() and (p.fpga_lat[members] < ZERO).all() and lat.sum() < ZERO
                and not bwd_touch[members].any())


def contract(problem: MaxLoadProblem) -> Contraction:
    """The contraction of the module docstring (a fixpoint: classes are merged one at a time and
    the class graph recomputed)."""
    p = problem
    N = len(p.node_ids)
    cls = np.array(p.group_of, dtype=np.int64)           # node -> current class label
    fwd_edge = ~p.backward[p.src] & ~p.backward[p.dst]
    bwd_touch = np.zeros(N, dtype=bool)                   # forward node with an edge to/from a backward node
    mixed = p.backward[p.src] != p.backward[p.dst]
    bwd_touch[p.src[mixed & ~p.backward[p.src]]] = True
    bwd_touch[p.dst[mixed & ~p.backward[p.dst]]] = True
    merged = with_memory = 0
    while True:
        members: dict[int, list[int]] = {}
        for i, c in enumerate(cls.tolist()):
            members.setdefault(c, []).append(i)
        neighbours: dict[int, set[int]] = {c: set() for c in members}
        for s, d in zip(p.src[fwd_edge].tolist(), p.dst[fwd_edge].tolist()):
            a, b = int(cls[s]), int(cls[d])
            if a != b:
                neighbours[a].add(b)
                neighbours[b].add(a)
        target = None
        for c in sorted(members):
            if len(neighbours[c]) == 1 and _mergeable(p, members[c], bwd_touch):
                target = (c, next(iter(neighbours[c])))
                break
        if target is None:
            break
        c, h = target
        if p.size[members[c]].sum() > 0 or not p.supported[members[c]].all():
            with_memory += 1
        cls[cls == c] = h
        merged += 1
    if merged == 0:
        return Contraction(p, np.arange(p.num_decisions), 0, 0)
    contracted = p.with_colors(cls)
    group_map = np.array([int(contracted.group_of[members_[0]]) for members_ in p.groups], dtype=np.int64)
    return Contraction(contracted, group_map, merged, with_memory)


def expand(c: Contraction, original: MaxLoadProblem, assignment: np.ndarray) -> np.ndarray:
    """A placement of the contracted problem as a placement of ``original`` (devices renumbered
    when the contracted problem, with fewer classes, has fewer devices)."""
    a = np.asarray(assignment, dtype=np.int64)[c.group_map]
    C = c.problem.max_cpus
    return np.where(a < C, a, a - C + original.max_cpus)
