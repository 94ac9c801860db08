"""Bounded restarts with exponential backoff (pure; the supervisor applies the decisions).

Contract of :class:`RestartPolicy`: task ``T`` may be restarted at most ``max_restarts`` times
in one run; before its ``k``-th restart (``k = 1, 2, ...``) the supervisor waits
``min(backoff_s * factor ** (k - 1), max_backoff_s)`` seconds. The ``max_restarts + 1``-th
failure of ``T`` raises :class:`RestartsExhausted`, naming the task, how often it failed and
its last exit status. The coordinator process counts as a task (``chief``): it is restarted
after a PS comes back, under the same budget.
"""
from __future__ import annotations

import dataclasses

from ralp_tf.errors import ClusterRuntimeError, ValidationError

__all__ = ["RestartsExhausted", "RestartPolicy"]


class RestartsExhausted(ClusterRuntimeError):
    """A task failed more often than the restart budget allows."""


@dataclasses.dataclass
class RestartPolicy:
    """Restart budget and backoff (see the module docstring)."""

    max_restarts: int = 3
    backoff_s: float = 1.0
    factor: float = 2.0
    max_backoff_s: float = 30.0
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 1:
            raise ValidationError(f"restart budget must be at least 1 restart per task, got {self.max_restarts!r}: "
                                  "with a budget of 0 --restart-failed could never restart anything; pass "
                                  "--max-restarts 1 or more, or leave out --restart-failed")
        for name in ("backoff_s", "factor", "max_backoff_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < (1 if name == "factor" else 0):
                raise ValidationError(f"restart {name} must be a number >= {1 if name == 'factor' else 0}, got {v!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number ``attempt`` (1-based)."""
        return float(min(self.backoff_s * self.factor ** (attempt - 1), self.max_backoff_s))

    def next_delay(self, task: str, exit_status: int | None = None) -> float:
        """Record one more failure of ``task`` and return the wait before restarting it; raise
        :class:`RestartsExhausted` once the budget is spent."""
        n = self.counts.get(task, 0) + 1
        if n > self.max_restarts:
            raise RestartsExhausted(
                f"task {task} failed {n} times (last exit status {exit_status}); its restart budget of "
                f"{self.max_restarts} is spent, so the run stops. Its last checkpoint is kept: fix the cause and "
                "rerun the same command to resume, or raise --max-restarts")
        self.counts[task] = n
        return self.delay(n)

    @property
    def total(self) -> int:
        """Restarts granted so far, all tasks together."""
        return sum(self.counts.values())
