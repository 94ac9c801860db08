"""``python -m ralp_tf.cli.accuracy``: the compression-accuracy study of :mod:`ralp_tf.bench.accuracy`
(the same model trained the same steps with each ``--compression`` setting), as a table and JSON.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Sequence

from ralp_tf.bench.accuracy import SETTINGS, run
from ralp_tf.cli.args import add_output_arg, positive_int, run_command

__all__ = ["main"]

def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the study through :func:`ralp_tf.cli.args.run_command` (``--out``
    checked first; bad input: one line, exit 2)."""
    p = argparse.ArgumentParser(prog="python -m ralp_tf.cli.accuracy", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=positive_int, default=300)
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    add_output_arg(p, "--out", help="write the rows as JSON here")
    p.add_argument("--settings", default=";".join(SETTINGS),
                   help=f"--compression settings to train, separated by ';' (default {';'.join(SETTINGS)})")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return run_command(_study, args, prog=p.prog)


def _study(args: argparse.Namespace) -> int:
    settings = [s.strip() for s in args.settings.split(";") if s.strip()]
    rows = run(args.steps, args.batch_size, learning_rate=args.learning_rate, seed=args.seed, settings=settings)
    doc = {"command": "python -m ralp_tf.cli.accuracy " + " ".join(args.argv),
           "rows": [dataclasses.asdict(r) for r in rows]}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
    print("| setting | final loss | accuracy | loss vs none | accuracy vs none (points) |")
    print("|---|---|---|---|---|")
    for r in rows:
        loss_vs, points_vs = ((f"{r.loss_vs_none:+.4f}", f"{r.accuracy_points_vs_none:+.1f}")
                              if r.loss_vs_none is not None else ("n/a", "n/a"))
        print(f"| {r.setting} | {r.final_loss:.4f} | {100 * r.accuracy:.1f}% | {loss_vs} | {points_vs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
