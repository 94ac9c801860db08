r"""A lower bound (and often the optimum) of a HeterPS problem where the θ-sweep DP is too slow.

With the notation of :mod:`scheduler.solvers.exact`: ``OPT = min_θ D(θ) / θ`` over the distinct stage
rates ``θ_1 < ... < θ_K`` (at most the bottleneck bound), where ``D(θ)`` is the least
``sum_s k_s p_s`` of a segmentation whose stages all reach rate ``θ``. Ignoring the per-type unit
caps *across* stages (each stage still within its type's cap) gives ``D~(θ) <= D(θ)``, so
``min_θ D~(θ) / θ`` is a lower bound on ``OPT``, a *relaxation*. ``D~`` is non-decreasing in
``θ``, hence for every ``k`` in an index interval ``[a, b]``:

``D~(θ_k) / θ_k >= D~(θ_a) / θ_b``

:func:`heterps_bound` evaluates ``D~`` (one shortest-path DP each, ``O(L^2 T^2)``) on a geometric
grid of thresholds (ratio ``grid``), then repeatedly splits the open interval of least bound at
its middle index, pruning intervals whose bound reaches the best placement found, until every
interval is closed (its two ends adjacent) or the work budget ``max_dps`` is spent:

* ``lower`` = the least bound of the open intervals and of the evaluated thresholds;
* ``upper`` = the least true cost (:meth:`scheduler.core.problem.Problem.evaluate`, unit caps
  included) of the DP segmentations seen;
* ``exact`` when every interval closed and the relaxed optimum's segmentation is feasible: then
  ``lower = upper = OPT``.

Budgets are work (DP solves); the same problem and budget give the same bound.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Any

import numpy as np

from scheduler.core.problem import Problem
from scheduler.solvers.segment_dp import dp_min_price

__all__ = ["HeterPSBound", "heterps_bound"]


@dataclasses.dataclass(frozen=True)
class HeterPSBound:
    """The result of :func:`heterps_bound` (module docstring); ``assignment`` achieves ``upper``."""

    lower: float
    upper: float
    assignment: np.ndarray | None
    exact: bool
    dps: int
    thresholds: int

    @property
    def gap(self) -> float:
        """``(upper - lower) / upper`` (``inf`` without a feasible placement)."""
        return (self.upper - self.lower) / self.upper if math.isfinite(self.upper) and self.upper > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper, "exact": self.exact, "dps": self.dps,
                "thresholds": self.thresholds, "gap": self.gap}


def heterps_bound(problem: Problem, *, grid: float = 1.02, max_dps: int = 4000) -> HeterPSBound:
    """The relaxation bound of the module docstring."""
    ok = problem.seg_ok
    if not ok.any():
        return HeterPSBound(math.inf, math.inf, None, False, 0, 0)
    cap = problem.bottleneck(np.where(ok, problem.seg_rate, 0.0))
    thetas = np.unique(problem.seg_rate[ok])
    thetas = thetas[(thetas > 0) & (thetas <= cap * (1 + 1e-12))]
    K = len(thetas)
    scale = 1e6 / 3600.0  # cost = price / 3600 * 1e6 / throughput
    D: dict[int, float] = {}
    best = [math.inf, None]

    def evaluate(k: int) -> float:
        if k not in D:
            d, a = dp_min_price(np.where(ok & (problem.seg_rate >= thetas[k]), problem.seg_price, np.inf))
            D[k] = d
            if a is not None:
                ev = problem.evaluate(a)
                if ev.feasible and ev.constraint_met and ev.cost < best[0]:
                    best[0], best[1] = ev.cost, a
        return D[k]

    if K == 0:
        return HeterPSBound(math.inf, math.inf, None, False, 0, 0)
    picks = {0, K - 1}
    target = thetas[0]
    for k in range(K):
        if thetas[k] >= target:
            picks.add(k)
            target = thetas[k] * grid
    order = [0, K - 1] + sorted(picks - {0, K - 1})  # the ends first, so a cut grid still brackets every k
    for k in order:
        if len(D) >= max(max_dps, 2):
            break
        evaluate(k)
    done = sorted(D)
    heap: list[tuple[float, int, int]] = []
    for a, b in zip(done[:-1], done[1:]):
        if b > a + 1:
            heapq.heappush(heap, (scale * D[a] / thetas[b], a, b))
    while heap and len(D) < max_dps:
        lb, a, b = heapq.heappop(heap)
        if lb >= best[0] * (1 - 1e-12):
            heap.clear()  # every remaining interval's bound reaches the best placement: all pruned
            break
        m = (a + b) // 2
        evaluate(m)
        for lo, hi in ((a, m), (m, b)):
            if hi > lo + 1:
                heapq.heappush(heap, (scale * D[lo] / thetas[hi], lo, hi))
    point = min((scale * d / thetas[k] for k, d in D.items()), default=math.inf)
    open_lb = min((lb for lb, _, _ in heap), default=math.inf)
    lower = min(point, open_lb, best[0])
    exact = not heap and math.isfinite(best[0]) and best[0] <= point * (1 + 1e-9)
    return HeterPSBound(lower=float(lower), upper=float(best[0]), assignment=best[1], exact=bool(exact),
                        dps=len(D), thresholds=int(K))
