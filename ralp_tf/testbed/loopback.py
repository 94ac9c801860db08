"""The fallback testbed: every task on 127.0.0.1, no caps, no root needed.

Same API as :class:`~ralp_tf.testbed.Testbed` so benchmarks run unchanged where namespaces are not
allowed (containers without CAP_SYS_ADMIN, unprivileged users). What it cannot do:

* cap bandwidth (``bandwidth_bps`` is always ``math.inf``; asking for a cap raises unless
  ``ignore_bandwidth=True``);
* give every task its own address: all tasks share 127.0.0.1, so tasks need distinct ports
  (:meth:`LoopbackTestbed.free_port`);
* count wire bytes: :meth:`LoopbackTestbed.link_bytes` sums the kernel's per-socket TCP payload
  counters (``ss -ti``: ``bytes_acked``/``bytes_received``, as :mod:`ralp_tf.run.traffic` reads them; ``bytes_sent``
  also counts retransmissions, which happen on loopback too) of the *live* TCP sockets of each
  host's processes. Headers are not included and sockets already closed are missed; hence
  ``bytes_kind = "tcp_payload_live_sockets"`` and ``bytes_exact = False``;
* separate hosts: ``hosts=`` is accepted (same host maps as :class:`~ralp_tf.testbed.Testbed`), but
  every host is 127.0.0.1 and all of them share one uncapped "link", the loopback device. Only
  the byte counts follow the hosts: they are summed per host, and sockets between two tasks of
  the same host are left out, as they never reach a host link on the namespace testbed.

CPU budgets (``host_cpu=``) work here too when the process is root and has the cgroup v1 CPU
controller (they do not need namespaces).

Every process it starts gets the loopback bind shim (``LD_PRELOAD``), so servers that bind the
wildcard address (TF's gRPC servers, gloo) listen on 127.0.0.1 only.
"""
from __future__ import annotations

import math
import re
import shutil
import socket
import subprocess
from typing import Any, Mapping, Sequence

from ralp_tf.testbed import _nsops
from ralp_tf.testbed.base import (DEFAULT_MEM_PER_TASK_GIB, BaseTestbed, TestbedConfigError, TestbedError,
                                  check_capacity)

__all__ = ["LoopbackTestbed"]

_USERS = re.compile(r"pid=(\d+)")
_SENT = re.compile(r"\bbytes_acked:(\d+)")  # sent and acknowledged: a loopback retransmit is not counted twice
_RECV = re.compile(r"\bbytes_received:(\d+)")


class LoopbackTestbed(BaseTestbed):
    """All tasks on loopback; see the module docstring for what differs from :class:`Testbed`."""

    emulated = False
    bytes_kind = "tcp_payload_live_sockets"
    bytes_exact = False

    def __init__(self, task_names: Sequence[str], bandwidth: str | float | int | None = None, *,
                 prefix: str = "ralptb", mem_per_task_gib: float = DEFAULT_MEM_PER_TASK_GIB,
                 ignore_bandwidth: bool = False, term_grace_s: float = 5.0,
                 hosts: Mapping[str, Sequence[str]] | None = None, host_cpu: float | Mapping[str, float] | None = None,
                 max_tasks_per_host: int | None = None, **_ignored: object) -> None:
        super().__init__(task_names, bandwidth, prefix=prefix, term_grace_s=term_grace_s, hosts=hosts,
                         host_cpu=host_cpu, max_tasks_per_host=max_tasks_per_host)
        if not math.isinf(self.bandwidth_bps):
            if not ignore_bandwidth:
                raise TestbedConfigError(
                    f"the loopback testbed cannot cap links (asked for {bandwidth!r}); use the namespace Testbed "
                    "(root), or pass bandwidth=None / ignore_bandwidth=True to run uncapped")
            self.requested_bandwidth_bps = self.bandwidth_bps
            self.bandwidth_bps = math.inf
        check_capacity(len(self.tasks), mem_per_task_gib, 1000, "the loopback testbed", n_hosts=len(self.hosts))

    def _build(self) -> None:
        pass

    def _destroy(self) -> None:
        pass

    def _wrap(self, task: str, argv: list[str]) -> list[str]:
        return argv

    def popen(self, task: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
              stdout: Any = None, stderr: Any = None, **kwargs: Any) -> subprocess.Popen:
        """As :meth:`BaseTestbed.popen`, with the loopback bind shim preloaded: TF's gRPC servers
        (PS tasks, MWMS and Horovod ranks) then listen on 127.0.0.1, not on every address."""
        from ralp_tf.run.launch import loopback_env

        return super().popen(task, argv, loopback_env(None if env is None else dict(env)), stdout, stderr,
                             **kwargs)

    def host(self, task: str) -> str:
        """Always ``127.0.0.1``."""
        if task not in self.tasks:
            raise TestbedConfigError(f"unknown task {task!r}; this testbed has {self.tasks}")
        return "127.0.0.1"

    @staticmethod
    def free_port() -> int:
        """A TCP port free on 127.0.0.1 right now (tasks share the address, so ports must differ)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Per host (= task in the dedicated layout), TCP payload bytes sent (``tx``) and received
        (``rx``) on the live sockets of the processes started for its tasks (and their children),
        leaving out sockets whose peer is a process of the same host. Not wire bytes; see the
        module docstring."""
        if not self._open:
            raise TestbedError("the testbed is not running")
        if shutil.which("ss") is None:
            raise TestbedError("loopback byte counts need 'ss' (iproute2); install it or ignore link_bytes()")
        owner: dict[int, str] = {}
        for task, proc in self._procs:
            for pid in _nsops.session_pids(proc.pid):
                owner[pid] = task
        out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=False).stdout
        counts = {h: {"tx": 0, "rx": 0} for h in self.hosts}
        lines = out.splitlines()
        sockets = []  # (host, local address, peer address, info line)
        for i, line in enumerate(lines):
            if line.startswith((" ", "\t")):
                continue
            info = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith((" ", "\t")) else ""
            pids = {int(p) for p in _USERS.findall(line)}
            hosts = {self.host_of(owner[p]) for p in pids if p in owner}
            fields = line.split()
            if len(hosts) != 1 or len(fields) < 5:
                continue
            sockets.append((hosts.pop(), fields[3], fields[4], info))
        host_at = {local: host for host, local, _, _ in sockets}
        for host, _, peer, info in sockets:
            if host_at.get(peer) == host:
                continue  # both ends on one host: not link traffic
            m_s, m_r = _SENT.search(info), _RECV.search(info)
            counts[host]["tx"] += int(m_s.group(1)) if m_s else 0
            counts[host]["rx"] += int(m_r.group(1)) if m_r else 0
        return counts
