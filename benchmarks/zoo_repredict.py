"""The zoo's predicted bytes, recomputed with the current cost model for rows already measured.

    python benchmarks/zoo_repredict.py --results benchmarks/results/zoo.json --out benchmarks/zoo.md \
        [--models NAME,NAME]

A zoo row's measured bytes depend on the model and its plan only; its predicted bytes also on the
cost model. When the cost model changes, this rebuilds each trained row's profile as the zoo job
does (same batch size and sequence length, without timing the layers: bytes do not depend on
it), rebuilds its plan from the row's ``ps_layers`` (with one PS task, every PS layer on
``ps:0``: the only plans a one-PS zoo run makes), and writes the new ``predicted_bytes_per_step``
and ``bytes_error`` back, with ``repredicted`` set to true. Rows of other stages and runs with more
than one PS task are refused, as is a row whose model no longer builds. No cluster starts.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def repredict(row: dict[str, Any], config: dict[str, Any]) -> float:
    """``row``'s predicted bytes per worker step under the current cost model (module docstring)."""
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.plan.costmodel import estimate
    from ralp_tf.plan.plans import Plan
    from ralp_tf.run.training import TrainConfig, prepare_model

    prepared = prepare_model(resolve_model(row["reference"]),
                             TrainConfig(batch_size=config["batch_size"], sequence_length=config["sequence_length"],
                                         measure_compute=False))
    cluster = Cluster.local(config["workers"], config["ps"], bandwidth=config["bandwidth"])
    plan = Plan({name: cluster.ps_device(0) for name in row["ps_layers"]}, policy="ralp")
    return estimate(prepared.profile, cluster, plan).bytes_per_step


def main(argv: list[str] | None = None) -> int:
    from ralp_tf.zoo.run import markdown, summary

    p = argparse.ArgumentParser(prog="benchmarks/zoo_repredict.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", required=True, help="the zoo's JSON results (rewritten in place)")
    p.add_argument("--out", help="the Markdown table to regenerate from them")
    p.add_argument("--models", help="comma-separated row names (default: every trained row)")
    args = p.parse_args(argv)
    with open(args.results) as f:
        data = json.load(f)
    config = data["config"]
    if config["ps"] != 1:
        print(f"error: {args.results} was run with {config['ps']} PS tasks; only one-PS runs can be "
              "repredicted from their ps_layers", file=sys.stderr)
        return 2
    wanted = set(args.models.split(",")) if args.models else None
    for row in data["rows"]:
        if row.get("stage") != "trained" or (wanted is not None and row["name"] not in wanted):
            continue
        predicted = repredict(row, config)
        measured = row["bytes_per_step"]
        print(f"{row['name']}: predicted {row['predicted_bytes_per_step']:.0f} -> {predicted:.0f} "
              f"(measured {measured:.0f})", flush=True)
        row.update(predicted_bytes_per_step=predicted, bytes_error=(measured - predicted) / predicted,
                   repredicted=True)
    data["summary"] = summary(data["rows"])
    with open(args.results, "w") as f:
        json.dump(data, f, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# The model zoo: what ralp_tf places, measured\n\n" + markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
