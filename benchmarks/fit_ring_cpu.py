"""Fit the ring all-reduce's CPU under host budgets on measured Horovod and MWMS runs.

    python benchmarks/fit_ring_cpu.py calibrate --models resnet_cifar,alexnet_cifar,vgg16_cifar,ctr_dnn \\
        --cores 0.3,1 --out benchmarks/results/quota-calibration.json
    python benchmarks/fit_ring_cpu.py fit --calibration benchmarks/results/quota-calibration.json \\
        --fit A.json [B.json ...] [--check C.json ...] [--out FILE.json]

``calibrate`` measures each model's profile under each CPU quota as the bench now does
(:func:`ralp_tf.bench.quota_profile.measure_quota_profile`: unthrottled layer shares calibrated to
whole forward+backward passes timed under the quota; root and cgroup v1) and writes them.

``fit`` takes every valid, budgeted Horovod (``horovod``) and MWMS (``allreduce``) repetition of the
results files, re-predicts its step with the cost model's ring estimate
(:func:`ralp_tf.plan.costmodel.estimate_allreduce`) from the calibrated profile of its model and
budget, and grid-searches ``RING_CPU_S_PER_BYTE`` and ``RING_TENSOR_HOP_CPU_S`` per implementation and
``RING_STEP_CPU_S`` for the
least mean squared log error over the ``--fit`` files' repetitions. The report gives each
repetition's error with no ring CPU and at the fit, on the fit and the check files. The results
files' own budgeted profiles are not used: their per-layer medians were taken under the quota
(:mod:`ralp_tf.bench.quota_profile` says why they are wrong there). No cluster starts.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Iterator

from ralp_tf.bench.config import RING_IMPLEMENTATION

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fit_constant import calibrated, within_25, write_json  # type: ignore[import-not-found]  # noqa: E402

#: The ring strategies fitted (fp16 on the wire is left out), and the implementation each prices.
IMPLEMENTATION = {s: RING_IMPLEMENTATION[s] for s in ("horovod", "allreduce")}
PER_BYTE_GRID = [round(1e-10 * i, 12) for i in range(0, 61, 2)]
STEP_GRID = [0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04]
HOP_GRID = [round(5e-6 * i, 7) for i in range(0, 13)]


def calibrate(models: list[str], cores: list[float], batch: int, out: str) -> None:
    """Measure every (model, cores) and write ``{model: {cores: summary + profile}}`` to ``out``."""
    import tempfile

    from ralp_tf.bench.quota_profile import measure_quota_profile

    doc: dict[str, Any] = {"command": "python benchmarks/fit_ring_cpu.py " + " ".join(sys.argv[1:]), "batch": batch,
                           "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            for c in cores:
                q = measure_quota_profile(m, batch, c, f"{tmp}/{m}.json", group_name="ralpfit-profile")
                doc["models"].setdefault(m, {})[f"{c:g}"] = {**q.summary(), "profile": q.profile.to_dict()}
                print(f"{m} at {c:g} cores: {q.step_s:.4f} s a pass, layer medians {q.layer_sum_s:.4f} s "
                      f"(x{q.calibration:.2f})", flush=True)
    write_json(out, doc)


def repetitions(path: str, calibration: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every valid budgeted ring repetition of results file ``path`` with what re-predicting it needs."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import cell_cluster

    with open(path) as f:
        doc = json.load(f)
    budget = doc.get("config", {}).get("host_cpu")
    if not budget:
        return
    for c in doc["cells"]:
        prof = calibrated(calibration, c["model"], budget)
        if prof is None:
            print(f"note: {path}: no calibration of {c['model']} at {budget:g} cores; its cells are left out",
                  file=sys.stderr)
            continue
        cell = Cell(c["model"], c["workers"], c["bandwidth"], layout=c.get("layout", "dedicated"))
        cluster = cell_cluster(cell, cell.bandwidth_bps, budget)
        for name, st in c["strategies"].items():
            for rep in st.get("runs", []) if name in IMPLEMENTATION else []:
                if rep.get("valid") and rep.get("measured_step_s"):
                    yield {"file": path.rsplit("/", 1)[-1], "cell": c["key"], "strategy": name,
                           "repetition": rep.get("repetition"), "measured_step_s": rep["measured_step_s"],
                           "profile": prof, "cluster": cluster}


def predict(row: dict[str, Any], per_byte: dict[str, float], step_cpu: float, hop: dict[str, float]) -> float:
    """``row``'s predicted step with the ring's CPU constants set to these values."""
    from ralp_tf.plan import costmodel

    saved = dict(costmodel.RING_CPU_S_PER_BYTE), costmodel.RING_STEP_CPU_S, dict(costmodel.RING_TENSOR_HOP_CPU_S)
    costmodel.RING_CPU_S_PER_BYTE.update(per_byte)
    costmodel.RING_TENSOR_HOP_CPU_S.update(hop)
    costmodel.RING_STEP_CPU_S = step_cpu
    try:
        impl = IMPLEMENTATION[row["strategy"]]
        return costmodel.estimate_allreduce(row["profile"], row["cluster"], implementation=impl).step_s
    finally:
        costmodel.RING_CPU_S_PER_BYTE.update(saved[0])
        costmodel.RING_STEP_CPU_S = saved[1]
        costmodel.RING_TENSOR_HOP_CPU_S.update(saved[2])


def fit(rows: list[dict[str, Any]]) -> tuple[dict[str, float], float, dict[str, float]]:
    """``(per byte, per step, per tensor and hop)``: the grid values with the least mean squared log
    error over ``rows``. Each implementation's per-byte and per-hop values are searched on their own
    at each step value (they move only its own rows)."""
    best: tuple[float, dict[str, float], float, dict[str, float]] | None = None
    for step_cpu in STEP_GRID:
        per_byte, hop, loss = {}, {}, 0.0
        for strategy, impl in IMPLEMENTATION.items():
            mine = [r for r in rows if r["strategy"] == strategy]
            losses = [(sum(math.log(r["measured_step_s"] / predict(r, {impl: b}, step_cpu, {impl: h})) ** 2
                           for r in mine), b, h) for b in PER_BYTE_GRID for h in HOP_GRID]
            part, per_byte[impl], hop[impl] = min(losses)
            loss += part
        if best is None or loss < best[0]:
            best = (loss, per_byte, step_cpu, hop)
    assert best is not None
    return best[1], best[2], best[3]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/fit_ring_cpu.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("calibrate", help="measure the models' profiles under each quota")
    c.add_argument("--models", required=True)
    c.add_argument("--cores", required=True, help="comma-separated budgets, e.g. 0.3,1")
    c.add_argument("--batch", type=int, default=32)
    c.add_argument("--out", required=True)
    f = sub.add_parser("fit", help="fit the ring's CPU constants")
    f.add_argument("--calibration", required=True)
    f.add_argument("--fit", nargs="+", required=True)
    f.add_argument("--check", nargs="*", default=[])
    f.add_argument("--out")
    args = p.parse_args(argv)
    if args.command == "calibrate":
        calibrate(args.models.split(","), [float(x) for x in args.cores.split(",")], args.batch, args.out)
        return 0
    with open(args.calibration) as fh:
        calibration = json.load(fh)
    sets = {"fit": [r for x in args.fit for r in repetitions(x, calibration)],
            "check": [r for x in args.check for r in repetitions(x, calibration)]}
    per_byte, step_cpu, hop = fit(sets["fit"])
    none = {impl: 0.0 for impl in per_byte}
    report: dict[str, Any] = {"command": "python benchmarks/fit_ring_cpu.py " + " ".join(sys.argv[1:] if argv is None else argv),
                              "RING_CPU_S_PER_BYTE": per_byte, "RING_STEP_CPU_S": step_cpu,
                              "RING_TENSOR_HOP_CPU_S": hop, "rows": []}
    print("| set | file | cell | strategy | rep | measured s/step | predicted, no ring CPU | err | predicted at the fit | err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for which, rows in sets.items():
        for r in rows:
            before, after = predict(r, none, 0.0, none), predict(r, per_byte, step_cpu, hop)
            e0, e1 = r["measured_step_s"] / before - 1, r["measured_step_s"] / after - 1
            report["rows"].append({k: r[k] for k in ("file", "cell", "strategy", "repetition", "measured_step_s")}
                                  | {"set": which, "predicted_no_cpu_s": before, "predicted_s": after,
                                     "error_no_cpu": e0, "error": e1})
            print(f"| {which} | {r['file']} | {r['cell']} | {r['strategy']} | {r['repetition']} | "
                  f"{r['measured_step_s']:.3f} | {before:.3f} | {e0:+.0%} | {after:.3f} | {e1:+.0%} |")
    counts = within_25(report, sets, ("error_no_cpu", "error"), ("no_ring_cpu", "fitted"), "repetitions")
    for which, (without, fitted, n) in counts.items():
        print(f"{which}: {without} of {n} within 25% with no ring CPU, {fitted} at the fit")
    print(f"fitted: RING_CPU_S_PER_BYTE = {per_byte}, RING_STEP_CPU_S = {step_cpu:g}, RING_TENSOR_HOP_CPU_S = {hop}")
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
