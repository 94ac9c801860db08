"""Every scheduler policy planning for real PSS clusters, priced by ralp_tf's cost model beside the analyzer.

``python -m scheduler.pss_table --out DIR [--models M ...] [--policies P ...]`` profiles every
built-in model (:data:`ralp_tf.model.BUILTIN_MODELS`, batch 32 as ``ralp-tf plan``; profiles
cached in ``DIR/profiles``), and for each cluster of :data:`CLUSTERS` (2 workers; 1 and 2 PS
tasks; 100 Mbit/s and 1 Gbit/s) plans it with ``--policy ralp`` (the analyzer's plan) and with
every scheduler policy (``Solver.plan``, :mod:`scheduler.solvers.cluster_plan`), and prices each plan with
:func:`ralp_tf.plan.estimate`. Writes ``DIR/pss_plans.json`` and ``DIR/pss_plans.md``: per cell
the predicted step of the analyzer's plan, each policy's step over it (at most 1 is the target),
which plan each policy returned (its own or the analyzer's), how much faster its own plan is
predicted than the analyzer's when it is kept, and the planning time.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["CLUSTERS", "POLICIES", "make_policy", "cached_profile", "run", "markdown", "main"]

#: (workers, PS tasks, bandwidth) of every cluster.
CLUSTERS = ((2, 1, "100mbit"), (2, 1, "1gbit"), (2, 2, "100mbit"), (2, 2, "1gbit"))
#: The policies of the table (``rl``: the shipped policy as ``--policy rl`` uses it; default budgets).
POLICIES = ("exact", "scheduler.ralp", "greedy", "random", "bo", "metf", "msct", "milp", "rl", "rl polish")


def make_policy(name: str) -> Any:
    """The solver of policy label ``name`` (:data:`POLICIES`)."""
    import scheduler

    if name == "rl polish":
        return scheduler.RL(polish=True)
    return scheduler.SOLVERS[name.removeprefix("scheduler.")]()


def cached_profile(name: str, folder: Path, batch_size: int = 32) -> Any:
    """The profile of built-in model ``name`` (profiled once, then read from ``folder``)."""
    from ralp_tf.model import ModelProfile, profile, resolve_model

    path = folder / f"{name}_b{batch_size}.json"
    if path.exists():
        return ModelProfile.from_dict(json.loads(path.read_text()))
    prof = profile(resolve_model(name)(), batch_size=batch_size)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(prof.to_json())
    return prof


def run(models: Sequence[str], policies: Sequence[str], folder: Path,
        log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """One row per (model, cluster, policy) (module docstring)."""
    from ralp_tf.plan import Cluster, analyze, estimate

    rows = []
    for model in models:
        prof = cached_profile(model, folder / "profiles")
        for workers, ps, bw in CLUSTERS:
            cluster = Cluster.local(workers, ps, bandwidth=bw)
            t0 = time.perf_counter()
            ralp = estimate(prof, cluster, analyze(prof, cluster).plan).step_s
            ralp_s = time.perf_counter() - t0
            for name in policies:
                t0 = time.perf_counter()
                plan = make_policy(name).plan(prof, cluster)
                seconds = time.perf_counter() - t0
                step = estimate(prof, cluster, plan).step_s
                n = plan.notes
                own = n.get("solver_pss_step_s")
                rows.append({"model": model, "workers": workers, "ps": ps, "bandwidth": bw, "policy": name,
                             "layers": len(prof.compute_layers), "analyzer_step_s": ralp, "step_s": step,
                             "ratio_to_analyzer": step / ralp, "chosen": n.get("chosen"),
                             "own_ratio_to_analyzer": own / ralp if own else None,
                             "not_applicable": n.get("solver_not_applicable"), "plan_seconds": seconds,
                             "analyzer_seconds": ralp_s})
                log(f"{model:<24} {ps} PS {bw:<7} {name:<14} {step / ralp:.4f} x ralp ({n.get('chosen')}, own "
                    f"{'n/a' if own is None else f'{own / ralp:.3f}'}) {seconds:.1f} s")
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The tables of :func:`run`'s rows."""
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    cells = list(dict.fromkeys((r["model"], r["ps"], r["bandwidth"]) for r in rows))
    by = {(r["model"], r["ps"], r["bandwidth"], r["policy"]): r for r in rows}
    lines = ["### Predicted step of each policy's plan over `--policy ralp`'s (ralp_tf.plan.estimate; <= 1 is the "
             "target; `*`: the policy's own plan was kept, else the analyzer's)", "",
             "| model | PS | link | " + " | ".join(policies) + " |", "|---|---|---|" + "---|" * len(policies)]
    for m, ps, bw in cells:
        out = []
        for p in policies:
            r = by[(m, ps, bw, p)]
            out.append(f"{r['ratio_to_analyzer']:.3f}{'*' if r['chosen'] == 'solver' else ''}")
        lines.append(f"| {m} | {ps} | {bw} | " + " | ".join(out) + " |")
    worst = max(r["ratio_to_analyzer"] for r in rows)
    kept = [r for r in rows if r["chosen"] == "solver"]
    lines += ["", f"Worst ratio: {worst:.4f} over {len(rows)} plans; a policy's own plan was kept in {len(kept)} "
              f"(faster than the analyzer's by {min((1 / r['ratio_to_analyzer'] - 1 for r in kept), default=0):.1%} to "
              f"{max((1 / r['ratio_to_analyzer'] - 1 for r in kept), default=0):.1%}).", "",
              "Planning time per policy (s; median, max over cells):", "", "| policy | median | max |",
              "|---|---|---|"]
    import numpy as np

    for p in policies:
        t = [r["plan_seconds"] for r in rows if r["policy"] == p]
        lines.append(f"| {p} | {np.median(t):.2f} | {max(t):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """The command (module docstring)."""
    import argparse

    from ralp_tf.model import BUILTIN_MODELS
    from scheduler.core.schedule import _clean

    ap = argparse.ArgumentParser(prog="python -m scheduler.pss_table", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", nargs="*", default=list(BUILTIN_MODELS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES), choices=list(POLICIES))
    args = ap.parse_args(argv)
    out = Path(args.out)
    t0 = time.perf_counter()
    rows = run(args.models, args.policies, out)
    doc = {"generated_by": "python -m scheduler.pss_table", "clusters": CLUSTERS, "rows": rows,
           "seconds": time.perf_counter() - t0}
    out.mkdir(parents=True, exist_ok=True)
    (out / "pss_plans.json").write_text(json.dumps(_clean(doc), indent=1))
    (out / "pss_plans.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
