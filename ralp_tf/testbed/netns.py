"""The emulated multi-host cluster: one network namespace per host, a bridge, capped links.

A *host* runs one or more tasks (``hosts=``, see :mod:`ralp_tf.testbed.layout`); in the default
dedicated layout every task is a host of its own, named like it. Below, "task" reads "host".

Topology (``prefix="ralptb"``, tasks ``worker0``, ``ps0``, dedicated)::

    ns ralptb-worker0            ns ralptb--switch                ns ralptb-ps0
    lo, eth0 10.231.0.1/24 ══ veth ══ p0 ─┐                  ┌─ p1 ══ veth ══ eth0 10.231.0.2/24, lo
                                          └────── br0 ───────┘

* Every task namespace has only ``lo`` and ``eth0``: the subnet exists nowhere else, there is no
  route out, and the root namespace is untouched.
* Each link is capped in both directions with ``tbf``: on the task's ``eth0`` (task → switch,
  the task's *tx*) and on the switch port ``pN`` (switch → task, the task's *rx*).
* TSO/GSO/GRO are off on both ends of every veth and IPv6 is off in every namespace, so the
  interface counters read by :meth:`Testbed.link_bytes` are the exact bytes of the Ethernet
  frames on the link (headers included; no preamble/FCS, which veth does not have).
* ``/etc/netns/<ns>/hosts`` maps the machine's hostname to the task's own address and every
  task name to its address; ``ip netns exec`` bind-mounts it over ``/etc/hosts`` for the
  commands it starts (Horovod resolves the hostname to find its own address).
"""
from __future__ import annotations

import ipaddress
import json
import math
import os
import signal
import socket
import shutil
from typing import Any, Mapping, Sequence

from ralp_tf.testbed import _cgroups, _nsops
from ralp_tf.testbed.base import (DEFAULT_MEM_PER_TASK_GIB, BaseTestbed, PrefixLock, TestbedConfigError,
                                  TestbedError, check_capacity, validate_bandwidth, validate_prefix)

__all__ = ["SWITCH", "netns_support", "cleanup_stale", "Testbed"]

SWITCH = "-switch"  # the switch namespace is "<prefix>--switch"; task names cannot contain '-'


