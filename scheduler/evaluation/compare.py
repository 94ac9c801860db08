"""``compare-schedulers``: every solver on every workload, against the exact optimum or a bound.

Writes ``<out>/results/schedulers.json`` (every row and the summaries), ``<out>/schedulers.md``
(the tables) and ``<out>/schedulers.png`` (the chart).

**Workloads** (:data:`DEFAULT_WORKLOADS`): the six built-ins (HeterPS, ``cloud``), the shared
dnn-partitioning workloads and the harder ones (:mod:`scheduler.workloads.hard`), and every
HeterPS-scale workload (:mod:`scheduler.workloads.large`, 200-300 layers) on ``cloud`` and on the
fixed evaluation catalogs of 2, 3, 5 and 6 types (``name@catalog``,
:func:`scheduler.evaluation.type_slots.evaluation_catalogs` seed 0).

**Reference** (:func:`reference`): max-load, the exact contiguous DP (and, with ``milp``, the
MILP's proven lower bound over all placements); HeterPS, the threshold-interval search of
:func:`scheduler.solvers.bounds.heterps_bound`, which is the exact optimum when it closes (row
``exact``) and else a proven lower bound (row ``bound``); built-ins use :class:`scheduler.solvers.exact.Exact`.

**Solvers** (:data:`SOLVER_ORDER`): ``rl`` is the shipped policy alone (``RL()``: no training,
no polish), ``rl_polish`` the same with the local polish; ``rl_train`` (not in the default set)
trains the paper's policy from scratch on each workload. Every row has the objective, its ratio
to the reference, whether the constraint was met, the solve time and the solve time per
decision; RL rows also the measured greedy-decode time per decision.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from scheduler.core.errors import SolverNotApplicableError
from scheduler.evaluation.compare_report import COLORS, SOLVER_ORDER, fmt

__all__ = ["SOLVER_ORDER", "DEFAULT_SOLVERS", "HEURISTICS", "COLORS", "MILP_SECONDS", "BOUND_DPS",
           "LARGE_CATALOGS", "default_workloads", "load_spec", "reference", "run_comparison", "verdict"]

DEFAULT_SOLVERS = tuple(s for s in SOLVER_ORDER if s != "rl_train")
#: The fast heuristics the learned policy is measured against (:func:`verdict`).
HEURISTICS = ("metf", "msct", "greedy", "random", "bo")
#: Safety cap (s) of the MILP per max-load workload in the comparison (its budget is nodes).
MILP_SECONDS = 60.0
#: DP solves the HeterPS reference search may spend on a HeterPS-scale workload.
BOUND_DPS = 4000
#: Catalogs of the HeterPS-scale workloads: ``cloud`` and the evaluation catalogs of 2, 3, 5, 6 types.
LARGE_CATALOGS = ("cloud", "eval0_2types", "eval0_3types", "eval0_5types", "eval0_6types")


def default_workloads() -> list[str]:
    """Every workload of the comparison (module docstring), in table order."""
    from scheduler.workloads import BUILTIN_WORKLOADS, dnn_partitioning
    from scheduler.workloads.hard import HARD_WORKLOADS
    from scheduler.workloads.large import LARGE_WORKLOADS

    return (list(BUILTIN_WORKLOADS) + list(dnn_partitioning.shared_workloads()) + list(HARD_WORKLOADS)
            + [f"{w}@{c}" for w in LARGE_WORKLOADS for c in LARGE_CATALOGS])


def _catalog(name: str) -> Any:
    from scheduler.core.catalogs import CATALOGS
    from scheduler.evaluation.type_slots import evaluation_catalogs
    from scheduler.workloads import BUILTIN_WORKLOADS

    if name in CATALOGS:
        return CATALOGS[name]
    for cat in evaluation_catalogs(0, workloads=list(BUILTIN_WORKLOADS)):
        if cat.name == name:
            return cat
    raise SolverNotApplicableError(f"unknown catalog {name!r} in a workload spec; use one of {', '.join(LARGE_CATALOGS)}")


def load_spec(spec: str) -> tuple[Any, str, str]:
    """``(problem, kind, group)`` of a workload name or ``name@catalog``; kind ``heterps`` or
    ``maxload``; group ``builtin``, ``shared``, ``hard`` or ``large``."""
    from scheduler.workloads import BUILTIN_WORKLOADS, dnn_partitioning, load_workload
    from scheduler.workloads.hard import HARD_WORKLOADS
    from scheduler.workloads.large import large_problem

    name, _, cat = spec.partition("@")
    if cat:
        return large_problem(name, _catalog(cat)), "heterps", "large"
    problem = load_workload(name)
    kind = "maxload" if problem.objective_name == "max_load" else "heterps"
    group = ("builtin" if name in BUILTIN_WORKLOADS else "shared" if name in dnn_partitioning.shared_workloads()
             else "hard" if name in HARD_WORKLOADS else "other")
    return problem, kind, group


def reference(problem: Any, kind: str, group: str) -> dict[str, Any]:
    """The reference of a workload (module docstring): ``value``, ``exact`` (whether it is the
    optimum), ``seconds`` and, when it is a placement, its ``schedule``."""
    from scheduler.solvers.bounds import heterps_bound
    from scheduler.solvers.exact import Exact

    t0 = time.perf_counter()
    if kind == "maxload" or group != "large":
        s = Exact().solve(problem)
        return {"value": s.objective, "exact": True, "seconds": s.solve_seconds, "schedule": s}
    b = heterps_bound(problem, max_dps=BOUND_DPS)
    seconds = time.perf_counter() - t0
    s = problem.make_schedule(b.assignment, "exact", seconds, {"method": "threshold intervals", **b.to_dict()}) \
        if b.exact else None
    return {"value": b.upper if b.exact else b.lower, "exact": b.exact, "seconds": seconds, "schedule": s,
            "bound": b.to_dict()}


def _make(name: str, seed: int, rl_iterations: int | None, quick: bool) -> Any:
    import scheduler

    if name == "rl":
        return scheduler.RL(seed=seed)
    if name == "rl_polish":
        return scheduler.RL(seed=seed, polish=True)
    if name == "rl_train":
        return scheduler.RL(train=True, iterations=rl_iterations, polish=True, seed=seed)
    if name == "milp":
        return scheduler.MILP(time_limit=MILP_SECONDS, seed=seed)
    if name == "random":
        return scheduler.RandomSearch(samples=300 if quick else 2000, seed=seed)
    if name == "bo":
        return scheduler.BayesOpt(evaluations=20 if quick else 60, seed=seed)
    return scheduler.SOLVERS[name](seed=seed)


def _row(spec: str, kind: str, group: str, sname: str, sch: Any, ref: dict[str, Any], problem: Any) -> dict[str, Any]:
    """One table row; an RL row's solve time leaves out its latency measurement (``notes.solve_seconds``)."""
    value = ref["value"]
    seconds = float(sch.notes.get("solve_seconds", sch.solve_seconds))
    row = {
        "workload": spec, "kind": kind, "group": group, "solver": sname, "applicable": True,
        "objective_name": sch.objective_name, "objective": sch.objective,
        "reference": "exact" if ref["exact"] else "bound", "reference_value": value,
        "ratio_to_exact": sch.objective / value if ref["exact"] and math.isfinite(sch.objective) and value else None,
        "ratio_to_reference": sch.objective / value if math.isfinite(sch.objective) and value else None,
        "constraint_met": sch.constraint_met, "solve_seconds": seconds,
        "ms_per_decision": 1e3 * seconds / problem.num_decisions, "decisions": problem.num_decisions,
        "types": problem.num_choices if kind == "heterps" else None, "throughput": sch.throughput,
        "units": sch.units, "decision_ms": sch.notes.get("decision_ms"),
        "policy_ratio": (sch.notes["policy_objective"] / value
                         if sch.notes.get("policy_objective") is not None and value else None),
        "min_throughput": getattr(problem, "constraints", None) and problem.constraints.min_throughput,
    }
    if kind == "maxload":
        row["result"] = sch.result
    return row


