"""SIGKILL at seeded instants: inside a checkpoint write of ``ralp-tf run``, and of a PS task while it
computes the head; each rerun checked (issue 42, item 1; the table: ``benchmarks/checkpoint_kills.py``).

A :class:`RunWatch` starts ``python -m ralp_tf.cli -v run ... --checkpoint-dir D --json`` in its own
session and follows it: a thread reads its stderr (the lines ``checkpoint: writing step N`` and
``checkpoint: step N complete`` of :mod:`ralp_tf.run.checkpoints` mark each write), another polls
``D`` every millisecond while a write is open, for the size of the shard being written (TensorFlow
writes it as ``*.tempstate*``, then renames it) and the instant the largest shard's data is in place
(``data_done``: no ``.tempstate`` left after that shard had 90% of the previous checkpoint's largest
data file). The instants a trial kills at:

* ``bytes`` ``f``: the write of step S, once its largest shard holds ``f`` of the bytes the
  previous checkpoint's largest data file has (the PS streaming the variables: most of a write);
* ``tail`` ``u``: ``u`` times this run's median time from ``data_done`` to ``complete`` (TensorFlow's
  merge of the shards, the manifest, the rename, the state file, the sweep) after ``data_done``;
* ``ps`` ``o``: ``o`` times this run's gap between two writes after the write of step S completes,
  then the first 2 ms poll at which ``ps0`` used at least 2 clock ticks of CPU in the last 20 ms
  (the head is computed on ps0: a busy ps0 is computing it), SIGKILL to ps0 alone.

The first two SIGKILL the run's whole process group (the coordinator and its task processes). The
checks of what follows (what was left, which checkpoints are whole, the rerun): :mod:`ralp_tf.faults.kill_checks`.
"""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ralp_tf.errors import ClusterRuntimeError

__all__ = ["RunWatch", "run_command", "kill_in_write", "kill_ps_busy", "cpu_ticks", "running_threads"]

_WRITING = re.compile(r"checkpoint: writing step (\d+)")
_COMPLETE = re.compile(r"checkpoint: step (\d+) complete")
REPO = Path(__file__).resolve().parents[2]


def run_command(model: str, checkpoint_dir: str, log_dir: str, *, steps: int, checkpoint_every: int,
                extra: list[str] | None = None) -> list[str]:
    """The ``ralp-tf -v run`` command of a trial: 2 workers, 1 PS, the RALP plan at 1 Gbit/s."""
    return [sys.executable, "-m", "ralp_tf.cli", "-v", "run", "--model", model, "--workers", "2", "--ps", "1",
            "--bandwidth", "1gbit", "--steps", str(steps), "--checkpoint-every", str(checkpoint_every),
            "--checkpoint-dir", checkpoint_dir, "--log-dir", log_dir, "--json", *(extra or [])]


