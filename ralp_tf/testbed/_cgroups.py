"""CPU budgets for emulated hosts: cgroup v1 CPU controller groups, standard library only.

Like :mod:`_nsops`, this module is imported both as ``ralp_tf.testbed._cgroups`` and, by the reaper
process (run by path), as a top-level module: it must not import anything from ralp_tf.

One group per emulated host, ``/sys/fs/cgroup/cpu/<prefix>-<host>`` (the name of the host's
namespace), with ``cpu.cfs_quota_us = cores x cpu.cfs_period_us`` (the period is left at its
default, 100000 us). A process joins a group by writing its PID to the group's ``cgroup.procs``;
its threads and children inherit the group. :func:`join_argv` wraps a command so that it joins
the group *before* it runs (a shell writes its own PID, then execs the command, keeping the PID),
so no thread of the command ever runs outside the budget. Everything here needs root.
"""
from __future__ import annotations

import os
import signal
import time

__all__ = ["CPU_ROOT", "MIN_CORES", "CgroupError", "cpu_controller_support", "group_path", "period_us",
           "create_group", "quota_cores", "group_pids", "cpu_stat", "join_argv", "remove_group", "stale_groups",
           "cleanup_prefix"]

CPU_ROOT = "/sys/fs/cgroup/cpu"
#: The smallest quota the kernel accepts is 1000 us per period; keep budgets well above it.
MIN_CORES = 0.01


class CgroupError(RuntimeError):
    """A cgroup operation failed; the message names the path and the reason."""


def cpu_controller_support() -> tuple[bool, str]:
    """(True, "") when this process can create CPU-quota groups, else (False, what is missing)."""
    if os.geteuid() != 0:
        return False, ("per-host CPU budgets need root (they create cgroup v1 CPU groups under "
                       f"{CPU_ROOT}); run as root, or run without CPU budgets")
    for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cgroup.procs"):
        if not os.path.exists(os.path.join(CPU_ROOT, name)):
            return False, (f"per-host CPU budgets need the cgroup v1 CPU controller mounted at {CPU_ROOT} "
                           f"({os.path.join(CPU_ROOT, name)} is missing; cgroup v2-only systems are not "
                           "supported); run without CPU budgets")
    if not os.access(CPU_ROOT, os.W_OK):
        return False, f"{CPU_ROOT} is not writable here (read-only cgroup mount); run without CPU budgets"
    return True, ""


def group_path(name: str) -> str:
    """Path of the CPU group ``name`` (a direct child of the controller's root)."""
    return os.path.join(CPU_ROOT, name)


def period_us(path: str = CPU_ROOT) -> int:
    """``cpu.cfs_period_us`` of a group (the root's default: 100000)."""
    with open(os.path.join(path, "cpu.cfs_period_us")) as f:
        return int(f.read().strip())


def create_group(name: str, cores: float) -> str:
    """Create (or reuse) group ``name`` capped at ``cores`` CPUs; returns its path."""
    path = group_path(name)
    try:
        os.makedirs(path, exist_ok=True)
        quota = max(1000, int(round(cores * period_us(path))))
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(quota))
    except OSError as exc:
        raise CgroupError(f"cannot create CPU group {path} with a quota of {cores:g} cores: {exc}") from None
    return path


def quota_cores(path: str) -> float | None:
    """The group's quota in cores (None when unlimited)."""
    with open(os.path.join(path, "cpu.cfs_quota_us")) as f:
        quota = int(f.read().strip())
    return None if quota < 0 else quota / period_us(path)


def group_pids(path: str) -> list[int]:
    """PIDs of the processes in the group (empty when it is gone)."""
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def cpu_stat(path: str) -> dict[str, int]:
    """The group's ``cpu.stat`` (``nr_periods``, ``nr_throttled``, ``throttled_time`` in ns)."""
    with open(os.path.join(path, "cpu.stat")) as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def join_argv(path: str, argv: list[str]) -> list[str]:
    """``argv`` wrapped so that it joins group ``path`` before it starts: ``sh`` writes its own PID to
    ``cgroup.procs`` and execs ``argv`` (same PID). If the write fails, ``sh`` exits 2 with the error
    and the command never runs."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(path, "cgroup.procs")] + list(argv)


def remove_group(path: str, wait_s: float = 5.0) -> None:
    """SIGKILL every process left in the group and remove it. A missing group is fine; raises
    :class:`CgroupError` if it still exists after ``wait_s`` (a process in uninterruptible sleep)."""
    deadline = time.monotonic() + wait_s
    while os.path.isdir(path):
        for pid in group_pids(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:  # EBUSY while killed processes are still exiting
            if time.monotonic() >= deadline:
                raise CgroupError(f"cannot remove CPU group {path}: {exc} (processes {group_pids(path)} "
                                  "are still in it)") from None
            time.sleep(0.05)


def stale_groups(prefix: str) -> list[str]:
    """Paths of the groups that belong to testbeds with ``prefix`` (``<prefix>-*``)."""
    try:
        names = os.listdir(CPU_ROOT)
    except OSError:
        return []
    return sorted(group_path(n) for n in names if n.startswith(prefix + "-") and os.path.isdir(group_path(n)))


def cleanup_prefix(prefix: str) -> list[str]:
    """Remove every group ``<prefix>-*`` (killing what is inside); returns the paths removed."""
    paths = stale_groups(prefix)
    for p in paths:
        remove_group(p)
    return paths
