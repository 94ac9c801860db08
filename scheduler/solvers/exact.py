r"""Exact solver: the reference optimum every other solver is measured against.

**HeterPS problems** (:class:`scheduler.core.problem.Problem`). Stages are maximal runs of one type
in the fixed layer order, and every stage quantity (units, rate, $/h) depends only on the
segment ``[i..j]`` and its type (the crossing traffic of a segment is fixed by the graph), so
any assignment is a segmentation with adjacent segments of different types. With
``P(s) = k_s p_{r_s}`` and ``X(s)`` the stage rate, ``cost = sum_s P(s) / min_s X(s)`` (up to the
constant ``10^6 / 3600``). For a rate threshold ``θ`` let
``D(θ) = min sum_s P(s)`` over segmentations whose stages all have ``X(s) >= θ`` (a
shortest-path dynamic programme over (last layer, last type), ``O(L^2 T^2)``). Then
``OPT = min_θ D(θ) / θ`` over the finitely many stage rates ``θ``: ``D(θ)/θ`` upper-bounds the
cost of the DP's own segmentation, and at ``θ = X*`` (the optimum's bottleneck)
``D(X*) / X* <= OPT``. Since ``D`` does not decrease with ``θ``, an interval ``[θ_a, θ_b]`` of
thresholds holds no ratio below ``D(θ_a) / θ_b``: the search first splits such intervals,
least bound first, pruning those whose bound reaches the best placement found
(:func:`scheduler.solvers.bounds.heterps_bound`), which is exact when the optimum it finds respects the
unit caps across stages; otherwise thresholds are tried from the highest down and the sweep stops once
``D(-inf) / θ`` (a lower bound for every smaller ``θ``) exceeds the best found. The budget is
a bound on ``D(θ)``. Exact for DAGs too (not only chains), since the layer order is fixed.
When the best segmentation uses more units of one type (over several stages) than the
catalog has, a label-setting DP that carries the units used per type re-solves it exactly.
``method="exhaustive"`` enumerates every assignment instead (small problems; a cross-check).

**PSS problems** (:class:`scheduler.core.pss.PSSProblem`): exhaustive search where it is small enough
(:func:`solve_pss`), else not applicable.

**Max-load problems** (:class:`scheduler.core.maxload.MaxLoadProblem`). The published programme's
space: every device gets ``I \ J`` for ideals ``J ⊆ I``. ``dp[c][f][I]`` = best max-load of the
groups in ideal ``I`` on ``c`` CPUs and ``f`` accelerators:
``dp[c][f][I] = min( min_J max(dp[c-1][f][J], cpu(I\J)), min_J max(dp[c][f-1][J], acc(I\J)) )``
with ``acc(S) = sum fpga latency + comm(S)`` (``inf`` above the size limit) and
``cpu(S) = sum cpu latency``.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from scheduler.solvers.base import Solver
from scheduler.solvers.contraction import contract, expand
from scheduler.solvers.segment_dp import dp_min_price
from scheduler.core.errors import InfeasibleError, ProblemError, SolverNotApplicableError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem
from scheduler.core.pss import PSSProblem

__all__ = ["EXHAUSTIVE_LIMIT", "INTERVAL_DPS", "PSS_EXHAUSTIVE_LIMIT", "solve_heterps", "solve_heterps_sweep", "solve_exhaustive", "solve_pss", "solve_maxload", "solve_maxload_dp",
           "Exact"]

#: Largest number of assignments ``method="exhaustive"`` enumerates.
EXHAUSTIVE_LIMIT = 300_000
#: DP solves the threshold-interval search may spend before :func:`solve_heterps` falls back on the sweep.
INTERVAL_DPS = 20_000
#: Largest number of PSS placements :func:`solve_pss` enumerates (each is a cost-model estimate).
PSS_EXHAUSTIVE_LIMIT = 16_384


def _dp_caps(problem: Problem, mask: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Like :func:`~scheduler.solvers.segment_dp.dp_min_price` but carrying units used per type (Pareto labels), so that the
    per-type unit caps across stages hold."""
    n, T = problem.num_decisions, problem.num_choices
    caps = np.array([t.max_units for t in problem.catalog.types])
    # labels[i]: list of (price, units tuple, last type, back pointer)
    labels: list[list[tuple[float, tuple[int, ...], int, Any]]] = [[] for _ in range(n + 1)]
    labels[0] = [(0.0, (0,) * T, -1, None)]
    for j in range(n):
        cand: dict[tuple[int, tuple[int, ...]], tuple[float, tuple[int, ...], int, Any]] = {}
        for i in range(j + 1):
            for r in range(T):
                if not mask[i, j, r]:
                    continue
                k = int(problem.seg_units[i, j, r])
                p = float(problem.seg_price[i, j, r])
                for lab in labels[i]:
                    if lab[2] == r:
                        continue
                    units = list(lab[1])
                    units[r] += k
                    if units[r] > caps[r]:
                        continue
                    key = (r, tuple(units))
                    price = lab[0] + p
                    if key not in cand or cand[key][0] > price:
                        cand[key] = (price, tuple(units), r, (i, lab))
        # Pareto filter per last type.
        kept = []
        for lab in sorted(cand.values(), key=lambda x: x[0]):
            if not any(o[2] == lab[2] and all(a <= b for a, b in zip(o[1], lab[1])) for o in kept):
                kept.append(lab)
        labels[j + 1] = kept
    if not labels[n]:
        return math.inf, None
    best = min(labels[n], key=lambda x: x[0])
    a = np.zeros(n, dtype=np.int64)
    j, lab = n - 1, best
    while lab[3] is not None:
        i, prev = lab[3]
        a[i: j + 1] = lab[2]
        j, lab = i - 1, prev
    return best[0], a


