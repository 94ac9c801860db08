"""Fit the coordinator's dispatch bytes (:mod:`ralp_tf.plan.closures`, *Dispatch bytes*) on bench runs.

    python benchmarks/dispatch_bytes.py [RESULTS.json ...]   (default: every file in benchmarks/results)

Every valid PSS run of a built-in model with one step per closure whose results record the chief's
link counters gives the chief's sent bytes (the closure calls) and received bytes (their replies)
per closure per worker. Per model the median of each is taken; the request is fitted by least
squares as ``DISPATCH_BYTES + V * DISPATCH_BYTES_PER_VARIABLE`` over the models, ``V`` the variables
of the model's cached profile, and the reply as the median over all runs. Runs of fewer than
``MIN_STEPS`` timed steps are left out: their window opens after the calls of its first closures
were sent. Prints each model's medians beside the fit and the shipped constants.
No cluster starts.
"""
from __future__ import annotations

import collections
import glob
import json
import os
import statistics
import sys

import numpy as np

from ralp_tf.plan import closures
from ralp_tf.plan.profiles import CACHED_MODELS, cached_profile

MIN_STEPS = 4


def per_closure(paths: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    """Model -> (chief bytes sent, received) per closure per worker, one entry per qualifying run."""
    out: dict[str, tuple[list[float], list[float]]] = collections.defaultdict(lambda: ([], []))
    for path in paths:
        try:
            doc = json.load(open(path))
        except (OSError, ValueError):
            continue
        for cell in doc.get("cells", []) if isinstance(doc, dict) else []:
            for strategy in cell.get("strategies", {}).values():
                for run in strategy.get("runs") or []:
                    chief = (run.get("link_bytes") or {}).get("chief")
                    if (not chief or not run.get("valid") or (run.get("steps") or 0) < MIN_STEPS
                            or run.get("model") not in CACHED_MODELS
                            or (run.get("steps_per_closure") or 1) != 1):
                        continue
                    closures_run = run["steps"] * run["workers"]
                    out[run["model"]][0].append(chief["tx"] / closures_run)
                    out[run["model"]][1].append(chief["rx"] / closures_run)
    return out


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    paths = argv or sorted(glob.glob(os.path.join(here, "results", "*.json")))
    runs = per_closure(paths)
    if not runs:
        print("no run records the chief's link counters", file=sys.stderr)
        return 1
    variables = {m: cached_profile(m).num_variables for m in runs}
    models = sorted(runs, key=variables.get)
    v = np.array([variables[m] for m in models], dtype=float)
    sent = np.array([statistics.median(runs[m][0]) for m in models])
    (base, per_var), *_ = np.linalg.lstsq(np.vstack([np.ones_like(v), v]).T, sent, rcond=None)
    reply = statistics.median(x for m in models for x in runs[m][1])
    print(f"fit: request {base:.0f} + {per_var:.1f} x V bytes, reply {reply:.0f} bytes "
          f"(shipped: {closures.DISPATCH_BYTES} + {closures.DISPATCH_BYTES_PER_VARIABLE} x V, {closures.DISPATCH_REPLY_BYTES})")
    print("| model | variables | runs | request (median) | fitted | error | reply (median) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m, n, s in zip(models, v, sent):
        fitted = base + per_var * n
        print(f"| {m} | {n:.0f} | {len(runs[m][0])} | {s:.0f} | {fitted:.0f} | {fitted / s - 1:+.0%} | "
              f"{statistics.median(runs[m][1]):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
