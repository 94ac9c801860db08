"""The loopback fallback: same API, 127.0.0.1, no caps, payload byte counts (no root needed)."""
from __future__ import annotations

import math
import shutil

import pytest

from ralp_tf.testbed import LoopbackTestbed
from ralp_tf.testbed.netperf import measure
from tbhelpers import CLIENT, PY, SERVER, pid_alive

def test_loopback_api_and_counts():
    with LoopbackTestbed(["worker0", "ps0"], None, prefix="tbtlo") as tb:
        assert tb.host("ps0") == "127.0.0.1" and not tb.emulated and math.isinf(tb.bandwidth_bps)
        r = measure(tb, "worker0", "ps0", nbytes=2_000_000, seconds=10)
        assert r["bytes"] == 2_000_000 and r["link"] is None
        port, n = tb.free_port(), 3_000_000
        srv = tb.popen("ps0", [PY, "-c", SERVER, str(port), str(n)], stdout=-1, text=True)
        assert srv.stdout.readline().strip() == "ready"
        cli = tb.popen("worker0", [PY, "-c", CLIENT, str(port), str(n)], stdout=-1, text=True)
        assert cli.stdout.readline().strip() == "sent"
        assert srv.stdout.readline().startswith("got")
        if shutil.which("ss") is None:
            pytest.skip("per-socket counts need 'ss' (iproute2)")
        counts = tb.link_bytes()
        assert counts["worker0"]["tx"] >= n and counts["ps0"]["rx"] >= n
        assert counts["worker0"]["tx"] < n + 1000
    assert not pid_alive(srv.pid) and not pid_alive(cli.pid)
