"""Re-predict every strategy-cell of budgeted bench runs with the cost model as it is now.

    python benchmarks/repredict.py --calibration benchmarks/results/quota-calibration.json \\
        RESULTS.json [...] [--out FILE.md]

For each valid strategy-cell (PSS strategies with the plan each ran, Horovod and MWMS with the ring
estimate and its CPU), the median measured step over its repetitions against the step the cost
model predicts now, from the model's profile calibrated under the run's budget
(``benchmarks/fit_ring_cpu.py calibrate``; files without a budget use their own profiles), next to
the prediction recorded with the run. Prints a Markdown table and the count within 25%. No
cluster starts.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fit_constant import cells, emit  # type: ignore[import-not-found]  # noqa: E402
from fit_ring_cpu import IMPLEMENTATION, repetitions  # type: ignore[import-not-found]  # noqa: E402


def rows(path: str, calibration: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per valid strategy-cell of ``path``: measured, recorded and current predictions."""
    from ralp_tf.plan.costmodel import estimate, estimate_allreduce

    with open(path) as f:
        doc = json.load(f)
    recorded = {(c["key"], name): st for c in doc["cells"] for name, st in c["strategies"].items()}
    out = []
    for r in cells(path, calibration):
        st = recorded[(r["cell"], r["strategy"])]
        out.append({"cell": r["cell"], "strategy": r["strategy"], "measured_s": st["measured_step_s"],
                    "recorded_s": st.get("predicted_step_s"),
                    "now_s": estimate(r["profile"], r["cluster"], r["plan"]).step_s})
    ring: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in repetitions(path, calibration):
        ring.setdefault((r["cell"], r["strategy"]), []).append(r)
    for (cell, strategy), reps in ring.items():
        st = recorded[(cell, strategy)]
        if not st.get("valid"):
            continue
        now = estimate_allreduce(reps[0]["profile"], reps[0]["cluster"], implementation=IMPLEMENTATION[strategy]).step_s
        out.append({"cell": cell, "strategy": strategy, "measured_s": statistics.median(x["measured_step_s"] for x in reps),
                    "recorded_s": st.get("predicted_step_s"), "now_s": now})
    for row in out:
        row["file"] = path.rsplit("/", 1)[-1]
    return out


def to_markdown(table: list[dict[str, Any]]) -> str:
    def err(measured: float, predicted: float | None) -> str:
        return f"{measured / predicted - 1:+.0%}" if predicted else "-"

    lines = ["| file | cell | strategy | measured s/step | recorded prediction | err | predicted now | err |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        rec = f"{r['recorded_s']:.3f}" if r["recorded_s"] else "-"
        lines.append(f"| {r['file']} | {r['cell']} | {r['strategy']} | {r['measured_s']:.3f} | {rec} | "
                     f"{err(r['measured_s'], r['recorded_s'])} | {r['now_s']:.3f} | {err(r['measured_s'], r['now_s'])} |")
    within = [sum(1 for r in table if r[k] and abs(r["measured_s"] / r[k] - 1) <= 0.25) for k in ("recorded_s", "now_s")]
    lines += ["", f"Within 25% of the measured step: {within[0]} of {len(table)} as recorded, {within[1]} now."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="ralp-tf bench results files that hold their profiles")
    ap.add_argument("--calibration", required=True, help="fit_ring_cpu.py calibrate's file")
    ap.add_argument("--out", help="write the Markdown table here instead of stdout")
    args = ap.parse_args(argv)
    with open(args.calibration) as f:
        calibration = json.load(f)
    emit(to_markdown([r for path in args.results for r in rows(path, calibration)]), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
