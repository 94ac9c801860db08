"""Profiles and cost-model predictions for the benchmark (no TensorFlow in the bench process:
profiling runs in a child, ``python -m ralp_tf.bench _profile MODEL BATCH OUT``, which dies
with the bench through ``PR_SET_PDEATHSIG``).

**Predictions.** PSS strategies: the coordinator's own ``ralp_tf.plan.costmodel.estimate`` on a profile
with measured layer times x ``compute_scale`` (run_ps: ``max(1, workers / cores)`` without CPU
budgets; 1 with them, since every emulated host then has its own budget). Rings:
``costmodel.estimate_allreduce`` on a profile measured here the same way (a separate process,
same batch, same seed), scaled by the same ``compute_scale``, on a cluster whose links run at the
testbed's effective rate. Predicted bytes are payload bytes converted to wire bytes with
``costmodel.wire_bytes`` (``x (1 + 66/1448)``) on the namespace testbed.

**CPU budgets.** With ``--host-cpu C`` the profiling child runs inside a cgroup v1 CPU group capped
at ``C`` cores, with TF's thread pools sized to ``C`` (:func:`ralp_tf.testbed.tf_thread_env`), as
every testbed task is; so its layer times are those of a host with that budget (the unit is
measured, not assumed), and the cost model's host CPU limit (``costmodel.estimate``: PS compute and
worker compute of one host share its budget) prices colocated tasks.

**Scheduler plans** come from the placement policy ``scheduler.<solver>``
(:func:`ralp_tf.place.policies.resolve_policy`), which the ``scheduler`` package registers through an
entry point; the bench never imports that package by name.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ralp_tf.run._procutil import die_with_parent
from ralp_tf.bench.config import PSS_VARIANTS, RING_IMPLEMENTATION, BenchError, Cell
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE, MEASURED_FLOOR, FloorTerms

__all__ = ["SCHEDULER_POLICY_PREFIX", "measure_profile", "profile_main", "compute_scale", "cell_cluster",
           "predictions", "scheduler_plan"]

if TYPE_CHECKING:
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.plan.plans import Plan
    from ralp_tf.model.profiles import ModelProfile

#: The policy name of scheduler solver ``name`` is ``SCHEDULER_POLICY_PREFIX + name``.
SCHEDULER_POLICY_PREFIX = "scheduler."


def measure_profile(model: str, batch: int, out_path: str, timeout: float = 600.0, *,
                    cpu_cores: float | None = None, group_name: str = "ralpbench-profile",
                    measure: bool = True) -> ModelProfile:
    """Profile ``model`` at ``batch`` with measured layer times (``profile(measure=True)``) in a
    child process (it dies with this one) and return the :class:`~ralp_tf.model.profiler.ModelProfile`.
    With ``cpu_cores`` the child runs in CPU group ``group_name`` capped at that many cores, with
    TF's thread pools sized to it (root and cgroup v1; the group is removed afterwards).
    Raises :class:`BenchError` with the child's output tail on failure."""
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.testbed import _cgroups, jobs, tf_thread_env

    cmd = [sys.executable, "-m", "ralp_tf.bench", "_profile", model, str(batch), out_path] + ([] if measure else
                                                                                               ["structure"])
    env = jobs.base_env()
    group = None
    if cpu_cores is not None:
        try:
            group = _cgroups.create_group(group_name, cpu_cores)
        except _cgroups.CgroupError as exc:
            raise BenchError(f"profiling {model} under a {cpu_cores:g}-core budget: {exc}") from None
        cmd = _cgroups.join_argv(group, cmd)
        env = {**env, **tf_thread_env(cpu_cores)}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        raise BenchError(f"profiling {model} took more than {timeout:.0f} s") from None
    finally:
        if group is not None:
            _cgroups.remove_group(group)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise BenchError(f"profiling {model} failed (exit {proc.returncode}):\n{tail}")
    return ModelProfile.from_json(Path(out_path).read_text())


