"""Process helpers shared by the launchers (no TensorFlow import)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["PR_SET_PDEATHSIG", "die_with_parent"]

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
