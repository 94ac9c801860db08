"""Greedy solver: per layer, the cheapest type that keeps the constraint.

**HeterPS problems.** Start from every layer on its fastest allowed type (the placement most
likely to meet the throughput constraint). Then visit the layers in order; for each, try every
allowed type with the other layers fixed, and keep the one with the lowest cost among those
that still meet the constraint (when none does, the lowest :meth:`Problem.penalized` score).
One pass, ``L x T`` evaluations.

**Max-load problems.** The linear greedy split: walk the groups in order, filling one
accelerator until its load would pass ``total / F``; cut before or after the group, whichever
ends nearer the target; the last accelerator takes the rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.base import Solver
from scheduler.maxload import MaxLoadProblem
from scheduler.problem import Problem

__all__ = ["greedy_heterps", "greedy_maxload", "Greedy"]


def greedy_heterps(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    speed = np.array([t.flops for t in problem.catalog.types])
    a = np.array([max(np.flatnonzero(problem.allowed[l]), key=lambda r: speed[r])
                  for l in range(problem.num_decisions)], dtype=np.int64)
    evals = 0
    for l in range(problem.num_decisions):
        best_key, best_r = None, a[l]
        for r in np.flatnonzero(problem.allowed[l]):
            cand = a.copy()
            cand[l] = r
            ev = problem.evaluate(cand)
            evals += 1
            ok = ev.feasible and ev.constraint_met
            key = (0, ev.cost) if ok else (1, problem.penalized(cand))
            if best_key is None or key < best_key:
                best_key, best_r = key, r
        a[l] = best_r
    return a, {"evaluations": evals}


def greedy_maxload(problem: MaxLoadProblem) -> tuple[np.ndarray, dict[str, Any]]:
    F = max(problem.max_fpgas, 1)
    target = problem.group_fpga.sum() / F
    cuts, load = [], 0.0
    for g, lat in enumerate(problem.group_fpga):
        if len(cuts) < F - 1 and load + lat > target and g > 0:
            if abs(load - target) <= abs(load + lat - target):
                cuts.append(g)
                load = lat
                continue
            cuts.append(g + 1)
            load = 0.0
            continue
        load += lat
    cuts = sorted(c for c in set(cuts) if 0 < c < problem.num_decisions)
    return problem.from_cuts(cuts), {"target_load": float(target)}


class Greedy(Solver):
    name = "greedy"

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(problem, MaxLoadProblem):
            return greedy_maxload(problem)
        return greedy_heterps(problem)
