"""Ring all-reduce training on this machine: MultiWorkerMirroredStrategy, one process per worker.

:func:`train_ring` is the ring's counterpart of :func:`ralp_tf.run.training.train` on a
:class:`~ralp_tf.run.launch.LocalCluster`: it starts ``workers`` processes
(``python -m ralp_tf.run._ring_task``, one ``TF_CONFIG`` each, on loopback with the same bind shim as
a LocalCluster's tasks, dying with this process), reads the chief's protocol lines (a worker step
counter for progress, the measured window), counts the bytes between the workers with the kernel's
per-socket counters (:mod:`ralp_tf.run.traffic`) inside that window, and returns a
:class:`~ralp_tf.run.training.RunResult` with the cost model's prediction
(:func:`ralp_tf.plan.costmodel.estimate_allreduce`, ``implementation="mwms"``).

Counting, as for every strategy (:mod:`ralp_tf.plan.strategies`): ``steps`` and ``warmup_steps`` are
worker steps (one batch of ``batch_size`` on one worker); the ring runs whole synchronous steps of N
worker steps, so it may end up to N - 1 worker steps past ``warmup + steps``. ``bytes_per_step`` is the
bytes between all workers (both directions) per worker step, ``losses`` one per synchronous step
(the workers' mean), ``total_steps`` the worker steps done. Checkpoints hold the unplaced model
(``tf.train.Checkpoint(model, optimizer, step)``), the object graph of a PSS job's, so a job resumes
under either strategy (:mod:`ralp_tf.run._ring_task`).

A worker that dies stops the others (a ring cannot lose a member): ClusterRuntimeError naming it,
its log tail and the last checkpoint. SIGINT/SIGTERM stop every worker at once
(:func:`ralp_tf.run.launch.track`).

**Where the workers run** is a *launcher*: a callable ``launcher(workers, ring_args, log_dir)`` that
returns a job with :class:`RingJob`'s interface (``start``/``stop`` as a context manager, ``lines``,
``answer``, ``meter``, ``wait``). :class:`RingJob` (the default) runs local processes, its bytes read
from this machine's sockets; :func:`train_ring_on_cluster` passes
:class:`ralp_tf.run.roles.RoleRingJob`, which runs them on a real cluster's worker hosts through
``ralp-tf server --roles``, its bytes from ``ralp-tf agent`` (``agent_port``) or unavailable (None).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ralp_tf.errors import ClusterRuntimeError, ValidationError, check_int
from ralp_tf.plan.cluster import Cluster, Rates
from ralp_tf.plan.costmodel import estimate_allreduce
from ralp_tf.run._ring_task import MARK
from ralp_tf.run.checkpoints import latest_complete_step
from ralp_tf.run.launch import (TaskProcess, check_tasks_fit_in_memory, free_port, kill_and_wait, loopback_env,
                                track)
from ralp_tf.run.remote import CONNECT_TIMEOUT_S, wait_reachable
from ralp_tf.run.roles import CONTROL_PORT_OFFSET, RingArgs, RoleRingJob
from ralp_tf.run.tfconfig import ClusterConfig
from ralp_tf.run.traffic import Endpoint, TrafficMeter, per_step

__all__ = ["RING_IMPLEMENTATION", "RingJob", "train_ring", "train_ring_on_cluster"]

log = logging.getLogger(__name__)
#: The ring ralp-tf run trains with (the cost model prices each implementation's CPU).
RING_IMPLEMENTATION = "mwms"


class RingJob:
    """``workers`` ring worker processes on loopback (module docstring): :meth:`start`, then
    :meth:`lines` yields the chief's protocol lines; :meth:`answer` replies to a measure mark;
    :meth:`stop` kills them all (also at exit and on SIGTERM/SIGINT)."""

    def __init__(self, workers: int, args: RingArgs, log_dir: str | os.PathLike | None = None) -> None:
        check_int(workers, "workers")
        check_tasks_fit_in_memory(workers)
        self.num_workers, self.task_args = workers, args.argv()
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="ralp_tf_ring_"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.tasks: list[TaskProcess] = []
        self._lines: "queue.Queue[str | None]" = queue.Queue()

    def __enter__(self) -> "RingJob":
        return self.start()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.stop()
        if exc_type is None and self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def start(self) -> "RingJob":
        track(self)
        spec = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(self.num_workers)]}
        try:
            for i, address in enumerate(spec["worker"]):
                self.tasks.append(self._spawn(i, address, spec))
        except BaseException:
            self.stop()
            raise
        threading.Thread(target=self._read_chief, name="ralp-ring-chief", daemon=True).start()
        return self

    def _spawn(self, index: int, address: str, spec: dict[str, list[str]]) -> TaskProcess:
        env = loopback_env({**os.environ, "TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": "worker",
                                                                                            "index": index}}),
                            "TF_USE_LEGACY_KERAS": "1", "PYTHONFAULTHANDLER": "1"})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        argv = [sys.executable, "-m", "ralp_tf.run._ring_task", *self.task_args, "--parent-pid", str(os.getpid())]
        log_path = self.log_dir / f"worker-{index}.log"
        with open(log_path, "wb") as out:
            chief = index == 0
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if chief else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if chief else out, stderr=out)
        return TaskProcess("worker", index, address, proc, log_path)

    def _read_chief(self) -> None:
        proc = self.tasks[0].proc
        assert proc.stdout is not None
        with open(self.tasks[0].log_path, "ab") as copy:
            for raw in proc.stdout:
                copy.write(raw)
                copy.flush()
                line = raw.decode(errors="replace").strip()
                if line.startswith(MARK + " "):
                    self._lines.put(line[len(MARK) + 1:])
        self._lines.put(None)

    def lines(self, poll_s: float = 0.5) -> Any:
        """The chief's protocol lines (``kind rest``) as they come; ClusterRuntimeError when a worker
        exits with an error first, or the chief ends without a result."""
        while True:
            try:
                line = self._lines.get(timeout=poll_s)
            except queue.Empty:
                self._check_alive()
                continue
            if line is None:  # the chief's stdout closed: it is exiting
                try:
                    self.tasks[0].proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                self._check_alive(final=True)
                return
            yield line

    def _check_alive(self, final: bool = False) -> None:
        for t in self.tasks:
            code = t.proc.poll()
            if code not in (None, 0) or (final and code is None and t.index == 0):
                raise ClusterRuntimeError(f"ring worker {t.index} exited with code {code}; its log "
                                          f"({t.log_path}) ends:\n{t.log_tail()}")

    def answer(self) -> None:
        """Let the chief go on after a measure mark."""
        stdin = self.tasks[0].proc.stdin
        if stdin is not None:
            stdin.write(b"\n")
            stdin.flush()

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint(t.name, t.pid, t.port) for t in self.tasks]

    def meter(self) -> TrafficMeter:
        """The bytes between the workers, from this machine's per-socket counters."""
        return TrafficMeter(self.endpoints())

    def wait(self, timeout_s: float = 60.0) -> None:
        """Wait for every worker to exit (after the chief's result)."""
        deadline = time.monotonic() + timeout_s
        for t in self.tasks:
            try:
                t.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        self._check_alive()

    def stop(self, release: bool = True) -> None:
        """Kill every worker and wait for it (``release`` is LocalCluster's signature; nothing to release)."""
        tasks, self.tasks = self.tasks, []
        kill_and_wait(tasks)


