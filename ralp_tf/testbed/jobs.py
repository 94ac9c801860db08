"""Shared pieces of the baseline training jobs (Horovod, MultiWorkerMirroredStrategy).

Two halves:

* **rank side** (runs inside each training process, imports TensorFlow lazily): argument
  parsing, the model and its synthetic batch, a step timer, the weight checksum and the one
  JSON result line;
* **launcher side** (runs in the benchmark process, never imports TensorFlow): streaming the
  tasks' output, snapshotting the testbed's link counters when rank 0 starts and ends its timed
  steps, and folding the ranks' results into one record with ``valid``.

Protocol between them: the rank prints lines ``RALP_JOB <kind> <json>`` with kind ``start``
(rank 0, after the warm-up steps), ``end`` (rank 0, after the timed steps) and ``result`` (every
rank, at exit). Lines may carry a prefix (``horovodrun`` adds ``[1,0]<stdout>:``).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import subprocess
import threading
import time
from typing import Any, Callable, Sequence

from ralp_tf.run.training import LOOP_OPTIMIZER, OPTIMIZERS

__all__ = ["MARK", "ACK_ENV", "emit", "add_job_args", "parse_job_args", "setup_tf", "make_timer", "report", "parse_line",
           "JobWatcher", "LinkMeter", "summarize", "check_model_name", "resolve_workers", "job_argv", "base_env",
           "is_finite"]

MARK = "RALP_JOB"

# ------------------------------------------------------------------------------------------
# rank side


#: Set (to "1") by a launcher whose :class:`JobWatcher` answers each ``start``/``end`` mark on the
#: rank's stdin once it has read its counters: the rank then waits for that answer.
ACK_ENV = "RALP_JOB_ACK"


def emit(kind: str, **data: Any) -> None:
    """Print one protocol line (flushed at once, so the launcher sees it when it happens). With
    :data:`ACK_ENV` set, a ``start`` or ``end`` mark returns once the launcher has answered it
    (at most 30 s), so the counters it reads bracket the timed steps however busy the machine is."""
    print(f"{MARK} {kind} {json.dumps(data, sort_keys=True)}", flush=True)
    if kind in ("start", "end") and os.environ.get(ACK_ENV) == "1":
        import select
        import sys

        ready, _, _ = select.select([sys.stdin], [], [], 30.0)
        if ready:
            sys.stdin.readline()


def add_job_args(ap: argparse.ArgumentParser) -> None:
    """The arguments every rank script takes (:func:`parse_job_args` checks the counts)."""
    ap.add_argument("--model", default="alexnet_cifar", help="built-in name (ralp_tf.model.builtin) or module:function")
    ap.add_argument("--batch", type=int, default=32, help="batch per worker (global batch = batch x workers)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed steps first, at least 1 (the first step traces the graph)")
    ap.add_argument("--lr", type=float, default=0.01, help="SGD learning rate")
    ap.add_argument("--optimizer", choices=OPTIMIZERS, default=LOOP_OPTIMIZER,
                    help="tf_keras.optimizers.SGD (sgd) or tf_keras.optimizers.legacy.SGD (legacy-sgd)")
    ap.add_argument("--seed", type=int, default=0, help="weights seed (same on every rank); data seed is seed+rank")
    ap.add_argument("--intra-threads", type=int, default=0, help="TF intra-op threads (0: TF default)")
    ap.add_argument("--inter-threads", type=int, default=0, help="TF inter-op threads (0: TF default)")


def parse_job_args(ap: argparse.ArgumentParser, argv: Any = None) -> argparse.Namespace:
    """``ap.parse_args(argv)``, with ``--batch``, ``--steps`` and ``--warmup`` checked to be at least 1
    (:func:`ralp_tf.errors.check_int`; a usage error, exit 2, otherwise)."""
    from ralp_tf.errors import ValidationError, check_int

    args = ap.parse_args(argv)
    try:
        for flag in ("batch", "steps", "warmup"):
            check_int(getattr(args, flag), f"--{flag}")
    except ValidationError as exc:
        ap.error(str(exc))
    return args


def setup_tf(args: argparse.Namespace) -> Any:
    """Import TensorFlow with tf_keras (``TF_USE_LEGACY_KERAS=1``), apply thread settings and the seed."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if args.intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    if args.inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    tf.keras.utils.set_random_seed(args.seed)
    return tf


