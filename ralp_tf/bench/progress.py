"""Progress lines on stderr: ``[bench 12m03s | ETA 40m10s] cell 2/5 alexnet_cifar/w2/1gbit | ralp
rep 2/3 (2+10 global steps)`` and one result line per run."""
from __future__ import annotations

import math
import statistics
import sys
import time

__all__ = ["RunKey", "hms", "Progress"]

#: A planned run: (cell key, strategy, repetition index).
RunKey = tuple[str, str, int]


def hms(s: float) -> str:
    """Seconds as ``MmSSs``, or ``HhMMmSSs`` from one hour on."""
    s = int(s)
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Progress lines on stderr: cell, strategy, repetition, elapsed and ETA.

    ETA = sum over remaining runs of ``startup_s + (warmup + steps) * predicted_step_s * ratio``,
    where ``startup_s`` (per run) and ``ratio`` (measured / predicted step time) are learned
    from the runs finished so far (initially 35 s and 1.5).
    """

    def __init__(self, quiet: bool = False) -> None:
        self.t0 = time.monotonic()
        self.quiet = quiet
        self.remaining: dict[RunKey, float] = {}
        self.startups: list[float] = []
        self.ratios: list[float] = []

    def plan_run(self, key: RunKey, warmup: int, steps: int, pred_step_s: float | None) -> None:
        """Count a run of ``warmup + steps`` global steps of ``pred_step_s`` (2 s if unknown)."""
        self.remaining[key] = (warmup + steps) * (pred_step_s if pred_step_s and math.isfinite(pred_step_s) else 2.0)

    def eta_s(self) -> float:
        startup = statistics.median(self.startups) if self.startups else 35.0
        ratio = statistics.median(self.ratios) if self.ratios else 1.5
        return sum(startup + t * ratio for t in self.remaining.values())

    def done_run(self, key: RunKey, wall_s: float, timed_s: float | None, predicted_s: float,
                 steps: int = 1, warmup: int = 0) -> None:
        """Learn from a finished run: ``ratio = timed_s / predicted_s`` and ``startup = wall_s -
        timed_s * (steps + warmup) / steps`` (the warm-up steps take about as long as timed ones)."""
        self.remaining.pop(key, None)
        if timed_s is not None and predicted_s > 0:
            self.ratios.append(timed_s / predicted_s)
            self.startups.append(max(wall_s - timed_s * (steps + warmup) / max(steps, 1), 0.0))

    def drop_run(self, key: RunKey) -> None:
        """Forget a planned run that will not happen (its strategy was skipped)."""
        self.remaining.pop(key, None)

    def drop_cell(self, cell_key: str) -> None:
        """Forget every planned run of a cell that cannot run."""
        for k in [k for k in self.remaining if k[0] == cell_key]:
            del self.remaining[k]

    def say(self, msg: str) -> None:
        """A progress line (nothing when quiet)."""
        if not self.quiet:
            self.warn(msg)

    def warn(self, msg: str) -> None:
        """A line shown even when quiet: warnings and skipped strategies."""
        el = time.monotonic() - self.t0
        print(f"[bench {hms(el)} | ETA {hms(self.eta_s())}] {msg}", file=sys.stderr, flush=True)
