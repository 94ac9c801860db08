r"""A model's profile under a CPU quota: layer shares measured unthrottled, calibrated to whole steps.

A testbed host with ``--host-cpu c`` is a cgroup v1 CPU group whose quota is ``c`` cores per CFS
period (100 ms). Per-layer medians taken under that quota are not the layers' times there: a pass
that fits inside one period's quota runs at full speed, one that does not waits out the period
(resnet_cifar at 0.3 core: the raw medians sum to 0.115 s, whole passes under the quota take
about 0.22 s; at 0.1 core small_cnn's dense head measured 25x its one-core time while the step was 10x).
So :func:`measure_quota_profile` runs two child processes, TF thread pools sized by
``tf_thread_env(c)`` as the testbed's tasks are:

1. the profiler (:func:`ralp_tf.bench.predictions.measure_profile`: median of 5 forward+backward
   passes per layer) under a quota of ``ceil(c)`` cores, as many as it has threads, so never
   throttled: the layers' *shares* of a step;
2. :func:`time_steps` under the quota of ``c`` cores: whole forward+backward passes of the model
   (every layer's gradients, as the profile's layer times are; no optimizer update, which the cost
   model prices where it runs: a table's whole-table passes on its PS task) for at least
   ``min_seconds`` (many CFS periods): ``step_s``.

and :func:`calibrate` scales the shares to the whole step:
``t_l = t_l^{measured} x step_s / sum_l t_l^{measured}``. The effective FLOP rate under the quota is
``F = 3 b sum_l f_l / step_s``. The bench prices every budgeted cell with this profile, and the
scheduler's emulated types (:mod:`scheduler.execution.unitrate`) are measured the same way.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from ralp_tf.bench.config import BenchError
from ralp_tf.bench.predictions import measure_profile
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.run._procutil import die_with_parent

__all__ = ["QuotaProfile", "calibrate", "time_steps", "measure_quota_profile", "MIN_SECONDS"]

#: Whole steps are timed for at least this long under the quota (40 CFS periods of 100 ms).
MIN_SECONDS = 4.0


@dataclasses.dataclass(frozen=True)
class QuotaProfile:
    """``profile``: the layer shares (unthrottled, ``layer_sum_s`` in all) scaled to ``step_s``, the
    whole training step measured under ``cores`` of quota; ``flops_per_s`` the rate it implies."""

    profile: ModelProfile
    cores: float
    step_s: float
    layer_sum_s: float
    flops_per_s: float

    @property
    def calibration(self) -> float:
        """``step_s / layer_sum_s``: how far the unthrottled layer medians are from the quota's step."""
        return self.step_s / self.layer_sum_s if self.layer_sum_s > 0 else float("nan")

    def summary(self) -> dict[str, float]:
        """``cores, step_s, layer_sum_s, calibration, flops_per_s`` (the bench records it per model)."""
        return {"cores": self.cores, "step_s": self.step_s, "layer_sum_s": self.layer_sum_s,
                "calibration": self.calibration, "flops_per_s": self.flops_per_s}


def calibrate(raw: ModelProfile, step_s: float) -> tuple[ModelProfile, float, float]:
    """``(raw with its layer times scaled to sum to step_s, the raw layer sum, 3 b sum f_l / step_s)``.
    Raises BenchError when ``raw`` has no measured layer times or ``step_s`` is not positive."""
    layer_sum = sum(l.measured_seconds or 0.0 for l in raw.compute_layers)
    if layer_sum <= 0 or not step_s > 0:
        raise BenchError(f"profile of {raw.model_name} has no measured layer times (sum {layer_sum}) or the "
                         f"step time is {step_s}; measure with profile(measure=True)")
    flops = 3.0 * raw.batch_size * sum(l.flops for l in raw.compute_layers) / step_s
    return raw.scaled_compute(step_s / layer_sum), layer_sum, flops


def time_steps(model: str, batch_size: int, cores: float, *, group_name: str, min_seconds: float = MIN_SECONDS,
               timeout: float = 600.0) -> float:
    """Seconds per whole forward+backward pass (gradients of every trainable variable) of ``model``
    at ``batch_size``, in a child process (it dies with this one, as the profiler's does) under a
    quota of ``cores`` (CPU group ``group_name``, removed afterwards). Raises BenchError."""
    from ralp_tf.testbed import TestbedConfigError, cpu_group, jobs, tf_thread_env

    env = jobs.base_env(tf_thread_env(cores))
    fd, out = tempfile.mkstemp(prefix="ralp_quota_", suffix=".json")
    try:
        with cpu_group(group_name, cores) as in_group:
            cmd = in_group([sys.executable, "-m", "ralp_tf.bench.quota_profile", model, str(batch_size),
                            str(min_seconds), out])
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                                  preexec_fn=die_with_parent)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            raise BenchError(f"timing {model}'s steps under {cores:g} cores failed (exit {proc.returncode}):\n{tail}")
        return float(json.loads(Path(out).read_text())["step_s"])
    except subprocess.TimeoutExpired:
        raise BenchError(f"timing {model}'s steps under {cores:g} cores took more than {timeout:.0f} s") from None
    except TestbedConfigError as exc:
        raise BenchError(f"cannot time {model} under a {cores:g}-core quota: {exc}") from None
    finally:
        os.close(fd)
        os.unlink(out)


def measure_quota_profile(model: str, batch_size: int, cores: float, out_path: str, *,
                          group_name: str = "ralpbench-profile", min_seconds: float = MIN_SECONDS,
                          timeout: float = 600.0) -> QuotaProfile:
    """``model``'s calibrated profile under a quota of ``cores`` (module docstring); the calibrated
    profile is also written to ``out_path`` as JSON. Raises BenchError (no root or cgroup v1, a
    child failed)."""
    shares = measure_profile(model, batch_size, out_path, timeout=timeout,
                             cpu_cores=float(math.ceil(cores - 1e-9)), group_name=group_name)
    step_s = time_steps(model, batch_size, cores, group_name=group_name, min_seconds=min_seconds, timeout=timeout)
    prof, layer_sum, flops = calibrate(shares, step_s)
    Path(out_path).write_text(prof.to_json())
    return QuotaProfile(profile=prof, cores=cores, step_s=step_s, layer_sum_s=layer_sum, flops_per_s=flops)


def _child(argv: Sequence[str]) -> int:
    """Child entry (runs inside the quota): ``MODEL BATCH MIN_S OUT`` times whole forward+backward
    passes and writes ``{"step_s", "steps"}``."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf
    import tf_keras

    from ralp_tf.model import per_sample_loss, resolve_model, synthetic_batch

    model_name, batch, min_seconds, out = argv[0], int(argv[1]), float(argv[2]), argv[3]
    tf_keras.utils.set_random_seed(0)
    model = resolve_model(model_name)()
    x, y = synthetic_batch(model, batch, seed=0)
    loss_fn = per_sample_loss(model)

    @tf.function
    def step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(y, model(x, training=True)))
        return loss, tape.gradient(loss, model.trainable_variables)

    for _ in range(3):
        step()[0].numpy()
    n, t0 = 0, time.perf_counter()
    while n < 10 or time.perf_counter() - t0 < min_seconds:
        step()[0].numpy()
        n += 1
    step_s = (time.perf_counter() - t0) / n
    Path(out).write_text(json.dumps({"step_s": step_s, "steps": n}))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
