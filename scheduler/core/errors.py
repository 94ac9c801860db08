"""The exceptions the scheduler raises for bad input. Each names the problem and the fix.

All of them are :class:`ralp_tf.errors.ValidationError` (and so ``ValueError``), so callers of
ralp_tf can catch one type for every bad-input error.
"""
from __future__ import annotations

from ralp_tf.errors import ValidationError

__all__ = ["SchedulerError", "CatalogError", "ProblemError", "WorkloadError", "InfeasibleError",
           "MemoryLimitError", "SolverNotApplicableError", "PolicyMismatchError"]


class SchedulerError(ValidationError):
    """Base class of every bad-input error of the scheduler package."""


class CatalogError(SchedulerError):
    """A resource catalog is empty or one of its types has an invalid field."""


class ProblemError(SchedulerError):
    """A placement problem has negative, NaN or inconsistent costs, times or sizes."""


class WorkloadError(SchedulerError):
    """A workload (built-in name, profile JSON or dnn-partitioning JSON) cannot be loaded."""


class InfeasibleError(SchedulerError):
    """No placement meets the constraints. The message states the best achievable value."""

    def __init__(self, message: str, best_throughput: float | None = None) -> None:
        super().__init__(message)
        self.best_throughput = best_throughput


class MemoryLimitError(InfeasibleError):
    """No placement fits the memory limits of the resource types."""


class SolverNotApplicableError(SchedulerError):
    """The solver has no meaning for this kind of problem (e.g. RALP on a max-load workload)."""


class PolicyMismatchError(SchedulerError):
    """A saved policy cannot be read by this code: another feature set, feature code version or
    layer-kind list, another file format, or a damaged file."""
