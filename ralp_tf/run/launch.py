"""Local clusters: one OS process per TF task, bound to loopback, torn down without orphans.

``LocalCluster(workers=N, ps=M)`` starts every task as ``python -m ralp_tf.run._task`` running a
``tf.distribute.Server``. Contract:

* every task listens on 127.0.0.1 on a free port. TF's gRPC server always binds the wildcard
  address, so tasks run with an ``LD_PRELOAD`` shim (``ralp_tf/run/_native``) that rewrites wildcard
  binds to loopback. ``bind_address="0.0.0.0"`` (explicit) skips the shim and warns that the
  server is unauthenticated. With a custom ``launcher`` the launcher decides where tasks listen;
* the coordinator's own gRPC server (``ParameterServerStrategy`` starts one in this process)
  listens on loopback too: ``start()`` points TensorFlow's ``bind()`` calls in this process at
  the same rewrite (:func:`bind_loopback_in_this_process`), however the user's script started;
* ``start()`` returns once every task accepts connections, or raises ``ClusterRuntimeError``
  with the log tail of the task that died or timed out. ``start(wait=False)`` returns once the
  tasks are spawned, so the caller's own work (importing TensorFlow, profiling the model) overlaps
  their start; ``wait_ready()``, ``strategy()`` and ``cluster_resolver()`` then wait for them;
* each task's stdout/stderr go to ``log_dir/<job>-<index>.log`` (a temporary folder by default,
  removed when the ``with`` block ends without an error and kept when one occurred);
* ``stop()`` (also on ``__exit__``, on error, at interpreter exit) first lets this process's
  eager context let go of the tasks (:func:`release_cluster_in_this_process`), so functions the
  user's objects still hold are not removed remotely from dead tasks at exit, then kills every
  task by PID and waits for it; tasks also get SIGKILL if this process dies
  (``PR_SET_PDEATHSIG``).

A *launcher* decides where task processes run: the default runs them here; a testbed runs
them inside network namespaces. It provides ``host(task_name) -> str`` and
``popen(task_name, argv, env, stdout, stderr) -> subprocess.Popen``.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Protocol

from ralp_tf.plan.cluster import Cluster
from ralp_tf.errors import ClusterConfigError, ClusterRuntimeError

__all__ = ["NATIVE_SHIM", "UNAUTHENTICATED_WARNING", "Launcher", "LoopbackLauncher", "build_native",
           "loopback_shim", "machine_cores", "free_port", "loopback_env", "TASK_MEMORY_GIB", "HEADROOM_GIB",
           "available_memory_bytes", "max_tasks_for_memory", "check_tasks_fit_in_memory",
           "bind_loopback_in_this_process", "release_cluster_in_this_process", "TaskProcess", "LocalCluster",
           "kill_and_wait", "stopped_by_signal", "exit_promptly_on_signals", "track"]

NATIVE_SHIM = Path(__file__).resolve().parent / "_native" / "libloopback_bind.so"
_NATIVE_SRC = NATIVE_SHIM.with_name("loopback_bind.c")
UNAUTHENTICATED_WARNING = (
    "TensorFlow's gRPC server is unauthenticated: anyone who can reach {addr} can run ops in this "
    "process. Bind to a non-loopback address only on a network reachable from trusted hosts alone.")
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()  # LocalClusters and tracked jobs
log = logging.getLogger(__name__)


class Launcher(Protocol):
    def host(self, task_name: str) -> str: ...

    def popen(self, task_name: str, argv: list[str], env: dict[str, str], stdout: Any, stderr: Any
              ) -> subprocess.Popen: ...


class LoopbackLauncher:
    """Runs task processes on this machine."""

    def __init__(self, bind_address: str = "127.0.0.1") -> None:
        self.bind_address = bind_address

    def host(self, task_name: str) -> str:
        return "127.0.0.1" if self.bind_address in ("0.0.0.0", "::") else self.bind_address

    def popen(self, task_name: str, argv: list[str], env: dict[str, str], stdout: Any, stderr: Any
              ) -> subprocess.Popen:
        return subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)


def build_native(source: Path, output: Path, what: str, fallback: str) -> Path:
    """``output``, the shared library compiled from ``source`` with ``cc`` when missing or older
    than the source; ClusterRuntimeError naming ``what`` and ``fallback`` when it cannot be built."""
    if output.exists() and output.stat().st_mtime >= source.stat().st_mtime:
        return output
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(output), str(source), "-ldl"],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ClusterRuntimeError(f"cannot build {what} ({exc}); install a C compiler (apt-get install gcc) and "
                                  f"run `make setup`, or {fallback}") from None
    return output


def loopback_shim() -> Path:
    """The compiled bind shim, building it with ``cc`` if ``make setup`` has not."""
    return build_native(_NATIVE_SRC, NATIVE_SHIM, "the loopback bind shim",
                        "pass bind_address='0.0.0.0' to accept TF's wildcard bind")


def machine_cores() -> float:
    """The cores of this machine that its processes may use (the CPU affinity mask)."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return float(os.cpu_count() or 1)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def loopback_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the loopback shim preloaded."""
    env = dict(os.environ if env is None else env)
    shim = str(loopback_shim())
    preload = env.get("LD_PRELOAD", "")
    if shim not in preload.split(":"):
        env["LD_PRELOAD"] = f"{shim}:{preload}" if preload else shim
    return env


