"""Greedy solver: per layer, the cheapest type that keeps the constraint.

**HeterPS problems.** Start from every layer on its fastest allowed type (the placement most
likely to meet the throughput constraint). Then visit the layers in order; for each, try every
allowed type with the other layers fixed, and keep the one with the lowest cost among those
that still meet the constraint (when none does, the lowest :meth:`Problem.penalized` score).
One pass, ``L x T`` evaluations (:func:`coordinate_pass`).

**PSS problems** (:class:`scheduler.core.pss.PSSProblem`): the same pass, ranked by the cost model's
predicted step time, starting from the analyzer's plan (so it ends no slower than it).

**Max-load problems.** The linear greedy split: walk the groups in order, filling one
accelerator until its load would pass ``total / F``; cut before or after the group, whichever
ends nearer the target; the last accelerator takes the rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.solvers.base import Solver
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem
from scheduler.core.pss import PSSProblem

__all__ = ["coordinate_pass", "greedy_heterps", "greedy_pss", "greedy_maxload", "Greedy"]


def coordinate_pass(problem: Any, start: np.ndarray, *, keep_ties: bool = False) -> tuple[np.ndarray, int]:
    """One pass over the decisions in order: each set to the allowed choice with the least
    ``(objective, penalized)`` with the others fixed (on ties the lowest choice index, or with
    ``keep_ties`` the current one). Returns the placement and the evaluations spent."""
    a = np.array(start, dtype=np.int64)
    evals = 0
    for l in range(problem.num_decisions):
        best_key, best_r = None, a[l]
        for r in np.flatnonzero(problem.allowed[l]):
            cand = a.copy()
            cand[l] = r
            key = problem.scores(cand)
            evals += 1
            if best_key is None or key < best_key or (keep_ties and key == best_key and r == a[l]):
                best_key, best_r = key, r
        a[l] = best_r
    return a, evals


def greedy_heterps(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    speed = np.array([t.flops for t in problem.catalog.types])
    start = np.array([max(np.flatnonzero(problem.allowed[l]), key=lambda r: speed[r])
                      for l in range(problem.num_decisions)], dtype=np.int64)
    a, evals = coordinate_pass(problem, start)
    return a, {"evaluations": evals}


def greedy_pss(problem: PSSProblem) -> tuple[np.ndarray, dict[str, Any]]:
    a, evals = coordinate_pass(problem, problem.analyzer_assignment(), keep_ties=True)
    return a, {"evaluations": evals, "start": "the analyzer's plan"}


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
        if isinstance(problem, PSSProblem):
            return greedy_pss(problem)
        return greedy_heterps(problem)
