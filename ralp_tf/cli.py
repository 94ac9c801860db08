"""The ``ralp-tf`` command.

* ``ralp-tf plan --model NAME|module:function [--workers N --ps M --bandwidth 1gbit] [--json]``
* ``ralp-tf run --model NAME --workers 2 --ps 1 --steps 30 [--compare] [--json]``
* ``ralp-tf schedule ...`` / ``ralp-tf compare-schedulers`` (the scheduler package)
* ``ralp-tf bench ...`` (the emulated-network benchmark; needs root for namespaces)

Bad arguments exit with status 2 and one line naming the problem and the fix.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Sequence

from ralp_tf.errors import RalpError

_SHIM_FLAG = "RALP_TF_CLI_REEXEC"


def _int_at_least(low: int) -> Any:
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _fault(text: str) -> tuple[str, int, int]:
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("worker", "ps") or not parts[1].isdigit() or not parts[2].isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not JOB:INDEX:STEP, e.g. worker:1:10 or ps:0:17")
    return parts[0], int(parts[1]), int(parts[2])


def _bandwidth(text: str) -> float:
    from ralp_tf.cluster import parse_bandwidth

    try:
        return parse_bandwidth(text)
    except RalpError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=_positive_int, default=2, help="worker tasks (default 2)")
    p.add_argument("--ps", type=_nonneg_int, default=1, help="parameter-server tasks (default 1)")
    p.add_argument("--bandwidth", type=_bandwidth, default=None,
                   help="link rate for the cost model, e.g. 100mbit, 1gbit, uncapped (default 1gbit)")
    p.add_argument("--flops", type=float, default=None, help="FLOP/s of each task for the cost model")
    p.add_argument("--batch-size", type=_positive_int, default=32, help="batch per worker step (default 32)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ralp-tf", description="Resource-aware layer placement for TF PS training")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="profile a model, analyze it and print the plan")
    p.add_argument("--model", required=True, help="built-in name or package.module:function (runs that code)")
    _cluster_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="also write the plan JSON to this file")
    p.set_defaults(func=cmd_plan)

    r = sub.add_parser("run", help="train on a local cluster (stock PS and/or RALP) and measure it")
    r.add_argument("--model", default="alexnet_cifar")
    _cluster_args(r)
    r.add_argument("--steps", type=_positive_int, default=30)
    r.add_argument("--policy", default="ralp", help="ralp, ps, or a plan JSON file")
    r.add_argument("--compare", action="store_true", help="run stock PS and RALP side by side")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    r.add_argument("--log-dir", help="where task logs go (default: a temporary folder)")
    r.add_argument("--warmup-steps", type=_nonneg_int, default=3, help="unmeasured steps first (default 3)")
    r.add_argument("--checkpoint-dir", help="save model, optimizer and step here; a rerun resumes from it")
    r.add_argument("--checkpoint-every", type=_positive_int, default=10, help="steps between checkpoints")
    r.add_argument("--inject-fault", type=_fault, default=None, metavar="JOB:INDEX:STEP",
                   help="testing: kill task JOB:INDEX after scheduling step STEP (e.g. ps:0:17)")
    r.set_defaults(func=cmd_run)

    try:
        from scheduler import cli as scheduler_cli
    except ImportError:
        scheduler_cli = None
    if scheduler_cli is not None and hasattr(scheduler_cli, "register"):
        scheduler_cli.register(sub)
    from ralp_tf import soak

    soak.register(sub)
    try:
        from ralp_tf import bench as bench_cli
    except ImportError:
        bench_cli = None
    if bench_cli is not None and hasattr(bench_cli, "register"):
        bench_cli.register(sub)
    return parser


def _rates(args: argparse.Namespace) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    if args.bandwidth is not None:
        rates["bandwidth"] = args.bandwidth
    if args.flops is not None:
        rates["flops"] = args.flops
    return rates


def cmd_plan(args: argparse.Namespace) -> int:
    from ralp_tf.analyzer import analyze
    from ralp_tf.cluster import Cluster
    from ralp_tf.models import resolve_model
    from ralp_tf.profiler import profile

    builder = resolve_model(args.model)
    prof = profile(builder(), batch_size=args.batch_size)
    cluster = Cluster.local(args.workers, args.ps, **_rates(args))
    analysis = analyze(prof, cluster)
    if args.out:
        analysis.plan.save(args.out)
    if args.json:
        out = analysis.to_dict()
        out["profile"] = prof.to_dict()
        print(json.dumps(out, indent=2))
    else:
        print(prof.summary())
        print()
        print(analysis.report())
        print()
        print(analysis.plan.to_json())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ralp_tf.plan import Plan
    from ralp_tf.train import compare

    if args.compare:
        policies: list[Any] = ["ps", "ralp"]
    elif args.policy in ("ralp", "ps"):
        policies = [args.policy]
    else:
        policies = [Plan.load(args.policy)]
    results = compare(args.model, workers=args.workers, ps=args.ps, steps=args.steps, batch_size=args.batch_size,
                      policies=policies, seed=args.seed, log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir,
                      checkpoint_every=args.checkpoint_every, warmup_steps=args.warmup_steps,
                      fault=args.inject_fault, **_rates(args))
    out = {}
    for name, r in results.items():
        key = "baseline" if name == "ps" else name
        entry = {"bytes_per_step": r.bytes_per_step, "predicted_bytes_per_step": r.predicted_bytes_per_step,
                 "steps_per_s": r.steps_per_s, "final_loss": r.final_loss,
                 "samples_per_s": r.samples_per_s, "predicted_step_s": r.predicted_step_s,
                 "measured_step_s": r.measured_step_s, "bytes_between": r.bytes_between,
                 "total_steps": r.total_steps, "resumed_from_step": r.resumed_from_step,
                 "restored_weights_checksum": r.restored_weights_checksum,
                 "final_weights_checksum": r.final_weights_checksum, "losses": r.losses}
        if name != "ps":
            entry["plan"] = r.plan
        out[key] = entry
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_comparison(args, results)
    return 0


def _print_comparison(args: argparse.Namespace, results: dict[str, Any]) -> None:
    names = list(results)
    print(f"{args.model}: {args.workers} worker(s), {args.ps} PS, batch {args.batch_size}/worker, "
          f"{args.steps} measured steps each")
    rows = [("bytes/step (measured)", lambda r: f"{r.bytes_per_step / 1e6:.2f} MB"),
            ("bytes/step (predicted)", lambda r: f"{r.predicted_bytes_per_step / 1e6:.2f} MB"),
            ("steps/s (measured)", lambda r: f"{r.steps_per_s:.2f}"),
            ("samples/s (measured)", lambda r: f"{r.samples_per_s:.1f}"),
            ("final loss", lambda r: f"{r.final_loss:.4f}")]
    print(f"{'':<24}" + "".join(f"{n:>16}" for n in names))
    for label, fmt in rows:
        print(f"{label:<24}" + "".join(f"{fmt(results[n]):>16}" for n in names))
    if "ps" in results and "ralp" in results and results["ralp"].bytes_per_step:
        a, b = results["ps"], results["ralp"]
        print(f"RALP moves {a.bytes_per_step / b.bytes_per_step:.1f}x fewer bytes per step and runs "
              f"{b.steps_per_s / a.steps_per_s:.2f}x the steps/s of stock PS.")
    for r in results.values():
        if r.analysis:
            print(r.analysis)
    print("The analyzer plans for the link rate given (--bandwidth, default 1gbit). This run is on loopback, where "
          "the network is not the bottleneck: compare the byte counts here, and use `ralp-tf bench` for "
          "capped links.")


def _reexec_with_loopback_shim(argv: Sequence[str]) -> None:
    """Restart this command with the loopback bind shim preloaded, so the coordinator's own
    gRPC server (ParameterServerStrategy starts one) listens on 127.0.0.1 only."""
    if os.environ.get(_SHIM_FLAG) or os.environ.get("RALP_TF_NO_REEXEC"):
        return
    try:
        from ralp_tf.launch import loopback_env

        env = loopback_env()
    except RalpError:
        return
    env[_SHIM_FLAG] = "1"
    os.execve(sys.executable, [sys.executable, "-m", "ralp_tf.cli", *argv], env)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    if args.command in ("run", "soak", "bench"):
        _reexec_with_loopback_shim(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        return int(args.func(args) or 0)
    except RalpError as exc:
        print(f"ralp-tf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ralp-tf: interrupted; local cluster tasks were stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
