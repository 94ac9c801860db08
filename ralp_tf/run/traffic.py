"""Measured bytes between the tasks of a local cluster, from the kernel's per-socket counters.

``ss -tinp`` reports, for every TCP socket, its owner PID and the counters ``bytes_acked``
(payload sent and acknowledged) and ``bytes_received``. A connection between task A and task
B is counted once, from the end that opened it (owner A, peer port = B's listening port):
``bytes_acked`` is A -> B and ``bytes_received`` is B -> A. Only sockets owned by the given
tasks and connecting to the given tasks' ports are counted, so other traffic on the machine
does not leak in. Counters are payload bytes (gRPC/HTTP2 frames included, TCP/IP headers not).
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from typing import Iterable, Mapping

from ralp_tf.errors import ClusterRuntimeError

__all__ = ["SocketCounters", "Endpoint", "split_address", "read_sockets", "pair_bytes", "TrafficMeter",
           "cluster_endpoints", "SUSPECT_BYTES_RATIO", "suspect_bytes_warning", "per_step"]

_PID = re.compile(r"pid=(\d+)")
_COUNTER = re.compile(r"\b(bytes_acked|bytes_received|bytes_sent):(\d+)")


@dataclasses.dataclass(frozen=True)
class SocketCounters:
    pid: int
    local_port: int
    peer_port: int
    sent: int
    received: int
    #: the peer's address, brackets and zone removed, an IPv4-mapped IPv6 address as plain IPv4
    peer_host: str = ""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A task: its name, process id and listening port."""

    name: str
    pid: int
    port: int


def split_address(address: str) -> tuple[str, int]:
    """``'10.0.0.1:2222'`` / ``'[::ffff:10.0.0.1]:2222'`` / ``'*:2222'`` -> ``(host, port)``, an
    IPv4-mapped IPv6 host as plain IPv4, brackets and zone removed."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]").split("%")[0]
    if host.lower().startswith("::ffff:") and "." in host:
        host = host[7:]
    return host, int(port)


def read_sockets() -> list[SocketCounters]:
    """Every established TCP socket with an owner PID and byte counters."""
    if shutil.which("ss") is None:
        raise ClusterRuntimeError("traffic measurement needs `ss` (apt-get install iproute2)")
    out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True, check=True).stdout
    sockets: list[SocketCounters] = []
    header: list[str] | None = None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            header = line.split()
            continue
        if header is None:
            continue
        # With "state established", columns are: Recv-Q Send-Q Local Peer [Process]
        fields = [f for f in header if ":" in f and not f.startswith("users:")]
        pid_m = _PID.search(" ".join(header))
        counters = dict((k, int(v)) for k, v in _COUNTER.findall(line))
        if len(fields) >= 2 and pid_m:
            peer_host, peer_port = split_address(fields[1])
            sockets.append(SocketCounters(
                pid=int(pid_m.group(1)), local_port=split_address(fields[0])[1], peer_port=peer_port,
                sent=counters.get("bytes_acked", counters.get("bytes_sent", 0)),
                received=counters.get("bytes_received", 0), peer_host=peer_host))
        header = None
    return sockets


def pair_bytes(endpoints: Iterable[Endpoint], sockets: list[SocketCounters] | None = None
               ) -> dict[tuple[str, str], int]:
    """Cumulative bytes ``{(src, dst): n}`` between the given tasks, per direction."""
    eps = list(endpoints)
    by_pid = {e.pid: e for e in eps}
    by_port = {e.port: e for e in eps}
    out: dict[tuple[str, str], int] = {}
    for s in read_sockets() if sockets is None else sockets:
        a, b = by_pid.get(s.pid), by_port.get(s.peer_port)
        if a is None or b is None or a is b:
            continue
        out[(a.name, b.name)] = out.get((a.name, b.name), 0) + s.sent
        out[(b.name, a.name)] = out.get((b.name, a.name), 0) + s.received
    return out


class TrafficMeter:
    """Bytes between tasks over an interval: ``start()``, run steps, ``stop()``."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self.endpoints = list(endpoints)
        self._start: dict[tuple[str, str], int] = {}
        self.delta: dict[tuple[str, str], int] = {}

    def start(self) -> None:
        self._start = pair_bytes(self.endpoints)

    def stop(self) -> dict[tuple[str, str], int]:
        end = pair_bytes(self.endpoints)
        self.delta = {k: v - self._start.get(k, 0) for k, v in end.items() if v - self._start.get(k, 0) > 0}
        return self.delta

    def total(self, between: tuple[str, str] = ("worker", "ps")) -> int:
        """Bytes in both directions between tasks whose names start with the two prefixes."""
        x, y = between
        return sum(v for (a, b), v in self.delta.items()
                   if (a.startswith(x) and b.startswith(y)) or (a.startswith(y) and b.startswith(x)))


def cluster_endpoints(cluster: object) -> list[Endpoint]:
    """Endpoints of a started :class:`ralp_tf.run.launch.LocalCluster`."""
    return [Endpoint(t.name, t.pid, t.port) for t in getattr(cluster, "tasks")]


#: Measured bytes above this multiple of the prediction mean placement or the cost model is wrong.
SUSPECT_BYTES_RATIO = 2.0


def suspect_bytes_warning(what: str, measured: float | None, predicted: float | None) -> str | None:
    """A warning when ``measured`` bytes per step exceed ``SUSPECT_BYTES_RATIO`` x ``predicted``
    (None otherwise): the plan did not take effect, or the cost model is wrong for this model."""
    if not measured or not predicted or measured <= SUSPECT_BYTES_RATIO * predicted:
        return None
    return (f"{what}: measured {measured / 1e6:.3f} MB per step, {measured / predicted:.1f}x the predicted "
            f"{predicted / 1e6:.3f} MB: the placement did not take effect or the cost model is wrong for this model. "
            "Check the placed devices with ralp_tf.verify_placement(model, plan) and report the model if they match")


def per_step(delta: Mapping[tuple[str, str], int], steps: int) -> dict[str, float]:
    return {f"{a}->{b}": v / steps for (a, b), v in sorted(delta.items())}
