"""The kill table of issue 42, item 1: SIGKILL at seeded instants inside a checkpoint write of
``ralp-tf run`` and of its PS task while it computes the head, each rerun checked.

    nice -n 10 .venv/bin/python benchmarks/checkpoint_kills.py --seed 42 --write-kills 20 --ps-kills 10 \\
        --out benchmarks/results/checkpoint-kills.json --md benchmarks/results/checkpoint-kills.md

Every trial runs ``ralp-tf -v run --model alexnet_cifar --workers 2 --ps 1 --bandwidth 1gbit --steps 17
--checkpoint-every 5 --checkpoint-dir D --log-dir L --json`` (checkpoints at steps 3, 5, 10, 15 and 20, the
head on ps0) in a fresh folder, kills it (:mod:`ralp_tf.faults.kills`: inside the write of step 15, or
ps0 while it computes after step 10's), then reruns the same command and checks it
(:mod:`ralp_tf.faults.kill_checks`). Loopback, no root. Prints a line per trial; writes the JSON and
the Markdown table.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run the trials; exit 0 when every one holds, 1 otherwise."""
    from ralp_tf.faults.kill_checks import kill_table, markdown

    p = argparse.ArgumentParser(prog="benchmarks/checkpoint_kills.py")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--write-kills", type=int, default=20)
    p.add_argument("--ps-kills", type=int, default=10)
    p.add_argument("--model", default="alexnet_cifar")
    p.add_argument("--steps", type=int, default=17)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--target", type=int, default=15, help="the checkpoint whose write the run is killed in")
    p.add_argument("--ps-after", type=int, default=10, help="ps0 is killed after this checkpoint's write")
    p.add_argument("--workdir", default=None, help="where the trials run (default: a temporary folder)")
    p.add_argument("--out", default=None, help="JSON of every trial")
    p.add_argument("--md", default=None, help="the Markdown table")
    args = p.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ralp_tf_kills_"))
    t0 = time.time()

    def show(rec: dict) -> None:
        print(f"[{time.time() - t0:6.0f} s] {rec['kind']} {rec['value']:.3f}: left {rec['left_by_kill']!r}, "
              f"whole {rec['whole_after_kill']}, resumed {rec['resumed_from']} (expected {rec['expected_resume']}), "
              f"variables equal {rec['variables_equal']}, loss {rec['final_loss']}, left behind "
              f"{rec['left_behind']}, {'ok' if rec['ok'] else 'FAILED'}", flush=True)

    table = kill_table(args.seed, args.write_kills, args.ps_kills, workdir, model=args.model, steps=args.steps,
                       every=args.every, target=args.target, ps_after=args.ps_after, on_trial=show)
    table["command"] = " ".join(["benchmarks/checkpoint_kills.py", *(argv if argv is not None else sys.argv[1:])])
    table["wall_s"] = round(time.time() - t0, 1)
    if args.out:
        Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
    text = markdown(table)
    if args.md:
        Path(args.md).write_text(text + "\n")
    print(text)
    if not args.workdir:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if table["summary"]["ok"] == table["summary"]["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
