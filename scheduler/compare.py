"""``compare-schedulers``: every solver on every built-in and shared workload.

Writes ``<out>/results/schedulers.json`` (every row and the summaries), ``<out>/schedulers.md``
(the table) and ``<out>/schedulers.png`` (the chart). Each row: objective, ratio to the exact
optimum, whether the constraint was met, solve time and, for RL, inference time per
decision. The generalisation test trains one policy per fold on half of the built-in
workloads and applies it, with no retraining, to the other half. Shared workloads also get
the gap to the published optimum.

Generalisation (:func:`generalisation`) is the paper-LSTM baseline of the generalisation test
(the lookahead policy that reaches the issue-14 targets is measured by
:mod:`scheduler.generalise`; when ``<out>/results/generalisation.json`` exists, its tables are
appended to ``<out>/schedulers.md``). It is leave-one-out: one base policy is trained by
imitation of the exact optima of :data:`GENERATED_COUNT` generated layer graphs
(:mod:`scheduler.workloads.generated`); for each built-in workload a copy of it is trained
further on the generated graphs plus the *other five* built-ins, then applied with no
retraining to the held-out one. The held-out workload is never in any training set of the
policy evaluated on it (checked, not just intended). Both the policy's own result (greedy
decode plus samples) and the polished result are reported.
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

from scheduler.errors import SolverNotApplicableError
from scheduler.workloads import BUILTIN_WORKLOADS, builtin_problem, dnn_partitioning

__all__ = ["SOLVER_ORDER", "COLORS", "MILP_SECONDS", "GENERATED_COUNT", "APPLY_SAMPLES", "PRETRAIN_ITERATIONS",
           "FOLD_ITERATIONS", "generalisation", "run_comparison", "markdown", "plot"]

SOLVER_ORDER = ("exact", "milp", "ralp", "greedy", "random", "bo", "rl")
COLORS = {"exact": "tab:blue", "ralp": "tab:orange", "greedy": "tab:green", "random": "tab:red", "bo": "tab:purple",
          "rl": "tab:brown", "milp": "tab:cyan"}
#: Safety cap (s) of the MILP per max-load workload in the comparison (its budget is nodes).
MILP_SECONDS = 60.0
#: Generated layer graphs in the generalisation pretraining set.
GENERATED_COUNT = 48
#: Placements sampled by a pretrained policy on an unseen workload (besides its greedy decode).
APPLY_SAMPLES = 64
#: Imitation steps of the generalisation test's base policy (on the generated graphs) and of
#: each fold (generated graphs plus the other built-ins); about what 40 s and 15 s did before.
PRETRAIN_ITERATIONS = 6000
FOLD_ITERATIONS = 2500


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _make(name: str, seed: int, rl_iterations: int | None, quick: bool, polish: bool = True) -> Any:
    import scheduler

    if name == "rl":
        return scheduler.RL(iterations=rl_iterations, polish=polish, seed=seed)
    if name == "milp":
        return scheduler.MILP(time_limit=MILP_SECONDS, seed=seed)
    if name == "random":
        return scheduler.RandomSearch(samples=300 if quick else 2000, seed=seed)
    if name == "bo":
        return scheduler.BayesOpt(evaluations=20 if quick else 60, seed=seed)
    return scheduler.SOLVERS[name](seed=seed)


def generalisation(names: Sequence[str], *, pretrain_iterations: int = PRETRAIN_ITERATIONS,
                   fold_iterations: int = FOLD_ITERATIONS, generated: int = GENERATED_COUNT, seed: int = 0,
                   log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Leave-one-out generalisation over the built-in workloads ``names`` (module docstring).

    Returns one row per held-out workload: the policy's own ratio to the exact optimum
    (``policy_ratio_to_exact``), the polished ratio (``ratio_to_exact``), constraint met, the
    training sets (``trained_on``: the built-ins; ``generated``: how many generated graphs)
    and times. Raises ``AssertionError`` if a held-out workload ever was in a training set.
    """
    from scheduler.exact import Exact
    from scheduler.rl import RL
    from scheduler.workloads.generated import generated_problems

    t0 = time.perf_counter()
    gen = generated_problems(generated, seed=seed + 1000)
    gen_targets = [Exact().solve(p).assignment for p in gen]
    base = RL(seed=seed, iterations=0)
    base_info = base.imitate(gen, gen_targets, iterations=pretrain_iterations)
    base_s = time.perf_counter() - t0
    log(f"generalisation: base policy imitated {len(gen)} generated graphs "
        f"({base_info['imitation_iterations']} steps, {base_s:.0f} s with their exact optima)")
    problems = {n: builtin_problem(n) for n in names}
    exact = {n: Exact().solve(p) for n, p in problems.items()}
    rows: list[dict[str, Any]] = []
    for held in names:
        others = [n for n in names if n != held]
        t1 = time.perf_counter()
        solver = RL(policy=base.policy.clone(), seed=seed, iterations=0, samples=APPLY_SAMPLES)
        info = solver.imitate(gen + [problems[n] for n in others],
                              gen_targets + [exact[n].assignment for n in others], iterations=fold_iterations)
        trained_on = info["trained_on"] + base_info["trained_on"]
        assert held not in trained_on, f"leave-one-out broken: {held!r} is in its own training set"
        train_s = time.perf_counter() - t1
        problem = problems[held]
        sch = solver.solve(problem)
        opt = exact[held].objective
        rows.append({"workload": held, "trained_on": others, "generated": len(gen),
                     "objective": sch.objective,
                     "ratio_to_exact": sch.objective / opt if math.isfinite(sch.objective) else None,
                     "policy_ratio_to_exact": sch.notes["policy_objective"] / opt
                     if math.isfinite(sch.notes["policy_objective"]) else None,
                     "constraint_met": sch.constraint_met, "exact_constraint_met": exact[held].constraint_met,
                     "pretrain_seconds": base_s + train_s, "fold_iterations": info["imitation_iterations"],
                     "apply_seconds": sch.solve_seconds, "decision_ms": sch.notes.get("decision_ms")})
        log(f"generalisation: {held:<14} policy {_fmt(rows[-1]['policy_ratio_to_exact'], 5)} polished "
            f"{_fmt(rows[-1]['ratio_to_exact'], 5)} (trained on {len(gen)} generated + {', '.join(others)}; "
            f"applied in {sch.solve_seconds:.2f} s)")
    return rows


