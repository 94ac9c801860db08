"""Measured compression ratios from ``ralp-tf run --json`` results (pure: no TF runtime).

The traffic a gradient codec compresses is the push: variable gradients from the workers to
the PS tasks. The meter counts bytes per direction between tasks, not per phase, so the push is
recovered from the ``worker -> ps`` bytes of a run: ``push = up - U``, where ``U`` is the rest of
what goes up in that run (activations into PS-computed layers, their gradients, control
traffic; compressed too when the run's setting compresses activations), taken from the cost
model (:func:`ralp_tf.plan.traffic.step_traffic`), which predicts whole runs' bytes within
0.1% (BUILD_NOTES.md). Reported per run:

* ``measured_ratio = (up - U) / (up_none - U_none)``, the pushed gradients against ``none``'s;
* ``predicted_ratio``: the cost model's push bytes with the codec over those without;
* ``total_vs_predicted``: measured bytes per step (both directions) over the predicted.

``python -m ralp_tf.bench.compression_report NONE.json CODEC.json [...]`` prints one row per file.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Mapping, Sequence

from ralp_tf.plan.costmodel import PUSH, WORKER, resolve_placements
from ralp_tf.plan.traffic import step_traffic
from ralp_tf.plan.plans import Plan
from ralp_tf.model.profiles import ModelProfile

__all__ = ["RatioRow", "push_and_rest", "up_bytes", "ratios", "main"]


@dataclasses.dataclass(frozen=True)
class RatioRow:
    """One run's compressed traffic against the run without compression (module docstring)."""

    setting: str
    up_bytes_per_step: float
    measured_ratio: float
    predicted_ratio: float
    total_vs_predicted: float

    @property
    def miss(self) -> float:
        """Relative difference of the measured ratio from the predicted one."""
        return self.measured_ratio / self.predicted_ratio - 1.0


def push_and_rest(profile: ModelProfile, plan: Plan, num_ps: int) -> tuple[float, float]:
    """Predicted bytes per worker step going up (worker -> PS tasks): ``(push of variable
    gradients, everything else)``; control traffic counts as the rest."""
    step = step_traffic(profile, resolve_placements(profile, plan), num_ps, plan.stored_on(), plan.compression)
    up = {key: b for key, b in step.bytes.items() if key[0] == WORKER}
    push = sum(b - step.control.get(key, 0.0) for key, b in up.items() if key[2] == PUSH)
    return push, sum(up.values()) - push


def up_bytes(result: Mapping[str, Any]) -> float:
    """Measured ``worker -> ps`` bytes per worker step of one ``run --json`` result."""
    return float(sum(b for pair, b in result["bytes_between"].items() if pair.startswith("worker")))


def ratios(profile: ModelProfile, num_ps: int, none: Mapping[str, Any],
           runs: Sequence[Mapping[str, Any]]) -> list[RatioRow]:
    """A :class:`RatioRow` per result in ``runs`` against ``none`` (same model, cluster and policy)."""
    push_none, rest_none = push_and_rest(profile, Plan.from_dict(none["plan"]), num_ps)
    measured_none = up_bytes(none) - rest_none
    rows = []
    for r in runs:
        plan = Plan.from_dict(r["plan"])
        push, rest = push_and_rest(profile, plan, num_ps)
        setting = "; ".join(f"{k}: {v.describe()}" for k, v in sorted(plan.compression.items())) or "none"
        rows.append(RatioRow(setting, up_bytes(r), (up_bytes(r) - rest) / measured_none, push / push_none,
                             r["bytes_per_step"] / r["predicted_bytes_per_step"]))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.profiler import profile

    p = argparse.ArgumentParser(prog="python -m ralp_tf.bench.compression_report", description=__doc__.splitlines()[0])
    p.add_argument("none", help="ralp-tf run --json output without compression")
    p.add_argument("runs", nargs="+", help="ralp-tf run --json outputs with compression (same model and cluster)")
    p.add_argument("--model", required=True)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32, help="per-worker batch of the runs (default 32)")
    args = p.parse_args(argv)

    def load(path: str) -> Mapping[str, Any]:
        with open(path) as f:
            doc = json.load(f)
        return next(v for k, v in doc.items() if k != "baseline")

    none = load(args.none)
    prof = profile(resolve_model(args.model)(), batch_size=none.get("batch_size", args.batch_size))
    print("| setting | up bytes/step | pushed gradients vs none, measured | predicted | miss "
          "| total bytes vs predicted |")
    print("|---|---|---|---|---|---|")
    for row in ratios(prof, args.ps, none, [load(f) for f in args.runs]):
        print(f"| {row.setting} | {row.up_bytes_per_step:,.0f} | {row.measured_ratio:.4f} | {row.predicted_ratio:.4f} "
              f"| {100 * row.miss:+.2f}% | {row.total_vs_predicted:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
