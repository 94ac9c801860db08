"""Low-level network-namespace operations, standard library only.

This module is imported both as ``ralp_tf.testbed._nsops`` and, by the reaper process
(``_reaper.py`` run by path), as a top-level module; it must not import anything from ralp_tf.

Everything here needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN) and the ``ip`` command of iproute2.
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from typing import Any, Callable, Iterable

__all__ = ["NETNS_DIR", "ETC_NETNS_DIR", "CLONE_NEWNET", "NsOpError", "sh", "list_netns", "netns_pids",
           "stat_fields", "process_cpu_seconds", "parse_proc_stat", "machine_cpu_seconds", "kill_pids", "killpg_quiet",
           "session_pids", "delete_netns", "stale_names", "cleanup_prefix", "in_netns", "disable_offloads",
           "write_sysctls"]

NETNS_DIR = "/var/run/netns"
ETC_NETNS_DIR = "/etc/netns"
CLONE_NEWNET = 0x40000000

# linux/ethtool.h legacy commands (still honoured by the feature code).
_SIOCETHTOOL = 0x8946
_ETHTOOL_GTSO, _ETHTOOL_STSO = 0x1E, 0x1F
_ETHTOOL_GGSO, _ETHTOOL_SGSO = 0x23, 0x24
_ETHTOOL_GGRO, _ETHTOOL_SGRO = 0x2B, 0x2C


class NsOpError(RuntimeError):
    """A namespace command failed; ``cmd`` and ``stderr`` say which and why."""

    def __init__(self, cmd: list[str], returncode: int, stderr: str) -> None:
        self.cmd, self.returncode, self.stderr = cmd, returncode, stderr.strip()
        super().__init__(f"`{' '.join(cmd)}` failed (exit {returncode}): {self.stderr or 'no message'}")


def sh(cmd: list[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run a short administrative command; raise :class:`NsOpError` on failure when ``check``."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise NsOpError(cmd, proc.returncode, proc.stderr)
    return proc


def list_netns() -> list[str]:
    """Names of the named network namespaces (those under /var/run/netns)."""
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if not n.startswith("."))
    except FileNotFoundError:
        return []


def netns_pids(name: str) -> list[int]:
    """PIDs of processes whose network namespace is ``name`` (``ip netns pids``)."""
    proc = sh(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in proc.stdout.split() if p.strip().isdigit()]


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


#: The fields of ``/proc/stat``'s ``cpu`` line, in order (guest time is already in ``user``).
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(text: str, ticks_per_s: float) -> dict[str, float]:
    """Seconds of the whole machine (every CPU) from ``/proc/stat``'s ``cpu`` line: each of
    :data:`_CPU_FIELDS`, ``total`` (their sum) and ``busy`` (``total`` less ``idle`` and ``iowait``)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            out = {name: int(v) / ticks_per_s for name, v in zip(_CPU_FIELDS, parts[1:])}
            out["busy"] = sum(v for name, v in out.items() if name not in ("idle", "iowait"))
            out["total"] = out["busy"] + out.get("idle", 0.0) + out.get("iowait", 0.0)
            return out
    raise ValueError("no 'cpu' line in /proc/stat")


def machine_cpu_seconds() -> dict[str, float]:
    """:func:`parse_proc_stat` of this machine now. Take deltas over a window."""
    with open("/proc/stat") as f:
        return parse_proc_stat(f.read(), os.sysconf("SC_CLK_TCK"))


def _alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def kill_pids(pids: Iterable[int], sig: int = signal.SIGKILL, wait_s: float = 5.0) -> list[int]:
    """Send ``sig`` to every pid and wait up to ``wait_s`` for them to go; returns the survivors."""
    pids = [p for p in set(pids) if p != os.getpid()]
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait_s
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if _alive(p)]
    return left


def killpg_quiet(pgid: int, sig: int) -> None:
    """Signal a process group, ignoring groups that are already gone."""
    if pgid <= 1 or pgid == os.getpgrp():
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def session_pids(sid: int) -> list[int]:
    """PIDs of live processes whose session id is ``sid`` (children of a ``start_new_session`` Popen)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)
        if fields is not None and int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            out.append(int(entry))
    return out


def delete_netns(name: str) -> None:
    """Kill every process inside namespace ``name``, delete it (and with it its veths/bridge) and
    its /etc/netns/<name> folder. Missing namespaces are fine."""
    if name in list_netns():
        kill_pids(netns_pids(name), signal.SIGKILL)
        proc = sh(["ip", "netns", "delete", name], check=False)
        if proc.returncode != 0 and name in list_netns():
            raise NsOpError(["ip", "netns", "delete", name], proc.returncode, proc.stderr)
    shutil.rmtree(os.path.join(ETC_NETNS_DIR, name), ignore_errors=True)


def stale_names(prefix: str) -> list[str]:
    """Namespaces (and /etc/netns folders) that belong to testbeds with ``prefix``."""
    names = {n for n in list_netns() if n.startswith(prefix + "-")}
    try:
        names |= {n for n in os.listdir(ETC_NETNS_DIR) if n.startswith(prefix + "-")}
    except FileNotFoundError:
        pass
    return sorted(names)


def cleanup_prefix(prefix: str) -> list[str]:
    """Remove every namespace named ``<prefix>-*`` with the processes inside it; returns the names."""
    names = stale_names(prefix)
    # Kill everything first, in every namespace, so no process migrates work between them.
    for n in names:
        if n in list_netns():
            kill_pids(netns_pids(n), signal.SIGKILL, wait_s=0)
    for n in names:
        delete_netns(n)
    return names


def in_netns(name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn()`` on a fresh thread that has joined namespace ``name``; return its result.

    Only that thread changes namespace (setns is per-thread), and it ends afterwards, so the
    calling process is never moved.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({name}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target, name=f"netns-{name}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _ethtool(ifname: str, cmd: int, data: int = 0) -> int:
    buf = ctypes.create_string_buffer(struct.pack("II", cmd, data), 8)
    ifr = struct.pack("16sP", ifname.encode(), ctypes.addressof(buf))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), _SIOCETHTOOL, ifr)
    return struct.unpack("II", buf.raw[:8])[1]


def disable_offloads(ifnames: Iterable[str]) -> dict[str, dict[str, int]]:
    """In the current thread's namespace: turn TSO, GSO and GRO off (``ethtool -K tso off gso off gro
    off``) so interface counters and qdisc stats see real wire frames. Returns the resulting flags."""
    out = {}
    for ifname in ifnames:
        _ethtool(ifname, _ETHTOOL_STSO, 0)
        _ethtool(ifname, _ETHTOOL_SGSO, 0)
        _ethtool(ifname, _ETHTOOL_SGRO, 0)
        out[ifname] = {"tso": _ethtool(ifname, _ETHTOOL_GTSO), "gso": _ethtool(ifname, _ETHTOOL_GGSO),
                       "gro": _ethtool(ifname, _ETHTOOL_GGRO)}
    return out


def write_sysctls(values: dict[str, str]) -> None:
    """In the current thread's namespace, write /proc/sys entries (keys like ``net/ipv6/conf/all/...``)."""
    for key, value in values.items():
        with open(os.path.join("/proc/sys", key), "w") as f:
            f.write(value)