class RunWatch:
    """One ``ralp-tf run`` process followed as the module docstring says. ``writes[step]`` holds the
    monotonic times ``start``, ``data_done`` and ``end`` of each write seen; ``shard_bytes`` the size
    of the largest shard of the write in progress; ``tasks`` the PIDs of its task processes by name
    (``ps0``, ``worker1``) and ``ports`` their ports, read from their command lines once they run."""

    def __init__(self, cmd: list[str], checkpoint_dir: str, env: dict[str, str] | None = None) -> None:
        self.cmd, self.checkpoint_dir = cmd, checkpoint_dir
        self.lines: list[tuple[float, str]] = []
        self.writes: dict[int, dict[str, float]] = {}
        self.shard_bytes = 0
        self.tasks: dict[str, int] = {}
        self.ports: list[int] = []
        self._open: int | None = None
        self._cond = threading.Condition()
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                                     start_new_session=True)
        self.stdout = ""
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._read, self._poll, self._collect)]
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            now = time.monotonic()
            with self._cond:
                self.lines.append((now, line.rstrip("\n")))
                m = _WRITING.search(line)
                if m:
                    self.writes[int(m[1])] = {"start": now}
                    self._open, self.shard_bytes = int(m[1]), 0
                m = _COMPLETE.search(line)
                if m:
                    self.writes.setdefault(int(m[1]), {})["end"] = now
                    self._open = None
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def _poll(self) -> None:
        """Every millisecond while a write is open: the largest ``.tempstate`` shard and ``data_done``
        (once that shard, at 90% of the previous checkpoints' largest data file or more, was renamed)."""
        seen, last, full = False, None, 0
        while self.proc.poll() is None:
            step = self._open
            if step is None:
                self._find_tasks()
                time.sleep(0.005)
                continue
            if step != last:
                seen, last, full = False, step, _largest_data_file(self.checkpoint_dir)
            sizes = _tempstate_sizes(self.checkpoint_dir)
            with self._cond:
                if sizes:
                    self.shard_bytes = max(self.shard_bytes, max(sizes))
                    seen = seen or self.shard_bytes >= 0.9 * full  # the largest shard, not the coordinator's
                elif seen and "data_done" not in self.writes.get(step, {"data_done": 0}):
                    self.writes[step]["data_done"] = time.monotonic()
                self._cond.notify_all()
            time.sleep(0.001)

    def _find_tasks(self) -> None:
        if len(self.tasks) >= 3:
            return
        for pid, argv in _task_processes(self.proc.pid):
            name = argv[argv.index("--job") + 1] + argv[argv.index("--index") + 1]
            if name not in self.tasks:
                self.tasks[name] = pid
                spec = json.loads(argv[argv.index("--cluster") + 1])
                self.ports = sorted({int(a.rsplit(":", 1)[1]) for addrs in spec.values() for a in addrs})

    def wait_for(self, pred: Callable[[], Any], timeout: float, what: str) -> Any:
        """Wait until ``pred()`` (called under the watch's lock) is truthy and return it;
        ClusterRuntimeError naming ``what`` and the run's last lines when the run ends first or
        ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = pred()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._threads[0].is_alive()):
                    tail = "\n".join(l for _, l in self.lines[-15:])
                    raise ClusterRuntimeError(f"the run did not reach {what} (exit {self.proc.poll()}):\n{tail}")
                self._cond.wait(min(left, 0.05))

    @property
    def write_open(self) -> bool:
        """Whether a checkpoint write has begun and not completed."""
        return self._open is not None

    def kill_group(self) -> float:
        """SIGKILL the run's process group; returns the instant (monotonic)."""
        now = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGKILL)
        return now

    def finish(self, timeout: float = 600.0) -> int:
        """Wait for the process and the reader threads; its exit status."""
        code = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=30)
        return code

    def write_seconds(self, key: str, before: int) -> float | None:
        """Median over this run's writes of steps below ``before`` of ``end - key`` (``key``:
        ``start`` or ``data_done``); None when no such write was seen whole."""
        spans = [w["end"] - w[key] for s, w in self.writes.items() if s < before and key in w and "end" in w]
        return statistics.median(spans) if spans else None


def _tempstate_sizes(directory: str) -> list[int]:
    sizes = []
    for root, _, files in os.walk(directory):
        for name in files:
            if ".tempstate" in name:
                try:
                    sizes.append(os.path.getsize(os.path.join(root, name)))
                except OSError:
                    pass
    return sizes


