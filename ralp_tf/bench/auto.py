"""The bench's ``auto`` strategy: ``--strategy auto`` as a job runs it, on a cell's hosts.

Per repetition (an auto job of its own), on the cell's testbed:

1. :func:`auto_order`: the cell's candidate strategies ranked by the bench's own predictions (the
   same cost model and cluster the other columns are predicted with, :mod:`ralp_tf.bench.predictions`):
   the analyzer's plan (``ralp``; left out when it places nothing: it is ``ps``), stock PSS (``ps``),
   MultiWorkerMirroredStrategy (``allreduce``) and Horovod (``horovod``, where it is installed);
2. :func:`choose`: the top two are probed, each with the schedule its own column would run
   (``choose_steps`` of its prediction, at least :data:`AUTO_PROBE_STEPS`
   global steps, after the cell's warm-up); the faster measured (a valid run) is chosen;
3. the bench runs the chosen strategy with the cell's schedule; that run is the ``auto`` column's
   repetition, its record carrying ``auto``: ``{"chosen", "order", "probe_samples_per_s",
   "probe_wall_s"}``. The probes' time is not in its samples/s (a job pays it once, not per step);
   ``probe_wall_s`` says what it was.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.bench.config import AUTO_CANDIDATES, AUTO_PROBE_STEPS

__all__ = ["auto_order", "choose"]


def auto_order(pred: Mapping[str, Any], unavailable: Sequence[str] = ()) -> list[str]:
    """The bench strategies ``auto`` would rank, fastest predicted first: those of
    :data:`AUTO_CANDIDATES` with a prediction, not ``unavailable``; ``ralp`` only when the analyzer
    chose a plan that places something (its ``analysis.chosen`` is not ``no split``)."""
    names = [AUTO_CANDIDATES[n] for n in AUTO_CANDIDATES]
    stock = (pred.get("analysis") or {}).get("chosen", "no split") == "no split"
    out = [n for n in names if n in pred and n not in unavailable and not (n == "ralp" and stock)]
    return sorted(out, key=lambda n: (pred[n]["step_s"], names.index(n)))


def choose(bench: Any, tb: Any, cell: Any, order: Sequence[str], pred: Mapping[str, Any],
           plans: Mapping[str, str], steps_per_closure: int,
           schedule: Callable[[float | None], tuple[int, int]]) -> tuple[str, dict[str, Any]]:
    """Probe the first two strategies of ``order`` on ``tb`` (``bench._run_one``) and return the
    faster measured, with the record's ``auto`` entry (module docstring). ``schedule(step_s)`` is a
    column's ``(steps, warmup)`` at that predicted step. With one candidate, or no valid probe, the
    first of ``order``."""
    t0 = time.monotonic()
    measured: dict[str, float] = {}
    for name in order[:2] if len(order) > 1 else ():
        step_s = (pred.get(name) or {}).get("step_s")
        steps, warmup = schedule(step_s)
        rec = bench._run_one(name, tb, cell, max(steps, AUTO_PROBE_STEPS), warmup, plans.get(name), step_s,
                             steps_per_closure)
        measured[name] = rec.samples_per_s if rec.valid and rec.samples_per_s else 0.0
    valid = {n: v for n, v in measured.items() if v > 0}
    chosen = max(valid, key=lambda n: (valid[n], -list(order).index(n))) if valid else order[0]
    return chosen, {"chosen": chosen, "order": list(order), "probe_samples_per_s": measured,
                    "probe_wall_s": time.monotonic() - t0}
