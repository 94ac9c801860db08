"""Topology, link caps and wire-byte counts on a tiny namespace cluster (root only)."""
from __future__ import annotations

import json
import subprocess

import pytest

from ralp_tf.testbed import Testbed, bytes_delta
from ralp_tf.testbed.netperf import measure
from tbhelpers import PY, needs_netns

pytestmark = [needs_netns, pytest.mark.needs_root]

# Per full-size frame: 14 Ethernet + 20 IPv4 + 32 TCP (with timestamps) header bytes.
HDR = 66


def test_topology_addresses_isolation_and_hosts():
    with Testbed(["worker0", "ps0"], "1gbit", prefix="tbttopo") as tb:
        assert tb.host("worker0") == "10.231.0.1" and tb.host("ps0") == "10.231.0.2"
        assert set(tb.tasks) == {"worker0", "ps0"}
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert "tbttopo-worker0" in names and "tbttopo--switch" in names
        # Only lo and eth0 in a task namespace, IPv6 off, no route out of the subnet.
        links = json.loads(tb.run("worker0", ["ip", "-j", "link"], check=True).stdout)
        assert sorted(l["ifname"] for l in links) == ["eth0", "lo"]
        routes = tb.run("worker0", ["ip", "route"], check=True).stdout
        assert "default" not in routes and "10.231.0.0/24" in routes
        assert tb.run("ps0", ["cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"]).stdout.strip() == "1"
        # The subnet exists nowhere in the root namespace.
        assert "10.231.0." not in subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        # Offloads are off on both ends of every link; links are shaped with tbf on both ends.
        flag_sets = [flags for v in tb.offloads.values() for flags in v.values()]
        assert flag_sets and all(flags and not any(flags.values()) for flags in flag_sets), tb.offloads
        assert "tbf" in tb.run("worker0", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        sw = subprocess.run(["tc", "-n", tb.switch_ns, "qdisc", "show"], capture_output=True, text=True).stdout
        assert sw.count("qdisc tbf") == 2
        # The hostname resolves to the task's own address inside its namespace.
        code = "import socket; print(socket.gethostbyname(socket.gethostname()), socket.gethostbyname('ps0'))"
        assert tb.run("worker0", [PY, "-c", code], check=True).stdout.split() == ["10.231.0.1", "10.231.0.2"]


@pytest.mark.parametrize("bandwidth, rate, nbytes", [("100mbit", 100e6, 6_000_000), ("1gbit", 1e9, 60_000_000)])
def test_cap_and_wire_bytes(bandwidth, rate, nbytes):
    with Testbed(["worker0", "ps0"], bandwidth, prefix="tbtcap") as tb:
        r = measure(tb, "worker0", "ps0", nbytes=nbytes, seconds=15)
        stats = tb.link_stats()
    assert r["bytes"] == nbytes and r["client"]["bytes"] == nbytes
    link = r["link"]
    # Every byte worker0 sends crosses the switch to ps0, and back (give or take an ARP frame, which
    # the bridge may also flood or answer from one side only).
    assert abs(link["worker0"]["tx"] - link["ps0"]["rx"]) <= 200
    assert abs(link["ps0"]["tx"] - link["worker0"]["rx"]) <= 200
    # Wire bytes = payload + headers of every frame (offload off: one frame per MSS).
    data_frames = -(-nbytes // 1448)
    assert nbytes + data_frames * HDR <= link["worker0"]["tx"] <= (nbytes + data_frames * HDR) * 1.01
    assert stats["worker0"]["tx_packets"] >= data_frames
    # The wire rate over the transfer is within 15% of the cap (goodput is ~4.6% below it).
    wire_rate = link["worker0"]["tx"] * 8 / r["seconds"]
    assert 0.85 * rate <= wire_rate <= 1.15 * rate, (wire_rate, r)


def test_uncapped_counts_and_both_directions():
    with Testbed(["worker0", "worker1", "ps0"], None, prefix="tbtunc") as tb:
        before = tb.link_bytes()
        r1 = measure(tb, "worker0", "ps0", nbytes=5_000_000, seconds=10)
        r2 = measure(tb, "ps0", "worker1", nbytes=3_000_000, seconds=10, port=5202)
        d = bytes_delta(tb.link_bytes(), before)
    assert r1["bytes"] == 5_000_000 and r2["bytes"] == 3_000_000
    # payload plus headers (~4.6%); an uncapped veth drops frames when the receiving namespace's
    # backlog overflows on a busy machine, and the retransmissions are wire bytes too (seen: 5.43 MB)
    assert 5_000_000 < d["worker0"]["tx"] < 5_000_000 * 1.15
    assert 3_000_000 < d["worker1"]["rx"] < 3_000_000 * 1.15
    assert d["ps0"]["rx"] >= d["worker0"]["tx"] and d["ps0"]["tx"] >= d["worker1"]["rx"]