def solve_heterps(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    """The optimum: first the interval search over thresholds of :func:`scheduler.solvers.bounds.heterps_bound`,
    which is exact whenever the relaxed optimum respects the unit caps across stages (and then
    needs a few dozen DPs instead of one per threshold); otherwise the θ-sweep DP with the unit-cap
    DP (:func:`solve_heterps_sweep`)."""
    from scheduler.solvers.bounds import heterps_bound

    bound = heterps_bound(problem, max_dps=INTERVAL_DPS)
    if bound.exact and bound.assignment is not None:
        return bound.assignment, {"method": "threshold intervals (relaxation exact)", "dps": bound.dps,
                                  "thresholds": bound.thresholds}
    return solve_heterps_sweep(problem)


def solve_heterps_sweep(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    """The θ-sweep DP (module docstring)."""
    ok = problem.seg_ok
    if not ok.any():
        raise InfeasibleError(f"no stage of {problem.name!r} can meet {problem.constraints.min_throughput:g} "
                              f"samples/s; best achievable is {problem.best_throughput():.4g}",
                              best_throughput=problem.best_throughput())
    base = np.where(ok, problem.seg_price, np.inf)
    d0, a0 = dp_min_price(base)
    if a0 is None:
        raise InfeasibleError(f"no placement of {problem.name!r} meets {problem.constraints.min_throughput:g} "
                              f"samples/s; best achievable is {problem.best_throughput():.4g}",
                              best_throughput=problem.best_throughput())
    # No segmentation's bottleneck exceeds the bottleneck DP over provisioned rates.
    cap = problem.bottleneck(np.where(ok, problem.seg_rate, 0.0))
    thetas = np.unique(problem.seg_rate[ok])[::-1]
    thetas = thetas[thetas <= cap * (1 + 1e-12)]
    budget = problem.constraints.budget_per_hour
    best_cost, best_a, tried, capped = math.inf, None, 0, False
    for theta in thetas:
        if theta <= 0 or d0 / theta >= best_cost * (1 - 1e-12):
            break
        tried += 1
        mask = ok & (problem.seg_rate >= theta)
        d, a = dp_min_price(np.where(mask, problem.seg_price, np.inf))
        if a is None or (budget is not None and d > budget * (1 + 1e-12)):
            continue
        ev = problem.evaluate(a)
        if not ev.feasible:  # per-type unit caps across stages
            capped = True
            d, a = _dp_caps(problem, mask)
            if a is None or (budget is not None and d > budget * (1 + 1e-12)):
                continue
            ev = problem.evaluate(a)
        if ev.feasible and ev.constraint_met and ev.cost < best_cost:
            best_cost, best_a = ev.cost, a
    if best_a is None:
        why = f"within the budget ${budget:g}/h" if budget is not None else "within the catalog's unit counts"
        raise InfeasibleError(f"no placement of {problem.name!r} meets {problem.constraints.min_throughput:g} "
                              f"samples/s {why}; best achievable throughput is {problem.best_throughput():.4g} "
                              "samples/s (ignoring the budget)", best_throughput=problem.best_throughput())
    return best_a, {"method": "theta-sweep DP", "thresholds_tried": tried, "thresholds": int(thetas.size),
                    "unit_caps_dp": capped}


def solve_exhaustive(problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """Enumerate every allowed assignment (only for small problems)."""
    opts = [np.flatnonzero(problem.allowed[l]) for l in range(problem.num_decisions)]
    total = math.prod(len(o) for o in opts)
    if total > EXHAUSTIVE_LIMIT:
        raise ProblemError(f"exhaustive search would try {total} assignments (limit {EXHAUSTIVE_LIMIT}); use the "
                           "DP (method='dp')")
    best, best_a = math.inf, None
    for combo in itertools.product(*opts):
        v = problem.objective(np.array(combo))
        if v < best:
            best, best_a = v, np.array(combo)
    if best_a is None:
        raise InfeasibleError(f"no assignment of {problem.name!r} is feasible")
    return best_a, {"method": "exhaustive", "assignments": total}


def solve_pss(problem: PSSProblem) -> tuple[np.ndarray, dict[str, Any]]:
    """The PSS placement problem has no known polynomial optimum (the cost model's step time
    mixes per-host link phases, serving CPU and contention): exhaustive search when every
    placement can be enumerated, else :class:`SolverNotApplicableError` (``Solver.plan`` then
    keeps the analyzer's plan and says so)."""
    total = math.prod(int(problem.allowed[l].sum()) for l in range(problem.num_decisions))
    if total > PSS_EXHAUSTIVE_LIMIT:
        raise SolverNotApplicableError(
            f"the exact PSS placement of {problem.name!r} would enumerate {total:.3g} placements (limit "
            f"{PSS_EXHAUSTIVE_LIMIT}, about a millisecond of the cost model each); there is no exact PSS "
            "solver beyond that; use greedy, random, bo or rl")
    return solve_exhaustive(problem)


def _pack(mat: np.ndarray) -> np.ndarray:
    """Rows of a bool matrix as uint64 words (bit ``v % 64`` of word ``v // 64``)."""
    N, G = mat.shape
    W = max(1, (G + 63) // 64)
    words = np.zeros((N, W), dtype=np.uint64)
    for v in range(G):
        words[:, v // 64] |= mat[:, v].astype(np.uint64) << np.uint64(v % 64)
    return words


def solve_maxload(problem: MaxLoadProblem) -> tuple[np.ndarray, dict[str, Any]]:
    """The ideal DP for contiguous splits (:func:`solve_maxload_dp`) of the problem contracted as
    the reference DP contracts it (:func:`scheduler.solvers.contraction.contract`), mapped back."""
    c = contract(problem)
    a, notes = solve_maxload_dp(c.problem)
    notes.update(classes=problem.num_decisions, contracted_classes=c.problem.num_decisions,
                 merged_classes=c.merged, merged_classes_with_memory=c.merged_with_memory)
    return expand(c, problem, a), notes


def solve_maxload_dp(problem: MaxLoadProblem) -> tuple[np.ndarray, dict[str, Any]]:
    """The ideal DP for contiguous splits (module docstring).

    Ideals are taken in order of size; for each ideal ``I`` its sub-ideals are found by a
    bitset test on packed words (``J & ~I == 0``), the costs of every ``I \\ J`` are computed
    at once, and every ``dp[c][f][I]`` is filled right away, so no pair of ideals is stored:
    memory is ``O(ideals x CPUs x accelerators)``, not ``O(pairs)``. Pairs whose device load is
    above the max-load of a known contiguous split (the linear greedy split) even without
    communication are skipped (pruning by a bound; exact, since every device of an optimal split
    has a load at most that). With ``base[c][f]`` the best
    over strict sub-ideals, ``dp[c][f][I]`` is the running minimum of ``base`` over
    ``c' <= c, f' <= f`` (an empty device leaves ``I`` as it is)."""
    masks, mat = problem.ideals()
    N = len(masks)
    C, F = problem.max_cpus, problem.max_fpgas
    words = _pack(mat)
    mat_t = np.ascontiguousarray(mat.T)
    fp = mat.astype(np.float64) @ problem.group_fpga
    cp = mat.astype(np.float64) @ problem.group_cpu
    sz = mat.astype(np.float64) @ problem.group_size
    bad = mat.astype(np.float64) @ (~problem.allowed[:, problem.max_cpus:].all(axis=1) if problem.max_fpgas
                                    else np.zeros(problem.num_decisions))
    dp = np.full((C + 1, F + 1, N), np.inf)
    dp[:, :, 0] = 0.0
    back_kind = np.zeros((C + 1, F + 1, N), dtype=np.int8)   # 0: CPU, 1: accelerator, 2: inherited
    back_j = np.zeros((C + 1, F + 1, N), dtype=np.int64)
    pairs, pruned = 1, 0
    full = N - 1
    upper = _contiguous_upper_bound(problem)
    for I in range(1, N):
        sub = np.flatnonzero((words[:I] & ~words[I]).max(axis=1) == 0)  # strict sub-ideals J of I
        pairs += sub.size + 1
        if math.isfinite(upper):
            # A device whose load exceeds a contiguous split's max-load is on no optimal path; the
            # accelerator latency alone (without communication) already bounds its load below.
            lower = np.minimum(fp[I] - fp[sub] if F else np.inf, cp[I] - cp[sub] if C else np.inf)
            keep = lower <= upper * (1 + 1e-9)
            pruned += int(sub.size - keep.sum())
            sub = sub[keep]
        acc = fp[I] - fp[sub] + problem.set_comm_columns(mat_t[:, I:I + 1] & ~mat_t[:, sub])
        acc[(sz[I] - sz[sub]) > problem.max_size * (1 + 1e-12)] = np.inf
        acc[(bad[I] - bad[sub]) > 0] = np.inf
        cpu = cp[I] - cp[sub]
        base, kind, arg = _last_device(dp[:, :, sub], sub, cpu, acc)
        # An empty device: dp[c][f][I] = min(base, dp[c-1][f][I], dp[c][f-1][I]).
        for c in range(C + 1):
            for f in range(F + 1):
                val, kd, j = base[c, f], kind[c, f], arg[c, f]
                if c and dp[c - 1, f, I] < val:
                    val, kd, j = dp[c - 1, f, I], 2, -1
                if f and dp[c, f - 1, I] < val:
                    val, kd, j = dp[c, f - 1, I], 3, -1
                dp[c, f, I], back_kind[c, f, I], back_j[c, f, I] = val, kd, j
    if not math.isfinite(dp[C, F, full]):
        raise InfeasibleError(f"no contiguous split of {problem.name!r} fits the accelerators' size limit "
                              f"({problem.max_size:.4g} bytes each); add accelerators or CPUs")
    a = _backtrack(problem, mat, back_kind, back_j)
    return a, {"method": "ideal DP (contiguous splits)", "ideals": N, "ideal_pairs": int(pairs),
               "pairs_pruned_by_bound": pruned, "upper_bound": upper if math.isfinite(upper) else None,
               "dp_max_load": float(dp[C, F, full])}


def _last_device(D: np.ndarray, sub: np.ndarray, cpu: np.ndarray, acc: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one ideal ``I`` and its candidate sub-ideals ``sub`` (``D = dp[:, :, sub]``; ``cpu`` /
    ``acc`` the loads of ``I \\ J`` on a CPU / an accelerator): per ``(c, f)``, the best max-load
    with ``I \\ J`` on the ``c``-th CPU (kind 0) or the ``f``-th accelerator (kind 1), and the
    arg-min sub-ideal (kind 2: neither possible)."""
    C, F = D.shape[0] - 1, D.shape[1] - 1
    base = np.full((C + 1, F + 1), np.inf)
    kind = np.full((C + 1, F + 1), 2, dtype=np.int8)
    arg = np.zeros((C + 1, F + 1), dtype=np.int64)
    if C:
        v = np.maximum(D[:-1], cpu)                  # [C, F+1, m]: CPU c-1 -> c
        k = v.argmin(axis=2)
        best = np.take_along_axis(v, k[..., None], axis=2)[..., 0]
        base[1:], kind[1:], arg[1:] = best, 0, sub[k]
    if F:
        v = np.maximum(D[:, :-1], acc)               # [C+1, F, m]: accelerator f-1 -> f
        k = v.argmin(axis=2)
        best = np.take_along_axis(v, k[..., None], axis=2)[..., 0]
        better = best < base[:, 1:]
        base[:, 1:] = np.where(better, best, base[:, 1:])
        kind[:, 1:] = np.where(better, 1, kind[:, 1:])
        arg[:, 1:] = np.where(better, sub[k], arg[:, 1:])
    return base, kind, arg


def _backtrack(problem: MaxLoadProblem, mat: np.ndarray, back_kind: np.ndarray, back_j: np.ndarray) -> np.ndarray:
    """The assignment of the DP's optimum from its back pointers (kinds: 0 CPU, 1 accelerator,
    2 / 3 a CPU / an accelerator left empty)."""
    C, F, I = back_kind.shape[0] - 1, back_kind.shape[1] - 1, back_kind.shape[2] - 1
    a = np.zeros(problem.num_decisions, dtype=np.int64)
    c, f = C, F
    while I != 0:
        kd, J = int(back_kind[c, f, I]), int(back_j[c, f, I])
        if kd == 2:
            c -= 1
            continue
        if kd == 3:
            f -= 1
            continue
        groups = np.flatnonzero(mat[I] & ~mat[J])
        if kd == 1:
            f -= 1
            a[groups] = problem.max_cpus + f
        else:
            c -= 1
            a[groups] = c
        I = J
    return a


def _contiguous_upper_bound(problem: MaxLoadProblem) -> float:
    """Max-load of the linear greedy split when it is a contiguous split (every group may go on
    an accelerator, so no group is moved to a CPU out of order), else ``inf``."""
    from scheduler.solvers.greedy import greedy_maxload

    if problem.max_fpgas == 0 or not problem.allowed[:, problem.max_cpus:].all():
        return math.inf
    return float(problem.objective(greedy_maxload(problem)[0]))


class Exact(Solver):
    """The reference optimum: DP (any layer graph), or ``method="exhaustive"`` for tiny problems."""

    name = "exact"

    def __init__(self, method: str = "dp", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if method not in ("dp", "exhaustive"):
            raise ProblemError(f"unknown exact method {method!r}; use 'dp' or 'exhaustive'")
        self.method = method

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        if self.method == "exhaustive":
            return solve_exhaustive(problem)
        if isinstance(problem, PSSProblem):
            return solve_pss(problem)
        if isinstance(problem, MaxLoadProblem):
            return solve_maxload(problem)
        return solve_heterps(problem)
