"""What every testbed shares: errors, input validation, process tracking, teardown guarantees.

A testbed is a context manager. Entering it builds the emulated cluster; leaving it (normally,
by exception, by Ctrl-C, or by SIGTERM/SIGHUP turned into :class:`TestbedInterrupted`) kills
every process it started and removes everything it created. A watchdog process (the reaper)
does the same if the owner dies without a chance to clean up (SIGKILL, OOM kill).
"""
from __future__ import annotations

import atexit
import fcntl
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Mapping, Sequence

from ralp_tf.plan.cluster import format_bandwidth, parse_bandwidth
from ralp_tf.errors import ClusterConfigError
from ralp_tf.run.launch import TASK_MEMORY_GIB, available_memory_bytes, max_tasks_for_memory
from ralp_tf.testbed import _cgroups, _nsops
from ralp_tf.testbed.errors import TestbedConfigError, TestbedError, TestbedInterrupted
from ralp_tf.testbed.layout import (COLOCATED, MAX_TASKS_PER_HOST, TASK_NAME, layout_hosts, validate_hosts,
                                    validate_tasks)

__all__ = ["TASK_NAME", "PREFIX", "DEFAULT_MEM_PER_TASK_GIB", "Redirect", "TestbedError", "TestbedConfigError",
           "TestbedInterrupted", "validate_tasks", "validate_prefix", "validate_bandwidth", "check_capacity",
           "usable_cores", "validate_host_cpu", "tf_thread_env", "PrefixLock", "BaseTestbed", "bytes_delta"]

PREFIX = re.compile(r"^[a-z][a-z0-9]{0,11}$")
#: Resident memory one TensorFlow task needs (import + a CIFAR-size model + gRPC buffers).
DEFAULT_MEM_PER_TASK_GIB = TASK_MEMORY_GIB
_REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reaper.py")

Redirect = "int | IO[Any] | None"


def validate_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not PREFIX.match(prefix):
        raise TestbedConfigError(f"bad prefix {prefix!r}: use 1-12 lowercase letters/digits starting with a "
                                 "letter (it names the namespaces '<prefix>-<task>')")
    return prefix


def validate_bandwidth(bandwidth: str | float | int | None) -> float:
    """Bits per second (``math.inf`` for uncapped), with a testbed-specific error for bad input."""
    try:
        return parse_bandwidth(bandwidth)
    except ClusterConfigError as exc:
        raise TestbedConfigError(f"{exc} (testbed link rate)") from None


def check_capacity(n_tasks: int, mem_per_task_gib: float, address_limit: int, address_what: str,
                   n_hosts: int | None = None) -> None:
    """Raise :class:`TestbedConfigError` naming the limit if ``n_tasks`` tasks on ``n_hosts`` hosts
    (default: a host per task) do not fit: hosts against ``address_limit``, tasks against memory."""
    hosts = n_tasks if n_hosts is None else n_hosts
    if hosts > address_limit:
        what = "tasks" if n_hosts is None else "hosts"
        raise TestbedConfigError(f"{hosts} {what} do not fit: {address_what} holds at most {address_limit}; "
                                 f"use fewer {what} or a larger subnet")
    limit = max_tasks_for_memory(mem_per_task_gib)
    if n_tasks > limit:
        avail = available_memory_bytes() / 2**30
        raise TestbedConfigError(
            f"{n_tasks} tasks need about {n_tasks * mem_per_task_gib:.1f} GiB ({mem_per_task_gib:g} GiB per "
            f"TensorFlow task) but {avail:.1f} GiB is available: this machine holds at most {limit} tasks. "
            "Use fewer tasks, or pass mem_per_task_gib= if your tasks are smaller")


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask): what every host budget shares."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def validate_host_cpu(host_cpu: float | Mapping[str, float] | None, hosts: Sequence[str]) -> dict[str, float] | None:
    """Per-host CPU budgets in cores: ``None`` (no budgets), one number for every host, or a mapping
    naming every host. Each must be at least 0.01 core and all together at most the machine's cores
    (:func:`usable_cores`), or hosts would take CPU from each other and the figures would lie."""
    if host_cpu is None:
        return None
    if isinstance(host_cpu, Mapping):
        missing, unknown = [h for h in hosts if h not in host_cpu], [h for h in host_cpu if h not in hosts]
        if missing or unknown:
            raise TestbedConfigError(f"host_cpu must name every host exactly: missing {missing}, unknown {unknown} "
                                     f"(hosts: {list(hosts)}); or pass one number for all")
        budgets = {h: host_cpu[h] for h in hosts}
    else:
        budgets = {h: host_cpu for h in hosts}
    for h, cores in budgets.items():
        if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not math.isfinite(cores) \
                or cores < _cgroups.MIN_CORES:
            raise TestbedConfigError(f"CPU budget of host {h!r} must be a number of cores >= {_cgroups.MIN_CORES} "
                                     f"(e.g. 0.5), got {cores!r}")
    total, cores_here = sum(budgets.values()), usable_cores()
    if total > cores_here + 1e-9:
        raise TestbedConfigError(
            f"host CPU budgets sum to {total:g} cores over {len(budgets)} hosts but this machine has {cores_here}: "
            "emulated hosts would take CPU from each other and the figures would lie. Give each host at most "
            f"{cores_here / len(budgets):.3g} cores, or use fewer hosts")
    return {h: float(c) for h, c in budgets.items()}


