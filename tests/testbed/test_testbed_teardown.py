"""Teardown is guaranteed: on exception, Ctrl-C, SIGTERM, and (via the reaper, cleanup_stale or the
next start) after SIGKILL of the process that owns the testbed. Root only."""
from __future__ import annotations

import os
import signal
import subprocess
import textwrap

import pytest

from ralp_tf.testbed import Testbed, TestbedError, cleanup_stale
from polling import wait_until
from tbhelpers import PY, needs_netns, pid_alive, start_owner, tbt_namespaces

pytestmark = [needs_netns, pytest.mark.needs_root]

OWNER = textwrap.dedent("""
    import json, subprocess, sys, time
    from ralp_tf.testbed import Testbed
    with Testbed(["worker0", "ps0"], "100mbit", prefix=sys.argv[1], term_grace_s=1.0) as tb:
        a = tb.popen("worker0", ["sleep", "600"])
        # A child that ignores SIGTERM and forks a grandchild: teardown must escalate to SIGKILL.
        b = tb.popen("ps0", [sys.executable, "-c",
            "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
            "if os.fork(): print('forked', flush=True)\\n"
            "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
        assert b.stdout.readline().strip() == "forked"
        print(json.dumps({"pids": [a.pid, b.pid], "reaper": tb._reaper.pid}), flush=True)
        time.sleep(600)
""")


def _start_owner(prefix: str, env: dict) -> tuple[subprocess.Popen, dict]:
    return start_owner(OWNER, prefix, env)


def _ns_pids(prefix: str) -> list[int]:
    out = []
    for n in tbt_namespaces():
        if n.startswith(prefix + "-"):
            out += [int(p) for p in subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                                   text=True).stdout.split()]
    return out


def _wait_gone(prefix: str, pids: list[int], timeout: float = 20.0) -> None:
    """Wait until no ``prefix-*`` namespace and none of ``pids`` is left; fail naming what is."""
    wait_until(lambda: not [n for n in tbt_namespaces() if n.startswith(prefix + "-")]
               and not any(map(pid_alive, pids)), timeout, interval_s=0.1,
               what=lambda: (f"teardown; left behind: namespaces {tbt_namespaces()}, "
                             f"live pids {[p for p in pids if pid_alive(p)]}"))


def test_teardown_on_exception_kills_processes():
    with pytest.raises(RuntimeError, match="boom"):
        with Testbed(["worker0", "ps0"], "1gbit", prefix="tbtexc", term_grace_s=1.0) as tb:
            p = tb.popen("worker0", ["sleep", "600"])
            q = tb.popen("ps0", [PY, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                           "print('ready', flush=True); time.sleep(600)"],
                         stdout=subprocess.PIPE, text=True)
            assert q.stdout.readline().strip() == "ready"  # SIGTERM is ignored from here on
            raise RuntimeError("boom")
    assert p.poll() is not None and q.poll() is not None
    assert not tb.is_open and not tbt_namespaces()
    assert not os.path.exists("/etc/netns/tbtexc-worker0")


def test_failed_build_cleans_up(monkeypatch):
    from ralp_tf.testbed import netns as netns_mod

    def broken(self, ns, dev, rate_bps=None):
        raise TestbedError("simulated tc failure")

    monkeypatch.setattr(netns_mod.Testbed, "_shape", broken)
    with pytest.raises(TestbedError, match="simulated"):
        Testbed(["worker0", "ps0"], "1gbit", prefix="tbtfail").start()
    assert not tbt_namespaces()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_owner_tears_down(sig, child_env):
    prefix = "tbtsig"
    proc, info = _start_owner(prefix, child_env)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    _wait_gone(prefix, info["pids"] + [info["reaper"]], timeout=5)


def test_sigkill_owner_reaper_cleans_up(child_env):
    prefix = "tbtkill"
    proc, info = _start_owner(prefix, child_env)
    inside = _ns_pids(prefix)
    assert len(inside) >= 3  # sleep, the SIGTERM-ignoring child and its fork
    proc.kill()
    proc.wait()
    _wait_gone(prefix, inside + [info["reaper"]])
    assert cleanup_stale(prefix) == []


@pytest.mark.parametrize("how", ["cleanup_stale", "next_start"])
def test_sigkill_owner_and_reaper_then_recover(how, child_env):
    prefix = "tbtcrash"
    proc, info = _start_owner(prefix, child_env)
    os.kill(info["reaper"], signal.SIGKILL)
    proc.kill()
    proc.wait()
    wait_until(lambda: not pid_alive(info["reaper"]), 10, what=f"the killed reaper {info['reaper']} to exit")
    inside = _ns_pids(prefix)
    assert inside and any(map(pid_alive, inside)), "the crash should leave processes behind"
    assert any(n.startswith(prefix + "-") for n in tbt_namespaces())
    if how == "cleanup_stale":
        removed = cleanup_stale(prefix)
        assert f"{prefix}-worker0" in removed and f"{prefix}--switch" in removed
    else:
        with Testbed(["worker0"], prefix=prefix) as tb:
            assert tb.run("worker0", ["true"]).returncode == 0
            assert not any(map(pid_alive, inside))
    _wait_gone(prefix, inside, timeout=5)


def test_prefix_in_use_is_refused():
    with Testbed(["worker0"], prefix="tbtbusy"):
        with pytest.raises(TestbedError, match="another live testbed"):
            cleanup_stale("tbtbusy", wait_s=0.2)
        assert any(n.startswith("tbtbusy-") for n in tbt_namespaces())