def netns_support() -> tuple[bool, str]:
    """(True, "") when this process can build a namespace testbed, else (False, why)."""
    if os.geteuid() != 0:
        return False, ("the namespace testbed needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network "
                       "namespaces, veth pairs and tc qdiscs; run as root, or use LoopbackTestbed (no caps)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False, "the namespace testbed needs iproute2 ('ip' and 'tc'); apt-get install iproute2"
    return True, ""


def cleanup_stale(prefix: str = "ralptb", *, wait_s: float = 30.0) -> list[str]:
    """Remove leftovers of crashed testbeds with ``prefix``: every namespace ``<prefix>-*`` and its
    processes (SIGKILL), their ``/etc/netns`` folders, and the CPU groups
    ``/sys/fs/cgroup/cpu/<prefix>-*`` with their processes. Returns the names (groups as paths).

    Waits up to ``wait_s`` for a live owner of the prefix (or its reaper) to finish, then raises
    :class:`TestbedError` rather than destroy a testbed that is in use.
    """
    validate_prefix(prefix)
    ok, why = netns_support()
    if not ok:
        raise TestbedError(why)
    lock = PrefixLock(prefix)
    lock.acquire(wait_s)
    try:
        removed = _nsops.cleanup_prefix(prefix)
        if _cgroups.cpu_controller_support()[0]:
            removed += _cgroups.cleanup_prefix(prefix)
        return removed
    finally:
        lock.release()


def _tbf_args(rate_bps: float) -> list[str]:
    """tbf parameters for ``rate_bps``: a bucket of 2 ms of traffic (at least 16 KiB, so full frames and
    timer slack never throttle below the rate) and a queue of 20 ms (at least 128 KiB)."""
    byte_rate = rate_bps / 8.0
    burst = int(max(16 * 1024, byte_rate * 0.002))
    limit = int(max(128 * 1024, byte_rate * 0.020, 2 * burst))
    return ["rate", f"{int(rate_bps)}bit", "burst", str(burst), "limit", str(limit)]


class Testbed(BaseTestbed):
    """Emulated multi-host cluster on one machine (root only). See the module docstring.

    Args:
        task_names: one name per task, e.g. ``["chief", "worker0", "worker1", "ps0"]``.
        hosts: host name -> its tasks (:func:`~ralp_tf.testbed.layout.layout_hosts`); all tasks of a
            host share its namespace ``<prefix>-<host>``, address and capped link. ``None``: the
            dedicated layout, a host per task named like it (the namespace ``<prefix>-<task>``).
        host_cpu: CPU budget per host in cores (a number, or ``{host: cores}``); ``None``: no budgets.
        bandwidth: link rate each way (``"100mbit"``, ``"1gbit"``, ``"10gbit"``, bits/s as a number),
            or ``None``/``"uncapped"``; or ``{host: rate}`` naming every host (a rate per host link;
            ``bandwidth_bps`` is then the slowest of them, ``host_bandwidth_bps`` has each).
        subnet: private IPv4 subnet; host *i* gets its *i*-th host address.
        prefix: namespace names are ``<prefix>-<host>`` and ``<prefix>--switch``. One live testbed
            per prefix; leftovers with this prefix are removed at start.
        delay: one-way extra latency per link (``"5ms"``). Needs ``tc netem``; where the kernel lacks
            it (as on the project's reference machines) a :class:`TestbedError` says so.
        mem_per_task_gib: memory budget per task used to refuse clusters the machine cannot hold
            (0 disables the check).
        hostname_in_hosts: write ``/etc/netns/<ns>/hosts`` (machine hostname -> the task's address).

    Use as a context manager; :meth:`close` is guaranteed on success, exception, Ctrl-C and
    SIGTERM, and a reaper process cleans up if this process is SIGKILLed.
    """

    emulated = True
    bytes_kind = "wire"

    def __init__(self, task_names: Sequence[str], bandwidth: str | float | int | None = None, *,
                 subnet: str = "10.231.0.0/24", prefix: str = "ralptb", delay: str | None = None,
                 mem_per_task_gib: float = DEFAULT_MEM_PER_TASK_GIB, hostname_in_hosts: bool = True,
                 term_grace_s: float = 5.0, hosts: Mapping[str, Sequence[str]] | None = None,
                 host_cpu: float | Mapping[str, float] | None = None, max_tasks_per_host: int | None = None) -> None:
        per_host = bandwidth if isinstance(bandwidth, Mapping) else None
        super().__init__(task_names, None if per_host is not None else bandwidth, prefix=prefix,
                         term_grace_s=term_grace_s, hosts=hosts, host_cpu=host_cpu,
                         max_tasks_per_host=max_tasks_per_host)
        #: host name -> its link rate (bits/s each way; inf: uncapped)
        self.host_bandwidth_bps: dict[str, float] = self._host_rates(per_host)
        if per_host is not None:
            self.bandwidth_bps = min(self.host_bandwidth_bps.values())
        try:
            net = ipaddress.ip_network(subnet, strict=False)
        except (ValueError, TypeError) as exc:
            raise TestbedConfigError(f"bad subnet {subnet!r}: {exc}; write e.g. '10.231.0.0/24'") from None
        if net.version != 4 or not net.is_private:
            raise TestbedConfigError(f"subnet {subnet!r} must be a private IPv4 network (e.g. 10.231.0.0/24) so "
                                     "its addresses cannot be confused with real hosts")
        self.subnet = net
        limit = min(net.num_addresses - 2, 65534)
        check_capacity(len(self.tasks), mem_per_task_gib, min(limit, 250),
                       f"subnet {net} (and the one-bridge topology, 250 ports)", n_hosts=len(self.hosts))
        addresses = list(net.hosts()) if net.num_addresses <= 65536 else None
        #: host name -> its IPv4 address
        self._ips = {h: str(addresses[i] if addresses is not None else net.network_address + 1 + i)
                     for i, h in enumerate(self.hosts)}
        self.delay_ms = self._parse_delay(delay)
        self.hostname_in_hosts = hostname_in_hosts
        self.switch_ns = f"{self.prefix}-{SWITCH}"
        self._created: list[str] = []
        self.offloads: dict[str, Any] = {}
        ok, why = netns_support()
        if not ok:
            raise TestbedError(why)

    def _host_rates(self, per_host: Mapping[str, Any] | None) -> dict[str, float]:
        """Link rate per host: ``bandwidth_bps`` for every host, or ``per_host`` naming every host."""
        if per_host is None:
            return {h: self.bandwidth_bps for h in self.hosts}
        missing, unknown = [h for h in self.hosts if h not in per_host], [h for h in per_host if h not in self.hosts]
        if missing or unknown:
            raise TestbedConfigError(f"a bandwidth per host must name every host exactly: missing {missing}, "
                                     f"unknown {unknown} (hosts: {list(self.hosts)}); or pass one rate for all")
        return {h: validate_bandwidth(per_host[h]) for h in self.hosts}

    @staticmethod
    def _parse_delay(delay: Any) -> float:
        if delay in (None, 0, "0", "0ms", ""):
            return 0.0
        text = str(delay).strip().lower()
        try:
            if text.endswith("ms"):
                ms = float(text[:-2])
            elif text.endswith("us"):
                ms = float(text[:-2]) / 1000
            elif text.endswith("s"):
                ms = float(text[:-1]) * 1000
            else:
                ms = float(text)
        except ValueError:
            raise TestbedConfigError(f"cannot parse delay {delay!r}; write e.g. '5ms'") from None
        if not ms >= 0 or math.isinf(ms):
            raise TestbedConfigError(f"delay must be a non-negative time, got {delay!r}")
        return ms

    # ---- names -------------------------------------------------------------------------------

    def netns(self, task: str) -> str:
        """Name of the network namespace of ``task``'s host (for ``ip netns exec``)."""
        return self.host_netns(self.host_of(task))

    def host_netns(self, host: str) -> str:
        """Name of host ``host``'s network namespace, ``<prefix>-<host>``."""
        if host not in self.hosts:
            raise TestbedConfigError(f"unknown host {host!r}; this testbed has hosts {list(self.hosts)}")
        return f"{self.prefix}-{host}"

    def port_name(self, host: str) -> str:
        """The switch port of ``host``'s link (a task name works too: its host's port)."""
        if host not in self.hosts:
            host = self.host_of(host)
        return f"p{list(self.hosts).index(host)}"

    def host(self, task: str) -> str:
        """The IPv4 address of ``task``'s host (reachable only from the testbed's namespaces); tasks
        of one host share it, so they need distinct ports."""
        return self._ips[self.host_of(task)]

    def host_address(self, host: str) -> str:
        """The IPv4 address of host ``host``."""
        if host not in self.hosts:
            raise TestbedConfigError(f"unknown host {host!r}; this testbed has hosts {list(self.hosts)}")
        return self._ips[host]

    def task_of_host(self, ip: str) -> str:
        """The first task of the host whose address is ``ip`` (the task itself in the dedicated layout)."""
        for h, a in self._ips.items():
            if a == ip:
                return self.hosts[h][0]
        raise TestbedConfigError(f"no host has address {ip!r}; addresses are {self._ips}")

    # ---- build / destroy ---------------------------------------------------------------------

    def _build(self) -> None:
        ok, why = netns_support()
        if not ok:
            raise TestbedError(why)
        _nsops.cleanup_prefix(self.prefix)  # we hold the prefix lock: these are leftovers
        if self.delay_ms:
            self._check_netem()
        try:
            self._add_ns(self.switch_ns)
        except _nsops.NsOpError as exc:
            raise TestbedError(f"cannot create network namespaces here ({exc.stderr}); namespaces may be "
                               "forbidden in this container: use LoopbackTestbed instead") from None
        sw = self.switch_ns
        try:
            _nsops.sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0",
                       "forward_delay", "0"])
            _nsops.sh(["ip", "-n", sw, "link", "set", "br0", "up"])
            plen = self.subnet.prefixlen
            for i, host in enumerate(self.hosts):
                ns, port = self.host_netns(host), f"p{i}"
                self._add_ns(ns)
                _nsops.sh(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
                           "netns", sw])
                _nsops.sh(["ip", "-n", ns, "addr", "add", f"{self._ips[host]}/{plen}", "dev", "eth0"])
                self.offloads[host] = _nsops.in_netns(ns, lambda: _nsops.disable_offloads(["eth0"]))
                self.offloads[f"switch:{port}"] = _nsops.in_netns(sw, lambda p=port: _nsops.disable_offloads([p]))
                _nsops.sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
                _nsops.sh(["ip", "-n", sw, "link", "set", port, "master", "br0", "up"])
                self._shape(ns, "eth0", self.host_bandwidth_bps[host])
                self._shape(sw, port, self.host_bandwidth_bps[host])
                self._write_hosts(host)
        except _nsops.NsOpError as exc:
            raise TestbedError(f"building the testbed failed: {exc}") from None
        self._check_offloads()

    def _add_ns(self, name: str) -> None:
        self._tell_reaper(f"ns {name}")  # first, so the reaper knows it even if we die right after
        _nsops.sh(["ip", "netns", "add", name])
        self._created.append(name)
        _nsops.sh(["ip", "-n", name, "link", "set", "lo", "up"])
        _nsops.in_netns(name, lambda: _nsops.write_sysctls({
            "net/ipv6/conf/all/disable_ipv6": "1", "net/ipv6/conf/default/disable_ipv6": "1",
            "net/ipv6/conf/lo/disable_ipv6": "1"}))

    def _shape(self, ns: str, dev: str, rate_bps: float | None = None) -> None:
        rate_bps = self.bandwidth_bps if rate_bps is None else rate_bps
        if not math.isinf(rate_bps):
            _nsops.sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf"]
                      + _tbf_args(rate_bps))
            if self.delay_ms:
                _nsops.sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "netem",
                           "delay", f"{self.delay_ms / 2:g}ms", "limit", "100000"])
        elif self.delay_ms:
            _nsops.sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay",
                       f"{self.delay_ms / 2:g}ms", "limit", "100000"])

    def _check_netem(self) -> None:
        probe = f"{self.prefix}-{SWITCH}"
        self._add_ns(probe)
        _nsops.sh(["ip", "-n", probe, "link", "add", "nprobe", "type", "dummy"], check=False)
        r = _nsops.sh(["tc", "-n", probe, "qdisc", "add", "dev", "nprobe", "root", "netem", "delay", "1ms"],
                      check=False)
        _nsops.delete_netns(probe)
        self._created.remove(probe)
        if r.returncode != 0:
            raise TestbedError(
                f"link delay ({self.delay_ms:g} ms) is unavailable: it needs the tc 'netem' qdisc, which this "
                f"kernel lacks ({r.stderr.strip()}). Run without delay=, or on a kernel with sch_netem")

    def _check_offloads(self) -> None:
        bad = {k: v for k, v in self.offloads.items() for f in v.values() if any(f.values())}
        if bad:
            raise TestbedError(f"could not turn segmentation offload off on {sorted(bad)}: byte counts would "
                               "not be wire bytes")

    def _names(self, host: str) -> str:
        """The names of ``host`` in /etc/hosts: the host name and its tasks' names, tab-separated."""
        return "\t".join(dict.fromkeys([host] + self.hosts[host]))

    def _write_hosts(self, host: str) -> None:
        if not self.hostname_in_hosts:
            return
        d = os.path.join(_nsops.ETC_NETNS_DIR, self.host_netns(host))
        lines = ["127.0.0.1\tlocalhost", f"{self._ips[host]}\t{socket.gethostname()}\t{self._names(host)}"]
        lines += [f"{ip}\t{self._names(h)}" for h, ip in self._ips.items() if h != host]
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("\n".join(lines) + "\n")
        except OSError as exc:
            raise TestbedError(f"cannot write {d}/hosts ({exc}); pass hostname_in_hosts=False (Horovod across "
                               "namespaces then cannot resolve its own address)") from None

    def _destroy(self) -> None:
        errors = []
        for name in list(self._created):
            _nsops.kill_pids(_nsops.netns_pids(name), signal.SIGKILL, wait_s=0)
        for name in reversed(self._created):
            try:
                _nsops.delete_netns(name)
                self._created.remove(name)
            except Exception as exc:
                errors.append(str(exc))
        if errors:
            raise TestbedError("teardown left namespaces behind: " + "; ".join(errors)
                               + f". Run ralp_tf.testbed.cleanup_stale({self.prefix!r})")

    def _wrap(self, task: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns(task)] + argv

    # ---- measurement -------------------------------------------------------------------------

    def link_stats(self) -> dict[str, dict[str, int]]:
        """Per host link (keyed by host name; = task name in the dedicated layout): ``tx``/``rx`` bytes
        and packets, plus ``rx_dropped`` (frames the switch-side cap's queue dropped), read from the
        switch ports' counters in one call. Traffic between tasks of one host never reaches it."""
        if not self._open:
            raise TestbedError("the testbed is not running")
        out = _nsops.sh(["ip", "-n", self.switch_ns, "-s", "-j", "link", "show"]).stdout
        by_port = {d["ifname"]: d for d in json.loads(out)}
        q = json.loads(_nsops.sh(["tc", "-n", self.switch_ns, "-s", "-j", "qdisc", "show"]).stdout or "[]")
        qdrops = {d.get("dev"): int(d.get("drops", 0)) for d in q if d.get("root")}
        stats: dict[str, dict[str, int]] = {}
        for host in self.hosts:
            port = by_port[self.port_name(host)]
            s = port.get("stats64") or port["stats"]
            stats[host] = {"tx": int(s["rx"]["bytes"]), "rx": int(s["tx"]["bytes"]),
                           "tx_packets": int(s["rx"]["packets"]), "rx_packets": int(s["tx"]["packets"]),
                           "rx_dropped": qdrops.get(self.port_name(host), 0)}
        return stats

    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Exact wire bytes per host link since the testbed started: ``{host: {"tx": n, "rx": n}}``
        (host = task in the dedicated layout), where ``tx`` is what the host's tasks sent onto its
        link and ``rx`` what the link delivered to them (Ethernet frames, headers included). Use
        :func:`~ralp_tf.testbed.bytes_delta` for an interval."""
        return {t: {"tx": s["tx"], "rx": s["rx"]} for t, s in self.link_stats().items()}
