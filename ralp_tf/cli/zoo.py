"""``ralp-tf zoo``: every ``tf_keras.applications`` model and every user shape of the zoo, profiled,
planned, placed on a LocalCluster, trained and measured against predicted bytes (:mod:`ralp_tf.zoo`).

``--models`` takes ``applications``, ``shapes``, ``sample`` (three quick ones) or model names,
comma-separated. The results JSON is rewritten after every model (``--resume`` continues a run);
the Markdown table goes to ``--out`` (``benchmarks/zoo.md``). Exit 0 when every model either
trained with its placement verified or was refused before a cluster started without a
traceback; 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from ralp_tf.cli.args import add_output_arg, non_negative_int, positive_int

__all__ = ["register", "cmd_zoo", "all_accounted_for"]


def register(subparsers: Any) -> None:
    z = subparsers.add_parser("zoo", help="profile, plan, place and train every tf_keras.applications model and the "
                                          "zoo's user shapes on a local cluster; a table of what works")
    z.add_argument("--models", default="applications,shapes",
                   help="applications, shapes, sample, or model names, comma-separated (default: both groups)")
    add_output_arg(z, "--out", default="benchmarks/zoo.md", help="the Markdown table (default benchmarks/zoo.md)")
    add_output_arg(z, "--results", default="benchmarks/results/zoo.json", help="the results JSON")
    z.add_argument("--resume", action="store_true", help="keep the models the results file already holds")
    z.add_argument("--json", action="store_true", help="print the results document")
    z.add_argument("--workers", type=positive_int, default=2)
    z.add_argument("--ps", type=non_negative_int, default=1)
    z.add_argument("--bandwidth", default="100mbit", help="the link rate the plans assume (default 100mbit)")
    z.add_argument("--batch-size", type=positive_int, default=16)
    z.add_argument("--sequence-length", type=positive_int, default=32,
                   help="length given to inputs of variable length (default 32)")
    z.add_argument("--steps", type=positive_int, default=2, help="measured steps per model (default 2)")
    z.add_argument("--timeout", type=float, default=900.0, help="seconds per model before it is stopped")
    z.set_defaults(func=cmd_zoo)


def cmd_zoo(args: argparse.Namespace) -> int:
    from ralp_tf.zoo.run import ZooConfig, markdown, run_zoo, zoo_models

    models = zoo_models([m.strip() for m in args.models.split(",") if m.strip()])
    results = Path(args.results)  # --out and --results are checked by run_command
    config = ZooConfig(workers=args.workers, ps=args.ps, bandwidth=args.bandwidth, batch_size=args.batch_size,
                       sequence_length=args.sequence_length, steps=args.steps, timeout_s=args.timeout)
    command = "ralp-tf zoo " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    doc = run_zoo(models, config, results, resume=args.resume, command=command,
                  progress=None if args.json else (lambda line: print(line, file=sys.stderr, flush=True)))
    Path(args.out).write_text("# The model zoo: what ralp_tf places, measured\n\n" + markdown(doc))
    s = doc["summary"]
    if args.json:
        print(json.dumps(doc, indent=1, default=str))
    else:
        print(f"{s['trained']} of {s['models']} trained and verified ({s['bytes_within_10pct']} within 10% of the "
              f"predicted bytes), {s['refused_before_cluster']} refused before a cluster started, "
              f"{s['failed_after_start']} failed after; table: {args.out}")
    return 0 if all_accounted_for(s) else 1


def all_accounted_for(summary: dict[str, Any]) -> bool:
    """Whether every model trained or was refused before a cluster started, with no traceback."""
    return summary["failed_after_start"] == 0 and summary["tracebacks"] == 0
