r"""Pin the unit: a resource type's compute rate, measured under its CPU quota.

An emulated type is a CPU quota (:mod:`scheduler.emulated`), so its FLOP rate is whatever the
model's layers achieve under that quota; it is measured, never assumed. :func:`measure_under_quota`
runs two child processes, each in a cgroup v1 CPU group, TF thread pools sized by
``tf_thread_env(cores)`` as the testbed's tasks are:

1. the bench's profiler (:func:`ralp_tf.bench.predictions.measure_profile`: measured layer
   times, median of 5 forward+backward passes per layer) under a quota of ``ceil(cores)`` cores
   -- as many cores as it has threads, so never throttled -- giving the layers' *shares* of a step;
2. one, under the type's quota (``cpu.cfs_quota_us = cores x period``), that times whole local
   training steps (forward, backward, SGD update of every layer) for at least ``min_seconds``
   (many CFS periods of 100 ms), giving ``step_s``.

Per-layer medians taken under the quota itself are not shares: a pass that fits inside one
period's quota runs at full speed, one that does not waits out the period (at 0.1 core,
small_cnn's dense head measured 25x its one-core time while the whole step measured 10x). So
the unthrottled times are calibrated to the whole throttled step:
``t_l = t_l^{measured} x step_s / sum_l t_l^{measured}``. The effective FLOP rate of the type is
``F = 3 x b x sum_l f_l / step_s`` (ralp_tf's ``3 f b`` forward+backward FLOPs per batch), and
the calibrated profile is what the cost model prices the type's compute with.

Results are cached per (model, batch, cores) as JSON under ``cache_dir``.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ralp_tf.bench import BenchError
from ralp_tf.bench import measure_profile
from ralp_tf.model import ModelProfile
from scheduler.errors import SchedulerError

__all__ = ["DEFAULT_CACHE_DIR", "MeasurementError", "UnitRate", "calibrate", "cache_path", "measure_under_quota"]

DEFAULT_CACHE_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ralp_tf_unitrate")


class MeasurementError(SchedulerError):
    """Measuring a type's rate under its quota failed (no root, no cgroup v1, the child failed)."""


@dataclasses.dataclass(frozen=True)
class UnitRate:
    """A model measured under ``cores`` of CPU quota: the calibrated profile and the rates."""

    model: str
    batch_size: int
    cores: float
    step_s: float
    layer_sum_s: float
    flops_per_s: float
    profile: ModelProfile

    @property
    def calibration(self) -> float:
        """``step_s / sum of the raw per-layer medians`` (how far the medians were off)."""
        return self.step_s / self.layer_sum_s if self.layer_sum_s > 0 else float("nan")

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
    """``(profile with layer times scaled to sum to step_s, raw layer sum, FLOP rate)``."""
    layer_sum = sum(l.measured_seconds or 0.0 for l in raw.compute_layers)
    if layer_sum <= 0 or step_s <= 0:
        raise MeasurementError(f"profile of {raw.model_name} has no measured layer times (sum {layer_sum}) or the "
                               f"step time is {step_s}; measure with profile(measure=True)")
    flops = 3.0 * raw.batch_size * sum(l.flops for l in raw.compute_layers) / step_s
    return raw.scaled_compute(step_s / layer_sum), layer_sum, flops


#: Bumped when the measurement changes, so that older cached rates are measured again.
_CACHE_VERSION = 2


def cache_path(cache_dir: str, model: str, batch_size: int, cores: float) -> Path:
    return Path(cache_dir) / f"{model}_b{batch_size}_c{cores:g}_v{_CACHE_VERSION}.json"


def measure_under_quota(model: str, batch_size: int, cores: float, *, cache_dir: str = DEFAULT_CACHE_DIR,
                        refresh: bool = False, min_seconds: float = 4.0, timeout: float = 600.0) -> UnitRate:
    """The :class:`UnitRate` of ``model`` at ``batch_size`` under a quota of ``cores`` (cached)."""
    from ralp_tf.testbed import TestbedConfigError, cpu_budget_support, cpu_group, tf_thread_env

    path = cache_path(cache_dir, model, batch_size, cores)
    if path.is_file() and not refresh:
        return UnitRate.from_dict(json.loads(path.read_text()))
    ok, why = cpu_budget_support()
    if not ok:
        raise MeasurementError(f"cannot measure {model} under a {cores:g}-core quota: {why}")
    os.makedirs(cache_dir, exist_ok=True)
    group_name = f"ralpunit-{os.getpid()}"
    shares_path = f"{path}.profile.raw"
    try:  # ceil(cores) gives the same thread pools as cores (tf_thread_env rounds up) and no throttling
        shares = measure_profile(model, batch_size, shares_path, timeout=timeout,
                                 cpu_cores=float(math.ceil(cores - 1e-9)), group_name=group_name)
    except BenchError as exc:
        raise MeasurementError(f"measuring {model}'s layer shares for {cores:g} cores: {exc}") from None
    finally:
        if os.path.exists(shares_path):
            os.unlink(shares_path)
    out = str(path) + ".raw"
    env = {**os.environ, **tf_thread_env(cores), "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        with cpu_group(group_name, cores) as in_group:
            cmd = in_group([sys.executable, "-m", "scheduler.unitrate", model, str(batch_size), str(min_seconds), out])
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"measuring {model} under {cores:g} cores took more than {timeout:.0f} s") from None
    except TestbedConfigError as exc:
        raise MeasurementError(f"cannot measure {model} under a {cores:g}-core quota: {exc}") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise MeasurementError(f"measuring {model} under {cores:g} cores failed (exit {proc.returncode}):\n{tail}")
    step_s = json.loads(Path(out).read_text())["step_s"]
    os.unlink(out)
    prof, layer_sum, flops = calibrate(shares, step_s)
    rate = UnitRate(model=model, batch_size=batch_size, cores=cores, step_s=step_s, layer_sum_s=layer_sum,
                    flops_per_s=flops, profile=prof)
    path.write_text(json.dumps(rate.to_dict()))
    return rate


def _child(argv: Sequence[str]) -> int:
    """Child entry (runs inside the quota): ``MODEL BATCH MIN_S OUT`` times whole training steps and
    writes ``{"step_s", "steps"}``."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf
    import tf_keras

    from ralp_tf.model import per_sample_loss, resolve_model, synthetic_batch

    model_name, batch, min_seconds, out = argv[0], int(argv[1]), float(argv[2]), argv[3]
    tf_keras.utils.set_random_seed(0)
    model = resolve_model(model_name)()
    x, y = synthetic_batch(model, batch, seed=0)
    loss_fn = per_sample_loss(model)
    opt = tf_keras.optimizers.SGD(0.01)

    @tf.function
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(3):
        step().numpy()
    n, t0 = 0, time.perf_counter()
    while n < 10 or time.perf_counter() - t0 < min_seconds:
        step().numpy()
        n += 1
    step_s = (time.perf_counter() - t0) / n
    Path(out).write_text(json.dumps({"step_s": step_s, "steps": n}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
