"""ParameterServerStrategy runs (stock, RALP or any plan) on a testbed, measured like the baselines.

:func:`run_ps` starts the PS and worker tasks as a :class:`ralp_tf.run.launch.LocalCluster` whose
launcher is the testbed (each task in its own namespace), runs the coordinator
(``python -m ralp_tf.cli.train_job --emit-marks``) as task ``chief``, snapshots the links' wire bytes
when the measured window opens and closes, and returns one record with the same keys as the
Horovod and MultiWorkerMirroredStrategy records.

Units, shared by every strategy: a *global step* is ``workers x batch`` samples (one
synchronous step of a ring; ``workers`` worker steps of PSS). ``bytes_per_step`` is total wire
bytes on all links per global step; ``measured_step_s`` and ``predicted_step_s`` are seconds per
global step; ``samples_per_s`` is what compares across strategies.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from ralp_tf.testbed import jobs

__all__ = ["CRASH_SIGNALS", "run_ps"]

#: Signals that mean a process crashed (nothing here sends them): SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE.
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE})


def run_ps(tb: Any, model: str = "alexnet_cifar", policy: str = "ralp", *, workers: int = 2, ps: int = 1,
           batch: int = 32, steps: int = 10, warmup: int = 3, planner_bandwidth: str | None = None,
           measure_compute: bool = True, compute_scale: float | None = None, timeout: float = 900.0,
           log_dir: str | None = None, compression: str | None = None, steps_per_closure: int = 1,
           optimizer: str = jobs.LOOP_OPTIMIZER, fuse_transfers: bool = False,
           profile_path: str | None = None, calibration_path: str | None = None) -> dict[str, Any]:
    """One PSS run with ``policy`` ("ps", "ralp" or a plan JSON path) and ``compression`` (a
    setting of :mod:`ralp_tf.plan.compression`, given to the planner); ``steps_per_closure`` worker
    steps per scheduled closure, ``optimizer`` the loop's SGD and ``fuse_transfers`` its fused
    transfers (:func:`ralp_tf.run.training.train`); ``profile_path``: measured layer times (e.g. the
    bench's profile JSON) the coordinator plans with instead of measuring its own, ``calibration_path``
    a `ralp-tf calibrate --testbed` file of these hosts it prices with. Its cost model is
    told the testbed's CPU budget per host, or, without budgets, that every host shares this
    machine's cores. Never raises for a failed job: the record then has ``valid: false``,
    ``invalid_reason``, ``log_tail`` and ``crash_signal`` (the signal number) when the coordinator
    was killed by one of :data:`CRASH_SIGNALS`."""
    from ralp_tf.run.launch import LocalCluster

    jobs.check_model_name(model)
    need = [f"worker{i}" for i in range(workers)] + [f"ps{i}" for i in range(ps)] + ["chief"]
    missing = [t for t in need if t not in tb.tasks]
    if missing:
        from ralp_tf.testbed.base import TestbedConfigError

        raise TestbedConfigError(f"testbed lacks task(s) {missing} for {workers} workers and {ps} PS")
    cores = os.cpu_count() or 1
    scale = compute_scale if compute_scale is not None else max(1.0, workers / cores)
    steps_total = steps * workers  # worker steps: `steps` global steps
    meter = jobs.LinkMeter(tb)
    record_strategy = "ralp" if policy == "ralp" else ("ps" if policy == "ps" else "plan")
    # The chief starts at once and waits for the tasks itself, so its TensorFlow import overlaps theirs.
    with LocalCluster(workers=workers, ps=ps, launcher=tb, log_dir=log_dir, env=jobs.base_env()).start(wait=False) as lc:
        cmd = [sys.executable, "-m", "ralp_tf.cli.train_job", "--cluster", json.dumps(lc.cluster_spec_dict),
               "--model", model, "--policy", policy, "--steps", str(steps_total),
               "--warmup-steps", str(warmup * workers), "--batch-size", str(batch), "--emit-marks",
               "--connect-timeout", str(lc.ready_timeout),
               "--bandwidth", planner_bandwidth or ("uncapped" if not tb.emulated else
                                                    _rate_text(tb.bandwidth_bps))]
        cmd += _options(measure_compute, scale, compression, steps_per_closure, optimizer, fuse_transfers,
                        profile_path)
        cmd += _cores_options(getattr(tb, "host_cpu", None), calibration_path)
        proc, watcher, finished = _run_chief(tb, lc, cmd, meter, log_dir, timeout)
        dead = [f"{t.job}:{t.index}" for t in lc.tasks if not t.alive()]
        tails = "\n".join(f"--- {t.job}:{t.index}\n{t.log_tail(15)}" for t in lc.tasks if not t.alive())
    result = watcher.results[-1] if watcher.results else {}
    reasons = []
    if not finished:
        reasons.append("timed out")
    crash_signal = None
    if proc.returncode not in (0, None) or not result:
        reasons.append(f"coordinator exited {proc.returncode}")
        if finished and proc.returncode is not None and -proc.returncode in CRASH_SIGNALS:
            crash_signal = -proc.returncode
    if dead:
        reasons.append(f"task(s) died: {', '.join(dead)}")
    link = meter.delta()
    global_steps = steps
    bytes_total = sum(v["tx"] for v in link.values()) if link else None
    measured_step_s = result.get("measured_step_s")
    out = {
        "strategy": record_strategy, "model": model, "workers": workers, "ps": ps, "batch_per_worker": batch,
        "global_batch": batch * workers, "steps": global_steps,
        "samples_per_s": result.get("samples_per_s"),
        "measured_step_s": measured_step_s,
        "predicted_step_s": result.get("predicted_step_s"),
        "predicted_bytes_per_step": _predicted_link_bytes(result, workers),
        "bytes_per_step": bytes_total / global_steps if bytes_total is not None else None,
        "link_bytes": link, **meter.cpu_fields(global_steps),
        "final_loss": result.get("final_loss"), "plan": result.get("plan"),
        "analysis": result.get("analysis"), "compute_scale": scale if measure_compute else None,
        "compression": compression, "steps_per_closure": steps_per_closure, "optimizer": optimizer,
        "fuse_transfers": fuse_transfers,
        "testbed": tb.describe(), "valid": not reasons,
    }
    if reasons:
        out["invalid_reason"] = "; ".join(reasons)
        out["log_tail"] = watcher.tail_text() + ("\n" + tails if tails else "")
        if crash_signal is not None:
            out["crash_signal"] = crash_signal
    return out


def _run_chief(tb: Any, lc: Any, cmd: list[str], meter: Any, log_dir: str | None,
               timeout: float) -> tuple[Any, Any, bool]:
    """Start the chief's train job while ``lc``'s tasks start, wait for both; ``(proc, watcher,
    finished)``. A chief past ``timeout`` s is killed; a task that never starts raises (chief killed)."""
    from ralp_tf.testbed import _nsops

    proc = tb.popen("chief", cmd, env={**jobs.base_env(), jobs.ACK_ENV: "1"}, stdout=-1, stderr=-2, text=True,
                    stdin=subprocess.PIPE)
    watcher = jobs.JobWatcher([("chief", proc)], on_mark=meter, ack=True,
                              log_path=os.path.join(log_dir, "chief.log") if log_dir else None)
    try:
        lc.wait_ready()
    except BaseException:
        _nsops.killpg_quiet(proc.pid, 9)
        proc.wait()
        raise
    finished = watcher.wait(timeout)
    if not finished:
        _nsops.killpg_quiet(proc.pid, 9)
        proc.wait()
        watcher.wait(10)
    return proc, watcher, finished


def _options(measure_compute: bool, scale: float, compression: str | None, steps_per_closure: int,
             optimizer: str, fuse_transfers: bool = False, profile_path: str | None = None) -> list[str]:
    """The train job's options for the settings that are not its defaults (and the steps per closure
    and the optimizer, always: 0 asks for the cost model's choice, ``auto``)."""
    measured = ["--profile", profile_path] if profile_path else ["--measure-compute"]
    out = [*measured, "--compute-scale", str(scale)] if measure_compute else []
    if compression:
        out += ["--compression", compression]
    out += ["--steps-per-closure", str(steps_per_closure) if steps_per_closure else "auto"]
    out += ["--fuse-transfers"] if fuse_transfers else []
    return out + ["--optimizer", optimizer]


def _cores_options(budgets: dict[str, float] | None, calibration_path: str | None = None) -> list[str]:
    """The coordinator's ``--host-cores`` (one budget for every host) or, without budgets,
    ``--shared-cores`` (this machine's); nothing for budgets that differ between hosts. With a
    calibration file, ``--calibration`` too (it states the hosts' cores itself)."""
    from ralp_tf.run.launch import machine_cores

    calibrated = ["--calibration", calibration_path] if calibration_path else []
    if not budgets:
        return ["--shared-cores", str(machine_cores())] + calibrated
    return (["--host-cores", str(next(iter(budgets.values())))] if len(set(budgets.values())) == 1 else []) + calibrated


def _predicted_link_bytes(result: dict[str, Any], workers: int) -> float | None:
    """Predicted payload bytes crossing host links per global step: the coordinator's per-host-link
    prediction (loopback between tasks of one host excluded, as the link counters see it), or, from
    a coordinator that predates it, its per-worker bytes x ``workers`` (equal on dedicated hosts)."""
    if result.get("predicted_link_bytes_per_step") is not None:
        return float(result["predicted_link_bytes_per_step"])
    if result.get("predicted_bytes_per_step") is not None:
        return float(result["predicted_bytes_per_step"]) * workers
    return None


def _rate_text(bps: float) -> str:
    from ralp_tf.plan.cluster import format_bandwidth

    return format_bandwidth(bps)
