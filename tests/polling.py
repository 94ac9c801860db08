"""Poll-until-deadline: the one way tests wait for a process or a condition (no fixed sleeps)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, TypeVar, Union

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, interval_s: float = 0.05,
               what: Union[str, Callable[[], str]] = "the condition") -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    It is called at once, then every ``interval_s`` seconds, and once more at the deadline, so a
    condition that holds by then is never reported as a timeout. If it is still falsy
    ``timeout_s`` seconds after the first call, raise AssertionError naming ``what`` (a string,
    or a function returning one, called only on timeout so it can describe the state left
    behind) and the timeout. Exceptions raised by ``predicate`` propagate unchanged.
    """
    if timeout_s < 0 or interval_s <= 0:
        raise ValueError(f"timeout_s must be >= 0 and interval_s > 0, got {timeout_s} and {interval_s}")
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(interval_s, left))
    desc = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {desc}")


def local_tasks_of(pid: int) -> list[int]:
    """PIDs of LocalCluster task processes started by ``pid`` (they carry ``--parent-pid PID``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if b"ralp_tf.run._task" in argv and f"{pid}".encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found
