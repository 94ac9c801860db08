"""One-line progress displays: steps of long training commands (``ralp-tf run``, ``ralp-tf soak``),
items of a measurement (``ralp-tf calibrate``: :class:`ItemProgress`, a bar).

``[run 0m42s | ETA 1m10s] ralp step 120/330 (2.9 steps/s)`` redrawn in place on stderr, only when
stderr is a terminal (:func:`ralp_tf.cli.quiet.stderr_is_tty`, which sees through the noise filter)
and the caller did not ask for ``--json``; otherwise nothing is printed. ETA = steps left /
(steps done in this phase / seconds since the phase began). Time formatting is the bench's
(:func:`ralp_tf.bench.progress.hms`).
"""
from __future__ import annotations

import sys
import time

from ralp_tf.bench.progress import hms
from ralp_tf.cli.quiet import stderr_is_tty

__all__ = ["MIN_STEPS", "StepProgress", "ItemProgress"]

#: Below this many steps a run is short enough to need no progress line.
MIN_STEPS = 20


class StepProgress:
    """``update(label, step)`` after each scheduled step of ``total`` (per label); ``close()`` ends the line."""

    def __init__(self, command: str, total: int, *, enabled: bool | None = None, min_interval_s: float = 0.5) -> None:
        self.command, self.total = command, total
        self.enabled = (stderr_is_tty() and total >= MIN_STEPS) if enabled is None else enabled
        self.t0 = time.monotonic()
        self.min_interval_s = min_interval_s
        self._label: str | None = None
        self._phase_t0 = self.t0
        self._phase_first = 0
        self._last = 0.0

    def update(self, label: str, step: int) -> None:
        """Step ``step`` (0-based) of ``label`` (e.g. a policy) was scheduled."""
        if not self.enabled:
            return
        now = time.monotonic()
        if label != self._label:
            self._label, self._phase_t0, self._phase_first = label, now, step
        done = step + 1
        if now - self._last < self.min_interval_s and done < self.total:
            return
        self._last = now
        rate = (done - self._phase_first) / (now - self._phase_t0) if now > self._phase_t0 else 0.0
        eta = hms((self.total - done) / rate) if rate > 0 else "?"
        line = (f"[{self.command} {hms(now - self.t0)} | ETA {eta}] {label} step {done}/{self.total}"
                + (f" ({rate:.1f} steps/s)" if rate else ""))
        sys.stderr.write("\r" + line.ljust(78))
        sys.stderr.flush()

    def close(self) -> None:
        """End the progress line (a newline) if one was drawn."""
        if self.enabled and self._label is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()


class ItemProgress:
    """``update(stage, done, total, detail)`` after each item of a measurement: ``[calibrate 0m12s |
    ETA 0m30s] [#####-----] 6/15 links worker:0->ps:1 ...`` redrawn on stderr when it is a terminal
    (or ``enabled``); ETA = items left x seconds per item so far. ``close()`` ends the line."""

    WIDTH = 20

    def __init__(self, command: str, *, enabled: bool | None = None) -> None:
        self.command = command
        self.enabled = stderr_is_tty() if enabled is None else enabled
        self.t0 = time.monotonic()
        self.drawn = False

    def update(self, stage: str, done: int, total: int, detail: str = "") -> None:
        if not self.enabled or total <= 0:
            return
        elapsed = time.monotonic() - self.t0
        eta = hms(elapsed / done * (total - done)) if done else "?"
        filled = self.WIDTH * min(done, total) // total
        line = (f"[{self.command} {hms(elapsed)} | ETA {eta}] [{'#' * filled}{'-' * (self.WIDTH - filled)}] "
                f"{done}/{total} {stage} {detail}")
        sys.stderr.write("\r" + line[:118].ljust(118))
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
