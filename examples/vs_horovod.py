"""Your own model through `ralp-tf bench`: stock PS and RALP against Horovod and MultiWorkerMirroredStrategy.

    python examples/vs_horovod.py --model mypackage.models:build --workers 2 --bandwidth 1gbit
    python examples/vs_horovod.py --model small_cnn --strategies ps,ralp,allreduce --steps 2

Shows how to benchmark a model you wrote with the benchmark's Python API
(``ralp_tf.bench.run.Bench``, what ``ralp-tf bench --json`` runs): one cell (your model x
``--workers`` x ``--bandwidth``) on an emulated cluster, every strategy on the same links, the
same synthetic data and the same batch per worker: ``ps`` (stock ParameterServerStrategy),
``ralp`` (the analyzer's plan), ``allreduce`` (MultiWorkerMirroredStrategy's ring) and
``horovod`` (Horovod/gloo). ``--model`` is a built-in name or ``package.module:function``; the
module must be importable from the current folder or ``PYTHONPATH`` (each rank imports it).

The emulated network needs root (one network namespace per task, links capped with ``tc``).
Without it the bench falls back to loopback with uncapped links and TCP-payload byte counts, and
this script says so. Horovod is optional (``make horovod`` builds it): when it is missing the
bench skips it and the script prints the reason. Results go to a temporary folder (``--out_dir``
to keep them); the bench's progress lines go to stderr.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model", "small_cnn", "Your model: package.module:function that builds it, or a built-in name.")
flags.DEFINE_integer("workers", 2, "Worker tasks (one ring rank per worker for allreduce/horovod).", lower_bound=1)
flags.DEFINE_string("bandwidth", "1gbit", "Link rate of the emulated network, e.g. 100mbit, 1gbit, uncapped.")
flags.DEFINE_list("strategies", ["ps", "ralp", "allreduce", "horovod"],
                  "Strategies to compare: ps, ralp, scheduler, allreduce, horovod.")
flags.DEFINE_integer("repeats", 1, "Repetitions per strategy (the median is reported).", lower_bound=1)
flags.DEFINE_integer("steps", 3, "Timed global steps per run.", lower_bound=1)
flags.DEFINE_integer("warmup", 1, "Untimed global steps first.", lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Batch per worker.", lower_bound=1)
flags.DEFINE_enum("testbed", "auto", ["auto", "netns", "loopback"],
                  "netns (root, capped links), loopback (uncapped), or auto: netns where possible.")
flags.DEFINE_string("out_dir", None, "Keep the results file in OUT_DIR/results/ (default: a temporary folder).")


def describe_testbed(requested: str) -> str:
    """What the bench will run on, and why: the namespace testbed, or the loopback fallback."""
    from ralp_tf.testbed import netns_support

    ok, why = netns_support()
    if requested == "loopback":
        return "testbed: loopback (asked for): uncapped links, bytes are TCP payload"
    if ok:
        return "testbed: network namespaces, links capped with tc (running as root)"
    if requested == "netns":
        raise app.UsageError(f"--testbed netns is not possible here: {why}")
    return (f"testbed: loopback fallback, because the namespace testbed is not available ({why}); links are "
            "uncapped and bytes are TCP payload, so --bandwidth does not limit anything")


def run_cell(out_dir: Path) -> dict[str, Any]:
    """Run one bench cell for the flags; return ``{strategy: summary}`` (the ``--json`` schema)."""
    from ralp_tf.bench.config import BenchConfig, Cell, parse_bandwidths, parse_strategies
    from ralp_tf.bench.report import strategy_json
    from ralp_tf.bench.run import Bench

    cell = Cell(FLAGS.model, FLAGS.workers, parse_bandwidths(FLAGS.bandwidth)[0])
    cfg = BenchConfig(cells=[cell], strategies=parse_strategies(FLAGS.strategies), repeats=FLAGS.repeats,
                      batch=FLAGS.batch_size, steps=FLAGS.steps, warmup=FLAGS.warmup, testbed=FLAGS.testbed,
                      out_dir=out_dir, name="vs_horovod", report=False, command=" ".join(sys.argv))
    bench = Bench(cfg)
    doc = bench.run()
    if FLAGS.out_dir:
        print(f"results file: {bench.results_path}")
    return strategy_json(doc)


def _num(x: float | None, spec: str, scale: float = 1.0, suffix: str = "") -> str:
    return "-" if x is None else f"{x / scale:{spec}}{suffix}"


def print_table(results: dict[str, Any]) -> None:
    """One line per strategy: samples/s, speed-up over stock PS, bytes per global step; or why skipped/failed."""
    print(f"{'strategy':<11}{'status':<9}{'samples/s':>11}{'vs ps':>8}{'MB/step':>10}  note")
    for name, r in results.items():
        note = r.get("reason") or r.get("invalid_reason") or ""
        print(f"{name:<11}{r.get('status') or '-':<9}{_num(r.get('samples_per_s'), '.1f'):>11}"
              f"{_num(r.get('speedup_vs_ps'), '.2f', suffix='x'):>8}{_num(r.get('bytes_per_step'), '.2f', 1e6):>10}"
              f"  {note}")
        if name == "horovod" and r.get("status") == "skipped":
            print(f"horovod skipped: {note}")


def main(argv: list[str]) -> None:
    del argv
    from ralp_tf.errors import ValidationError
    from ralp_tf.model.builtin import resolve_model

    if ":" in FLAGS.model:  # import the module from the current folder or PYTHONPATH, here and in every rank
        sys.path.insert(0, os.getcwd())
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    try:
        resolve_model(FLAGS.model)  # fail early on a bad reference (this imports the user's module)
    except ValidationError as exc:
        raise app.UsageError(str(exc)) from None
    print(f"model {FLAGS.model}, {FLAGS.workers} workers, {FLAGS.bandwidth}, batch {FLAGS.batch_size}/worker, "
          f"{FLAGS.warmup}+{FLAGS.steps} global steps x {FLAGS.repeats}")
    print(describe_testbed(FLAGS.testbed))
    out_dir = Path(FLAGS.out_dir or tempfile.mkdtemp(prefix="ralp_vs_horovod_"))
    try:
        results = run_cell(out_dir)
    finally:
        if not FLAGS.out_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
    print_table(results)
    failed = [s for s, r in results.items() if r.get("status") in ("failed", "partial")]
    if failed:
        raise SystemExit(f"vs_horovod: runs failed for {', '.join(failed)} (see the notes above)")
    print("vs_horovod: done")


if __name__ == "__main__":
    app.run(main)
