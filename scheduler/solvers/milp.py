r"""Non-contiguous exact solver for the max-load objective: the integer programme, solved by HiGHS.

The contiguous DP (:func:`scheduler.solvers.exact.solve_maxload`) is exact only over contiguous splits
(every device gets ``I \ J`` for two ideals); a non-contiguous placement can be better. This is
the integer programme of the max-load problem over *all* placements (Tarnawski et al., NeurIPS
2020, the throughput IP), solved by HiGHS through :func:`scipy.optimize.milp`.

**Variables.** ``x[g, d] in {0, 1}``: colour class ``g`` on device ``d`` (CPUs, then
accelerators); for every node ``u`` with outgoing cost ``c_u > 0`` and every accelerator ``a``:
``o[u, a], i[u, a] in [0, 1]`` (``a`` pays ``c_u`` as the sender / as a receiver); ``T >= 0``.

**Constraints.**

* ``sum_d x[g, d] = 1``; ``x[g, a] = 0`` where ``g`` may not go on an accelerator;
* for each edge ``u -> v`` and accelerator ``a``: ``o[u, a] >= x[g(u), a] - x[g(v), a]`` and
  ``i[u, a] >= x[g(v), a] - x[g(u), a]`` (minimising drives them to the indicator that ``a``
  holds ``u`` and not some successor, resp. holds a successor and not ``u``);
* memory: ``sum_g size_g x[g, a] <= maxSizePerFPGA``;
* load: ``sum_g lat_d(g) x[g, d] + [d accelerator] sum_u c_u (o[u, d] + i[u, d]) <= T``;
* symmetry (devices of one kind are interchangeable): accelerator ``a >= 1`` (CPU ``c >= 1``)
  may hold class ``g`` only if accelerator ``a - 1`` holds a class before ``g``:
  ``x[g, a] <= sum_{g' < g} x[g', a - 1]``;
* ``T <= U``, the contiguous DP's optimum (any better placement is non-contiguous).

**Objective:** minimise ``T``. This equals :meth:`MaxLoadProblem.evaluate`'s max-load at the
integer optimum (the tests check it on random small graphs against exhaustive search).

**Budget and gap.** Work: ``node_limit`` branch-and-bound nodes; ``time_limit`` (seconds) is a
safety cap, reported in ``notes["time_cap_cut"]`` when it ends the search. The result is the
better of the MILP's incumbent and the DP's split; ``notes`` carry the proven lower bound
(``dual_bound``, never above the optimum) and the gap ``(objective - dual_bound) / objective``
that HiGHS proved (0 = proven optimal over all placements).

**Why HiGHS through SciPy.** It takes the real-valued latencies and costs as they are (CP-SAT
needs integer coefficients, so every value would be scaled and rounded), reports its dual bound
and gap, has node and time limits, and SciPy is a well-kept dependency with wheels for every
platform this project runs on.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from scheduler.solvers.base import Solver, time_cap_cut
from scheduler.core.errors import SolverNotApplicableError
from scheduler.core.maxload import MaxLoadProblem

__all__ = ["build_milp", "MILP"]


def build_milp(problem: MaxLoadProblem, upper: float | None = None) -> dict[str, Any]:
    """The integer programme of ``problem`` (module docstring) as arrays for
    :func:`scipy.optimize.milp`: ``c``, ``A`` (sparse), ``lo``/``hi`` (row bounds), ``lb``/``ub``
    (variable bounds), ``integrality``, the index of ``x[g, d]`` (``x_index``) and of ``T``."""
    G, D, C = problem.num_decisions, problem.num_choices, problem.max_cpus
    accs = list(range(C, D))
    senders = sorted({int(u) for u in problem.src if problem.cost[u] > 0})
    nx = G * D
    x_index = np.arange(nx).reshape(G, D)
    o_index = {(u, a): nx + 2 * (k * len(accs) + j) for k, u in enumerate(senders) for j, a in enumerate(accs)}
    t_var = nx + 2 * len(senders) * len(accs)
    n = t_var + 1
    rows: list[dict[int, float]] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(coef: dict[int, float], low: float, high: float) -> None:
        rows.append(coef)
        lo.append(low)
        hi.append(high)

    for g in range(G):
        row({int(x_index[g, d]): 1.0 for d in range(D)}, 1.0, 1.0)
    gof = problem.group_of
    for u, v in zip(problem.src, problem.dst):
        u, v = int(u), int(v)
        gu, gv = int(gof[u]), int(gof[v])
        if problem.cost[u] <= 0 or gu == gv:
            continue
        for a in accs:
            o = o_index[(u, a)]
            # o >= x[gu,a] - x[gv,a]  <=>  o - x[gu,a] + x[gv,a] >= 0 ; i >= x[gv,a] - x[gu,a]
            row({o: 1.0, int(x_index[gu, a]): -1.0, int(x_index[gv, a]): 1.0}, 0.0, math.inf)
            row({o + 1: 1.0, int(x_index[gv, a]): -1.0, int(x_index[gu, a]): 1.0}, 0.0, math.inf)
    for a in accs:
        row({int(x_index[g, a]): float(problem.group_size[g]) for g in range(G) if problem.group_size[g] > 0},
            -math.inf, problem.max_size * (1 + 1e-9))
    for d in range(D):
        lat = problem.group_fpga if d >= C else problem.group_cpu
        coef = {int(x_index[g, d]): float(lat[g]) for g in range(G) if lat[g] > 0}
        if d >= C:
            for u in senders:
                coef[o_index[(u, d)]] = float(problem.cost[u])
                coef[o_index[(u, d)] + 1] = float(problem.cost[u])
        coef[t_var] = -1.0
        row(coef, -math.inf, 0.0)
    for first, count in ((0, C), (C, D - C)):
        for k in range(1, count):
            d = first + k
            for g in range(G):
                coef = {int(x_index[g, d]): 1.0}
                for g2 in range(g):
                    coef[int(x_index[g2, d - 1])] = coef.get(int(x_index[g2, d - 1]), 0.0) - 1.0
                row(coef, -math.inf, 0.0)
    from scipy.sparse import csr_array

    ri = [r for r, coef in enumerate(rows) for _ in coef]
    ci = [j for coef in rows for j in coef]
    vals = [v for coef in rows for v in coef.values()]
    A = csr_array((vals, (ri, ci)), shape=(len(rows), n))
    lb = np.zeros(n)
    ub = np.ones(n)
    ub[t_var] = math.inf if upper is None else float(upper) * (1 + 1e-9)
    for g in range(G):
        for d in accs:
            if not problem.allowed[g, d]:
                ub[x_index[g, d]] = 0.0
    integrality = np.zeros(n)
    integrality[:nx] = 1
    c = np.zeros(n)
    c[t_var] = 1.0
    return {"c": c, "A": A, "lo": np.array(lo), "hi": np.array(hi), "lb": lb, "ub": ub,
            "integrality": integrality, "x_index": x_index, "t_var": t_var}


class MILP(Solver):
    """Exact max-load over all (non-contiguous) placements: the integer programme solved by
    HiGHS (module docstring). ``node_limit``: work budget (branch-and-bound nodes);
    ``time_limit``: safety cap in seconds; ``mip_rel_gap``: stop once the gap is proven below it."""

    name = "milp"

    def __init__(self, node_limit: int = 20_000, time_limit: float = 120.0, mip_rel_gap: float = 1e-6,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from scheduler.core.errors import ProblemError

        if isinstance(node_limit, bool) or int(node_limit) != node_limit or node_limit < 1:
            raise ProblemError(f"node_limit must be an integer >= 1 (branch-and-bound nodes), got {node_limit!r}")
        if not time_limit > 0:
            raise ProblemError(f"time_limit must be > 0 seconds, got {time_limit!r}")
        self.node_limit, self.time_limit, self.mip_rel_gap = int(node_limit), float(time_limit), float(mip_rel_gap)

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        from scipy.optimize import Bounds, LinearConstraint, milp

        from scheduler.solvers.exact import solve_maxload

        if not isinstance(problem, MaxLoadProblem):
            raise SolverNotApplicableError("the MILP solves the max-load objective of dnn-partitioning workloads; "
                                           "use 'exact' (the θ-sweep DP) for HeterPS problems")
        dp_a, _ = solve_maxload(problem)
        dp_val = problem.objective(dp_a)
        m = build_milp(problem, upper=dp_val)
        t0 = time.perf_counter()
        res = milp(m["c"], integrality=m["integrality"], bounds=Bounds(m["lb"], m["ub"]),
                   constraints=LinearConstraint(m["A"], m["lo"], m["hi"]),
                   options={"node_limit": self.node_limit, "time_limit": self.time_limit,
                            "mip_rel_gap": self.mip_rel_gap, "presolve": True})
        seconds = time.perf_counter() - t0
        notes: dict[str, Any] = {"method": "MILP (HiGHS via scipy.optimize.milp)", "status": int(res.status),
                                 "message": str(res.message), "milp_seconds": seconds,
                                 "nodes": getattr(res, "mip_node_count", None), "contiguous_dp": dp_val,
                                 "variables": int(m["c"].size), "constraints": int(m["A"].shape[0])}
        a = dp_a
        if res.x is not None:
            xs = res.x[: m["x_index"].size].reshape(m["x_index"].shape)
            cand = np.argmax(xs, axis=1).astype(np.int64)
            if problem.objective(cand) < dp_val:
                a = cand
        best = problem.objective(a)
        bound = getattr(res, "mip_dual_bound", None)
        if res.status == 0:  # proven optimal (within mip_rel_gap)
            bound = res.fun if bound is None else bound
        bound = None if bound is None or not math.isfinite(bound) else min(float(bound), best)
        notes["dual_bound"] = bound
        notes["gap"] = None if bound is None else max(0.0, (best - bound) / best) if best > 0 else 0.0
        notes["proven_optimal"] = bool(res.status == 0)
        if res.status == 1 and seconds >= self.time_limit * 0.98:
            time_cap_cut(notes, "milp", "branch and bound", self.time_limit)
        notes["improves_on_contiguous"] = bool(best < dp_val * (1 - 1e-12))
        return a, notes
