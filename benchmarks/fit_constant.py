"""Fit one constant of the cost model on measured bench runs and check it on other runs.

    python benchmarks/fit_constant.py --fit A.json [B.json ...] [--check C.json ...] [--out FILE.json]
        [--constant PULL_PUSH_OVERLAP|RPC_FIXED_S] [--grid V1,V2,...] [--baseline V] [--calibration CAL.json]

The constant is a module attribute of :mod:`ralp_tf.plan.costmodel`: ``PULL_PUSH_OVERLAP`` (*Overlap*;
the default, on the grid 0, 0.05, ..., 1) or ``RPC_FIXED_S`` (the CPU seconds of one further message
at each end; default grid 0 to 500 us). Each results file must hold the bench-side profiles
(``profiles``, written by ``ralp-tf bench`` since the overlap was priced). Every valid PSS
strategy-cell is re-predicted with the current cost model from the run's own profile (scaled as the
bench scales it; under a budget, the ``--calibration`` profile when it has one), cluster (its CPU budgets, or this machine's cores shared by every host), floor,
steps per closure, optimizer and the plan it ran, for each value on the grid. The fitted value
minimises the mean squared log error (``log(measured / predicted)``) over the ``--fit`` files'
cells; the report gives every cell's error at a baseline (``--baseline``, default the shipped value)
and at the fit, on the fit and the check files. No cluster starts.

The re-predictions use the bench's profile, not the coordinator's own, so a cell's error here can
differ from its ``step_error`` in the results file by the two profiles' measurement noise.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Iterable, Iterator

GRIDS: dict[str, list[float]] = {
    "PULL_PUSH_OVERLAP": [round(0.05 * i, 2) for i in range(21)],
    "RPC_FIXED_S": [round(25e-6 * i, 6) for i in range(21)],
}
PSS = ("ps", "ralp", "ralp_nosplit", "ralp_split", "scheduler")


def _floor(doc: dict[str, Any]) -> Any:
    from ralp_tf.bench.config import floor_terms
    from ralp_tf.plan.closures import FloorTerms

    source = doc["config"].get("floor", "builtin")
    if source == "measure":
        return FloorTerms(**doc["floor"]["terms"])
    return floor_terms(source)


def calibrated(calibration: dict[str, Any] | None, model: str, budget: float | None) -> Any:
    """The profile of ``model`` under ``budget`` cores in a calibration file's document
    (``python benchmarks/fit_ring_cpu.py calibrate``), or None."""
    from ralp_tf.model.profiles import ModelProfile

    measured = (calibration or {}).get("models", {}).get(model, {}).get(f"{budget:g}") if budget else None
    return ModelProfile.from_dict(measured["profile"]) if measured else None


def cells(path: str, calibration: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every valid PSS strategy-cell of results file ``path``, with what re-predicting it needs.
    With ``calibration`` (a calibration document) a budgeted cell is priced with its model's profile
    calibrated under that budget instead of the results file's own (whose layer medians were taken
    under the quota, before the bench calibrated them: :mod:`ralp_tf.bench.quota_profile`)."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import cell_cluster, compute_scale
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.plan.plans import Plan

    with open(path) as f:
        doc = json.load(f)
    cfg, floor = doc["config"], _floor(doc)
    budget = cfg.get("host_cpu")
    for c in doc["cells"]:
        cell = Cell(c["model"], c["workers"], c["bandwidth"], layout=c.get("layout", "dedicated"))
        prof = calibrated(calibration, c["model"], budget)
        if prof is None and c["model"] not in doc.get("profiles", {}):
            raise SystemExit(f"error: {path} holds no bench-side profile of {c['model']} ('profiles') and no "
                             f"calibration covers it; rerun it with this ralp-tf bench or pass --calibration")
        prof = prof or ModelProfile.from_dict(doc["profiles"][c["model"]])
        prof = prof.with_optimizer(cfg.get("optimizer", "sgd"))
        prof = prof.scaled_compute(compute_scale(cell.workers, budget))
        base = cell_cluster(cell, cell.bandwidth_bps, budget)
        base = base if budget else base.with_shared_cores(float(doc["machine"]["cpus"]))
        for name, st in c["strategies"].items():
            if name not in PSS or not st.get("valid") or not st.get("measured_step_s"):
                continue
            run = st["runs"][0]
            cluster = base.with_closures(run.get("steps_per_closure") or 1, floor)
            plan = Plan.from_dict(run["plan"]) if run.get("plan") else None
            yield {"file": path, "cell": c["key"], "layout": cell.layout, "strategy": name,
                   "measured_step_s": st["measured_step_s"], "profile": prof, "cluster": cluster, "plan": plan}


def shipped(constant: str) -> float:
    """The value ``constant`` has in :mod:`ralp_tf.plan.costmodel` as shipped."""
    from ralp_tf.plan import costmodel

    return float(getattr(costmodel, constant))


def predict(row: dict[str, Any], constant: str, value: float) -> float:
    """``row``'s predicted seconds per global step with ``constant`` at ``value``."""
    from ralp_tf.plan import costmodel

    saved = getattr(costmodel, constant)
    setattr(costmodel, constant, value)
    try:
        return costmodel.estimate(row["profile"], row["cluster"], row["plan"]).step_s
    finally:
        setattr(costmodel, constant, saved)


