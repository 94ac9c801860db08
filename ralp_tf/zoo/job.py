"""One model of the zoo, end to end, in a process of its own: ``python -m ralp_tf.zoo.job REF OUT
[WORKERS PS BANDWIDTH BATCH SEQUENCE_LENGTH STEPS]``.

It does what a user does with the model: build it and profile it (:func:`ralp_tf.run.training.
prepare_model`), plan it with the ``ralp`` policy on the cluster shape, then, on a LocalCluster of
real task processes, place it (the verifier checks every placed layer's variables, forward and
gradient ops), compare its first-step loss and gradients with the unplaced model's
(:func:`ralp_tf.place.verify.verify_gradients`), train ``STEPS`` measured steps after a warm-up step
on each worker, and count the bytes between workers and PS tasks. It writes one JSON row to ``OUT`` (:func:`run_one`); a model that fails
gets a row that says at which stage and why, and the process still exits 0 (the row is the result).
"""
from __future__ import annotations

import json
import math
import sys
import time
import traceback
from typing import Any

__all__ = ["run_one"]


def _plan_summary(plan: Any) -> str:
    ps = sorted(plan.ps_layers())
    if not ps:
        return "no split" + (", balanced storage" if plan.storage else "")
    shown = ", ".join(ps[:4]) + (f", ... ({len(ps)} in all)" if len(ps) > 4 else "")
    return f"{len(ps)} on the PS: {shown}"


def run_one(ref: str, *, workers: int = 2, ps: int = 1, bandwidth: str = "100mbit", batch_size: int = 16,
            sequence_length: int | None = 32, steps: int = 2) -> dict[str, Any]:
    """The zoo row of model reference ``ref`` (module docstring): ``stage`` is where it stopped
    (``profile`` and ``plan`` are before any cluster starts; ``train`` once trained), ``error``
    the one-line reason when it failed, ``exit`` the ralp-tf exit code the failure maps to."""
    from ralp_tf.errors import RalpError, exit_code_for
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.place.policies import plan_with_policy
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.run.training import TrainConfig, compare, prepare_model

    row: dict[str, Any] = {"reference": ref, "stage": "profile", "error": None, "exit": 0}
    t0 = time.perf_counter()
    try:
        builder = resolve_model(ref)
        prepared = prepare_model(builder, TrainConfig(batch_size=batch_size, sequence_length=sequence_length,
                                                      check_gradients=True))
        prof = prepared.profile
        row.update(parameters=int(prepared.base.count_params()), param_bytes=prof.param_bytes,
                   layers=len(prof.compute_layers), stage="plan")
        plan, analysis = plan_with_policy("ralp", prof, Cluster.local(workers, ps, bandwidth=bandwidth))
        row.update(plan=_plan_summary(plan), ps_layers=sorted(plan.ps_layers()), stage="train")
        if analysis is not None:
            row.update(predicted_speedup=analysis.predicted_speedup, refusals=analysis.refusals)
        result = compare(builder, workers=workers, ps=ps, steps=steps, warmup_steps=1, batch_size=batch_size,
                         bandwidth=bandwidth, policies=["ralp"], sequence_length=sequence_length,
                         prepared=prepared, check_gradients=True)["ralp"]
        measured, predicted = result.bytes_per_step, result.predicted_bytes_per_step
        row.update(stage="trained", verified=True, gradients=result.gradients_checked, bytes_per_step=measured,
                   predicted_bytes_per_step=predicted,
                   bytes_error=(measured - predicted) / predicted if measured and predicted else None,
                   losses_finite=all(math.isfinite(l) for l in result.losses), samples_per_s=result.samples_per_s,
                   plan=_plan_summary(result.plan))
    except RalpError as exc:
        row.update(error=str(exc), exit=int(exit_code_for(exc)))
    except Exception as exc:  # a bug: kept with its traceback's last frames
        row.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}", exit=1,
                   traceback=traceback.format_exc()[-2000:])
    row["seconds"] = time.perf_counter() - t0
    return row


def main(argv: list[str]) -> int:
    ref, out, *rest = argv
    workers, ps, bandwidth, batch, length, steps = (rest + ["2", "1", "100mbit", "16", "32", "2"][len(rest):])[:6]
    row = run_one(ref, workers=int(workers), ps=int(ps), bandwidth=bandwidth, batch_size=int(batch),
                  sequence_length=int(length) if length != "none" else None, steps=int(steps))
    with open(out, "w") as f:
        json.dump(row, f, default=str)
    return 0


if __name__ == "__main__":
    import os

    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown (ralp_tf.cli.train_job's __main__ says why)
