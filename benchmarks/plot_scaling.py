"""Plot samples/s against hosts from one ``ralp-tf bench`` results file: measured medians (solid)
and the cost model's predictions (dashed), one panel per model and link rate
(:func:`ralp_tf.bench.plots.plot_scaling_vs_workers`).

``--rename OLD=NEW`` relabels a strategy of the file first: results written before a strategy was
renamed plot under today's names (``--rename ralp=ralp_nosplit,ralp_split=ralp`` for runs made
when ``ralp`` planned without head splits and ``ralp_split`` with them)::

    python benchmarks/plot_scaling.py --results benchmarks/results/scaling-alexnet-1gbit.json \\
        --rename ralp=ralp_nosplit,ralp_split=ralp --out benchmarks/scaling_alexnet_1gbit.png
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ralp_tf.bench.plots import plot_scaling_vs_workers


def renamed(doc: dict, mapping: dict[str, str]) -> dict:
    """``doc`` with each cell's strategies (results and predictions) relabelled by ``mapping``."""
    for cell in doc.get("cells", []):
        for key in ("strategies", "bench_predictions"):
            if isinstance(cell.get(key), dict):
                cell[key] = {mapping.get(s, s): v for s, v in cell[key].items()}
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="a bench results JSON file")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--rename", default="", help="OLD=NEW[,OLD=NEW...]: strategy names to relabel first")
    args = ap.parse_args()
    mapping = dict(pair.split("=", 1) for pair in args.rename.split(",") if pair)
    doc = renamed(json.loads(Path(args.results).read_text()), mapping)
    if not plot_scaling_vs_workers(doc, Path(args.out)):
        raise SystemExit(f"{args.results}: no model and link rate with more than one worker count to plot")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