#: Memory reserved per local task: an idle task (TF imported, server up) measured 0.72 GB RSS;
#: training alexnet_cifar, a worker 0.82 GB and the PS holding its head 1.34 GB (2-core machine).
TASK_MEMORY_GIB = 1.0
#: Memory left for the coordinator process and the rest of the machine.
HEADROOM_GIB = 2.0


def available_memory_bytes() -> int:
    """``MemAvailable`` from /proc/meminfo (bytes); a very large number where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 50


def max_tasks_for_memory(mem_per_task_gib: float = TASK_MEMORY_GIB, headroom_gib: float = 0.0) -> int:
    """How many TF tasks of ``mem_per_task_gib`` fit in the memory available now, less ``headroom_gib``."""
    if not mem_per_task_gib or mem_per_task_gib <= 0:
        return 1 << 30
    return max(int((available_memory_bytes() - headroom_gib * 2**30) / (mem_per_task_gib * 2**30)), 0)


def check_tasks_fit_in_memory(tasks: int) -> None:
    """Refuse, before anything is spawned, a local cluster whose tasks cannot all fit in memory.

    Rule: ``tasks * TASK_MEMORY_GIB + HEADROOM_GIB <= MemAvailable`` (1 GiB per task, 2 GiB for the
    coordinator). ``LocalCluster(check_memory=False)`` skips the check.
    """
    fits = max_tasks_for_memory(TASK_MEMORY_GIB, HEADROOM_GIB)
    if tasks > fits:
        raise ClusterConfigError(
            f"a LocalCluster of {tasks} tasks needs about {tasks * TASK_MEMORY_GIB:.0f} GiB ({TASK_MEMORY_GIB:g} GiB "
            f"per TensorFlow task) but this machine has {available_memory_bytes() / 2**30:.1f} GiB available: at most "
            f"{fits} tasks fit. Use fewer workers/PS tasks, or pass check_memory=False to LocalCluster if you know "
            "they fit")


def bind_loopback_in_this_process() -> int:
    """Make TensorFlow's wildcard ``bind()`` calls in this process bind loopback instead.

    Loads the shim and patches the ``bind`` entries of every loaded TensorFlow library (see
    ``ralp_tf/run/_native/loopback_bind.c``); call it after ``import tensorflow`` and before a
    ``ParameterServerStrategy`` starts the coordinator's server. Returns how many entries point
    at the hook (0: none found, which the caller reports as a warning).
    """
    import ctypes

    import tensorflow  # noqa: F401  (its libraries must be loaded to be patched)

    lib = ctypes.CDLL(str(loopback_shim()))
    lib.ralp_loopback_hook_install.argtypes = [ctypes.c_char_p]
    lib.ralp_loopback_hook_install.restype = ctypes.c_int
    return int(lib.ralp_loopback_hook_install(b"tensorflow"))


def release_cluster_in_this_process(addresses: set[str]) -> bool:
    """If this process's eager context is connected to a cluster whose tasks are ``addresses``,
    shrink it to this process alone, so the remote contexts close while the tasks still answer.

    TensorFlow has no public API for this (:func:`ralp_tf.model.keras_compat.server_def`,
    :func:`~ralp_tf.model.keras_compat.update_server_def`). Returns whether it let go of a cluster.
    """
    import sys

    if "tensorflow" not in sys.modules:
        return False
    from tensorflow.core.protobuf import tensorflow_server_pb2

    from ralp_tf.model.keras_compat import server_def, update_server_def

    current = server_def()
    if current is None:
        return False
    remote = {addr for job in current.cluster.job if job.name != current.job_name for addr in job.tasks.values()}
    if not remote or not remote <= addresses:
        return False
    alone = tensorflow_server_pb2.ServerDef()
    alone.CopyFrom(current)
    alone.ClearField("cluster_device_filters")
    del alone.cluster.job[:]
    for job in current.cluster.job:
        if job.name == current.job_name:
            alone.cluster.job.add(name=job.name, tasks=dict(job.tasks))
    update_server_def(alone)
    return True


class TaskProcess:
    """One running task."""

    def __init__(self, job: str, index: int, address: str, proc: subprocess.Popen, log_path: Path) -> None:
        self.job, self.index, self.address, self.proc, self.log_path = job, index, address, proc, log_path

    @property
    def name(self) -> str:
        return f"{self.job}{self.index}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class LocalCluster:
    """A PS cluster of real task processes on this machine (see the module docstring)."""

    def __init__(self, workers: int = 2, ps: int = 1, *, bind_address: str = "127.0.0.1",
                 log_dir: str | os.PathLike | None = None, ready_timeout: float = 180.0,
                 launcher: Launcher | None = None, env: dict[str, str] | None = None,
                 inter_op_threads: int | None = None, check_memory: bool = True) -> None:
        for name, n, low in (("workers", workers, 1), ("ps", ps, 0)):
            if isinstance(n, bool) or not isinstance(n, int) or n < low:
                raise ClusterConfigError(f"LocalCluster {name} must be an integer >= {low}, got {n!r}")
        if check_memory:
            check_tasks_fit_in_memory(workers + ps)
        self.num_workers, self.num_ps = workers, ps
        self.bind_address = bind_address
        if launcher is None and bind_address not in ("127.0.0.1", "localhost"):
            warnings.warn(UNAUTHENTICATED_WARNING.format(addr=bind_address), stacklevel=2)
        # A custom launcher (e.g. a testbed's private network namespaces) owns isolation; the
        # loopback shim would make its tasks unreachable from the other namespaces.
        self._loopback_only = launcher is None and bind_address in ("127.0.0.1", "localhost")
        self.launcher: Launcher = launcher or LoopbackLauncher(bind_address)
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="ralp_tf_cluster_"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.ready_timeout = ready_timeout
        self.extra_env = env or {}
        self.inter_op_threads = inter_op_threads
        self.tasks: list[TaskProcess] = []
        self._ready = False
        self._spec: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- life cycle
    def __enter__(self) -> "LocalCluster":
        if not self.tasks:  # `with LocalCluster(...).start(wait=False) as c:` does not wait here
            self.start()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.stop()
        if exc_type is None and self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)  # keep the logs only when something failed

    def start(self, wait: bool = True) -> "LocalCluster":
        """Spawn every task; with ``wait``, return once all accept connections (module docstring)."""
        if self.tasks:
            if wait:
                self.wait_ready()
            return self
        _install_exit_handlers()
        _LIVE.add(self)
        try:
            spec = self._spec = self._make_spec()
            for job in ("ps", "worker"):
                for i, addr in enumerate(spec.get(job, [])):
                    self.tasks.append(self._spawn(job, i, addr, spec))
            if self._loopback_only:  # imports TensorFlow here while the tasks import it
                self._bind_coordinator_loopback()
            if wait:
                self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _bind_coordinator_loopback(self) -> None:
        if bind_loopback_in_this_process() == 0 and "libloopback_bind" not in os.environ.get("LD_PRELOAD", ""):
            warnings.warn("could not redirect TensorFlow's bind() in this process: the coordinator's gRPC server "
                          "will listen on all interfaces. " + UNAUTHENTICATED_WARNING.format(addr="its port"),
                          stacklevel=3)

    def _make_spec(self) -> dict[str, list[str]]:
        spec: dict[str, list[str]] = {}
        for job, n in (("worker", self.num_workers), ("ps", self.num_ps)):
            hosts = [self.launcher.host(f"{job}{i}") for i in range(n)]
            first = 0 if job == "worker" else self.num_workers  # port 2222 + global task index: unique per host
            spec[job] = [f"{h}:{free_port(h) if h.startswith('127.') else 2222 + first + i}"
                         for i, h in enumerate(hosts)]
        if not spec["ps"]:
            del spec["ps"]
        return spec

    def _spawn(self, job: str, index: int, address: str, spec: dict[str, list[str]]) -> TaskProcess:
        log_path = self.log_dir / f"{job}-{index}.log"
        env = dict(os.environ)
        env.update(self.extra_env)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        if self._loopback_only:
            env = loopback_env(env)
        argv = [sys.executable, "-m", "ralp_tf.run._task", "--cluster", json.dumps(spec), "--job", job,
                "--index", str(index), "--parent-pid", str(os.getpid())]
        if self.inter_op_threads:
            argv += ["--inter-op-threads", str(self.inter_op_threads)]
        log = open(log_path, "wb")
        try:
            proc = self.launcher.popen(f"{job}{index}", argv, env, log, subprocess.STDOUT)
        finally:
            log.close()
        return TaskProcess(job, index, address, proc, log_path)

    def restart(self, job: str, index: int) -> TaskProcess:
        """Start dead task ``job:index`` again on its address with the current cluster spec (the old
        log moves to ``<job>-<index>.log.<n>``); returns once it accepts connections."""
        old = self.task(job, index)
        if old.alive():
            raise ClusterRuntimeError(f"task {job}:{index} is still running; kill it before restarting it")
        n = sum(1 for _ in self.log_dir.glob(f"{job}-{index}.log.*")) + 1
        old.log_path.replace(old.log_path.with_name(f"{old.log_path.name}.{n}"))
        new = self._spawn(job, index, old.address, self._spec)
        with self._lock:
            self.tasks[self.tasks.index(old)] = new
        self._wait_ready([new])
        return new

    def add_worker(self, wait: bool = True) -> TaskProcess:
        """Start one more worker task (index ``num_workers``) with a cluster spec that includes it;
        returns once it accepts connections (``wait=False``: at once; :meth:`wait_ready` waits). A
        coordinator must reconnect to use it."""
        index = self.num_workers
        host = self.launcher.host(f"worker{index}")
        used = {t.port for t in self.tasks if t.address.rsplit(":", 1)[0] == host}
        port = free_port(host) if host.startswith("127.") else max(used | {2221 + len(self.tasks)}) + 1
        self._spec = {**self._spec, "worker": [*self._spec["worker"], f"{host}:{port}"]}
        task = self._spawn("worker", index, f"{host}:{port}", self._spec)
        with self._lock:
            self.tasks.append(task)
        self.num_workers += 1
        if wait:
            self._wait_ready([task])
        return task

    def wait_ready(self, tasks: list[TaskProcess] | None = None) -> None:
        """Return once every task of ``tasks`` (default: all, once) accepts connections;
        ClusterRuntimeError with its log tail if one dies first or is not ready within ``ready_timeout``."""
        if tasks is None:
            if not self._ready:
                try:
                    self._wait_ready()
                except BaseException:
                    self.stop()
                    raise
                self._ready = True
            return
        self._wait_ready(tasks)

    def _wait_ready(self, tasks: list[TaskProcess] | None = None) -> None:
        deadline = time.monotonic() + self.ready_timeout
        pending = list(self.tasks if tasks is None else tasks)
        while pending:
            for t in list(pending):
                if not t.alive():
                    raise ClusterRuntimeError(f"task {t.job}:{t.index} exited with code {t.proc.returncode} "
                                              f"before it was ready; its log ({t.log_path}) ends:\n{t.log_tail()}")
                reachable = _accepts(t.address) if isinstance(self.launcher, LoopbackLauncher) else True
                if "RALP_TF_TASK_READY" in t.log_tail(200) and reachable:
                    pending.remove(t)
            if pending and time.monotonic() > deadline:
                t = pending[0]
                raise ClusterRuntimeError(f"task {t.job}:{t.index} was not ready after {self.ready_timeout:.0f} s; "
                                          f"its log ends:\n{t.log_tail()}")
            time.sleep(0.2)

    def stop(self, release: bool = True) -> None:
        """Kill every task and wait for it. With ``release`` (not from a signal handler), first let
        this process's eager context let go of the tasks (see the module docstring)."""
        with self._lock:
            tasks, self.tasks, self._ready = self.tasks, [], False
        if release and tasks and all(t.alive() for t in tasks):
            try:
                release_cluster_in_this_process({t.address for t in tasks})
            except Exception as exc:  # a failing release must not keep the tasks alive
                log.debug("could not release the cluster in this process: %s", exc)
        kill_and_wait(tasks)
        _LIVE.discard(self)

    # ----------------------------------------------------------------- queries
    @property
    def cluster_spec_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t in self.tasks:
            out.setdefault(t.job, []).append(t.address)
        return {j: out[j] for j in ("worker", "ps") if j in out}

    def cluster_spec(self) -> Any:
        import tensorflow as tf

        return tf.train.ClusterSpec(self.cluster_spec_dict)

    def cluster_resolver(self) -> Any:
        import tensorflow as tf

        if self.tasks:
            self.wait_ready()
        return tf.distribute.cluster_resolver.SimpleClusterResolver(self.cluster_spec(), rpc_layer="grpc")

    def cluster(self, **rates: Any) -> Cluster:
        """The running cluster as a :class:`ralp_tf.Cluster` (rates as in ``Cluster.from_dict``), its
        hosts sharing this machine's cores unless its launcher gives them CPU budgets."""
        cluster = Cluster.from_dict(self.cluster_spec_dict, **rates)
        return cluster if getattr(self.launcher, "host_cpu", None) else cluster.with_shared_cores(machine_cores())

    def strategy(self) -> Any:
        """A ``ParameterServerStrategy`` connected to this cluster."""
        import tensorflow as tf

        if not self.tasks:
            raise ClusterRuntimeError("LocalCluster is not started; use `with LocalCluster(...) as c:` first")
        if self.num_ps == 0:
            raise ClusterConfigError("ParameterServerStrategy needs at least one PS task; use LocalCluster(ps=1)")
        return tf.distribute.ParameterServerStrategy(self.cluster_resolver())

    def task(self, job: str, index: int) -> TaskProcess:
        for t in self.tasks:
            if t.job == job and t.index == index:
                return t
        raise ClusterConfigError(f"no task {job}:{index} in this LocalCluster")

    def pids(self) -> list[int]:
        return [t.pid for t in self.tasks]

    def kill(self, job: str, index: int, sig: int = signal.SIGKILL) -> None:
        """Kill one task (fault injection)."""
        t = self.task(job, index)
        os.kill(t.pid, sig)
        t.proc.wait(timeout=30)

    def check_alive(self) -> None:
        """Raise ClusterRuntimeError with the log tail of any task that died."""
        for t in self.tasks:
            if not t.alive():
                raise ClusterRuntimeError(f"task {t.job}:{t.index} died with code {t.proc.returncode}; its log "
                                          f"({t.log_path}) ends:\n{t.log_tail()}")


