"""The shipped policy on held-out workloads: its objective over the exact optimum, and its latency.

``python -m scheduler.policy_eval --out DIR [--no-latency]`` writes ``DIR/policy_eval.json`` and
``DIR/policy_eval.md``:

* **HeterPS** (the shipped ``heterps`` policy, ``RL()`` as it ships: greedy decode, beam 64 and
  64 samples, no training, no polish): every built-in workload on ``cloud`` and on the fixed
  evaluation catalogs of 2, 3, 5 and 6 types (:func:`scheduler.evaluation.type_slots.evaluation_catalogs`,
  seed 0; a seeded stream no training catalog draws from), objective over the exact θ-sweep
  optimum, with the untrained rule "cheapest completion" (:func:`scheduler.evaluation.generalise.rule_placement`)
  beside it;
* **max-load** (the shipped ``maxload`` policy): every shared dnn-partitioning workload over its
  published optimum, and the harder generated ones over the exact contiguous optimum;
* **latency** (:meth:`scheduler.policy.rl.RL.decision_ms`: median of 15 greedy decodes, features
  computed, the one-off hint excluded) per workload and catalog.

Every evaluated workload is checked against the shipped policy's training set (its file's
``training.trained_on``): none may be in it.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from scheduler.core.errors import ProblemError

__all__ = ["EVAL_SEED", "heterps_rows", "maxload_rows", "latency_rows", "markdown", "main"]

#: Seed of the evaluation catalogs (:func:`scheduler.evaluation.type_slots.evaluation_catalogs`).
EVAL_SEED = 0


def _trained_on(kind: str) -> set[str]:
    from scheduler.policy.shipped import FILES, WEIGHTS_DIR, load_policy

    _, meta = load_policy(WEIGHTS_DIR / FILES[kind])
    return set(meta.get("training", {}).get("trained_on", []))


def _ratio(x: float, ref: float) -> float | None:
    return x / ref if math.isfinite(x) and ref and math.isfinite(ref) else None


def heterps_rows(names: Sequence[str], log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Every built-in in ``names`` on ``cloud`` and the evaluation catalogs (module docstring)."""
    from scheduler.core.catalogs import CLOUD
    from scheduler.solvers.exact import Exact
    from scheduler.evaluation.generalise import rule_placement
    from scheduler.policy.rl import RL
    from scheduler.evaluation.type_slots import evaluation_catalogs
    from scheduler.workloads import builtin_problem

    seen = _trained_on("heterps")
    rows = []
    for cat in [CLOUD] + evaluation_catalogs(EVAL_SEED, workloads=names):
        for name in names:
            if name in seen:
                raise AssertionError(f"{name!r} is in the shipped policy's training set")
            p = builtin_problem(name, cat)
            exact = Exact().solve(p).objective
            s = RL().solve(p)
            rows.append({"workload": name, "catalog": cat.name, "types": len(cat), "layers": p.num_decisions,
                         "exact": exact, "policy_objective": s.objective, "policy_ratio": _ratio(s.objective, exact),
                         "greedy_ratio": _ratio(s.notes["greedy_decode_objective"], exact),
                         "rule_ratio": _ratio(p.objective(rule_placement(p)), exact),
                         "constraint_met": s.constraint_met, "apply_seconds": s.solve_seconds})
            log(f"heterps {name:<13} {cat.name:<14} policy {rows[-1]['policy_ratio']} x exact "
                f"({s.solve_seconds:.1f} s)")
    return rows