def tf_thread_env(cores: float) -> dict[str, str]:
    """TensorFlow thread-pool sizes for a process on a host with ``cores`` CPUs of budget:
    ``TF_NUM_INTRAOP_THREADS = ceil(cores)`` (at least 1) and ``TF_NUM_INTEROP_THREADS`` = that, at
    least 2 (one blocked op must not stall the rest). TF reads both when its pools are created."""
    intra = max(1, math.ceil(cores - 1e-9))
    return {"TF_NUM_INTRAOP_THREADS": str(intra), "TF_NUM_INTEROP_THREADS": str(max(2, intra))}


def _lock_dir() -> str:
    d = "/run/ralp_tf" if os.geteuid() == 0 else os.path.join(tempfile.gettempdir(), f"ralp_tf-{os.getuid()}")
    os.makedirs(d, exist_ok=True)
    return d


class PrefixLock:
    """An exclusive flock on ``<lockdir>/testbed-<prefix>.lock``: one live testbed per prefix per machine.

    The reaper inherits the descriptor, so the lock stays held until a dead owner is cleaned up.
    """

    def __init__(self, prefix: str) -> None:
        self.path = os.path.join(_lock_dir(), f"testbed-{prefix}.lock")
        self.fd: int | None = None

    def acquire(self, wait_s: float = 30.0) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    try:
                        owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    except OSError:
                        owner = "unknown"
                    os.close(fd)
                    raise TestbedError(f"another live testbed (pid {owner}) holds {self.path}; wait for it to "
                                       "finish or use a different prefix=") from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