def kill_and_wait(tasks: list[TaskProcess], timeout_s: float = 30.0) -> None:
    """SIGKILL every task process still running, then wait up to ``timeout_s`` for each."""
    for t in tasks:
        if t.alive():
            try:
                t.proc.kill()
            except ProcessLookupError:
                pass
    for t in tasks:
        try:
            t.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass


def _accepts(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


_handlers_installed = False


def _stop_all(release: bool = True) -> None:
    for c in list(_LIVE):
        c.stop(release=release)


_stopping_signal: int | None = None


def stopped_by_signal() -> int | None:
    """The signal whose watchdog (:func:`exit_promptly_on_signals`) stopped this process's local
    clusters, or None."""
    return _stopping_signal


def exit_promptly_on_signals(grace_s: float = 4.0) -> bool:
    """For command-line programs: make SIGINT and SIGTERM end the process within ``grace_s`` s.

    Python runs signal handlers only when the main thread returns to the interpreter, which a
    blocking TensorFlow call can delay for minutes. This installs a wakeup fd
    (``signal.set_wakeup_fd``) read by a watchdog thread: on SIGINT or SIGTERM the watchdog at
    once kills every LocalCluster's tasks, silences TensorFlow's log of the failures that
    follow, and lets the main thread unwind (KeyboardInterrupt / SystemExit); if the process
    still runs ``grace_s`` seconds later it exits with status ``128 + signal``. SIGINT counts even
    when the process inherited it ignored (started in the background by a script): a command asked
    to stop stops. Call it from the main thread; returns False (and does nothing) elsewhere or
    when a wakeup fd is already set.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
        # A process started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
        # ignored, and Python then installs no handler: the signal would never reach the watchdog.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _install_exit_handlers()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    if signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False) != -1:
        signal.set_wakeup_fd(-1)  # someone else (e.g. an event loop) owns the wakeup fd: leave it
        os.close(read_fd)
        os.close(write_fd)
        return False

    def watch() -> None:
        global _stopping_signal
        while True:
            signum = os.read(read_fd, 1)[0]
            if signum in (signal.SIGINT, signal.SIGTERM):
                break
        _stopping_signal = signum
        logging.getLogger("tensorflow").setLevel(logging.CRITICAL)
        _stop_all(release=False)
        time.sleep(grace_s)
        sys.stderr.write(f"stopped by {signal.Signals(signum).name}; local cluster tasks were stopped\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    threading.Thread(target=watch, name="ralp-signal-watchdog", daemon=True).start()
    return True


def track(job: Any) -> None:
    """Stop ``job`` (anything with ``stop(release=...)``, such as a ring job's worker processes) when
    the local clusters are stopped: at exit, on SIGTERM and from :func:`exit_promptly_on_signals`."""
    _install_exit_handlers()
    _LIVE.add(job)


def _install_exit_handlers() -> None:
    """Stop every live LocalCluster at exit and on SIGTERM (SIGINT raises KeyboardInterrupt,
    which unwinds through ``with`` blocks)."""
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            _stop_all(release=False)
            if callable(previous):
                previous(signum, frame)
            else:
                raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)