def _task_processes(parent: int) -> list[tuple[int, list[str]]]:
    """Live (not zombie) LocalCluster task processes of ``parent`` (they carry ``--parent-pid``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            continue
        if "ralp_tf.run._task" in argv and "--parent-pid" in argv and state != "Z" \
                and argv[argv.index("--parent-pid") + 1] == str(parent):
            found.append((int(entry.name), argv))
    return found


def _largest_data_file(directory: str) -> int:
    """Bytes of the largest data file of the ``ckpt-N`` folders in ``directory`` (0: none)."""
    sizes = []
    for folder in Path(directory).glob("ckpt-*"):
        for data in folder.glob("*.data-*") if folder.is_dir() else ():
            try:
                sizes.append(data.stat().st_size)
            except OSError:  # removed meanwhile (the oldest one, swept)
                continue
    return max(sizes, default=0)


def kill_in_write(watch: RunWatch, step: int, kind: str, value: float, timeout: float = 300.0) -> dict[str, Any]:
    """SIGKILL the run's group inside the write of checkpoint ``step`` at the instant ``kind``
    (``bytes`` or ``tail``) ``value`` names (module docstring); returns where it landed: seconds
    after the write began, the shard's bytes then, and the write's expected length (median of this
    run's earlier writes)."""
    watch.wait_for(lambda: "start" in watch.writes.get(step, {}), timeout, f"the write of checkpoint {step}")
    start = watch.writes[step]["start"]
    full = _largest_data_file(watch.checkpoint_dir)  # the previous checkpoints' (the same variables)
    tail_s = watch.write_seconds("data_done", step)
    if kind == "bytes":
        target = value * full
        while watch.shard_bytes < target and "data_done" not in watch.writes[step] and watch.proc.poll() is None:
            time.sleep(0.0005)
    elif kind == "tail":
        done = watch.wait_for(lambda: watch.writes[step].get("data_done"), timeout, f"checkpoint {step}'s data")
        time.sleep(max(0.0, done + value * (tail_s or 0.02) - time.monotonic()))
    else:
        raise ValueError(f"kill kind {kind!r} is not bytes or tail")
    at = watch.kill_group()
    return {"kind": kind, "value": round(value, 4), "s_after_write_start": round(at - start, 4),
            "shard_bytes_at_kill": watch.shard_bytes, "full_shard_bytes": full,
            "expected_write_s": watch.write_seconds("start", step),
            "expected_tail_s": tail_s, "data_done_before_kill": "data_done" in watch.writes[step]}


def cpu_ticks(pid: int) -> int:
    """User plus system clock ticks ``pid`` used (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def running_threads(pid: int) -> int:
    """How many of ``pid``'s threads are running (state R) right now."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            n += (task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:
            continue
    return n


def kill_ps_busy(watch: RunWatch, after_step: int, fraction: float, timeout: float = 300.0) -> dict[str, Any]:
    """SIGKILL ``ps0`` alone, ``fraction`` of this run's gap between writes after the write of
    checkpoint ``after_step`` completed, at the first 2 ms poll that finds ps0 computing (module
    docstring) while no write is open; returns where it landed."""
    end = watch.wait_for(lambda: watch.writes.get(after_step, {}).get("end"), timeout,
                         f"the end of checkpoint {after_step}'s write")
    gaps = sorted(b["start"] - a["end"] for (_, a), (_, b) in zip(sorted(watch.writes.items()),
                                                                   sorted(watch.writes.items())[1:])
                  if "end" in a and "start" in b)
    gap = statistics.median(gaps) if gaps else 2.0
    pid = watch.tasks["ps0"]
    time.sleep(max(0.0, end + fraction * gap - time.monotonic()))
    history: list[tuple[float, int]] = []
    while True:
        now, ticks = time.monotonic(), cpu_ticks(pid)
        history = [(t, k) for t, k in history if now - t <= 0.02] + [(now, ticks)]
        if not watch.write_open and ticks - history[0][1] >= 2:
            running = running_threads(pid)
            os.kill(pid, signal.SIGKILL)
            break
        if now - end > timeout:
            raise ClusterRuntimeError("ps0 was never seen computing after the checkpoint")
        time.sleep(0.002)
    return {"kind": "ps", "value": round(fraction, 4), "s_after_write_end": round(now - end, 4),
            "gap_between_writes_s": round(gap, 4), "ps_ticks_last_20ms": ticks - history[0][1],
            "ps_threads_running": running}