def train_ring(model: str, *, workers: int = 2, steps: int = 30, warmup_steps: int = 3, batch_size: int = 32,
               learning_rate: float = 0.01, seed: int = 0, checkpoint_dir: str | None = None,
               checkpoint_every: int = 10, log_dir: str | None = None,
               on_step: Callable[[int], None] | None = None, optimizer: str = "sgd",
               sequence_length: int | None = None, profile: Any = None, bandwidth: Any = None, flops: Any = None,
               cluster: Cluster | None = None, launcher: Callable[..., Any] = RingJob) -> Any:
    """Train ``model`` (a built-in name or ``module:function``: every worker process builds it) with
    MultiWorkerMirroredStrategy (RING) on ``workers`` local processes (or where ``launcher`` runs
    them: module docstring) for ``warmup_steps + steps`` worker steps, and measure the last ``steps``.
    ``profile`` (a ModelProfile of the same batch size) and ``cluster`` (default:
    ``Cluster.local(workers, 0)`` with ``bandwidth`` and ``flops``) give the prediction; without
    ``profile`` there is none (0). ``on_step(i)`` is called for every worker step ``i`` as the chief
    reports it. Returns a RunResult (``strategy`` "mwms"; ``bytes_per_step`` None when the launcher's
    job has no meter)."""
    from ralp_tf.run.training import RunResult, warmup_steps_for

    if not isinstance(model, str):
        raise ValidationError("the ring trains a model every worker process builds: pass a built-in name or "
                              "'module:function' (a reference importable on PYTHONPATH), not a Python object")
    for name, value in (("steps", steps), ("batch_size", batch_size), ("checkpoint_every", checkpoint_every)):
        check_int(value, name)
    warmup = warmup_steps_for(warmup_steps, workers)
    total = warmup + steps
    args = RingArgs(model=model, steps=total, warmup=warmup, batch=batch_size, seed=seed, lr=learning_rate,
                    optimizer=optimizer, checkpoint_dir=checkpoint_dir or "", checkpoint_every=checkpoint_every,
                    sequence_length=sequence_length or 0)
    cluster = cluster or Cluster.local(workers, 0, **Rates(bandwidth, flops).kwargs())
    done_before = latest_complete_step(checkpoint_dir)
    result: dict[str, Any] = {}
    delta: dict[Any, int] = {}
    with launcher(workers, args, log_dir) as job:
        meter = job.meter()
        reported = done_before
        for line in job.lines():
            kind, _, rest = line.partition(" ")
            if kind == "step" and on_step:
                done = int(rest.split()[0])
                for i in range(reported, min(done, total)):
                    on_step(i)
                reported = max(reported, done)
            elif kind == "measure":
                if meter is not None and rest == "start":
                    meter.start()
                elif meter is not None:
                    delta = meter.stop()
                job.answer()
            elif kind == "result":
                result = json.loads(rest)
        job.wait()
    if not result:
        raise ClusterRuntimeError("the ring's chief ended without a result; see its log")
    measured = int(result["measured_worker_steps"])
    elapsed = float(result["elapsed"])
    est = estimate_allreduce(profile, cluster, implementation=RING_IMPLEMENTATION) if profile is not None else None
    between = sum(v for (a, b), v in delta.items())
    return RunResult(
        policy="mwms", strategy="mwms", steps=measured, batch_size=batch_size,
        steps_per_s=measured / elapsed if elapsed else 0.0,
        samples_per_s=measured * batch_size / elapsed if elapsed else 0.0,
        final_loss=result["losses"][-1] if result["losses"] else float("nan"), losses=result["losses"],
        bytes_per_step=between / measured if measured and meter is not None else None,
        bytes_between=per_step(delta, measured) if measured else {},
        predicted_bytes_per_step=est.bytes_per_step / workers if est else 0.0,
        predicted_step_s=est.step_s if est else 0.0,
        predicted_link_bytes_per_step=est.link_bytes_per_step if est else None,
        measured_step_s=elapsed / result["sync_steps"] if result["sync_steps"] else 0.0, plan=None,
        total_steps=int(result["done"]), resumed_from_step=result["resumed_from_step"],
        restored_weights_checksum=result["restored_weights_checksum"],
        restored_weights_digest=result["restored_weights_digest"],
        final_weights_checksum=result["final_weights_checksum"], steps_per_closure=1, optimizer=optimizer)


