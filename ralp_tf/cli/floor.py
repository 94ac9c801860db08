"""``ralp-tf floor``: the step floor of ParameterServerStrategy measured on this machine.

:func:`register` adds the command to the ``ralp-tf`` parser; :func:`cmd_floor` runs
:func:`ralp_tf.run.floor.measure_floor` on a fresh LocalCluster and prints every case and the
fitted terms (``--json``: :meth:`ralp_tf.run.floor.FloorResult.to_dict`, also written to ``--out``).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from ralp_tf.cli.args import add_output_arg, positive_int

__all__ = ["register", "cmd_floor"]


def register(subparsers: Any) -> None:
    """Add ``floor`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "floor", help="measure ParameterServerStrategy's fixed cost per closure and per step on this machine",
        description="Schedule closures that only pull and push tiny variables on a local cluster and fit the "
                    "fixed seconds per closure, per PS task and per step (ralp_tf.run.floor).")
    p.add_argument("--workers", type=positive_int, default=2, help="worker tasks (default 2)")
    p.add_argument("--ps", type=positive_int, default=2, help="parameter-server tasks (default 2)")
    p.add_argument("--seconds", type=float, default=2.0, help="wall seconds per repetition of a case (default 2)")
    p.add_argument("--repeats", type=positive_int, default=3, help="repetitions per case, median kept (default 3)")
    p.add_argument("--max-variables", type=positive_int, default=16,
                   help="variables per PS task of the largest case (default 16)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_output_arg(p, "--out", help="also write the JSON object to this file")
    add_output_arg(p, "--log-dir", kind="dir", help="where task logs go (default: a temporary folder)")
    p.set_defaults(func=cmd_floor, needs_loopback_shim=True)


def cmd_floor(args: argparse.Namespace) -> int:
    """Measure the floor, print it (``--json``: one object) and write ``--out``."""
    from ralp_tf.errors import ValidationError
    from ralp_tf.run.floor import measure_floor

    if not args.seconds > 0:
        raise ValidationError(f"--seconds must be positive, got {args.seconds}")
    show = not args.json

    def on_case(r: Any) -> None:
        if show:
            print(f"  {r.case.name:<24} {r.closure_s * 1e3:8.3f} ms/closure  {r.ps_bytes_per_closure():9.0f} B/PS task "
                  f"CPU {r.ps_cpu_s_per_closure * 1e3:.3f} ms PS, {r.worker_cpu_s_per_closure * 1e3:.3f} ms workers "
                  f"({r.closures} closures)", file=sys.stderr, flush=True)

    result = measure_floor(args.workers, args.ps, seconds=args.seconds, repeats=args.repeats,
                           max_variables=args.max_variables, log_dir=args.log_dir, on_case=on_case)
    given = sys.argv[sys.argv.index("floor"):] if "floor" in sys.argv else ["floor"]
    result.command = "ralp-tf " + " ".join(shlex.quote(a) for a in given)
    doc = result.to_dict()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    t = result.terms
    print(f"floor on {args.workers} worker(s), {args.ps} PS ({result.wall_s:.0f} s; fit's worst relative error "
          f"{result.fit_max_error:.0%}):")
    print(f"  plain one-step closure P    = {t.plain_closure_s * 1e3:.3f} ms")
    print(f"  plain, per variable   p_var = {t.plain_step_per_variable_s * 1e3:.3f} ms")
    print(f"  per closure            F    = {t.closure_s * 1e3:.3f} ms")
    print(f"  per closure per PS     F_ps = {t.closure_per_ps_s * 1e3:.3f} ms")
    print(f"  per step per PS        s_ps = {t.step_per_ps_s * 1e3:.3f} ms")
    print(f"  per step per variable  s_var= {t.step_per_variable_s * 1e3:.3f} ms")
    print(f"  control bytes per PS task: {t.control_bytes_per_closure_per_ps:.0f} per closure, "
          f"{t.control_bytes_per_step_per_ps:.0f} per step")
    print(f"  CPU per tensor message: {t.message_cpu_ps_s * 1e6:.0f} us at a PS task, "
          f"{t.message_cpu_worker_s * 1e6:.0f} us at a worker")
    return 0