def maxload_rows(log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Every shared dnn-partitioning and harder max-load workload (module docstring)."""
    from scheduler.solvers.exact import Exact
    from scheduler.core.maxload import MaxLoadProblem
    from scheduler.policy.rl import RL
    from scheduler.workloads import dnn_partitioning, load_workload
    from scheduler.workloads.hard import HARD_WORKLOADS

    seen = _trained_on("maxload")
    shared = dnn_partitioning.shared_workloads()
    if not shared:
        raise ProblemError("no shared dnn-partitioning workloads found; set RALP_SHARED_DIR")
    rows = []
    for name in list(shared) + list(HARD_WORKLOADS):
        if name in seen:
            raise AssertionError(f"{name!r} is in the shipped policy's training set")
        p = dnn_partitioning.load(shared[name]) if name in shared else load_workload(name)
        if not isinstance(p, MaxLoadProblem):
            continue
        published = dnn_partitioning.PUBLISHED_OPTIMUM.get(name)
        exact = Exact().solve(p).objective
        s = RL().solve(p)
        ref = published or exact
        rows.append({"workload": name, "groups": p.num_decisions, "reference": "published" if published else "exact",
                     "reference_value": ref, "exact": exact, "policy_objective": s.objective,
                     "policy_ratio": _ratio(s.objective, ref), "policy_ratio_to_exact": _ratio(s.objective, exact),
                     "greedy_ratio": _ratio(s.notes["greedy_decode_objective"], ref), "apply_seconds": s.solve_seconds})
        log(f"maxload {name:<26} policy {rows[-1]['policy_ratio']} x {rows[-1]['reference']}")
    return rows


def latency_rows(names: Sequence[str], repeats: int = 15) -> list[dict[str, Any]]:
    """Decision latency of the shipped policy per built-in and catalog, and per max-load workload."""
    from scheduler.core.catalogs import CLOUD
    from scheduler.policy.policy_features import exception_hint
    from scheduler.policy.rl import RL
    from scheduler.evaluation.type_slots import evaluation_catalogs
    from scheduler.workloads import builtin_problem, dnn_partitioning

    out = []
    for cat in [CLOUD] + evaluation_catalogs(EVAL_SEED, workloads=names):
        for name in names:
            p = builtin_problem(name, cat)
            t0 = time.perf_counter()
            exception_hint(p)
            out.append({"workload": name, "catalog": cat.name, "types": len(cat), "hint_ms": 1e3 * (
                time.perf_counter() - t0), "decision_ms": RL().decision_ms(p, repeats=repeats)})
    for name, path in dnn_partitioning.shared_workloads().items():
        out.append({"workload": name, "catalog": "max-load", "types": None,
                    "decision_ms": RL().decision_ms(dnn_partitioning.load(path), repeats=repeats)})
    return out


def markdown(doc: dict[str, Any]) -> str:
    """The tables of :func:`main`'s document."""

    def f(x: Any) -> str:
        return "infeasible" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)

    rows = doc.get("heterps", [])
    cats = list(dict.fromkeys(r["catalog"] for r in rows))
    types = {r["catalog"]: r["types"] for r in rows}
    names = list(dict.fromkeys(r["workload"] for r in rows))
    by = {(r["workload"], r["catalog"]): r for r in rows}
    lines = ["### Shipped HeterPS policy alone (no training, no polish) / exact optimum, every built-in held out", "",
             "| workload | " + " | ".join(f"{c} ({types[c]} types)" for c in cats) + " |", "|---|" + "---|" * len(cats)]
    for w in names:
        lines.append(f"| {w} | " + " | ".join(f(by[(w, c)]["policy_ratio"]) for c in cats) + " |")
    ok = [r for r in rows if r["policy_ratio"] is not None and r["policy_ratio"] <= 1.10]
    rule = [r for r in rows if r["rule_ratio"] is not None and r["rule_ratio"] <= 1.10]
    lines += ["", f"Within 10%: policy {len(ok)} of {len(rows)} (worst "
              f"{f(max((r['policy_ratio'] or math.inf) for r in rows)) if rows else '—'}); "
              f"the untrained rule alone {len(rule)} of {len(rows)}.", ""]
    lines += ["### Shipped max-load policy alone / published optimum (harder workloads: / exact contiguous optimum)",
              "", "| workload | classes | reference | policy alone | greedy decode only | apply s |", "|---|---|---|---|---|---|"]
    for r in doc.get("maxload", []):
        lines.append(f"| {r['workload']} | {r['groups']} | {r['reference']} | {f(r['policy_ratio'])} | "
                     f"{f(r['greedy_ratio'])} | {r['apply_seconds']:.1f} |")
    lat = doc.get("latency")
    if lat:
        lines += ["", "### Decision latency (ms per decision, median of 15 greedy decodes, features included)", "",
                  "| types | median | max |", "|---|---|---|"]
        for T in sorted({r["types"] for r in lat if r["types"]}):
            v = [r["decision_ms"] for r in lat if r["types"] == T]
            lines.append(f"| {T} | {np.median(v):.2f} | {max(v):.2f} |")
        v = [r["decision_ms"] for r in lat if r["types"] is None]
        if v:
            lines.append(f"| max-load | {np.median(v):.2f} | {max(v):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """The evaluation command (module docstring)."""
    import argparse
    import os

    from scheduler.core.schedule import _clean
    from scheduler.workloads import BUILTIN_WORKLOADS

    ap = argparse.ArgumentParser(prog="python -m scheduler.policy_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for policy_eval.json and policy_eval.md")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency measurement")
    ap.add_argument("--latency-only", action="store_true", help="only the latency (run it alone on a quiet machine)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(BUILTIN_WORKLOADS)
    doc: dict[str, Any] = {"generated_by": "python -m scheduler.policy_eval", "machine": f"{os.cpu_count()} CPUs"}
    path = out / "policy_eval.json"
    if args.latency_only and path.exists():
        doc = json.loads(path.read_text())
    t0 = time.perf_counter()
    if not args.latency_only:
        doc["heterps"] = heterps_rows(names)
        doc["maxload"] = maxload_rows()
    if not args.no_latency:
        doc["latency"] = latency_rows(names)
    doc["seconds"] = time.perf_counter() - t0
    path.write_text(json.dumps(_clean(doc), indent=1))
    (out / "policy_eval.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
