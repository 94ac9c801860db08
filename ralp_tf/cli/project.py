"""``ralp-tf project`` and ``ralp-tf provision``: scale on paper, with the one cost model.

* ``project`` prints the predicted grid of ``benchmarks/projection.md``
  (:mod:`ralp_tf.plan.projection`): models x 2-64 GPU hosts x link rates x stock PSS, ralp_tf's
  plan and the ring, and a row set with CPU-only PS hosts (``--ps-host-ratio``, N/4 by default;
  0 leaves it out). ``--json`` prints the rows as a JSON list (fields ``model``, ``hosts``,
  ``ps_hosts``, ``link_bps``, ``strategy``, ``samples_per_s``, ``max_link_bytes``, ``plan``,
  ``vs_ring``, ``step_s``, ``bottleneck``, ``batch_size``, ``gpu_flops``, ``host_cpu_flops``);
  ``--markdown`` (the default) the tables. ``--out FILE`` writes there instead of stdout.
* ``provision`` recommends how many CPU-only PS hosts to add to ``--workers`` GPU hosts, given
  prices per hour (:mod:`ralp_tf.plan.provisioning`): best samples per dollar, and with
  ``--throughput`` the cheapest count that meets it (exit 3 when none does). Prices that are not
  positive numbers are refused (exit 2).

Both use the projection's cluster (GPU workers at ``--gpu-flops``, PS compute at
``--host-cpu-flops``) and the models' profiles as data: no TensorFlow is imported.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from ralp_tf.cli.args import add_output_arg, bandwidth, non_negative_int, positive_int
from ralp_tf.cli.calibrate import add_calibration_arg, read_calibration
from ralp_tf.errors import CommandFailed

__all__ = ["register", "cmd_project", "cmd_provision"]


def _listed(convert: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """An argparse type: a comma-separated list of values of ``convert``."""

    def parse(text: str) -> list[Any]:
        items = [t for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("give at least one value, e.g. 2,4,8")
        return [convert(t.strip()) for t in items]

    parse.__name__ = f"list of {getattr(convert, '__name__', 'values')}"
    return parse


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 4:
        raise argparse.ArgumentTypeError(f"must be between 0 and 4 CPU-only PS hosts per worker host, got {value}")
    return value


def _rate_args(parser: argparse.ArgumentParser) -> None:
    from ralp_tf.plan.projection import GPU_FLOPS, HOST_CPU_FLOPS

    parser.add_argument("--gpu-flops", type=float, default=GPU_FLOPS,
                        help=f"sustained FLOP/s of a GPU worker (default {GPU_FLOPS:g})")
    parser.add_argument("--host-cpu-flops", type=float, default=HOST_CPU_FLOPS,
                        help=f"FLOP/s of a host's CPU for PS compute (default {HOST_CPU_FLOPS:g})")


def register(subparsers: Any) -> None:
    """Add ``project`` and ``provision`` to an argparse subparsers object."""
    from ralp_tf.plan.projection import MODELS, PS_HOST_RATIO

    p = subparsers.add_parser("project", help="predicted samples/s and bytes per host link, 2-64 GPU hosts: stock "
                                              "PSS, ralp_tf's plan, ring all-reduce (benchmarks/projection.md)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    out.add_argument("--markdown", action="store_true", help="print the Markdown tables (default)")
    p.add_argument("--models", type=_listed(str), default=list(MODELS), help=f"comma list (default {','.join(MODELS)})")
    p.add_argument("--hosts", type=_listed(positive_int), default=None, help="GPU host counts (default 2,4,8,16,32,64)")
    p.add_argument("--bandwidths", type=_listed(bandwidth), default=None,
                   help="link rates (default 10gbit,25gbit,100gbit)")
    p.add_argument("--ps-host-ratio", type=_ratio, default=PS_HOST_RATIO,
                   help=f"CPU-only PS hosts per GPU host in the second row set (default {PS_HOST_RATIO}; 0: none)")
    _rate_args(p)
    add_calibration_arg(p, default_note=": here the workers' and PS tasks' measured FLOP rates stand for "
                                        "--gpu-flops and --host-cpu-flops, and its fastest host link for --bandwidths "
                                        "(flags given win)")
    add_output_arg(p, "--out", help="write to this file instead of stdout")
    p.set_defaults(func=cmd_project)

    v = subparsers.add_parser("provision", help="how many CPU-only PS hosts to add to GPU worker hosts: best "
                                                "samples per dollar, or the cheapest meeting --throughput")
    v.add_argument("--model", required=True, help=f"one of {', '.join(MODELS)}")
    v.add_argument("--workers", type=positive_int, required=True, help="GPU worker hosts (each with a PS task)")
    v.add_argument("--bandwidth", type=bandwidth, required=True, help="link rate of every host, e.g. 25gbit")
    v.add_argument("--worker-price", type=float, required=True, help="dollars per hour of a GPU worker host")
    v.add_argument("--ps-host-price", type=float, required=True, help="dollars per hour of a CPU-only PS host")
    v.add_argument("--throughput", type=float, default=None, help="samples/s to meet at the lowest cost")
    v.add_argument("--max-ps-hosts", type=non_negative_int, default=None,
                   help="most CPU-only PS hosts to consider (default: as many as worker hosts)")
    _rate_args(v)
    v.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    v.set_defaults(func=cmd_provision)


def cmd_project(args: argparse.Namespace) -> int:
    """Print (or write to ``--out``) the projection rows as JSON or Markdown."""
    from ralp_tf.plan import projection

    profiles = [projection.model_profile(name) for name in args.models]
    grid = {"hosts": args.hosts or projection.HOSTS, "bandwidths_bps": args.bandwidths or projection.BANDWIDTHS_BPS,
            "gpu_flops": args.gpu_flops, "host_cpu_flops": args.host_cpu_flops}
    cal = read_calibration(args)
    if cal is not None:
        grid.update(_calibrated_rates(cal, args))
    rows = projection.project(profiles, **grid)
    if args.ps_host_ratio > 0:
        rows += projection.project(profiles, ps_host_ratio=args.ps_host_ratio, **grid)
    text = (json.dumps(projection.rows_json(rows), indent=1) + "\n" if args.json else
            projection.to_markdown(rows, projection.COMMAND))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")
    return 0


def _calibrated_rates(cal: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The projection's rates from a calibration (``--calibration``), where no flag gave them: the
    workers' and the PS tasks' measured FLOP rates (the fastest of each job), the fastest host link."""
    from ralp_tf.cli.calibrate import tensorflow_version
    from ralp_tf.plan.projection import GPU_FLOPS, HOST_CPU_FLOPS

    cal.check(cal.cluster(), tensorflow_version=tensorflow_version(), match_hosts=False)
    rates = {job: max((v for k, v in cal.task_flops().items() if k.startswith(job + ":")), default=None)
             for job in ("worker", "ps")}
    out: dict[str, Any] = {}
    if args.gpu_flops == GPU_FLOPS and rates["worker"]:
        out["gpu_flops"] = rates["worker"]
    if args.host_cpu_flops == HOST_CPU_FLOPS and rates["ps"]:
        out["host_cpu_flops"] = rates["ps"]
    links = cal.host_rates()
    if not args.bandwidths and links:
        out["bandwidths_bps"] = [max(links.values())]
    return out


def cmd_provision(args: argparse.Namespace) -> int:
    """Print the recommendation; exit 3 when ``--throughput`` is given and no option meets it."""
    from ralp_tf.plan.projection import model_profile
    from ralp_tf.plan.provisioning import check_price, recommend_ps_hosts

    check_price(args.worker_price, "--worker-price")
    check_price(args.ps_host_price, "--ps-host-price")
    rec = recommend_ps_hosts(model_profile(args.model), args.workers, args.bandwidth,
                             worker_host_price=args.worker_price, ps_host_price=args.ps_host_price,
                             max_ps_hosts=args.max_ps_hosts, min_samples_per_s=args.throughput,
                             gpu_flops=args.gpu_flops, host_cpu_flops=args.host_cpu_flops)
    print(json.dumps(rec.to_dict(), indent=1) if args.json else rec.report())
    if args.throughput is not None and rec.cheapest is None:
        raise CommandFailed(f"no count of CPU-only PS hosts up to {rec.options[-1].ps_hosts} reaches "
                            f"{args.throughput:g} samples/s (best {max(o.samples_per_s for o in rec.options):,.0f}); "
                            "add worker hosts, raise --max-ps-hosts or lower --throughput")
    return 0
