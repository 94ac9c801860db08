"""Fit the cost model's overlap factor on measured bench runs and check it on other runs.

    python benchmarks/fit_overlap.py --fit A.json [B.json ...] [--check C.json ...] [--out FILE.json]

The factor is ``PULL_PUSH_OVERLAP`` of :mod:`ralp_tf.plan.costmodel` (*Overlap*). Each results file
must hold the bench-side profiles (``profiles``, written by ``ralp-tf bench`` since the overlap was
priced). Every valid PSS strategy-cell is re-predicted with the current cost model from the run's
own profile (scaled as the bench scales it), cluster (its CPU budgets, or this machine's cores shared
by every host), floor, steps per closure, optimizer and the plan it ran, for each factor on a grid
of 0, 0.05, ..., 1. The fitted factor minimises the mean squared log error
(``log(measured / predicted)``) over the ``--fit`` files' cells; the report gives every cell's error
with the factor at 0 and at the fit, on the fit and the check files. No cluster starts.

The re-predictions use the bench's profile, not the coordinator's own, so a cell's error here can
differ from its ``step_error`` in the results file by the two profiles' measurement noise.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Iterator

GRID = [round(0.05 * i, 2) for i in range(21)]
PSS = ("ps", "ralp", "ralp_nosplit", "ralp_split", "scheduler")


def _floor(doc: dict[str, Any]) -> Any:
    from ralp_tf.bench.config import floor_terms
    from ralp_tf.plan.closures import FloorTerms

    source = doc["config"].get("floor", "builtin")
    if source == "measure":
        return FloorTerms(**doc["floor"]["terms"])
    return floor_terms(source)


def cells(path: str) -> Iterator[dict[str, Any]]:
    """Every valid PSS strategy-cell of results file ``path``, with what re-predicting it needs."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import cell_cluster, compute_scale
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.plan.plans import Plan

    with open(path) as f:
        doc = json.load(f)
    if "profiles" not in doc:
        raise SystemExit(f"error: {path} holds no bench-side profiles ('profiles'); rerun it with this ralp-tf bench")
    cfg, floor = doc["config"], _floor(doc)
    for c in doc["cells"]:
        cell = Cell(c["model"], c["workers"], c["bandwidth"], layout=c.get("layout", "dedicated"))
        budget = cfg.get("host_cpu")
        prof = ModelProfile.from_dict(doc["profiles"][c["model"]]).with_optimizer(cfg.get("optimizer", "sgd"))
        prof = prof.scaled_compute(compute_scale(cell.workers, budget))
        for name, st in c["strategies"].items():
            if name not in PSS or not st.get("valid") or not st.get("measured_step_s"):
                continue
            run = st["runs"][0]
            cluster = cell_cluster(cell, cell.bandwidth_bps, budget)
            cluster = cluster if budget else cluster.with_shared_cores(float(doc["machine"]["cpus"]))
            cluster = cluster.with_closures(run.get("steps_per_closure") or 1, floor)
            plan = Plan.from_dict(run["plan"]) if run.get("plan") else None
            yield {"file": path, "cell": c["key"], "layout": cell.layout, "strategy": name,
                   "measured_step_s": st["measured_step_s"], "profile": prof, "cluster": cluster, "plan": plan}


def predict(row: dict[str, Any], factor: float) -> float:
    """``row``'s predicted seconds per global step with the overlap factor at ``factor``."""
    from ralp_tf.plan import costmodel

    saved = costmodel.PULL_PUSH_OVERLAP
    costmodel.PULL_PUSH_OVERLAP = factor
    try:
        return costmodel.estimate(row["profile"], row["cluster"], row["plan"]).step_s
    finally:
        costmodel.PULL_PUSH_OVERLAP = saved


def fit(rows: list[dict[str, Any]]) -> tuple[float, list[float]]:
    """The grid factor with the least mean squared log error over ``rows``, and every grid point's."""
    losses = []
    for factor in GRID:
        logs = [math.log(r["measured_step_s"] / predict(r, factor)) for r in rows]
        losses.append(sum(x * x for x in logs) / len(logs) if logs else math.inf)
    return GRID[min(range(len(GRID)), key=losses.__getitem__)], losses


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/fit_overlap.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--fit", nargs="+", required=True, help="results files the factor is fitted on")
    p.add_argument("--check", nargs="*", default=[], help="results files they are checked on")
    p.add_argument("--out", help="write the report as JSON here too")
    args = p.parse_args(argv)
    sets = {"fit": [r for f in args.fit for r in cells(f)], "check": [r for f in args.check for r in cells(f)]}
    factor, losses = fit(sets["fit"])
    report: dict[str, Any] = {"command": "python benchmarks/fit_overlap.py " + " ".join(sys.argv[1:] if argv is None else argv),
                              "factor": factor, "loss_by_factor": dict(zip(GRID, losses))}
    print("| set | file | cell | strategy | measured s/step | predicted at 0 | err | predicted at fit | err |")
    print("|---|---|---|---|---|---|---|---|---|")
    report["rows"] = []
    for which, rows in sets.items():
        for r in rows:
            before, after = predict(r, 0.0), predict(r, factor)
            e0, e1 = r["measured_step_s"] / before - 1, r["measured_step_s"] / after - 1
            report["rows"].append({"set": which, "file": r["file"], "cell": r["cell"], "strategy": r["strategy"],
                                   "measured_step_s": r["measured_step_s"], "predicted_unoverlapped_s": before,
                                   "predicted_s": after, "error_unoverlapped": e0, "error": e1})
            print(f"| {which} | {r['file'].rsplit('/', 1)[-1]} | {r['cell']} | {r['strategy']} | {r['measured_step_s']:.4f} "
                  f"| {before:.4f} | {e0:+.0%} | {after:.4f} | {e1:+.0%} |")
    for which in sets:
        rows = [x for x in report["rows"] if x["set"] == which]
        if rows:
            within = [sum(abs(x[k]) <= 0.25 for x in rows) for k in ("error_unoverlapped", "error")]
            print(f"{which}: {within[0]} of {len(rows)} within 25% unoverlapped, {within[1]} with the fitted factor")
            report[f"{which}_within_25"] = {"unoverlapped": within[0], "fitted": within[1], "cells": len(rows)}
    print(f"fitted: PULL_PUSH_OVERLAP = {factor}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
