"""Random search: sample assignments, keep the best.

Samples come from the problem's ``random_assignments`` (random segmentations with a random
type per stage for HeterPS problems; random contiguous splits for max-load problems). The best
is the lowest objective among samples that are feasible and meet the constraint, else the
lowest penalised score. ``samples`` and ``time_limit_s`` bound the search, whichever first.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from scheduler.base import Solver


class RandomSearch(Solver):
    name = "random"

    def __init__(self, samples: int = 2000, time_limit_s: float = 30.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.samples = int(samples)
        self.time_limit_s = float(time_limit_s)

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        rng = np.random.default_rng(self.seed)
        t0 = time.perf_counter()
        best_key, best_a, tried = (math.inf, math.inf), None, 0
        while tried < self.samples and time.perf_counter() - t0 < self.time_limit_s:
            for a in problem.random_assignments(rng, min(64, self.samples - tried)):
                tried += 1
                obj = problem.objective(a)
                key = (obj, 0.0) if math.isfinite(obj) else (math.inf, problem.penalized(a))
                if key < best_key:
                    best_key, best_a = key, a
        return best_a, {"samples": tried}
