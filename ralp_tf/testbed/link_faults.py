"""Link faults on a namespace testbed: a host's link down and up, or throttled and restored.

:class:`LinkFaults` acts on one open :class:`~ralp_tf.testbed.Testbed`:

* :meth:`~LinkFaults.down` runs ``ip link set eth0 down`` in the host's namespace (the veth peer
  on the switch loses carrier too: nothing crosses either way); :meth:`~LinkFaults.up` brings it
  back with the same address and shaping.
* :meth:`~LinkFaults.throttle` changes the ``tbf`` rate on both ends of the host's link (the
  host's ``eth0`` and its switch port) with ``tc qdisc change`` (``replace`` on an uncapped
  testbed, which has no qdisc to change); :meth:`~LinkFaults.restore` puts the testbed's rate
  back (or removes the qdisc).
* :meth:`~LinkFaults.detect_dead_peers` lowers ``net.ipv4.tcp_retries2`` in one host's
  namespace, so that host's TCP connections to a peer whose link is down fail after about
  ``0.2 x (2^(n+1) - 1)`` s (n retries, RTO from 200 ms) instead of TCP's default ~15 minutes.
  The supervisor sets it on the coordinator's host: gRPC then reports the worker unavailable and
  TF's ClusterCoordinator treats it as a failed worker (its closures go to the other workers,
  and it is reconnected once it answers again).

:meth:`~LinkFaults.heal_all` (also called by the supervisor before the testbed closes) ends every
fault still active. Needs root, like the testbed itself.
"""
from __future__ import annotations

import math
from typing import Any

from ralp_tf.testbed import _nsops
from ralp_tf.testbed.base import TestbedConfigError, TestbedError

__all__ = ["LinkFaults"]


class LinkFaults:
    """Fault actions on ``tb``'s host links (see the module docstring)."""

    def __init__(self, tb: Any) -> None:
        if not getattr(tb, "emulated", False):
            raise TestbedError("link faults need the namespace testbed (root): the loopback fallback cannot emulate "
                               "a link going down or slowing")
        self.tb = tb
        self.down_hosts: set[str] = set()
        self.throttled: dict[str, float] = {}

    def _host(self, task_or_host: str) -> str:
        if task_or_host in self.tb.hosts:
            return task_or_host
        try:
            return self.tb.host_of(task_or_host)
        except TestbedConfigError:
            raise TestbedConfigError(f"no host or task {task_or_host!r} on this testbed (hosts: {list(self.tb.hosts)})"
                                     ) from None

    def _ends(self, host: str) -> list[tuple[str, str]]:
        """(namespace, device) of both ends of ``host``'s link."""
        return [(self.tb.host_netns(host), "eth0"), (self.tb.switch_ns, self.tb.port_name(host))]

    def down(self, target: str) -> str:
        """Take the link of ``target``'s host down; returns the host name."""
        host = self._host(target)
        _nsops.sh(["ip", "-n", self.tb.host_netns(host), "link", "set", "eth0", "down"])
        self.down_hosts.add(host)
        return host

    def up(self, target: str) -> str:
        """Bring the link of ``target``'s host back up (address and shaping are kept)."""
        host = self._host(target)
        _nsops.sh(["ip", "-n", self.tb.host_netns(host), "link", "set", "eth0", "up"])
        self.down_hosts.discard(host)
        return host

    def throttle(self, target: str, rate_bps: float) -> str:
        """Cap both directions of ``target``'s host link at ``rate_bps``."""
        from ralp_tf.testbed.netns import _tbf_args

        if not rate_bps > 0 or math.isinf(rate_bps):
            raise TestbedConfigError(f"a throttle needs a finite positive rate, got {rate_bps!r}")
        host = self._host(target)
        verb = "replace" if math.isinf(self.tb.bandwidth_bps) else "change"
        for ns, dev in self._ends(host):
            _nsops.sh(["tc", "-n", ns, "qdisc", verb, "dev", dev, "root", "handle", "1:", "tbf"] + _tbf_args(rate_bps))
        self.throttled[host] = rate_bps
        return host

    def restore(self, target: str) -> str:
        """Give ``target``'s host link the testbed's rate again."""
        from ralp_tf.testbed.netns import _tbf_args

        host = self._host(target)
        for ns, dev in self._ends(host):
            if math.isinf(self.tb.bandwidth_bps):
                _nsops.sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
            else:
                _nsops.sh(["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "handle", "1:", "tbf"]
                          + _tbf_args(self.tb.bandwidth_bps))
        self.throttled.pop(host, None)
        return host

    def detect_dead_peers(self, target: str, retries: int = 4) -> None:
        """Set ``net.ipv4.tcp_retries2 = retries`` in the namespace of ``target``'s host (see the
        module docstring; 4 retries give up after about 6 s)."""
        host = self._host(target)
        _nsops.in_netns(self.tb.host_netns(host),
                        lambda: _nsops.write_sysctls({"net/ipv4/tcp_retries2": str(int(retries))}))

    def heal_all(self) -> list[str]:
        """End every active fault (links up, rates restored); returns the hosts healed."""
        healed = []
        for host in sorted(self.down_hosts):
            self.up(host)
            healed.append(host)
        for host in sorted(self.throttled):
            self.restore(host)
            healed.append(host)
        return healed
