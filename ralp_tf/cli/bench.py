"""The ``ralp-tf bench`` command: :func:`register` adds it to the ``ralp-tf`` parser and
:func:`cmd_bench` runs it.

**Outputs.** ``<out>/results/<name>.json`` (rewritten after every run: every raw repetition and
the medians), and unless ``--no-report``: the Markdown tables between the markers of
``<out>/README.md`` and PNG plots in ``<out>/`` (:mod:`ralp_tf.bench.plots`). ``--json`` prints
one JSON object (a key per strategy for a single cell; schema in docs/bench.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ralp_tf.cli.args import add_output_arg, steps_per_closure
from ralp_tf.bench.config import DEFAULT_MODELS, DEFAULT_STRATEGIES, STRATEGIES, BenchError, config_from_args
from ralp_tf.bench.report import markdown_tables, strategy_json, write_report
from ralp_tf.bench.run import Bench, json_default
from ralp_tf.run.training import LOOP_OPTIMIZER, OPTIMIZERS

__all__ = ["register", "cmd_bench"]


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand to an argparse subparsers object (``ralp-tf bench``). Counts
    are validated by :func:`~ralp_tf.bench.config.config_from_args`, so every bad value gets one
    ``ralp-tf: error:`` line (exit 2)."""
    p = subparsers.add_parser(
        "bench", help="benchmark RALP vs stock PS, a scheduler plan, MWMS and Horovod on an emulated network",
        description="Run the benchmark matrix (models x workers x bandwidth, 1 PS) on an emulated cluster "
                    "(network namespaces with tc-capped links as root; uncapped loopback otherwise).")
    p.add_argument("--models", "--model", dest="models", action="append",
                   help=f"comma-separated built-in models (default {','.join(DEFAULT_MODELS)})")
    p.add_argument("--workers", action="append", help="comma-separated worker counts (default 1,2,3)")
    p.add_argument("--bandwidths", "--bandwidth", dest="bandwidths", action="append",
                   help="comma-separated link rates, e.g. 100mbit,1gbit,uncapped (the default)")
    p.add_argument("--strategies", "--strategy", dest="strategies", action="append",
                   help=f"comma-separated, from {','.join(STRATEGIES)} (default {','.join(DEFAULT_STRATEGIES)})")
    p.add_argument("--cell", action="append",
                   help="extra cell MODEL:WORKERS:BANDWIDTH[:STRATEGY+STRATEGY...] (repeatable or comma-separated), "
                        "run after the matrix; the optional strategies replace --strategies for that cell")
    p.add_argument("--repeats", type=int, default=None, help="repetitions per strategy, median reported (default 3)")
    p.add_argument("--batch", type=int, default=32, help="batch per worker (default 32)")
    p.add_argument("--steps", type=int, default=None, help="timed global steps per run (default: auto)")
    p.add_argument("--warmup", type=int, default=None, help="untimed global steps first (default: auto, 1-10: about 2 s of steps)")
    p.add_argument("--window-s", type=float, default=20.0,
                   help="auto steps: aim for this many seconds of timed steps per run (default 20)")
    p.add_argument("--max-steps", type=int, default=10, help="auto steps: at most this many (default 10)")
    p.add_argument("--min-steps", type=int, default=None, help="auto steps: at least this many (default 2)")
    p.add_argument("--quick", action="store_true",
                   help="one small cell (small_cnn, 2 workers, 1gbit, ps,ralp,allreduce, 1 repetition)")
    p.add_argument("--json", action="store_true", help="print one JSON object (a key per strategy for one cell)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="progress and result lines on stderr (default: only when stderr is a terminal and not --json)")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    add_output_arg(p, "--out-dir", kind="dir", default="benchmarks",
                   help="where results/, README.md and plots go (targets: <out-dir>/targets.json if present)")
    p.add_argument("--name", default=None, help="results file name (default: a timestamp)")
    p.add_argument("--report", dest="report", action="store_true", default=None,
                   help="write README tables and plots (default unless --quick or --json)")
    p.add_argument("--no-report", dest="report", action="store_false")
    p.add_argument("--prefix", default="rbench", help="namespace prefix of the testbed (default rbench)")
    p.add_argument("--testbed", choices=("auto", "netns", "loopback"), default="auto",
                   help="netns (root), loopback (uncapped), or auto: netns where possible (default)")
    p.add_argument("--layout", choices=("dedicated", "colocated"), default="dedicated",
                   help="hosts: dedicated (every task on a host of its own, 1 PS; default) or colocated (host i runs "
                        "worker i and PS i, the chief on host 0); every strategy runs on the same hosts")
    p.add_argument("--host-cpu", type=float, default=None, metavar="CORES",
                   help="CPU budget of every emulated host in cores (cgroup v1 quota, root; the sum over a cell's "
                        "hosts must fit this machine's cores). Default: no budgets")
    p.add_argument("--compression", default=None, choices=("fp16", "bf16"),
                   help="also run the compressed variant of each strategy that has one: ralp_<CODEC> (activations "
                        "and weights on the wire) and horovod_fp16 (hvd.Compression.fp16); MWMS has no such option")
    p.add_argument("--steps-per-closure", type=steps_per_closure, default=1, metavar="K",
                   help="PSS strategies (ps, ralp, scheduler): worker steps per closure the coordinator schedules "
                        "(a loop inside the step's tf.function; default 1), or auto: each strategy at the K the "
                        "cost model picks for its plan (the results name it). Give --steps so that a run's worker "
                        "steps (steps x workers) span several closures")
    p.add_argument("--optimizer", default=LOOP_OPTIMIZER, choices=OPTIMIZERS,
                   help="every strategy's SGD: tf_keras.optimizers.SGD (sgd, the default) or "
                        "tf_keras.optimizers.legacy.SGD (legacy-sgd: the same update, far cheaper sparse embedding "
                        "updates)")
    p.add_argument("--fuse-transfers", action="store_true",
                   help="PSS strategies: each worker step moves the variables its layers compute with as one pull "
                        "and one push per PS task instead of a message per variable (ralp_tf.place.fusion); "
                        "planned and priced so")
    p.add_argument("--floor", default="builtin", metavar="SOURCE",
                   help="the closure floor priced in the PSS predictions (ralp_tf.plan.closures): builtin (the "
                        "terms measured on this project's machine, the default), measure (run `ralp-tf floor "
                        "--workers 2 --ps 2` first, about a minute, and price what it measured), none, or the "
                        "path of a `ralp-tf floor --out` JSON")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="price every cell with what `ralp-tf calibrate --testbed` measured on the same hosts (link "
                        "rates, per-layer times on the workers' and PS tasks' devices, serving CPU, floor) instead "
                        "of the cell's link cap, a profile measured here and the fitted constants; a file of another "
                        "layout, link cap, --host-cpu or shape is refused")
    p.add_argument("--scheduler-solver", default="exact",
                   help="solver of 'scheduler': the placement policy scheduler.<NAME> (default exact)")
    p.set_defaults(func=cmd_bench, needs_loopback_shim=True)


