"""Steps per closure, A/B on one emulated cluster: one PSS plan run at each ``--k`` in turn.

    sudo python benchmarks/closure_ab.py --model ctr_dnn --workers 2 --bandwidth 100mbit \
        --plan PLAN.json --k sgd:1,legacy-sgd:1,legacy-sgd:32 --rounds 2 --steps 100 --warmup 16 --out benchmarks/results/closure-ab.json

Builds one network-namespace testbed (as ``ralp-tf bench`` does: a host per task, 1 PS, tc-capped
links; needs root), then runs :func:`ralp_tf.testbed.ps_job.run_ps` with the same plan file for
every optimizer and K of ``--k``, interleaved over ``--rounds`` rounds, so the runs differ in optimizer and K only (the bench's
own ``ralp`` strategy plans on every run from measured layer times, which a loaded machine can
change). ``--steps`` and ``--warmup`` are global steps (``workers`` worker steps each). Writes
every record and the per-variant medians of samples/s to ``--out``; the namespaces are deleted at the end,
also on failure.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    """Run the A/B and print the per-variant medians (samples/s, seconds and wire bytes per global step)."""
    from ralp_tf.bench.config import MEM_PER_TASK_GIB, Cell
    from ralp_tf.testbed import Testbed
    from ralp_tf.testbed.ps_job import run_ps

    p = argparse.ArgumentParser(prog="benchmarks/closure_ab.py")
    p.add_argument("--model", default="ctr_dnn")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--bandwidth", default="100mbit")
    p.add_argument("--plan", required=True, help="plan JSON file every run uses (or 'ps' for stock PSS)")
    p.add_argument("--k", default="1,32", help="comma-separated steps per closure, each K or OPTIMIZER:K "
                                                 "(e.g. sgd:1,legacy-sgd:1,legacy-sgd:32; K alone: --optimizer)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=16)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--prefix", default="rbab")
    p.add_argument("--optimizer", default="sgd", help="the loop's SGD: sgd or legacy-sgd")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    variants = [(item.split(":")[0], int(item.split(":")[1])) if ":" in item else (args.optimizer, int(item))
                for item in args.k.split(",")]
    cell = Cell(args.model, args.workers, args.bandwidth)
    tb = Testbed(cell.tasks, args.bandwidth, prefix=args.prefix, mem_per_task_gib=MEM_PER_TASK_GIB, hosts=cell.hosts)
    records: list[dict[str, Any]] = []
    started = time.time()
    tb.start()
    try:
        for rnd in range(args.rounds):
            for opt, k in variants:
                rec = run_ps(tb, args.model, args.plan, workers=args.workers, ps=1, batch=args.batch, steps=args.steps,
                             warmup=args.warmup, steps_per_closure=k, optimizer=opt)
                rec.update(round=rnd, k=k, variant=f"{opt}:{k}")
                records.append(rec)
                print(f"round {rnd} {opt} K={k}: {rec.get('samples_per_s')} samples/s, valid={rec.get('valid')}",
                      file=sys.stderr, flush=True)
    finally:
        tb.close()
    summary = {}
    for opt, k in variants:
        name = f"{opt}:{k}"
        ok = [r for r in records if r["variant"] == name and r.get("valid")]
        summary[name] = {key: statistics.median(r[key] for r in ok) if ok else None
                           for key in ("samples_per_s", "measured_step_s", "predicted_step_s", "bytes_per_step",
                                       "predicted_bytes_per_step")}
        summary[name]["samples_per_s_all"] = [r["samples_per_s"] for r in ok]
    doc = {"command": "python benchmarks/closure_ab.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "started": time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(started)), "wall_s": time.time() - started,
           "summary": summary, "runs": records}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