def _workload_rows(spec: str, solvers: Sequence[str], seed: int, rl_iterations: int | None, quick: bool,
                   log: Callable[[str], Any]) -> list[dict[str, Any]]:
    """Every solver's row on one workload (and, on max-load workloads with ``milp``, each row's
    ratio to the MILP's proven lower bound)."""
    from scheduler.workloads import dnn_partitioning

    problem, kind, group = load_spec(spec)
    ref = reference(problem, kind, group)
    rows: list[dict[str, Any]] = []
    bound = None
    for sname in solvers:
        if sname == "exact":
            if ref["schedule"] is None:
                rows.append({"workload": spec, "kind": kind, "group": group, "solver": "exact", "applicable": False,
                             "reason": "no proven optimum within the DP budget; the bound is the reference",
                             "bound": ref.get("bound")})
                continue
            sch = ref["schedule"]
        elif sname == "milp" and kind != "maxload":
            rows.append({"workload": spec, "kind": kind, "group": group, "solver": sname, "applicable": False,
                         "reason": "max-load only"})
            continue
        else:
            try:
                sch = _make(sname, seed, rl_iterations, quick).solve(problem)
            except SolverNotApplicableError as exc:
                rows.append({"workload": spec, "kind": kind, "group": group, "solver": sname, "applicable": False,
                             "reason": str(exc).split(";")[0]})
                log(f"{spec:<28} {sname:<9} n/a")
                continue
        row = _row(spec, kind, group, sname, sch, ref, problem)
        if sname == "milp":
            bound = sch.notes.get("dual_bound")
            row.update(milp_gap=sch.notes.get("gap"), milp_bound=bound)
        published = dnn_partitioning.PUBLISHED_OPTIMUM.get(spec)
        if published is not None:
            row["published_optimum"] = published
            row["ratio_to_published"] = sch.objective / published if math.isfinite(sch.objective) else None
        rows.append(row)
        log(f"{spec:<28} {sname:<9} {sch.objective_name} {fmt(sch.objective, 6):>12} ratio "
            f"{fmt(row['ratio_to_reference'], 5):>7} ({row['reference']}) met {sch.constraint_met!s:<5} "
            f"{sch.solve_seconds:7.2f} s" + (f"  {row['decision_ms']:.3f} ms/decision" if row["decision_ms"] else ""))
    for r in rows:
        if r.get("applicable") and bound:
            r["ratio_to_bound"] = r["objective"] / bound if math.isfinite(r["objective"]) else None
    return rows