def fit(rows: list[dict[str, Any]], constant: str, grid: list[float]) -> tuple[float, list[float]]:
    """The grid value with the least mean squared log error over ``rows``, and every grid point's."""
    losses = []
    for value in grid:
        logs = [math.log(r["measured_step_s"] / predict(r, constant, value)) for r in rows]
        losses.append(sum(x * x for x in logs) / len(logs) if logs else math.inf)
    return grid[min(range(len(grid)), key=losses.__getitem__)], losses


def _grid(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--grid takes comma-separated numbers, e.g. 0,1e-4,2e-4; got {text!r}")
    if not values or any(v < 0 or not math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"--grid needs one or more finite values >= 0; got {text!r}")
    return values


def within_25(report: dict[str, Any], sets: Iterable[str], errors: tuple[str, str], names: tuple[str, str],
              unit: str) -> dict[str, tuple[int, int, int]]:
    """Per set of ``report["rows"]`` (each row's ``set``): how many rows have ``|errors[0]|`` and
    ``|errors[1]|`` within 25%, and how many rows; also stored as ``report["<set>_within_25"] =
    {names[0]: .., names[1]: .., unit: ..}``. Sets without rows are left out."""
    out = {}
    for which in sets:
        rows = [x for x in report["rows"] if x["set"] == which]
        if rows:
            first, second = (sum(abs(x[k]) <= 0.25 for x in rows) for k in errors)
            out[which] = (first, second, len(rows))
            report[f"{which}_within_25"] = {names[0]: first, names[1]: second, unit: len(rows)}
    return out


def write_json(path: str, doc: Any) -> None:
    """``doc`` as indented JSON at ``path``, with a final newline."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def emit(text: str, out: str | None) -> None:
    """``text`` written to the file ``out``, or to standard output when ``out`` is None."""
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/fit_constant.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--fit", nargs="+", required=True, help="results files the constant is fitted on")
    p.add_argument("--check", nargs="*", default=[], help="results files they are checked on")
    p.add_argument("--out", help="write the report as JSON here too")
    p.add_argument("--constant", choices=sorted(GRIDS), default="PULL_PUSH_OVERLAP", help="the constant to fit")
    p.add_argument("--grid", type=_grid, help="comma-separated values to try (default: the constant's grid)")
    p.add_argument("--baseline", type=float, help="the value the report compares the fit with (default: the shipped value)")
    p.add_argument("--calibration", help="price budgeted cells with these calibrated profiles (fit_ring_cpu.py calibrate)")
    args = p.parse_args(argv)
    calibration = json.load(open(args.calibration)) if args.calibration else None
    constant, grid = args.constant, args.grid or GRIDS[args.constant]
    as_shipped = shipped(constant)
    base = as_shipped if args.baseline is None else args.baseline
    sets = {"fit": [r for f in args.fit for r in cells(f, calibration)],
            "check": [r for f in args.check for r in cells(f, calibration)]}
    value, losses = fit(sets["fit"], constant, grid)
    report: dict[str, Any] = {"command": "python benchmarks/fit_constant.py " + " ".join(sys.argv[1:] if argv is None else argv),
                              "constant": constant, "shipped": as_shipped, "baseline": base, "fitted": value,
                              "loss_by_value": dict(zip(grid, losses))}
    print(f"| set | file | cell | strategy | measured s/step | predicted at {base:g} | err | predicted at {value:g} | err |")
    print("|---|---|---|---|---|---|---|---|---|")
    report["rows"] = []
    for which, rows in sets.items():
        for r in rows:
            before, after = predict(r, constant, base), predict(r, constant, value)
            e0, e1 = r["measured_step_s"] / before - 1, r["measured_step_s"] / after - 1
            report["rows"].append({"set": which, "file": r["file"], "cell": r["cell"], "strategy": r["strategy"],
                                   "measured_step_s": r["measured_step_s"], "predicted_baseline_s": before,
                                   "predicted_s": after, "error_baseline": e0, "error": e1})
            print(f"| {which} | {r['file'].rsplit('/', 1)[-1]} | {r['cell']} | {r['strategy']} | {r['measured_step_s']:.4f} "
                  f"| {before:.4f} | {e0:+.0%} | {after:.4f} | {e1:+.0%} |")
    counts = within_25(report, sets, ("error_baseline", "error"), ("baseline", "fitted"), "cells")
    for which, (at_base, at_fit, n) in counts.items():
        print(f"{which}: {at_base} of {n} within 25% at {base:g}, {at_fit} at the fitted {value:g}")
    print(f"fitted: {constant} = {value:g} (shipped {as_shipped:g})")
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
