"""Where a budgeted run's CPU goes: measured CPU core-seconds per global step of every task
against the cost model's, per PSS strategy-cell of ``ralp-tf bench`` results files.

    python benchmarks/cpu_by_task.py RESULTS.json [...] [--out FILE.md] [--repredict] [--fit] [--calibration CAL.json]

A bench run on CPU budgets (``--host-cpu``) records, per repetition, ``task_cpu_s_per_step``
(the testbed's ``task_cpu_seconds()`` over the timed window: user + system seconds of each task's
process, per global step) and ``predicted_task_cpu_s_per_step``
(:func:`ralp_tf.plan.costmodel.task_cpu_seconds` of the bench's own estimate: compute at the
host's budget plus serving CPU). The table gives, per task role (workers, PS tasks, the chief),
the medians over repetitions of the mean over the tasks of that role, and the measured share of
the host budget the tasks used (``sum of task CPU / (cores x step)``). ``--repredict`` prices the
tasks with the cost model as it is now (files that hold their bench-side ``profiles``) instead of
the prediction recorded with the run.

``--fit`` also fits the colocated serving constants of :mod:`ralp_tf.plan.costmodel` on every task,
on a host that runs both a worker and a PS task, of every valid repetition (files that hold their
bench-side ``profiles``): each task's measured CPU less the model's with the four ``COLOCATED_*``
constants at 0, against the (worker step, PS task) pairs it takes part in per global step (a PS
task: N, a worker: the PS tasks it exchanges data with; one coefficient per role), the bytes and
the tensor messages it moves, least squares through 0.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fit_constant import cells, emit  # type: ignore[import-not-found]  # noqa: E402

ROLES = ("worker", "ps", "chief")
#: The constants ``--fit`` fits (:mod:`ralp_tf.plan.costmodel`, *Serving CPU*).
COLOCATED = ("COLOCATED_PS_STEP_CPU_S", "COLOCATED_WORKER_STEP_CPU_S", "COLOCATED_SERVE_CPU_S_PER_BYTE",
             "COLOCATED_MESSAGE_CPU_S")


def _role(task: str) -> str:
    """``worker0`` / ``worker:0`` -> ``worker``."""
    return re.sub(r"[:\d]+$", "", task)


def _mean_by_role(per_task: dict[str, float]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for task, value in per_task.items():
        by.setdefault(_role(task), []).append(value)
    return {role: sum(v) / len(v) for role, v in by.items()}


#: A calibration document (``--calibration``): budgeted cells are priced with its profiles.
CALIBRATION: dict[str, Any] | None = None


def _cells(path: str) -> Any:
    """:func:`fit_constant.cells` of ``path``: its PSS cells with what re-predicting them needs."""
    return cells(path, CALIBRATION)


def _current(path: str) -> dict[tuple[str, str], dict[str, float]]:
    """(cell, strategy) -> task CPU the cost model predicts now, as the recorded runs name tasks."""
    from ralp_tf.plan.costmodel import estimate
    from ralp_tf.run.remote import task_name

    out = {}
    for r in _cells(path):
        cpu = estimate(r["profile"], r["cluster"], r["plan"]).task_cpu_s
        out[(r["cell"], r["strategy"])] = {task_name(t.job, t.index): cpu[t.key] for t in r["cluster"].tasks
                                           if t.key in cpu}
    return out


def rows(path: str, repredict: bool = False) -> list[dict[str, Any]]:
    """One row per PSS strategy-cell with per-task CPU: medians over its valid repetitions."""
    current = _current(path) if repredict else {}
    with open(path) as f:
        doc = json.load(f)
    cores = doc["config"].get("host_cpu")
    out = []
    for cell in doc["cells"]:
        for name, st in cell["strategies"].items():
            runs = [r for r in st.get("runs", []) if r.get("valid") and r.get("task_cpu_s_per_step")]
            if not runs:
                continue
            measured = [_mean_by_role(r["task_cpu_s_per_step"]) for r in runs]
            predicted = [_mean_by_role(current.get((cell["key"], name), {}) if repredict
                                       else r.get("predicted_task_cpu_s_per_step") or {}) for r in runs]
            used = [sum(r["task_cpu_s_per_step"].values()) / (cores * len(r.get("host_cpu_s_per_step") or {1: 0})
                                                              * r["measured_step_s"])
                    for r in runs if cores and r.get("measured_step_s")]
            row = {"file": path, "cell": cell["key"], "strategy": name, "runs": len(runs),
                   "step_s": statistics.median(r["measured_step_s"] for r in runs),
                   "budget_used": statistics.median(used) if used else None}
            for role in ROLES:
                m = [x[role] for x in measured if role in x]
                p = [x[role] for x in predicted if role in x]
                row[role] = (statistics.median(m) if m else None, statistics.median(p) if p else None)
            out.append(row)
    return out


def fit_colocated(paths: list[str]) -> tuple[dict[str, float], int]:
    """The colocated serving constants fitted together (module docstring), and the tasks fitted:
    each constant's feature is what a task's predicted CPU gains when that constant is 1 and the
    others 0 (its pairs, bytes or messages per global step)."""
    import numpy as np

    from ralp_tf.plan import costmodel
    from ralp_tf.run.remote import task_name

    saved = {name: getattr(costmodel, name) for name in COLOCATED}
    features, targets = [], []

    def priced(row: dict[str, Any], unit: str | None) -> dict[str, float]:
        for name in COLOCATED:
            setattr(costmodel, name, 1.0 if name == unit else 0.0)
        return costmodel.estimate(row["profile"], row["cluster"], row["plan"]).task_cpu_s

    try:
        for path in paths:
            with open(path) as f:
                runs = {(c["key"], name): st.get("runs", []) for c in json.load(f)["cells"]
                        for name, st in c["strategies"].items()}
            for row in _cells(path):
                base = priced(row, None)
                units = [priced(row, name) for name in COLOCATED]
                cluster = row["cluster"]
                both = {t.host for t in cluster.ps} & {w.host for w in cluster.workers}
                tasks = [t for t in cluster.tasks if t.host in both and t.key in base]
                for run in runs[(row["cell"], row["strategy"])]:
                    measured = (run.get("task_cpu_s_per_step") or {}) if run.get("valid") else {}
                    for t in tasks:
                        if task_name(t.job, t.index) in measured:
                            features.append([unit[t.key] - base[t.key] for unit in units])
                            targets.append(measured[task_name(t.job, t.index)] - base[t.key])
    finally:
        for name, value in saved.items():
            setattr(costmodel, name, value)
    if not features:
        return {}, 0
    coef, *_ = np.linalg.lstsq(np.array(features), np.array(targets), rcond=None)
    return dict(zip(COLOCATED, (float(c) for c in coef))), len(targets)


def _cell(pair: tuple[float | None, float | None]) -> str:
    m, p = pair
    if m is None:
        return "-"
    if not p:
        return f"{m:.3f} / -"
    return f"{m:.3f} / {p:.3f} ({m / p - 1:+.0%})"


def to_markdown(table: list[dict[str, Any]]) -> str:
    lines = ["| cell | strategy | runs | s/step | worker core-s measured / predicted | PS task | chief | "
             "host budget used |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        used = f"{r['budget_used']:.0%}" if r["budget_used"] is not None else "-"
        lines.append(f"| {r['cell']} | {r['strategy']} | {r['runs']} | {r['step_s']:.3f} | {_cell(r['worker'])} | "
                     f"{_cell(r['ps'])} | {_cell(r['chief'])} | {used} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="ralp-tf bench results files (JSON)")
    ap.add_argument("--out", help="write the Markdown table here instead of stdout")
    ap.add_argument("--repredict", action="store_true", help="price the tasks with the cost model as it is now")
    ap.add_argument("--fit", action="store_true", help="also fit the COLOCATED_* serving constants (docstring)")
    ap.add_argument("--calibration", help="price budgeted cells with these calibrated profiles (fit_ring_cpu.py calibrate)")
    args = ap.parse_args(argv)
    global CALIBRATION
    if args.calibration:
        with open(args.calibration) as f:
            CALIBRATION = json.load(f)
    table = [r for path in args.results for r in rows(path, args.repredict)]
    if not table:
        print("error: no repetition in these files records task_cpu_s_per_step; run ralp-tf bench with "
              "--host-cpu (CPU budgets) from this version", file=sys.stderr)
        return 2
    text = to_markdown(table)
    if args.fit:
        fitted, tasks = fit_colocated(args.results)
        text += f"\nFitted on {tasks} tasks of colocated hosts:\n" + "".join(
            f"- {name} = {value:.3g}\n" for name, value in fitted.items())
    emit(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