def train_ring_on_cluster(config: ClusterConfig, model: str, *, agent_port: int | None = None,
                          connect_timeout: float = CONNECT_TIMEOUT_S, control_offset: int = CONTROL_PORT_OFFSET,
                          rates: dict[str, Any] | None = None, checkpoint_dir: str | None = None,
                          batch_size: int = 32, seed: int = 0, sequence_length: int | None = None,
                          optimizer: str = "sgd", prepared: Any = None, calibration: Any = None,
                          **ring_kwargs: Any) -> Any:
    """:func:`train_ring` on the worker hosts of the running cluster ``config``, each running
    ``ralp-tf server --roles`` (:mod:`ralp_tf.run.roles`): the ring's workers take the workers' task
    addresses, worker 0 writes ``checkpoint_dir`` (made absolute: the same shared folder on every host).
    Waits up to ``connect_timeout`` s for every worker's control port first (naming the silent ones).
    Bytes per step come from ``ralp-tf agent`` on ``agent_port`` (else None); the prediction prices
    ``config``'s cluster at ``rates`` with ``prepared``'s profile (profiled here when not given), both
    calibrated with ``calibration`` (``ralp-tf calibrate``'s, of this cluster: refused otherwise)."""
    from ralp_tf.run.roles import control_spec
    from ralp_tf.run.training import TrainConfig, prepare_model

    workers = len(config.spec.get("worker", []))
    if not workers:
        raise ValidationError(f"{config.source} has no 'worker' job: the ring trains on the workers")
    try:
        wait_reachable(control_spec(config, control_offset), connect_timeout)
    except ClusterRuntimeError as exc:
        raise ClusterRuntimeError(f"{exc} (these are control ports: the ring needs `ralp-tf server --roles` on every "
                                  f"worker host, each task's port + {control_offset})") from None
    if prepared is None:
        from ralp_tf.model.builtin import resolve_model

        prepared = prepare_model(resolve_model(model), TrainConfig(batch_size=batch_size, seed=seed,
                                                                   sequence_length=sequence_length, optimizer=optimizer))
    profile, cluster = prepared.profile, config.cost_cluster(**dict(rates or {}))
    if calibration is not None:
        from ralp_tf.run.calibrated import calibrated_job

        profile, cluster = calibrated_job(calibration, cluster, profile, rates=rates)

    def launcher(n: int, args: RingArgs, log_dir: Any) -> RoleRingJob:
        return RoleRingJob(config, n, args, log_dir, offset=control_offset, agent_port=agent_port,
                           timeout_s=connect_timeout)

    return train_ring(model, workers=workers, batch_size=batch_size, seed=seed, sequence_length=sequence_length,
                      optimizer=optimizer, checkpoint_dir=os.path.abspath(checkpoint_dir) if checkpoint_dir else None,
                      profile=profile, cluster=cluster, launcher=launcher,
                      **ring_kwargs)