class BaseTestbed:
    """Process tracking and teardown shared by :class:`~ralp_tf.testbed.Testbed` and
    :class:`~ralp_tf.testbed.LoopbackTestbed`.

    Subclasses implement ``_build()``, ``_destroy()``, ``host()``, ``_wrap(task, argv)`` and
    ``link_bytes()``.

    Hosts: ``hosts`` maps host names to task names (:mod:`ralp_tf.testbed.layout`); ``None`` is the
    ``dedicated`` layout, a host per task named like it. ``host_cpu`` gives every host a CPU budget
    in cores (one number, or ``{host: cores}``): a cgroup v1 CPU group per host, joined by every
    process started for that host before it runs, and TF thread-pool sizes to match
    (:func:`tf_thread_env`, unless the caller's ``env`` sets them). Budgets need root and the
    cgroup v1 CPU controller; without them the constructor raises :class:`TestbedError` naming what
    is missing.
    """

    __test__ = False  # not a pytest test class
    #: True when links are emulated (namespaces, caps); False on plain loopback.
    emulated: bool = False
    #: What :meth:`link_bytes` counts: ``"wire"`` (L2 frames, exact) or a weaker kind.
    bytes_kind: str = "unavailable"

    def __init__(self, task_names: Sequence[str], bandwidth: str | float | int | None = None, *,
                 prefix: str = "ralptb", term_grace_s: float = 5.0,
                 hosts: Mapping[str, Sequence[str]] | None = None,
                 host_cpu: float | Mapping[str, float] | None = None, max_tasks_per_host: int | None = None) -> None:
        self.tasks: list[str] = validate_tasks(task_names)
        self.bandwidth_bps: float = validate_bandwidth(bandwidth)
        self.prefix: str = validate_prefix(prefix)
        self.term_grace_s = term_grace_s
        #: host name -> its tasks (dedicated layout: ``{task: [task]}``)
        self.hosts: dict[str, list[str]] = validate_hosts(hosts, self.tasks, max_tasks_per_host or MAX_TASKS_PER_HOST)
        self._host_of = {t: h for h, members in self.hosts.items() for t in members}
        #: host name -> CPU budget in cores, or None (no budgets)
        self.host_cpu: dict[str, float] | None = validate_host_cpu(host_cpu, list(self.hosts))
        if self.host_cpu is not None:
            ok, why = _cgroups.cpu_controller_support()
            if not ok:
                raise TestbedError(why)
        self._cpu_groups: dict[str, str] = {}
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._lock = PrefixLock(self.prefix)
        self._reaper: subprocess.Popen | None = None
        self._open = False
        self._closing = threading.Lock()
        self._old_handlers: dict[int, Any] = {}

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "BaseTestbed":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> "BaseTestbed":
        """Build the cluster (idempotent). On any failure, what was built is removed before raising."""
        if self._open:
            return self
        self._lock.acquire()
        try:
            self._install_signal_handlers()
            self._open = True
            atexit.register(self.close)
            self._start_reaper()
            self._build_cpu_groups()
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every process started here (SIGTERM to its process group, SIGKILL after
        ``term_grace_s``), remove everything built, release the prefix. Idempotent; signals are
        deferred while it runs so a second Ctrl-C cannot interrupt the teardown."""
        if not self._closing.acquire(blocking=False):
            return
        try:
            if not self._open:
                return
            deferred = self._block_signals()
            try:
                self._kill_processes()
                try:
                    self._destroy()
                finally:
                    self._destroy_cpu_groups()
            finally:
                self._open = False
                self._stop_reaper()
                self._lock.release()
                atexit.unregister(self.close)
                self._restore_signal_handlers()
                self._unblock_signals(deferred)
        finally:
            self._closing.release()

    @property
    def is_open(self) -> bool:
        return self._open

    # ---- hosts and CPU budgets ---------------------------------------------------------------

    @property
    def layout(self) -> str:
        """``dedicated`` (a host per task), ``colocated`` (as :func:`~ralp_tf.testbed.layout.layout_hosts`
        builds it for this testbed's workers and PS tasks, at one worker per host or at the workers per
        PS task) or ``custom``."""
        if all(members == [h] for h, members in self.hosts.items()):
            return "dedicated"
        workers = sum(t.startswith("worker") for t in self.tasks)
        ps = sum(t.startswith("ps") for t in self.tasks)
        for per_host in sorted({1, max(workers // max(ps, 1), 1)}):
            try:
                if self.hosts == layout_hosts(workers, ps, COLOCATED, chief="chief" in self.tasks,
                                              workers_per_host=per_host):
                    return COLOCATED
            except TestbedConfigError:
                pass
        return "custom"

    def host_of(self, task: str) -> str:
        """Name of the host that runs ``task`` (the task's own name in the dedicated layout)."""
        if task not in self._host_of:
            raise TestbedConfigError(f"unknown task {task!r}; this testbed has {self.tasks}")
        return self._host_of[task]

    def cpu_group(self, host: str) -> str | None:
        """Path of ``host``'s CPU group while the testbed runs (None without budgets)."""
        return self._cpu_groups.get(host)

    def host_cpu_seconds(self) -> dict[str, float]:
        """Host -> CPU seconds (user + system) used so far by the processes in its CPU group, all
        their threads and children included; ``{}`` without budgets. Take deltas over a window."""
        return {host: sum(_nsops.process_cpu_seconds(pid) for pid in _cgroups.group_pids(path))
                for host, path in self._cpu_groups.items()}

    def host_throttled_seconds(self) -> dict[str, float]:
        """Host -> seconds its CPU group's processes have waited out a spent quota so far
        (``cpu.stat`` ``throttled_time``); ``{}`` without budgets. Take deltas over a window."""
        return {host: _cgroups.cpu_stat(path).get("throttled_time", 0) / 1e9 for host, path in self._cpu_groups.items()}

    def task_cpu_seconds(self) -> dict[str, float]:
        """Task -> CPU seconds (user + system, all threads) used so far by the live processes
        started as that task (:meth:`popen`); children are not counted. Take deltas over a window."""
        out: dict[str, float] = {}
        for task, proc in self._procs:
            if proc.poll() is None:
                out[task] = out.get(task, 0.0) + _nsops.process_cpu_seconds(proc.pid)
        return out

    def _build_cpu_groups(self) -> None:
        if _cgroups.cpu_controller_support()[0]:
            _cgroups.cleanup_prefix(self.prefix)  # we hold the prefix lock: these are leftovers
        for host, cores in (self.host_cpu or {}).items():
            path = _cgroups.group_path(f"{self.prefix}-{host}")
            self._tell_reaper(f"cg {path}")  # first, so the reaper knows it even if we die right after
            self._cpu_groups[host] = path
            try:
                _cgroups.create_group(f"{self.prefix}-{host}", cores)
            except _cgroups.CgroupError as exc:
                raise TestbedError(str(exc)) from None

    def _destroy_cpu_groups(self) -> None:
        errors = []
        for host, path in list(self._cpu_groups.items()):
            try:
                _cgroups.remove_group(path)
                del self._cpu_groups[host]
            except _cgroups.CgroupError as exc:
                errors.append(str(exc))
        if errors:
            raise TestbedError("teardown left CPU groups behind: " + "; ".join(errors)
                               + f". Run ralp_tf.testbed.cleanup_stale({self.prefix!r})")

    # ---- processes ---------------------------------------------------------------------------

    def _check_task(self, task: str) -> None:
        if task not in self.tasks:
            raise TestbedConfigError(f"unknown task {task!r}; this testbed has {self.tasks}")
        if not self._open:
            raise TestbedError("the testbed is not running; use it as `with Testbed(...) as tb:` or call start()")

    def _wrap(self, task: str, argv: list[str]) -> list[str]:
        raise NotImplementedError

    def popen(self, task: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
              stdout: Any = None, stderr: Any = None, *, stdin: Any = subprocess.DEVNULL,
              cwd: str | None = None, text: bool = False) -> subprocess.Popen:
        """Start ``argv`` as task ``task`` (inside its namespace on an emulated testbed).

        The process gets its own session and process group; teardown signals the whole group, so
        its children go too. ``env`` replaces the environment (``None``: inherit). The returned
        Popen's pid is the command itself (``ip netns exec`` execs it). With CPU budgets it joins
        its host's CPU group before it runs, and ``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS``
        default to the budget (:func:`tf_thread_env`).
        """
        self._check_task(task)
        argv = [str(a) for a in argv]
        if not argv:
            raise TestbedConfigError("popen needs a command, e.g. [sys.executable, 'script.py']")
        command = self._wrap(task, argv)
        group = self._cpu_groups.get(self.host_of(task))
        if group is not None:
            command = _cgroups.join_argv(group, command)
            env = dict(os.environ if env is None else env)
            for key, value in tf_thread_env(self.host_cpu[self.host_of(task)]).items():
                env.setdefault(key, value)
        proc = subprocess.Popen(command, env=None if env is None else dict(env), stdout=stdout,
                                stderr=stderr, stdin=stdin, cwd=cwd, start_new_session=True,
                                text=text)
        self._procs.append((task, proc))
        self._tell_reaper(f"pgid {proc.pid}")
        return proc

    def run(self, task: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout: float | None = 60.0, check: bool = False, input: str | None = None,
            cwd: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` as ``task`` to completion, capturing text stdout/stderr.

        On timeout the process group is killed and :class:`TestbedError` is raised; with
        ``check`` a non-zero exit raises :class:`TestbedError` with the output tail.
        """
        proc = self.popen(task, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL, cwd=cwd,
                          text=True)
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _nsops.killpg_quiet(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise TestbedError(f"{argv[0]!r} on task {task!r} did not finish within {timeout} s; killed it") from None
        result = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
        if check and proc.returncode != 0:
            raise TestbedError(f"{' '.join(map(str, argv))!r} on task {task!r} exited {proc.returncode}: "
                               f"{(err or out)[-2000:]}")
        return result

    def processes(self) -> list[tuple[str, subprocess.Popen]]:
        """(task, Popen) of every process started so far, in start order."""
        return list(self._procs)

    def _kill_processes(self) -> None:
        live = [p for _, p in self._procs if p.poll() is None]
        for p in live:
            _nsops.killpg_quiet(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.term_grace_s
        for p in live:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                pass
        # SIGKILL whatever is left of each group and session (children that ignored SIGTERM).
        for _, p in self._procs:
            _nsops.killpg_quiet(p.pid, signal.SIGKILL)
            _nsops.kill_pids(_nsops.session_pids(p.pid), signal.SIGKILL, wait_s=2)
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass

    # ---- reaper ------------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        fd = self._lock.fd
        self._reaper = subprocess.Popen(
            [sys.executable, "-S", _REAPER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=None, start_new_session=True, pass_fds=(fd,) if fd is not None else (), text=True)

    def _tell_reaper(self, line: str) -> None:
        if self._reaper is not None and self._reaper.stdin is not None:
            try:
                self._reaper.stdin.write(line + "\n")
                self._reaper.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass

    def _stop_reaper(self) -> None:
        if self._reaper is None:
            return
        self._tell_reaper("done")
        try:
            if self._reaper.stdin:
                self._reaper.stdin.close()
        except OSError:
            pass
        try:
            self._reaper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._reaper.kill()
            self._reaper.wait()
        self._reaper = None

    # ---- signals -----------------------------------------------------------------------------

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; atexit and the reaper still cover us

        def handler(signum: int, frame: Any) -> None:
            raise TestbedInterrupted(f"signal {signal.Signals(signum).name}")

        for sig in (signal.SIGTERM, signal.SIGHUP):
            old = signal.getsignal(sig)
            if old in (signal.SIG_DFL, None):
                self._old_handlers[sig] = old
                signal.signal(sig, handler)

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old_handlers.clear()

    @staticmethod
    def _block_signals() -> set[int]:
        if threading.current_thread() is not threading.main_thread():
            return set()
        sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        return sigs

    @staticmethod
    def _unblock_signals(sigs: set[int]) -> None:
        if sigs:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)

    # ---- description -------------------------------------------------------------------------

    def host(self, task: str) -> str:
        raise NotImplementedError

    def address(self, task: str, port: int) -> str:
        """``host:port`` of ``task`` (for TF_CONFIG / ClusterSpec)."""
        return f"{self.host(task)}:{int(port)}"

    def link_bytes(self) -> dict[str, dict[str, int]]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary: kind, tasks with their addresses, bandwidth, what bytes are counted,
        the layout, and per host its address, tasks and CPU budget (``cpu_cores``, None: none)."""
        return {"kind": type(self).__name__, "emulated": self.emulated, "bytes_kind": self.bytes_kind,
                "bandwidth": format_bandwidth(self.bandwidth_bps) if not math.isinf(self.bandwidth_bps)
                else "uncapped",
                "tasks": {t: self.host(t) for t in self.tasks} if self._open else list(self.tasks),
                "layout": self.layout,
                "hosts": {h: {"address": self.host(members[0]) if self._open else None, "tasks": list(members),
                              "cpu_cores": (self.host_cpu or {}).get(h)} for h, members in self.hosts.items()},
                "cpu_budgets": self.host_cpu is not None}

    def _build(self) -> None:
        raise NotImplementedError

    def _destroy(self) -> None:
        raise NotImplementedError


def bytes_delta(after: Mapping[str, Mapping[str, int]], before: Mapping[str, Mapping[str, int]]
                ) -> dict[str, dict[str, int]]:
    """``after - before`` for two :meth:`link_bytes` snapshots, per host link and direction."""
    return {t: {k: int(after[t][k]) - int(before.get(t, {}).get(k, 0)) for k in after[t]} for t in after}
