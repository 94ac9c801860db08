"""Measured against predicted, for a bench run priced from ``ralp-tf calibrate`` (``bench --calibration``).

    python benchmarks/calibrated_table.py benchmarks/results/calibrated-colocated-0.3-1gbit.json
    python benchmarks/calibrated_table.py RESULTS.json --calibration OTHER.json  # "now" priced from another file

For each strategy-cell that ran: the measured step and link bytes per global step, the prediction
recorded with the run, and the prediction of the cost model as it is now, from the same profile,
calibration file and cluster (:func:`ralp_tf.bench.predictions.predictions`); bytes on the wire
(:func:`ralp_tf.plan.costmodel.wire_bytes`), as the testbed's link counters see them. Prints a
Markdown table and how many cells are within 10% (bytes) and 25% (steps). With ``--calibration``,
"now" is priced from that file instead (another calibration of the same testbed: how much the
predictions move with the calibration). No cluster starts.
"""
from __future__ import annotations

import argparse
import json
from typing import Any


def rows(path: str, calibration: str | None = None) -> list[dict[str, Any]]:
    """One row per strategy-cell of ``path`` whose status is ok, "now" priced from ``calibration``
    (default: the run's own)."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import predictions
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.plan.calibration import calibrated_profile, load_calibration
    from ralp_tf.plan.cluster import parse_bandwidth
    from ralp_tf.plan.costmodel import wire_bytes

    with open(path) as f:
        doc = json.load(f)
    config = doc["config"]
    if not config.get("calibration"):
        raise SystemExit(f"{path}: not a calibrated run (its config has no 'calibration'); run bench with --calibration")
    cal = load_calibration(calibration or config["calibration"])
    out = []
    for c in doc["cells"]:
        profile = calibrated_profile(cal, ModelProfile.from_dict(doc["profiles"][c["model"]]))
        cell = Cell(c["model"], c["workers"], c["bandwidth"], layout=c["layout"])
        now = predictions(profile, cell, parse_bandwidth(c["bandwidth"]), host_cpu=config.get("host_cpu"),
                          calibration=cal, strategies=tuple(c["strategies"]))
        for name, st in c["strategies"].items():
            if st.get("status") != "ok":
                continue
            out.append({"model": c["model"], "strategy": name, "measured_s": st["measured_step_s"],
                        "recorded_s": st["predicted_step_s"], "now_s": now[name]["step_s"],
                        "measured_bytes": st["bytes_per_step"], "recorded_bytes": st["predicted_bytes_per_step"],
                        "now_bytes": wire_bytes(now[name]["payload_bytes_per_step"])})
    return out


def error(measured: float, predicted: float) -> float:
    """``measured / predicted - 1``."""
    return measured / predicted - 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a bench results file of a --calibration run")
    parser.add_argument("--calibration", help="price 'now' from this calibration file instead of the run's")
    args = parser.parse_args()
    table = rows(args.results, args.calibration)
    print("| model | strategy | measured s/step | predicted now | err | recorded | MB/step measured | predicted now "
          "| err | recorded |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['model']} | {r['strategy']} | {r['measured_s']:.3f} | {r['now_s']:.3f} | "
              f"{error(r['measured_s'], r['now_s']):+.0%} | {r['recorded_s']:.3f} | {r['measured_bytes'] / 1e6:.2f} | "
              f"{r['now_bytes'] / 1e6:.2f} | {error(r['measured_bytes'], r['now_bytes']):+.1%} | "
              f"{r['recorded_bytes'] / 1e6:.2f} |")
    steps = sum(abs(error(r["measured_s"], r["now_s"])) <= 0.25 for r in table)
    nbytes = sum(abs(error(r["measured_bytes"], r["now_bytes"])) <= 0.10 for r in table)
    print(f"\nsteps within 25%: {steps} of {len(table)}; bytes within 10%: {nbytes} of {len(table)}")


if __name__ == "__main__":
    main()