def profile_main(argv: Sequence[str]) -> int:
    """Child entry: ``python -m ralp_tf.bench _profile MODEL BATCH OUT [structure]`` writes the profile
    JSON (``structure``: without measured layer times)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tf_keras

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.profiler import profile

    model, batch, out = argv[0], int(argv[1]), argv[2]
    tf_keras.utils.set_random_seed(0)
    prof = profile(resolve_model(model)(), batch_size=batch, measure=argv[3:4] != ["structure"])
    Path(out).write_text(prof.to_json())
    return 0


def compute_scale(workers: int, host_cpu: float | None = None) -> float:
    """The cores-sharing factor applied to measured layer times, as run_ps does:
    ``max(1, workers / cores)`` without CPU budgets; 1 with them (``host_cpu`` cores per host: the
    profile was measured under that budget and each worker's host has its own)."""
    if host_cpu is not None:
        return 1.0
    return max(1.0, workers / (os.cpu_count() or 1))


def cell_cluster(cell: Cell, bandwidth_bps: float, host_cpu: float | None = None, calibration: Any = None,
                 workers_per_host: int = 1) -> Cluster:
    """The cluster of ``cell``: its workers and PS tasks on the hosts of its layout (one link of
    ``bandwidth_bps`` per host, shared by the host's tasks), as the testbed runs them, with
    ``host_cpu`` cores per host when the testbed budgets them, else sharing this machine's cores;
    with ``calibration`` (``ralp-tf calibrate --testbed``'s, ``bench --calibration``) at the rates,
    serving CPU and floor it measured on those hosts instead. ``workers_per_host`` worker tasks on
    each host (a two-per-host variant, :data:`~ralp_tf.bench.config.PSS_VARIANTS`)."""
    from ralp_tf.plan.calibration import calibrated_cluster
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.run.launch import machine_cores

    cluster = Cluster.local(cell.workers * workers_per_host, cell.num_ps, bandwidth=bandwidth_bps, layout=cell.layout,
                            workers_per_host=workers_per_host)
    cluster = cluster.with_host_cores(host_cpu) if host_cpu else cluster.with_shared_cores(machine_cores())
    return calibrated_cluster(calibration, cluster, match_hosts=False) if calibration is not None else cluster


def predictions(prof: ModelProfile, cell: Cell, bandwidth_bps: float,
                scheduler_plan: Plan | None = None, host_cpu: float | None = None, *,
                steps_per_closure: int = 1, floor: FloorTerms | None = MEASURED_FLOOR,
                fuse_transfers: bool = False, calibration: Any = None, strategies: Sequence[str] = ()
                ) -> dict[str, Any]:
    """Bench-side cost-model predictions for a cell (used for steps, ETA and the ring strategies):
    ``{strategy: {"step_s", "payload_bytes_per_step"}}`` per global step (payload bytes crossing
    host links, ``StepEstimate.link_bytes_per_step``, as the testbed's link counters see them;
    for ``ralp``, ``ralp_nosplit`` and ``ralp_<codec>`` also the analyzer's ``"plan"`` and its ``"label"``), plus the analyzer's decision (``"analysis"``) and the rejected alternative's plan
    (``"rejected"``, only when the analyzer chose no split). ``host_cpu``: the cores of every host's
    budget when ``prof`` was measured under it (:func:`compute_scale`). The PSS strategies pay
    ``floor`` (:mod:`ralp_tf.plan.closures`) at ``steps_per_closure``; the ring strategies do not.
    With ``steps_per_closure`` ``AUTO_STEPS_PER_CLOSURE`` each PSS entry is priced at its own
    :func:`~ralp_tf.plan.costmodel.best_steps_per_closure`; every PSS entry names its
    ``"steps_per_closure"``. ``fuse_transfers`` prices the PSS strategies' fused transfers.
    ``calibration`` prices the cell's hosts as it measured them (:func:`cell_cluster`; its floor
    wins over ``floor``); ``prof`` is then its calibrated profile. Each of
    :data:`~ralp_tf.bench.config.PSS_VARIANTS` among ``strategies`` is the analyzer's plan for its
    own cluster (two workers per host, fused transfers), priced there."""
    from ralp_tf.place.policies import RalpPolicy
    from ralp_tf.plan.costmodel import best_steps_per_closure, estimate, estimate_allreduce

    scale = compute_scale(cell.workers, host_cpu)
    p = prof.scaled_compute(scale)
    auto = steps_per_closure == AUTO_STEPS_PER_CLOSURE
    floor = calibration.floor if calibration is not None and calibration.floor is not None else floor
    cluster = cell_cluster(cell, bandwidth_bps, host_cpu, calibration).with_closures(1 if auto else steps_per_closure,
                                                                                     floor)
    cluster = cluster.with_fused_transfers(fuse_transfers)
    ralp = RalpPolicy()  # the analyzer as `--policy ralp` runs it
    a = ralp.analyze(p, cluster)
    out: dict[str, Any] = {
        "ps": _pss(a.baseline.estimate),
        "ralp": {**_pss(a.chosen.estimate), "label": a.chosen.label, "plan": a.plan},
        "allreduce": _ring(estimate_allreduce(p, cluster, implementation=RING_IMPLEMENTATION["allreduce"])),
        "analysis": {"split": a.is_split, "chosen": a.chosen.label, "predicted_speedup": a.predicted_speedup,
                     "best_split": a.best_split.label if a.best_split else None,
                     "compute_scale": scale},
    }
    out["horovod"] = _ring(estimate_allreduce(p, cluster, implementation=RING_IMPLEMENTATION["horovod"]))
    out["horovod_fp16"] = _ring(estimate_allreduce(p, cluster, gradient_codec="fp16",
                                                   implementation=RING_IMPLEMENTATION["horovod_fp16"]))
    whole = RalpPolicy(split=False).analyze(p, cluster)
    out["ralp_nosplit"] = {**_pss(whole.chosen.estimate), "label": whole.chosen.label, "plan": whole.plan}
    for codec in ("fp16", "bf16"):
        ac = ralp.analyze(p, cluster, compression=codec)
        out[f"ralp_{codec}"] = {**_pss(ac.chosen.estimate), "label": ac.chosen.label, "plan": ac.plan}
    if not a.is_split and a.best_split is not None:
        out["rejected"] = {**_pss(a.best_split.estimate), "plan": a.best_split.plan, "label": a.best_split.label}
    if scheduler_plan is not None:
        out["scheduler"] = _pss(estimate(p, cluster, scheduler_plan))
    clusters, profiles = {}, {}
    for name in [s for s in strategies if s in PSS_VARIANTS]:
        _, per_host, fused = PSS_VARIANTS[name]
        clusters[name] = cell_cluster(cell, bandwidth_bps, host_cpu, calibration, per_host).with_closures(
            1 if auto else steps_per_closure, floor).with_fused_transfers(fuse_transfers or fused)
        profiles[name] = prof.scaled_compute(compute_scale(cell.workers * per_host, host_cpu))
        av = ralp.analyze(profiles[name], clusters[name])
        out[name] = {**_pss(av.chosen.estimate), "label": av.chosen.label, "plan": av.plan}
    for key in ("ps", "ralp", "ralp_nosplit", "ralp_fp16", "ralp_bf16", "rejected", "scheduler", *clusters):
        if key not in out:
            continue
        plan = None if key == "ps" else (scheduler_plan if key == "scheduler" else out[key]["plan"])
        c, pk = clusters.get(key, cluster), profiles.get(key, p)
        k = best_steps_per_closure(pk, c, plan) if auto else c.steps_per_closure
        if k != c.steps_per_closure:
            out[key].update(_pss(estimate(pk, c.with_closures(k, floor), plan)))
        out[key]["steps_per_closure"] = k
    return out


def _pss(e: Any) -> dict[str, Any]:
    """A PSS estimate's step, link bytes and the terms behind them (seconds per worker step for
    compute and comm, host CPU seconds and task CPU core-seconds per synchronous step)."""
    return {"step_s": e.step_s, "payload_bytes_per_step": e.link_bytes_per_step, "bottleneck": e.bottleneck,
            "compute_s": e.worker_compute_s, "ps_compute_s": dict(e.ps_compute_s), "comm_s": e.comm_s,
            "host_cpu_s": dict(e.host_cpu_s), "link_s": dict(e.link_s), "task_cpu_s": dict(e.task_cpu_s)}


def _ring(e: Any) -> dict[str, Any]:
    return {"step_s": e.step_s, "payload_bytes_per_step": e.bytes_per_step, "bottleneck": e.bottleneck,
            "compute_s": e.worker_compute_s, "comm_s": e.comm_s}


def scheduler_plan(prof: ModelProfile, cell: Cell, bandwidth_bps: float, solver_name: str,
                   host_cpu: float | None = None) -> Plan:
    """The :class:`ralp_tf.Plan` of policy ``scheduler.<solver_name>`` for ``cell`` (profile
    scaled like run_ps's). Raises :class:`BenchError` naming why it is unavailable: the policy
    cannot be loaded or is unknown, its ``plan`` fails, or it returns no Plan."""
    from ralp_tf.plan.plans import Plan
    from ralp_tf.place.policies import resolve_policy

    name = SCHEDULER_POLICY_PREFIX + solver_name
    try:
        policy = resolve_policy(name)
    except Exception as exc:  # the plugin is missing, broken, or has no such solver: skip with the reason
        raise BenchError(f"placement policy {name!r} is unavailable ({type(exc).__name__}: {exc})") from None
    try:
        plan = policy.plan(prof.scaled_compute(compute_scale(cell.workers, host_cpu)),
                           cell_cluster(cell, bandwidth_bps, host_cpu))
    except Exception as exc:
        raise BenchError(f"{name}: {type(policy).__name__}().plan failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(plan, Plan):
        raise BenchError(f"{name}: {type(policy).__name__}().plan returned {type(plan).__name__}, not a ralp_tf.Plan")
    return plan