def make_timer(warmup: int, steps: int, emit_marks: bool, barrier: Callable[[], None] | None = None,
               window: str | None = None) -> Any:
    """A tf_keras callback timing the steps after ``warmup`` (wall clock between batch ends); its
    marks carry ``window`` (one job timing several models, each in its own window) when given.

    At the two marked batch ends it first reads the optimizer's step counter: the train function
    runs asynchronously, and a batch end only waits for the loss, so without that read a mark
    could precede the last gradient all-reduce of its step. ``barrier`` (a collective every rank
    calls) runs after the ``start`` mark on every rank: the marking rank waits there for the
    launcher to read its counters, and without the barrier another rank would already send its
    part of the first timed all-reduce, outside the counted window (seen: -15% of the bytes of 5
    steps, with the machine busy)."""
    import tf_keras

    tag = {"window": window} if window is not None else {}

    class StepTimer(tf_keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step_times: list[float] = []
            self.start = self.end = None
            self._prev = None

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if batch in (warmup - 1, warmup + steps - 1):
                int(self.model.optimizer.iterations.numpy())  # the step's function has ended
            now = time.perf_counter()
            if batch == warmup - 1:
                if emit_marks:
                    emit("start", t=time.time(), **tag)
                if barrier is not None:
                    barrier()
                self.start = self._prev = time.perf_counter()
            elif batch >= warmup:
                self.step_times.append(now - self._prev)
                self._prev = now
                if batch == warmup + steps - 1:
                    self.end = now
                    if emit_marks:
                        emit("end", t=time.time(), **tag)

    return StepTimer()


def report(strategy: str, rank: int, size: int, args: argparse.Namespace, timer: Any, model: Any,
           x: Any, y: Any, **extra: Any) -> dict[str, Any]:
    """Emit the ``result`` line of this rank and return it."""
    import numpy as np

    from ralp_tf.model.data import per_sample_loss, weights_checksum

    # Trainable weights only: a ring averages gradients, while BatchNorm's moving statistics stay
    # local to each rank (each sees its own data) unless the model uses synchronized BatchNorm.
    checksum, wsum = weights_checksum(model, trainable_only=True)
    loss = float(np.mean(per_sample_loss(model)(y, model(x, training=False))))
    elapsed = (timer.end - timer.start) if timer.start is not None and timer.end is not None else None
    result = {
        "strategy": strategy, "rank": rank, "size": size, "model": args.model, "batch_per_worker": args.batch,
        "global_batch": args.batch * size, "steps": args.steps, "warmup": args.warmup,
        "elapsed_s": elapsed, "step_times_s": [round(t, 6) for t in timer.step_times],
        "samples_per_s": (args.batch * size * args.steps / elapsed) if elapsed else None,
        "final_loss": loss, "weights_sha256": checksum, "weights_sum": wsum, **extra,
    }
    emit("result", **result)
    return result


# ------------------------------------------------------------------------------------------
# launcher side


def parse_line(line: str) -> tuple[str, dict[str, Any]] | None:
    """``(kind, data)`` if ``line`` carries a protocol message, else None."""
    i = line.find(MARK + " ")
    if i < 0:
        return None
    parts = line[i + len(MARK) + 1:].strip().split(" ", 1)
    if len(parts) != 2:
        return None
    try:
        return parts[0], json.loads(parts[1])
    except json.JSONDecodeError:
        return None


class JobWatcher:
    """Reads the merged stdout/stderr of several processes on threads: keeps a tail per process,
    collects ``result`` messages, and calls ``on_mark(kind)`` for rank 0's ``start``/``end``
    (``on_window_mark(window, kind)`` for a mark that names its window, each window's once); with
    ``ack``, then answers the mark on that process's stdin (a pipe; the rank runs with
    :data:`ACK_ENV` and waits for it in :func:`emit`)."""

    def __init__(self, procs: Sequence[tuple[str, subprocess.Popen]], on_mark: Callable[[str], None] | None = None,
                 tail_lines: int = 60, log_path: str | None = None, ack: bool = False,
                 on_window_mark: Callable[[str, str], None] | None = None) -> None:
        self.ack = ack
        self.procs = list(procs)
        self.on_mark = on_mark
        self.on_window_mark = on_window_mark
        self.tails = {label: collections.deque(maxlen=tail_lines) for label, _ in self.procs}
        self.results: list[dict[str, Any]] = []
        self.marks: dict[str, float] = {}
        self._lock = threading.Lock()
        self._log = open(log_path, "a", buffering=1) if log_path else None
        self.lingered: list[str] = []
        self._threads = [threading.Thread(target=self._pump, args=(label, p), daemon=True) for label, p in self.procs]
        for t in self._threads:
            t.start()

    def _pump(self, label: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.tails[label].append(line)
                if self._log:
                    self._log.write(f"[{label}] {line}\n")
            msg = parse_line(line)
            if msg is None:
                continue
            kind, data = msg
            with self._lock:
                if kind == "result":
                    self.results.append(data)
                elif kind in ("start", "end"):
                    window = data.get("window")
                    key = kind if window is None else f"{kind}:{window}"
                    if key in self.marks:
                        continue
                    self.marks[key] = time.monotonic()
                    if window is None and self.on_mark:
                        self.on_mark(kind)
                    elif window is not None and self.on_window_mark:
                        self.on_window_mark(str(window), kind)
                    if self.ack and proc.stdin is not None:
                        try:
                            proc.stdin.write("ack\n")
                            proc.stdin.flush()
                        except (BrokenPipeError, ValueError, OSError):
                            pass

    def wait(self, timeout: float, expected_results: int | None = None, linger_s: float = 20.0) -> bool:
        """Wait for every process to exit; False on timeout (the caller kills them).

        With ``expected_results``: once that many ``result`` lines are in, processes still running
        ``linger_s`` later are SIGKILLed and recorded in :attr:`lingered` (a worker whose peers
        exited can hang in TF's shutdown); that is not a failure of the run.
        """
        import signal as _signal

        from ralp_tf.testbed import _nsops

        deadline = time.monotonic() + timeout
        all_in_at = None
        while True:
            if all(p.poll() is not None for _, p in self.procs):
                break
            now = time.monotonic()
            if now >= deadline:
                return False
            with self._lock:
                complete = expected_results is not None and len(self.results) >= expected_results
            if complete and all_in_at is None:
                all_in_at = now
            if all_in_at is not None and now - all_in_at >= linger_s:
                for label, p in self.procs:
                    if p.poll() is None:
                        self.lingered.append(label)
                        _nsops.killpg_quiet(p.pid, _signal.SIGKILL)
                        p.wait()
                break
            time.sleep(0.1)
        for t in self._threads:
            t.join(timeout=5)
        if self._log:
            self._log.close()
            self._log = None
        return True

    def tail_text(self, n: int = 30) -> str:
        with self._lock:
            return "\n".join(f"[{label}] {line}" for label, tail in self.tails.items() for line in list(tail)[-n:])


class LinkMeter:
    """Snapshots ``tb.link_bytes()``, the whole machine's CPU times (``/proc/stat``) and, with CPU
    budgets, ``tb.host_cpu_seconds()``, ``tb.host_throttled_seconds()`` and, with ``per_task``,
    ``tb.task_cpu_seconds()`` at rank 0's ``start`` and ``end`` marks. On a namespace testbed link
    bytes are wire bytes; on loopback, TCP payload of live sockets (``testbed.bytes_kind`` says
    which). ``per_task`` is for jobs whose ranks the testbed started itself (PSS, MWMS), not
    Horovod's, whose ranks are children of its launcher."""

    def __init__(self, tb: Any, per_task: bool = True) -> None:
        self.tb = tb
        self.per_task = per_task
        self.snaps: dict[str, dict[str, dict[str, int]]] = {}
        self.cpu_snaps: dict[str, dict[str, float]] = {}
        self.task_cpu_snaps: dict[str, dict[str, float]] = {}
        self.machine_snaps: dict[str, dict[str, float]] = {}
        self.throttled_snaps: dict[str, dict[str, float]] = {}

    def __call__(self, kind: str) -> None:
        from ralp_tf.testbed import _nsops

        try:
            self.snaps[kind] = self.tb.link_bytes()
        except Exception:  # counting is best effort; the job result stays valid without it
            pass
        try:
            self.machine_snaps[kind] = _nsops.machine_cpu_seconds()
        except (OSError, ValueError):
            pass
        try:
            self.cpu_snaps[kind] = self.tb.host_cpu_seconds()
            if self.per_task:
                self.task_cpu_snaps[kind] = self.tb.task_cpu_seconds()
        except Exception:
            pass
        try:
            self.throttled_snaps[kind] = self.tb.host_throttled_seconds()
        except Exception:
            pass

    def machine_cpu(self) -> dict[str, float] | None:
        """The whole machine over the timed window: ``busy_share`` (busy over all CPU time),
        ``softirq_share`` (the part in softirq, where the emulated links' packets are processed)
        and ``steal_share`` (the part a virtual machine's host ran something else); None without
        both marks."""
        start, end = self.machine_snaps.get("start"), self.machine_snaps.get("end")
        if not start or not end:
            return None
        total = end["total"] - start["total"]
        if total <= 0:
            return None

        def share(field: str) -> float:
            return min(max((end.get(field, 0.0) - start.get(field, 0.0)) / total, 0.0), 1.0)

        return {"busy_share": share("busy"), "softirq_share": share("softirq"), "steal_share": share("steal")}

    def cpu_fields(self, steps: int) -> dict[str, Any]:
        """A run record's CPU keys over the timed window of ``steps`` global steps:
        ``host_cpu_s_per_step``, ``task_cpu_s_per_step``, ``host_throttled_s_per_step`` and
        ``machine_cpu``."""
        return {"host_cpu_s_per_step": self.cpu_per_step(steps), "task_cpu_s_per_step": self.task_cpu_per_step(steps),
                "host_throttled_s_per_step": self.throttled_per_step(steps), "machine_cpu": self.machine_cpu()}

    def throttled_per_step(self, steps: int) -> dict[str, float] | None:
        """Host -> seconds per global step its CPU group waited out a spent quota (None without
        budgets)."""
        start, end = self.throttled_snaps.get("start"), self.throttled_snaps.get("end")
        if not start or not end or not steps:
            return None
        return {h: (end[h] - start.get(h, 0.0)) / steps for h in end}

    def cpu_per_step(self, steps: int) -> dict[str, float] | None:
        """Host -> CPU seconds per global step over the timed window (None without budgets)."""
        start, end = self.cpu_snaps.get("start"), self.cpu_snaps.get("end")
        if not start or not end or not steps:
            return None
        return {h: (end[h] - start.get(h, 0.0)) / steps for h in end}

    def task_cpu_per_step(self, steps: int) -> dict[str, float] | None:
        """Task -> CPU seconds per global step over the timed window, for the tasks alive at both
        marks (None without CPU budgets)."""
        start, end = self.task_cpu_snaps.get("start"), self.task_cpu_snaps.get("end")
        if not start or not end or not steps or not self.cpu_snaps.get("end"):
            return None
        return {t: (end[t] - start[t]) / steps for t in end if t in start}

    def delta(self) -> dict[str, dict[str, int]] | None:
        if "start" in self.snaps and "end" in self.snaps:
            from ralp_tf.testbed.base import bytes_delta

            return bytes_delta(self.snaps["end"], self.snaps["start"])
        return None


def summarize(strategy: str, size: int, args: dict[str, Any], watcher: JobWatcher, meter: LinkMeter,
              returncodes: dict[str, int | None], timed_out: bool, testbed: Any,
              window: str | None = None) -> dict[str, Any]:
    """One record for the run (with ``window``: for the results of that window of a job that timed
    several): rank 0's figures, every rank's checksum, ``valid`` and, if not, ``invalid_reason`` and
    ``log_tail``."""
    results = sorted((r for r in watcher.results if r.get("window") == window), key=lambda r: r.get("rank", 0))
    reasons = []
    if timed_out:
        reasons.append("timed out")
    bad_rc = {k: v for k, v in returncodes.items() if v != 0 and k not in watcher.lingered}
    if bad_rc:
        reasons.append(f"non-zero exit: {bad_rc}")
    ranks = sorted(r.get("rank") for r in results)
    if ranks != list(range(size)):
        reasons.append(f"results from ranks {ranks}, expected 0..{size - 1}")
    sums = {r.get("weights_sha256") for r in results}
    if len(sums) > 1:
        reasons.append("ranks ended with different trainable weights (gradients were not averaged)")
    r0 = results[0] if results else {}
    elapsed = max((r["elapsed_s"] for r in results if r.get("elapsed_s")), default=None)
    steps = int(args.get("steps", 0))
    global_batch = int(args.get("batch", 0)) * size
    link = meter.delta()
    bytes_total = sum(v["tx"] for v in link.values()) if link else None
    if results and not elapsed:
        reasons.append("no timed steps were recorded")
    out = {
        "strategy": strategy, "model": args.get("model"), "workers": size, "batch_per_worker": args.get("batch"),
        "global_batch": global_batch, "steps": steps,
        "samples_per_s": global_batch * steps / elapsed if elapsed else None,
        "measured_step_s": elapsed / steps if elapsed and steps else None,
        "step_times_s": r0.get("step_times_s"),
        "final_loss": {r["rank"]: r.get("final_loss") for r in results},
        "weights_sha256": {r["rank"]: r.get("weights_sha256") for r in results},
        "bytes_per_step": bytes_total / steps if bytes_total is not None and steps else None,
        "link_bytes": link, **meter.cpu_fields(steps),
        "bytes_kind": getattr(testbed, "bytes_kind", None),
        "testbed": testbed.describe() if testbed is not None else None,
        "valid": not reasons,
    }
    if watcher.lingered:
        out["note"] = f"killed after reporting (hung at exit): {watcher.lingered}"
    if reasons:
        out["invalid_reason"] = "; ".join(reasons)
        out["log_tail"] = watcher.tail_text()
    return out


def check_model_name(model: str) -> None:
    """Reject unknown built-in model names before starting any process (``module:function``
    references are resolved by the ranks, so user code never runs in the launcher)."""
    from ralp_tf.model.builtin import resolve_model

    if not isinstance(model, str) or ":" not in model:
        resolve_model(model)  # raises ValidationError naming the built-in models


def resolve_workers(tb: Any, workers: Sequence[str] | None) -> list[str]:
    """The worker tasks of a baseline run: ``workers``, or the testbed's tasks named ``worker*``;
    raises TestbedConfigError for none or for names the testbed lacks."""
    from ralp_tf.testbed.base import TestbedConfigError

    workers = list(workers) if workers is not None else [t for t in tb.tasks if t.startswith("worker")]
    if not workers:
        raise TestbedConfigError(f"no workers: pass workers=, or name tasks 'worker0', 'worker1', ... "
                                 f"(testbed tasks: {tb.tasks})")
    for t in workers:
        if t not in tb.tasks:
            raise TestbedConfigError(f"unknown worker task {t!r}; testbed tasks: {tb.tasks}")
    return workers


def job_argv(args: dict[str, Any]) -> list[str]:
    """Command-line flags for a rank script from a dict of job arguments."""
    out = []
    for k, v in args.items():
        if v is None:
            continue
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for rank processes: tf_keras on, TF logging quiet, ralp_tf importable, and
    Python's fault handler on, so that a rank killed by a signal leaves its Python stack in the log."""
    env = dict(os.environ)
    env["TF_USE_LEGACY_KERAS"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def is_finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
