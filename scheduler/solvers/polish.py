"""Local improvement of a placement: best block moves until none helps.

:func:`polish` works on every problem kind (it reads only ``num_decisions``, ``num_choices``,
``allowed`` and ``scores``): repeatedly apply the best move that sets a block of 1..``max_block``
consecutive decisions to one allowed choice, until none lowers ``(objective, penalized)``.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["DEFAULT_POLISH_EVALUATIONS", "polish"]

#: Evaluations the polish may spend per solve by default (all of its starts together).
DEFAULT_POLISH_EVALUATIONS = 200_000


def polish(problem: Any, assignment: np.ndarray, max_block: int = 3, max_passes: int = 50,
           deadline: float | None = None, max_evaluations: int | None = None) -> tuple[np.ndarray, int]:
    """Local improvement of ``assignment``: repeatedly apply the best move that sets a block of
    1..``max_block`` consecutive decisions to one allowed choice, until none lowers the
    (objective, penalised score). Returns the result and the number of evaluations.

    Work budget: at most ``max_passes`` moves and ``max_evaluations`` evaluations (a pass cut by
    the budget applies the best move it has seen). ``deadline`` (a ``time.perf_counter()``
    value) is a safety cap: stop when it passes, keeping the best placement found so far (never
    worse than ``assignment``)."""
    a = np.array(assignment, dtype=np.int64)
    key = problem.scores(a)
    evals = 0
    n, C = problem.num_decisions, problem.num_choices
    for _ in range(max_passes):
        best_key, best = key, None
        for i in range(n):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if max_evaluations is not None and evals >= max_evaluations:
                break
            for w in range(1, max_block + 1):
                if i + w > n:
                    break
                for r in range(C):
                    if not problem.allowed[i:i + w, r].all() or (a[i:i + w] == r).all():
                        continue
                    if max_evaluations is not None and evals >= max_evaluations:
                        break
                    cand = a.copy()
                    cand[i:i + w] = r
                    evals += 1
                    k = problem.scores(cand)
                    if k < best_key:
                        best_key, best = k, cand
        if best is None:
            break
        a, key = best, best_key
        if deadline is not None and time.perf_counter() > deadline:
            break
        if max_evaluations is not None and evals >= max_evaluations:
            break
    return a, evals
