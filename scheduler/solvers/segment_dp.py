"""The segmentation DP the exact HeterPS solver (:mod:`scheduler.solvers.exact`) and its
relaxation bound (:mod:`scheduler.solvers.bounds`) both run: the cheapest split of the layers into
contiguous segments, one type per segment, adjacent segments of different types.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["dp_min_price"]


def dp_min_price(price: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Min sum of segment prices over segmentations with adjacent types different.
    ``price[i, j, r]`` = inf where the segment is not allowed."""
    n, _, T = price.shape
    f = np.full((n + 1, T), np.inf)
    G = np.full((n + 1, T), np.inf)
    G[0] = 0.0
    arg = np.zeros((n, T), dtype=np.int64)
    cols = np.arange(T)
    for j in range(n):
        vals = G[: j + 1] + price[: j + 1, j, :]
        best_i = np.argmin(vals, axis=0)
        f[j + 1] = vals[best_i, cols]
        arg[j] = best_i
        if T == 1:
            G[j + 1] = np.inf
        else:
            o = np.argsort(f[j + 1])
            G[j + 1] = np.where(cols == o[0], f[j + 1][o[1]], f[j + 1][o[0]])
    r = int(np.argmin(f[n]))
    total = float(f[n, r])
    if not math.isfinite(total):
        return math.inf, None
    a = np.zeros(n, dtype=np.int64)
    j = n - 1
    while j >= 0:
        i = int(arg[j, r])
        a[i: j + 1] = r
        if i == 0:
            break
        prev = f[i].copy()
        prev[r] = np.inf
        r = int(np.argmin(prev))
        j = i - 1
    return total, a