def run_comparison(out_dir: str | os.PathLike[str] = "benchmarks", *, rl_iterations: int | None = None,
                   workloads: Sequence[str] | None = None, solvers: Sequence[str] | None = None, seed: int = 0,
                   quick: bool = False, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run the comparison and write the three outputs (:mod:`scheduler.evaluation.compare_report`); returns
    the JSON document."""
    from scheduler.evaluation.compare_report import markdown, plot
    from scheduler.core.schedule import _clean

    chosen = [s for s in SOLVER_ORDER if (solvers is None and s in DEFAULT_SOLVERS) or (solvers and s in solvers)]
    names = list(workloads) if workloads else default_workloads()
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for spec in names:
        rows.extend(_workload_rows(spec, chosen, seed, rl_iterations, quick, log))
    doc = {"generated_by": "ralp-tf compare-schedulers", "rl_iterations": rl_iterations, "seed": seed,
           "quick": quick, "solvers": chosen,
           "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.python_version()}",
           "total_seconds": time.perf_counter() - t_start, "rows": rows}
    doc["summary"] = _summary(rows)
    doc["verdict"] = verdict(rows)
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "results" / "schedulers.json").write_text(json.dumps(_clean(doc), indent=1))
    (out / "schedulers.md").write_text(markdown(doc))
    plot(doc, out / "schedulers.png")
    log(f"wrote {out / 'results' / 'schedulers.json'}, {out / 'schedulers.md'}, {out / 'schedulers.png'}")
    return doc


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per problem kind and solver: mean and worst ratio to the reference; RL's worst latency."""
    s: dict[str, Any] = {}
    for kind in ("heterps", "maxload"):
        per: dict[str, list[float]] = {}
        for r in rows:
            if r["kind"] == kind and r.get("applicable"):
                v = r["ratio_to_reference"]
                per.setdefault(r["solver"], []).append(v if v is not None else math.inf)
        s[kind] = {k: {"mean_ratio": float(np.mean(v)), "max_ratio": float(np.max(v)), "n": len(v)}
                   for k, v in per.items()}
    rl = [r for r in rows if r["solver"] in ("rl", "rl_polish") and r.get("applicable")]
    s["rl_max_decision_ms"] = max((r["decision_ms"] for r in rl if r["decision_ms"] is not None), default=None)
    s["best_ratio_to_published"] = {}
    for r in rows:
        if r.get("ratio_to_published") is not None:
            w = r["workload"]
            s["best_ratio_to_published"][w] = min(s["best_ratio_to_published"].get(w, math.inf), r["ratio_to_published"])
    return s


def verdict(rows: list[dict[str, Any]], policy: str = "rl") -> list[dict[str, Any]]:
    """Per workload: the policy's ratio, the best heuristic (:data:`HEURISTICS`) and its ratio, and
    ``margin = heuristic / policy - 1`` (positive: the policy is better by that fraction; an
    infeasible result counts as infinitely bad)."""
    out = []
    for w in dict.fromkeys(r["workload"] for r in rows):
        mine = {r["solver"]: r for r in rows if r["workload"] == w and r.get("applicable")}
        if policy not in mine:
            continue
        heur = [(mine[h]["ratio_to_reference"] or math.inf, h) for h in HEURISTICS if h in mine]
        if not heur:
            continue
        best_ratio, best = min(heur)
        p = mine[policy]["ratio_to_reference"] or math.inf
        margin = (best_ratio / p - 1.0) if math.isfinite(p) and math.isfinite(best_ratio) else (
            math.inf if math.isfinite(p) else (-math.inf if math.isfinite(best_ratio) else 0.0))
        out.append({"workload": w, "group": mine[policy]["group"], "policy_ratio": p, "best_heuristic": best,
                    "heuristic_ratio": best_ratio, "margin": margin,
                    "policy_seconds": mine[policy]["solve_seconds"], "heuristic_seconds": mine[best]["solve_seconds"]})
    return out
