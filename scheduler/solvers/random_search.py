"""Random search: sample assignments, keep the best.

Samples come from the problem's ``random_assignments`` (random segmentations with a random
type per stage for HeterPS problems; random contiguous splits for max-load problems). The best
is the lowest objective among samples that are feasible and meet the constraint, else the
lowest penalised score. ``samples`` is the budget; ``time_limit_s`` is a safety cap, reported in
``notes["time_cap_cut"]`` when it cuts the search.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from scheduler.solvers.base import Solver, time_cap_cut
from scheduler.core.errors import ProblemError

__all__ = ["RandomSearch"]


class RandomSearch(Solver):
    name = "random"

    def __init__(self, samples: int = 2000, time_limit_s: float = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(samples, bool) or int(samples) != samples or samples < 1:
            raise ProblemError(f"random search needs a budget of at least 1 sample, got {samples!r}")
        self.samples = int(samples)
        self.time_limit_s = float(time_limit_s)

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        rng = np.random.default_rng(self.seed)
        t0 = time.perf_counter()
        best_key, best_a, tried = (math.inf, math.inf), None, 0
        notes: dict[str, Any] = {}
        while tried < self.samples:
            if time.perf_counter() - t0 >= self.time_limit_s:
                time_cap_cut(notes, "random", "the search", self.time_limit_s)
                break
            for a in problem.random_assignments(rng, min(64, self.samples - tried)):
                tried += 1
                obj, pen = problem.scores(a)
                key = (obj, 0.0) if math.isfinite(obj) else (math.inf, pen)
                if key < best_key:
                    best_key, best_a = key, a
        return best_a, {"samples": tried, **notes}