def run_comparison(out_dir: str | os.PathLike[str] = "benchmarks", *, rl_iterations: int | None = None,
                   pretrain_iterations: int = PRETRAIN_ITERATIONS, fold_iterations: int = FOLD_ITERATIONS,
                   workloads: Sequence[str] | None = None,
                   solvers: Sequence[str] | None = None, seed: int = 0, quick: bool = False,
                   log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run the comparison and write the three outputs; returns the JSON document."""
    from scheduler.exact import Exact

    if quick:
        rl_iterations = min(rl_iterations or 100, 100)
        pretrain_iterations, fold_iterations = min(pretrain_iterations, 1000), min(fold_iterations, 300)
    solvers = [s for s in SOLVER_ORDER if solvers is None or s in solvers]
    shared = dnn_partitioning.shared_workloads()
    from scheduler.workloads.hard import HARD_WORKLOADS

    names = list(workloads) if workloads else list(BUILTIN_WORKLOADS) + list(shared) + list(HARD_WORKLOADS)
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for wname in names:
        hard = wname in HARD_WORKLOADS
        if wname in BUILTIN_WORKLOADS:
            problem = builtin_problem(wname)
            kind = "heterps"
        elif wname in shared:
            problem = dnn_partitioning.load(shared[wname])
            kind = "maxload"
        else:
            from scheduler.workloads import load_workload

            problem = load_workload(wname)  # harder workloads and paths
            kind = "maxload" if problem.objective_name == "max_load" else "heterps"
        exact = Exact().solve(problem)
        opt = exact.objective
        bound = None  # the MILP's proven lower bound (max-load: over all placements)
        published = dnn_partitioning.PUBLISHED_OPTIMUM.get(wname)
        for sname in solvers:
            if sname == "exact":
                sch = exact
            elif sname == "milp" and kind != "maxload":
                rows.append({"workload": wname, "kind": kind, "solver": sname, "applicable": False,
                             "reason": "max-load only"})
                continue
            else:
                try:
                    sch = _make(sname, seed, rl_iterations, quick).solve(problem)
                except SolverNotApplicableError as exc:
                    rows.append({"workload": wname, "kind": kind, "solver": sname, "applicable": False,
                                 "reason": str(exc).split(";")[0]})
                    log(f"{wname:<20} {sname:<7} n/a")
                    continue
            row = {
                "workload": wname, "kind": kind, "solver": sname, "applicable": True, "hard": hard,
                "objective_name": sch.objective_name, "objective": sch.objective,
                "ratio_to_exact": sch.objective / opt if math.isfinite(sch.objective) and opt > 0 else None,
                "constraint_met": sch.constraint_met, "exact_constraint_met": exact.constraint_met,
                "solve_seconds": sch.solve_seconds, "throughput": sch.throughput, "units": sch.units,
                "decision_ms": sch.notes.get("decision_ms"), "train_iterations": sch.notes.get("iterations"),
                "policy_ratio_to_exact": (sch.notes["policy_objective"] / opt
                                          if sch.notes.get("policy_objective") is not None and opt > 0 else None),
                "min_throughput": getattr(problem, "constraints", None) and problem.constraints.min_throughput,
                "decisions": problem.num_decisions,
            }
            if sname == "milp":
                bound = sch.notes.get("dual_bound")
                row.update(milp_gap=sch.notes.get("gap"), milp_bound=bound)
            if bound:
                row["ratio_to_bound"] = sch.objective / bound if math.isfinite(sch.objective) else None
            if published is not None:
                row["published_optimum"] = published
                row["ratio_to_published"] = sch.objective / published if math.isfinite(sch.objective) else None
            if kind == "maxload":
                row["result"] = sch.result
            rows.append(row)
            log(f"{wname:<20} {sname:<7} {sch.objective_name} {_fmt(sch.objective, 6):>12} "
                f"ratio {_fmt(row['ratio_to_exact'], 5):>7} met {sch.constraint_met!s:<5} "
                f"{sch.solve_seconds:7.2f} s" + (f"  {row['decision_ms']:.3f} ms/decision"
                                                 if row["decision_ms"] is not None else ""))
        for r in rows:  # rows solved before the MILP (exact) get their ratio to its bound too
            if r["workload"] == wname and r.get("applicable") and bound and "ratio_to_bound" not in r:
                r["ratio_to_bound"] = r["objective"] / bound if math.isfinite(r["objective"]) else None
    # Generalisation: leave-one-out over the built-ins, no retraining on the held-out workload.
    general: list[dict[str, Any]] = []
    if "rl" in solvers and not workloads:
        general = generalisation(list(BUILTIN_WORKLOADS), pretrain_iterations=pretrain_iterations,
                                 fold_iterations=fold_iterations, generated=8 if quick else GENERATED_COUNT, seed=seed,
                                 log=log)
    summary = _summary(rows, general)
    doc = {"generated_by": "ralp-tf compare-schedulers", "rl_iterations": rl_iterations,
           "pretrain_iterations": pretrain_iterations, "fold_iterations": fold_iterations, "seed": seed,
           "quick": quick,
           "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.python_version()}",
           "total_seconds": time.perf_counter() - t_start, "rows": rows, "generalisation": general,
           "summary": summary}
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    from scheduler.schedule import _clean

    (out / "results" / "schedulers.json").write_text(json.dumps(_clean(doc), indent=1))
    text = markdown(doc)
    general_json = out / "results" / "generalisation.json"
    if general_json.is_file():  # the lookahead policy's tables (python -m scheduler.generalise)
        from scheduler.generalise import markdown as generalise_markdown

        text += ("\n## Generalisation: the lookahead policy (`python -m scheduler.generalise`, from "
                 f"{general_json.name})\n\n" + generalise_markdown(json.loads(general_json.read_text())))
    (out / "schedulers.md").write_text(text)
    plot(doc, out / "schedulers.png")
    log(f"wrote {out / 'results' / 'schedulers.json'}, {out / 'schedulers.md'}, {out / 'schedulers.png'}")
    return doc


def _summary(rows: list[dict[str, Any]], general: list[dict[str, Any]]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for kind in ("heterps", "maxload"):
        per: dict[str, list[float]] = {}
        for r in rows:
            if r["kind"] == kind and r.get("applicable"):
                v = r["ratio_to_exact"]
                per.setdefault(r["solver"], []).append(v if v is not None else math.inf)
        s[kind] = {k: {"mean_ratio": float(np.mean(v)), "max_ratio": float(np.max(v)), "n": len(v)}
                   for k, v in per.items()}
    rl = [r for r in rows if r["solver"] == "rl" and r.get("applicable")]
    s["rl_max_decision_ms"] = max((r["decision_ms"] for r in rl if r["decision_ms"] is not None), default=None)
    s["rl_max_train_seconds"] = max((r["solve_seconds"] for r in rl), default=None)
    s["rl_meets_constraint_when_exact_does"] = all(r["constraint_met"] or not r["exact_constraint_met"] for r in rl)
    heter = [r for r in rl if r["kind"] == "heterps"]
    s["rl_heterps_max_ratio"] = max((r["ratio_to_exact"] or math.inf for r in heter), default=None)
    best_pub = {}
    for r in rows:
        if r.get("ratio_to_published") is not None:
            best_pub[r["workload"]] = min(best_pub.get(r["workload"], math.inf), r["ratio_to_published"])
    s["best_ratio_to_published"] = best_pub
    s["rl_ratio_to_published"] = {r["workload"]: r.get("ratio_to_published") for r in rl if "published_optimum" in r}
    s["generalisation_max_ratio"] = max((g["ratio_to_exact"] or math.inf for g in general), default=None)
    s["generalisation_policy_max_ratio"] = max((g["policy_ratio_to_exact"] or math.inf for g in general),
                                               default=None)
    s["generalisation_policy_within_10pct"] = sum(
        1 for g in general if g["policy_ratio_to_exact"] is not None and g["policy_ratio_to_exact"] <= 1.10)
    s["generalisation_polished_within_10pct"] = sum(
        1 for g in general if g["ratio_to_exact"] is not None and g["ratio_to_exact"] <= 1.10)
    return s


def markdown(doc: dict[str, Any]) -> str:
    """The table kept in benchmarks/schedulers.md."""
    lines = ["# Scheduler comparison", "",
             f"Generated by `ralp-tf compare-schedulers` (RL training budget "
             f"{doc['rl_iterations'] or 'min(2000, ceil(24000 / decisions))'} iterations of 32 episodes per workload, "
             f"seed {doc['seed']}{', quick' if doc['quick'] else ''}) on {doc['machine']}; "
             f"{doc['total_seconds']:.0f} s in all. Built-in workloads minimise the HeterPS cost "
             "($ per million samples) under a throughput constraint (25% of the best achievable); shared "
             "dnn-partitioning workloads minimise max-load. Ratio = objective / exact optimum (1 is optimal; "
             "the exact optimum of a max-load workload is the best contiguous split).", "",
             "RL's ratio is after its local polish; the column 'RL policy only' is the best placement the "
             "trained policy itself produced, before the polish.", "",
             "For max-load workloads the `milp` row is the non-contiguous MILP (HiGHS, "
             f"{MILP_SECONDS:g} s cap): its objective, and in 'ratio to bound' every solver's objective over the lower "
             "bound the MILP proved (the true optimum lies between the bound and the best objective).", "",
             "| workload | solver | objective | ratio to exact | RL policy only | constraint met | solve s | "
             "RL ms/decision | ratio to published | ratio to MILP bound |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        if not r.get("applicable"):
            lines.append(f"| {r['workload']} | {r['solver']} | n/a | — | — | — | — | — | — | — |")
            continue
        lines.append(f"| {r['workload']} | {r['solver']} | {_fmt(r['objective'], 6)} | "
                     f"{_fmt(r['ratio_to_exact'], 5)} | {_fmt(r.get('policy_ratio_to_exact'), 5)} | "
                     f"{'yes' if r['constraint_met'] else 'NO'} | "
                     f"{r['solve_seconds']:.2f} | {_fmt(r['decision_ms'], 3)} | "
                     f"{_fmt(r.get('ratio_to_published'), 5)} | {_fmt(r.get('ratio_to_bound'), 5)} |")
    s = doc["summary"]
    lines += ["", "## Summary", "", "| problem kind | solver | mean ratio to exact | worst ratio |", "|---|---|---|---|"]
    for kind in ("heterps", "maxload"):
        for solver, v in s.get(kind, {}).items():
            lines.append(f"| {kind} | {solver} | {_fmt(v['mean_ratio'], 5)} | {_fmt(v['max_ratio'], 5)} |")
    lines += ["", f"- RL worst ratio on built-in workloads: {_fmt(s['rl_heterps_max_ratio'], 5)}",
              f"- RL meets the constraint whenever the optimum does: {s['rl_meets_constraint_when_exact_does']}",
              f"- RL inference, worst workload: {_fmt(s['rl_max_decision_ms'], 3)} ms per decision",
              f"- RL whole solve (training, polish, timing), longest: {_fmt(s['rl_max_train_seconds'], 3)} s per workload",
              "- Best solver vs published optimum: " + ", ".join(
                  f"{k} {_fmt(v, 5)}" for k, v in s["best_ratio_to_published"].items()),
              "- RL vs published optimum: " + ", ".join(
                  f"{k} {_fmt(v, 5)}" for k, v in s["rl_ratio_to_published"].items())]
    if doc["generalisation"]:
        g0 = doc["generalisation"][0]
        lines += ["", "## Generalisation (leave-one-out; policy applied with no retraining)", "",
                  f"Each policy was trained by imitation of the exact optima of {g0['generated']} generated layer "
                  "graphs and of the five *other* built-ins, never on the workload it is applied to. 'policy' is "
                  f"the best of its greedy decode and {APPLY_SAMPLES} samples; 'polished' adds the local polish.", "",
                  "| held out | trained on (built-ins) | policy ratio to exact | polished ratio | constraint met | "
                  "train s | apply s |", "|---|---|---|---|---|---|---|"]
        for g in doc["generalisation"]:
            lines.append(f"| {g['workload']} | {', '.join(g['trained_on'])} | "
                         f"{_fmt(g['policy_ratio_to_exact'], 5)} | {_fmt(g['ratio_to_exact'], 5)} | "
                         f"{'yes' if g['constraint_met'] else 'NO'} | {g['pretrain_seconds']:.0f} | "
                         f"{g['apply_seconds']:.2f} |")
        lines.append(f"\nWithin 10% of the optimum: policy alone {s['generalisation_policy_within_10pct']} of "
                     f"{len(doc['generalisation'])}, polished {s['generalisation_polished_within_10pct']} of "
                     f"{len(doc['generalisation'])}. Worst: policy {_fmt(s['generalisation_policy_max_ratio'], 5)}, "
                     f"polished {_fmt(s['generalisation_max_ratio'], 5)}.")
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> None:
    """Bar charts: ratio to the exact optimum per workload and solver; RL ms per decision."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if r.get("applicable")]
    kinds = [k for k in ("heterps", "maxload") if any(r["kind"] == k for r in rows)]
    fig, axes = plt.subplots(1, len(kinds) + 1, figsize=(6 * len(kinds) + 4, 4.8), squeeze=False)
    titles = {"heterps": "Built-in workloads: cost / exact optimum\n(hatched: constraint missed)",
              "maxload": "dnn-partitioning: max-load / exact contiguous optimum"}
    for ax, kind in zip(axes[0], kinds):
        wl = list(dict.fromkeys(r["workload"] for r in rows if r["kind"] == kind))
        sol = [s for s in SOLVER_ORDER if any(r["solver"] == s and r["kind"] == kind for r in rows)]
        w = 0.8 / max(len(sol), 1)
        for i, s in enumerate(sol):
            vals, missed = [], []
            for name in wl:
                r = next((r for r in rows if r["workload"] == name and r["solver"] == s), None)
                v = r["ratio_to_exact"] if r else None
                vals.append(min(v, 3.0) if v is not None else 3.0)
                missed.append(v is None)
            xs = np.arange(len(wl)) + (i - (len(sol) - 1) / 2) * w
            bars = ax.bar(xs, vals, w, label=s, color=COLORS.get(s))
            for bar, m in zip(bars, missed):
                if m:
                    bar.set_hatch("//")
                    bar.set_alpha(0.35)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.axhline(1.03, color="grey", lw=0.8, ls="--", label="+3%")
        ax.set_xticks(np.arange(len(wl)))
        ax.set_xticklabels(wl, rotation=30, ha="right")
        ax.set_ylabel("objective / exact optimum (capped at 3; lower is better)")
        ax.set_ylim(0.9, 3.05)
        ax.set_title(titles[kind])
        ax.legend(fontsize=8)
    ax = axes[0][-1]
    rl = [r for r in rows if r["solver"] == "rl" and r["decision_ms"] is not None]
    ax.bar([r["workload"] for r in rl], [r["decision_ms"] for r in rl], color=COLORS["rl"], label="RL inference")
    ax.axhline(2.0, color="red", ls="--", lw=0.8, label="2 ms target")
    ax.set_ylabel("ms per layer decision")
    ax.set_title("RL inference time per decision")
    ax.tick_params(axis="x", rotation=30)
    for lab in ax.get_xticklabels():
        lab.set_ha("right")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
