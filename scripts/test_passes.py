"""Run the test suite in its three passes: ``python scripts/test_passes.py [--extended]`` (``make test``).

- **in-process**: tests that start no cluster, namespace or Horovod job, on every core
  (pytest-xdist ``-n auto``). It runs *beside* the other two, at the lowest CPU priority
  (``SCHED_IDLE``; ``nice 19`` where that is refused), its output kept in a file and printed when
  it ends.
- **local clusters**: tests that start local clusters and subprocesses, two files at a time
  (``--dist loadfile``: a file's tests share its module fixtures). Each spends much of its time
  importing TensorFlow and waiting on its tasks, and counts only its own tasks' sockets.
- **namespaces**: tests that build network namespaces, CPU groups or Horovod jobs, one at a time
  (they share namespace prefixes and the testbed lock, check that no namespace is left, and
  measure link rates and CPU shares), after the local-cluster pass.

The namespace pass keeps about one of two cores idle (its hosts run on CPU budgets, its links are
shaped); the in-process pass is pure CPU and budgeted in work, not time. Under ``SCHED_IDLE`` its
CFS weight is 3 against 1024 for a default task or CPU group, and a waking task of the other passes
preempts it at once, so it takes the cycles they leave; its wall-clock waits are safety caps.

Without ``--extended`` every pass leaves out tests marked ``extended`` (pytest.ini). The exit status
is the first failing pass's (in-process, local clusters, namespaces), after all ran. The passes
share this script's process group, so Ctrl-C (SIGINT to the group) reaches each of them once and
pytest tears its fixtures down (namespaces and task processes go); SIGTERM to this script is passed
on to each pass as SIGINT. It then starts no further pass and exits 130 once they ended (SIGKILL
to a pass that outlives 60 s).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parents[1]

IN_PROCESS = "not integration and not needs_root and not needs_horovod and not release"
LOCAL_CLUSTERS = "integration and not needs_root and not needs_horovod and not release"
NAMESPACES = "(needs_root or needs_horovod) and not release"
STOP_GRACE_S = 60.0


def pytest_argv(marks: str, extended: bool, *options: str) -> list[str]:
    """``python -m pytest -q -rs OPTIONS -m MARKS tests``, with ``and not extended`` unless ``extended``."""
    expr = marks if extended else f"{marks} and not extended"
    return [sys.executable, "-m", "pytest", "-q", "-rs", *options, "-m", expr, "tests"]


def lowest_priority() -> None:
    """In the child before exec: ``SCHED_IDLE`` (inherited by its workers and subprocesses), else nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


class Passes:
    """The running passes; :meth:`interrupt` stops them (see the module docstring)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.interrupted = False

    def start(self, argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, cwd=REPO, **kw)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def interrupt(self, signum: int, _frame: FrameType | None) -> None:
        self.interrupted = True
        if signum == signal.SIGINT:
            return  # Ctrl-C: the group's SIGINT reached every pass already; a second would cut their teardown
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    def wait(self, proc: subprocess.Popen[bytes]) -> int:
        """``proc``'s status; SIGKILL if it outlives :data:`STOP_GRACE_S` after an interrupt."""
        deadline: float | None = None
        while True:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if self.interrupted:
                    deadline = deadline or time.monotonic() + STOP_GRACE_S
                    if time.monotonic() > deadline:
                        proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--extended", action="store_true", help="run the `extended` tests too (make test-full)")
    args = parser.parse_args(argv)
    passes = Passes()
    signal.signal(signal.SIGINT, passes.interrupt)
    signal.signal(signal.SIGTERM, passes.interrupt)
    with tempfile.TemporaryFile() as in_process_log:
        in_process = passes.start(pytest_argv(IN_PROCESS, args.extended, "-n", "auto"), preexec_fn=lowest_priority,
                                  stdout=in_process_log, stderr=subprocess.STDOUT)
        statuses = []
        for marks in (LOCAL_CLUSTERS, NAMESPACES):
            if passes.interrupted:
                break
            options = ("-n", "2", "--dist", "loadfile") if marks == LOCAL_CLUSTERS else ()
            statuses.append(passes.wait(passes.start(pytest_argv(marks, args.extended, *options, "--durations=10"))))
        statuses.insert(0, passes.wait(in_process))
        in_process_log.seek(0)
        sys.stdout.flush()
        print("\n== in-process pass (ran beside the others at the lowest CPU priority) ==", flush=True)
        sys.stdout.buffer.write(in_process_log.read())
        sys.stdout.flush()
    if passes.interrupted:
        return 130
    return next((s for s in statuses if s != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