def _strip_loopback_shim() -> None:
    """``ralp-tf`` re-executes itself with the loopback bind shim preloaded; tasks inside network
    namespaces must not inherit it (their servers would listen on 127.0.0.1 only)."""
    pre = os.environ.get("LD_PRELOAD")
    if not pre:
        return
    keep = [p for p in pre.split(":") if p and "libloopback_bind" not in p]
    if keep:
        os.environ["LD_PRELOAD"] = ":".join(keep)
    else:
        del os.environ["LD_PRELOAD"]


def cmd_bench(args: argparse.Namespace) -> int:
    """``ralp-tf bench``: validate, run the matrix, write results (and the report), print a summary
    or (``--json``) one JSON object. Exit 0 if every run was valid, 1 if some failed."""
    argv = sys.argv[sys.argv.index("bench") + 1:] if "bench" in sys.argv else []
    cfg = config_from_args(args, argv)
    _strip_loopback_shim()
    if cfg.testbed == "netns":
        from ralp_tf.testbed import netns_support

        ok, why = netns_support()
        if not ok:
            raise BenchError(why)
    from ralp_tf.bench.progress import Progress
    from ralp_tf.cli.quiet import stderr_is_tty

    show = args.progress if args.progress is not None else (stderr_is_tty() and not args.json)
    bench = Bench(cfg, Progress(quiet=not show))
    runs = sum(len(c.strategies or cfg.strategies) for c in cfg.cells)
    bench.progress.say(f"{len(cfg.cells)} cell(s), {runs} strategy run(s) x {cfg.repeats} repetition(s); "
                       f"results -> {bench.results_path}")
    bench.doc["results_file"] = str(bench.results_path)
    doc = bench.run()
    if cfg.report:
        for f in write_report(doc, cfg.out_dir):
            bench.progress.say(f"wrote {f}")
    if cfg.json_out:
        print(json.dumps(strategy_json(doc), indent=2, default=json_default))
    else:
        print(markdown_tables(doc))
        print(f"\nresults: {bench.results_path}")
    statuses = [st.get("status") for c in doc["cells"] for st in c["strategies"].values()]
    failed = any(c.get("error") for c in doc["cells"]) or any(s in ("failed", "partial") for s in statuses)
    return 1 if failed else 0
