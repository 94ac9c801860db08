"""The testbed's per-host link rates (``Testbed(bandwidth={host: rate})``), which executed
schedules use to give each resource type its own link rate."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from ralp_tf.testbed import Testbed, TestbedConfigError, netns_support

_ok, _why = netns_support()
needs_netns = pytest.mark.skipif(not _ok, reason=f"namespace testbed unavailable: {_why}")


def test_per_host_rates_must_name_every_host():
    with pytest.raises(TestbedConfigError, match=r"missing \['ps0'\]"):
        Testbed(["worker0", "ps0"], {"worker0": "100mbit"}, prefix="tbtxr")
    with pytest.raises(TestbedConfigError, match="unknown"):
        Testbed(["worker0"], {"worker0": "100mbit", "ps9": "1gbit"}, prefix="tbtxr")


@needs_netns
@pytest.mark.needs_root
def test_each_host_link_gets_its_own_rate():
    rates = {"worker0": "100mbit", "ps0": "10mbit"}
    with Testbed(["worker0", "ps0"], rates, prefix="tbtxr") as tb:
        assert tb.host_bandwidth_bps == {"worker0": 100e6, "ps0": 10e6} and tb.bandwidth_bps == 10e6
        seen = {}
        for host in rates:
            out = subprocess.run(["tc", "-n", tb.netns(host), "-j", "qdisc", "show", "dev", "eth0"],
                                 capture_output=True, text=True, check=True).stdout
            tbf = [q for q in json.loads(out) if q.get("kind") == "tbf"]
            seen[host] = tbf[0]["options"]["rate"]
    assert seen["worker0"] == 100e6 / 8 and seen["ps0"] == 10e6 / 8, seen
    assert not any(n.startswith("tbtxr") for n in os.listdir("/run/netns")) if os.path.isdir("/run/netns") else True
