r"""Pin the unit: a resource type's compute rate, measured under its CPU quota.

An emulated type is a CPU quota (:mod:`scheduler.execution.emulated`), so its FLOP rate is whatever the
model's layers achieve under that quota; it is measured, never assumed, the way the bench measures
a budgeted host (:mod:`ralp_tf.bench.quota_profile`: layer shares measured unthrottled under
``ceil(cores)``, calibrated to whole forward+backward passes timed under the quota). The effective FLOP rate
of the type is ``F = 3 x b x sum_l f_l / step_s``, and the calibrated profile is what the cost model
prices the type's compute with.

Results are cached per (model, batch, cores) as JSON under ``cache_dir``.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ralp_tf.bench import BenchError, quota_profile
from ralp_tf.model import ModelProfile
from scheduler.core.errors import SchedulerError

__all__ = ["DEFAULT_CACHE_DIR", "MeasurementError", "UnitRate", "calibrate", "cache_path", "measure_under_quota"]

DEFAULT_CACHE_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ralp_tf_unitrate")


class MeasurementError(SchedulerError):
    """Measuring a type's rate under its quota failed (no root, no cgroup v1, the child failed)."""


@dataclasses.dataclass(frozen=True)
class UnitRate(quota_profile.QuotaProfile):
    """:class:`~ralp_tf.bench.quota_profile.QuotaProfile` of ``model`` at ``batch_size``: the
    calibrated profile and the rates under ``cores`` of CPU quota."""

    model: str
    batch_size: int

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "batch_size": self.batch_size, "cores": self.cores, "step_s": self.step_s,
                "layer_sum_s": self.layer_sum_s, "flops_per_s": self.flops_per_s,
                "calibration": self.calibration, "profile": self.profile.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "UnitRate":
        return cls(model=d["model"], batch_size=int(d["batch_size"]), cores=float(d["cores"]),
                   step_s=float(d["step_s"]), layer_sum_s=float(d["layer_sum_s"]),
                   flops_per_s=float(d["flops_per_s"]), profile=ModelProfile.from_dict(d["profile"]))


def calibrate(raw: ModelProfile, step_s: float) -> tuple[ModelProfile, float, float]:
    """``(profile with layer times scaled to sum to step_s, raw layer sum, FLOP rate)``
    (:func:`ralp_tf.bench.quota_profile.calibrate`, its BenchError as MeasurementError)."""
    try:
        return quota_profile.calibrate(raw, step_s)
    except BenchError as exc:
        raise MeasurementError(str(exc)) from None


#: Bumped when the measurement changes, so that older cached rates are measured again.
_CACHE_VERSION = 3


def cache_path(cache_dir: str, model: str, batch_size: int, cores: float) -> Path:
    return Path(cache_dir) / f"{model}_b{batch_size}_c{cores:g}_v{_CACHE_VERSION}.json"


def measure_under_quota(model: str, batch_size: int, cores: float, *, cache_dir: str = DEFAULT_CACHE_DIR,
                        refresh: bool = False, min_seconds: float = 4.0, timeout: float = 600.0) -> UnitRate:
    """The :class:`UnitRate` of ``model`` at ``batch_size`` under a quota of ``cores`` (cached)."""
    from ralp_tf.testbed import cpu_budget_support

    path = cache_path(cache_dir, model, batch_size, cores)
    if path.is_file() and not refresh:
        return UnitRate.from_dict(json.loads(path.read_text()))
    ok, why = cpu_budget_support()
    if not ok:
        raise MeasurementError(f"cannot measure {model} under a {cores:g}-core quota: {why}")
    os.makedirs(cache_dir, exist_ok=True)
    raw_path = f"{path}.profile.raw"
    try:
        measured = quota_profile.measure_quota_profile(model, batch_size, cores, raw_path,
                                                       group_name=f"ralpunit-{os.getpid()}",
                                                       min_seconds=min_seconds, timeout=timeout)
    except BenchError as exc:
        raise MeasurementError(f"measuring {model} under {cores:g} cores: {exc}") from None
    finally:
        if os.path.exists(raw_path):
            os.unlink(raw_path)
    rate = UnitRate(**{f.name: getattr(measured, f.name) for f in dataclasses.fields(measured)},
                    model=model, batch_size=batch_size)
    path.write_text(json.dumps(rate.to_dict()))
    return rate
