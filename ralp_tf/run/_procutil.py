"""Process helpers shared by the launchers (no TensorFlow import)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["PR_SET_PDEATHSIG", "die_with_parent", "stat_fields", "process_cpu_seconds"]

#: ``prctl`` option: the signal the kernel sends this process when its parent exits (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int = 0) -> None:
    """Have the kernel SIGKILL this process when its parent exits (``PR_SET_PDEATHSIG``; a no-op
    where libc has no ``prctl``). With ``parent_pid``, exit at once (status 1) if the parent is
    already gone, i.e. this process was re-parented before the signal was armed. Safe as a
    ``subprocess`` ``preexec_fn``."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass
    if parent_pid and os.getppid() != parent_pid:
        sys.exit(1)  # the parent is already gone


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` state, ``[1]`` ppid,
    ``[2]`` pgrp, ``[3]`` session, ``[11]`` utime, ``[12]`` stime in clock ticks); None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far; 0.0 when it is gone."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0
