"""Device strings of a Plan: :func:`parse_device` reads ``/job:J[/replica:0][/task:K]/device:T:N`` into
a :class:`DeviceName` or raises :class:`~ralp_tf.errors.PlanError` naming the expected shape.

Below both :mod:`ralp_tf.plan.plans` (which re-exports the names) and :mod:`ralp_tf.plan.shards`.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from ralp_tf.errors import PlanError

__all__ = ["DeviceName", "parse_device"]

_DEVICE = re.compile(
    r"^/job:(?P<job>[a-z_]+)(?:/replica:(?P<replica>\d+))?(?:/task:(?P<task>\d+))?"
    r"/device:(?P<type>CPU|GPU):(?P<id>\d+)$")


@dataclasses.dataclass(frozen=True)
class DeviceName:
    """A parsed device string."""

    job: str
    task: int | None
    device_type: str
    device_id: int

    @property
    def is_ps(self) -> bool:
        return self.job == "ps"

    @property
    def is_worker(self) -> bool:
        return self.job == "worker"

    @property
    def task_key(self) -> str | None:
        return None if self.task is None else f"{self.job}:{self.task}"

    def canonical(self) -> str:
        if self.task is None:
            return f"/job:{self.job}/device:{self.device_type}:{self.device_id}"
        return f"/job:{self.job}/replica:0/task:{self.task}/device:{self.device_type}:{self.device_id}"


def parse_device(device: str) -> DeviceName:
    """Parse a full device string; raise PlanError naming the expected shape."""
    if not isinstance(device, str):
        raise _not_a_device(device)
    return _parse_device(device)


def _not_a_device(device: Any) -> PlanError:
    return PlanError(f"device {device!r} is not a full TF device string; write e.g. "
                     "'/job:ps/replica:0/task:0/device:CPU:0' or '/job:worker/device:GPU:0'")


@functools.lru_cache(maxsize=4096)  # the cost model parses the same few strings for every placement it prices
def _parse_device(device: str) -> DeviceName:
    m = _DEVICE.match(device)
    if not m:
        raise _not_a_device(device)
    if m.group("replica") not in (None, "0"):
        raise PlanError(f"device {device!r}: replica must be 0")
    if m.group("job") == "ps" and m.group("task") is None:
        raise PlanError(f"device {device!r} names no PS task; add '/replica:0/task:K'")
    return DeviceName(job=m.group("job"), task=None if m.group("task") is None else int(m.group("task")),
                      device_type=m.group("type"), device_id=int(m.group("id")))
