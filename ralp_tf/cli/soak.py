"""Long-run stability: a placed run on a LocalCluster, sampling every task's resources.

``ralp-tf soak --steps 2000`` trains with the RALP plan on 2 workers and 1 PS and samples, for
every task process, its resident memory (``VmRSS``), its thread count and its open sockets
(``/proc/PID/fd`` links to ``socket:``) every ``--sample-every`` steps. Growth is measured from
the first sample after ``--warmup`` steps to the last one:
``rss_growth = (rss_last - rss_warm) / rss_warm``, and absolute growth for threads and sockets.
Writes ``benchmarks/results/soak.json`` and prints a summary.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from ralp_tf.cli.args import add_output_arg, positive_int
from ralp_tf.errors import ValidationError, check_int

__all__ = ["task_resources", "soak", "register"]


def task_resources(pid: int) -> dict[str, int]:
    """RSS bytes, threads and open sockets of a live process, from /proc."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    sockets = 0
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)).startswith("socket:"):
                sockets += 1
        except OSError:
            continue
    return {"rss_bytes": rss, "threads": threads, "sockets": sockets}


def soak(model: str = "small_cnn", *, steps: int = 2000, warmup: int = 200, sample_every: int = 50,
         workers: int = 2, ps: int = 1, batch_size: int = 32, out: str | None = None,
         step_callback: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Run the soak and return (and optionally write) its figures; ``step_callback("ralp", step)``
    after each scheduled step (progress)."""
    import tensorflow as tf

    from ralp_tf.run.launch import LocalCluster
    from ralp_tf.run.training import train

    if warmup >= steps:
        raise ValidationError(f"warmup ({warmup}) must be below steps ({steps})")
    check_int(sample_every, "sample_every")
    samples: list[dict[str, Any]] = []
    with LocalCluster(workers=workers, ps=ps) as lc:
        strategy = lc.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

        def sample(i: int) -> None:
            if step_callback:
                step_callback("ralp", i)
            if i % sample_every == 0 or i == steps - 1:
                coordinator.join()  # sample completed steps, not merely scheduled ones
                samples.append({"step": i, "time": time.time(),
                                "tasks": {t.name: task_resources(t.pid) for t in lc.tasks}})

        t0 = time.perf_counter()
        result = train(strategy, model, policy="ralp", steps=steps, warmup_steps=0, batch_size=batch_size,
                       coordinator=coordinator, on_step=sample)
        elapsed = time.perf_counter() - t0
    warm = next(s for s in samples if s["step"] >= warmup)
    last = samples[-1]
    growth = {}
    for name in last["tasks"]:
        a, b = warm["tasks"][name], last["tasks"][name]
        growth[name] = {"rss_warm_mb": a["rss_bytes"] / 1e6, "rss_last_mb": b["rss_bytes"] / 1e6,
                        "rss_growth": (b["rss_bytes"] - a["rss_bytes"]) / a["rss_bytes"],
                        "threads_growth": b["threads"] - a["threads"], "sockets_growth": b["sockets"] - a["sockets"]}
    report = {"model": model, "steps": steps, "warmup": warmup, "workers": workers, "ps": ps,
              "batch_size": batch_size, "seconds": elapsed, "final_loss": result.final_loss,
              "plan_ps_layers": sorted(result.plan.ps_layers()),
              "growth": growth, "max_rss_growth": max(g["rss_growth"] for g in growth.values()),
              "max_threads_growth": max(g["threads_growth"] for g in growth.values()),
              "max_sockets_growth": max(g["sockets_growth"] for g in growth.values()), "samples": samples}
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=2))
    return report


def register(subparsers: Any) -> None:
    """Add the ``soak`` subcommand to an argparse subparsers object (``ralp-tf soak``)."""
    p = subparsers.add_parser("soak", help="long placed run; sample task RSS, threads and sockets")
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--steps", type=positive_int, default=2000)
    p.add_argument("--warmup", type=positive_int, default=200)
    p.add_argument("--sample-every", type=positive_int, default=50)
    p.add_argument("--batch-size", type=positive_int, default=32)
    add_output_arg(p, "--out", parents=True, default="benchmarks/results/soak.json",
                   help="the report JSON (its folder is created)")
    p.set_defaults(func=_cmd, needs_loopback_shim=True)


def _cmd(args: argparse.Namespace) -> int:
    from ralp_tf.cli.progress import StepProgress

    progress = StepProgress("soak", args.steps)
    try:
        r = soak(args.model, steps=args.steps, warmup=args.warmup, sample_every=args.sample_every,
                 batch_size=args.batch_size, out=args.out, step_callback=progress.update)
    finally:
        progress.close()
    print(f"soak: {r['steps']} placed steps of {r['model']} in {r['seconds']:.0f} s; after step {r['warmup']}: "
          f"max RSS growth {100 * r['max_rss_growth']:.1f}%, threads {r['max_threads_growth']:+d}, "
          f"sockets {r['max_sockets_growth']:+d}; written to {args.out}")
    for name, g in r["growth"].items():
        print(f"  {name}: RSS {g['rss_warm_mb']:.0f} -> {g['rss_last_mb']:.0f} MB ({100 * g['rss_growth']:+.1f}%), "
              f"threads {g['threads_growth']:+d}, sockets {g['sockets_growth']:+d}")
    return 0
