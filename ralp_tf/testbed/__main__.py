"""Command line for the testbed: ``python -m ralp_tf.testbed {baseline,netperf,cleanup} ...``.

* ``baseline --strategy horovod|allreduce --model alexnet_cifar --workers 2 --bandwidth 1gbit``
  builds a testbed (``worker0..N-1`` plus ``ps0``, as the PS benchmarks use), runs the baseline and
  prints its JSON record (exit status 1 when ``valid`` is false).
* ``netperf --bandwidth 100mbit [--bytes N]`` checks a link: one TCP stream worker0 -> ps0.
* ``cleanup [--prefix ralptb]`` removes namespaces and processes left by a crashed run.

``--loopback`` uses :class:`LoopbackTestbed` (no root, no caps); by default the namespace testbed
is used where possible, else loopback with a warning.
"""
from __future__ import annotations

import argparse
import json
import sys

from ralp_tf.errors import RalpError


def _testbed(args: argparse.Namespace, tasks: list[str]):
    from ralp_tf.testbed import LoopbackTestbed, make_testbed

    if args.loopback:
        return LoopbackTestbed(tasks, args.bandwidth, prefix=args.prefix, ignore_bandwidth=True)
    return make_testbed(tasks, args.bandwidth, prefix=args.prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ralp_tf.testbed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("baseline", help="run Horovod or MultiWorkerMirroredStrategy on a testbed")
    b.add_argument("--strategy", required=True, choices=["horovod", "allreduce"])
    b.add_argument("--model", default="alexnet_cifar")
    b.add_argument("--workers", type=int, default=2)
    b.add_argument("--batch", type=int, default=32, help="batch per worker")
    b.add_argument("--steps", type=int, default=10)
    b.add_argument("--warmup", type=int, default=3)
    b.add_argument("--timeout", type=float, default=900)
    b.add_argument("--log", default=None, help="append every task's output to this file")
    n = sub.add_parser("netperf", help="measure one link")
    n.add_argument("--bytes", type=int, default=50_000_000)
    n.add_argument("--seconds", type=float, default=20)
    for p in (b, n):
        p.add_argument("--bandwidth", default="1gbit", help="100mbit, 1gbit, 10gbit or uncapped")
        p.add_argument("--prefix", default="ralptb")
        p.add_argument("--loopback", action="store_true", help="use LoopbackTestbed (no root, no caps)")
    c = sub.add_parser("cleanup", help="remove leftovers of crashed testbeds")
    c.add_argument("--prefix", default="ralptb")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "cleanup":
            from ralp_tf.testbed import cleanup_stale

            print(json.dumps({"removed": cleanup_stale(args.prefix)}))
            return 0
        if args.cmd == "netperf":
            from ralp_tf.testbed.netperf import measure

            with _testbed(args, ["worker0", "ps0"]) as tb:
                print(json.dumps(measure(tb, "worker0", "ps0", args.bytes, args.seconds)))
            return 0
        if args.workers < 1:
            raise RalpError(f"--workers must be at least 1, got {args.workers}")
        workers = [f"worker{i}" for i in range(args.workers)]
        with _testbed(args, workers + ["ps0"]) as tb:
            if args.strategy == "horovod":
                from ralp_tf.testbed.horovod_job import run_horovod as run
            else:
                from ralp_tf.testbed.mwms_job import run_mwms as run
            result = run(tb, args.model, workers, batch=args.batch, steps=args.steps, warmup=args.warmup,
                         timeout=args.timeout, log_path=args.log)
        print(json.dumps(result))
        return 0 if result["valid"] else 1
    except RalpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
