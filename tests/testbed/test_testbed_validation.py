"""Bad input gets clear errors, before anything is built (these tests need no root)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ralp_tf.errors import ClusterConfigError, RalpError
from ralp_tf.testbed import (LoopbackTestbed, Testbed, TestbedConfigError, TestbedError, make_testbed,
                             max_tasks_for_memory)
from ralp_tf.testbed import netns as netns_mod
from ralp_tf.testbed.ssh_standin import parse as ssh_parse
from tbhelpers import PY, needs_netns


def test_error_hierarchy():
    assert issubclass(TestbedError, RalpError)
    assert issubclass(TestbedConfigError, ClusterConfigError) and issubclass(TestbedConfigError, ValueError)


@pytest.mark.parametrize("bw", ["fast", "-1mbit", "0mbit", "10 parsecs", True])
def test_bad_bandwidth(bw):
    with pytest.raises(TestbedConfigError, match="bandwidth"):
        Testbed(["worker0"], bw)
    with pytest.raises(TestbedConfigError, match="bandwidth"):
        LoopbackTestbed(["worker0"], bw)


@pytest.mark.parametrize("names, match", [
    ([], "at least one"), ("worker0", "list"), (["Worker0"], "bad task name"), (["a-b"], "bad task name"),
    (["0ps"], "bad task name"), (["x" * 30], "bad task name"), (["ps0", "ps0"], "duplicate"), ([3], "bad task"),
])
def test_bad_task_names(names, match):
    with pytest.raises(TestbedConfigError, match=match):
        Testbed(names)


def test_bad_prefix_subnet_delay():
    with pytest.raises(TestbedConfigError, match="prefix"):
        Testbed(["w0"], prefix="Bad-Prefix")
    with pytest.raises(TestbedConfigError, match="private"):
        Testbed(["w0"], subnet="8.8.8.0/24")
    with pytest.raises(TestbedConfigError, match="subnet"):
        Testbed(["w0"], subnet="not-a-net")
    with pytest.raises(TestbedConfigError, match="delay"):
        Testbed(["w0"], delay="soon")


def test_too_many_tasks_for_subnet():
    with pytest.raises(TestbedConfigError, match="at most 6"):
        Testbed([f"w{i}" for i in range(7)], subnet="10.231.0.0/29", mem_per_task_gib=0)


def test_too_many_tasks_for_memory():
    limit = max_tasks_for_memory(1.0)
    with pytest.raises(TestbedConfigError, match=r"holds at most \d+ tasks"):
        Testbed([f"w{i}" for i in range(min(limit + 1, 200))] if limit < 200 else ["w0", "w1"],
                mem_per_task_gib=1.0 if limit < 200 else 1e6)


def test_non_root_is_refused(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="needs root"):
        Testbed(["worker0", "ps0"], "1gbit")
    # make_testbed falls back to loopback (uncapped), or raises when told not to.
    tb = make_testbed(["worker0", "ps0"], "1gbit", prefix="tbtnr")
    assert isinstance(tb, LoopbackTestbed) and not tb.emulated
    with pytest.raises(TestbedError, match="needs root"):
        make_testbed(["worker0"], "1gbit", loopback_fallback=False)


@pytest.mark.skipif(shutil.which("setpriv") is None and os.geteuid() == 0, reason="needs setpriv (util-linux)")
def test_unprivileged_process_gets_clear_error(child_env):
    """A real unprivileged process: as nobody when the interpreter is reachable, else root without caps."""
    code = ("from ralp_tf.testbed import Testbed, TestbedError\n"
            "try:\n    Testbed(['worker0', 'ps0'], '100mbit', prefix='tbtunpriv').start()\n"
            "except TestbedError as e:\n    print('ERR', e)\n")
    as_nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PY, "-c", "0"],
                               capture_output=True, env=child_env) if os.geteuid() == 0 else None
    if os.geteuid() != 0 or as_nobody.returncode == 0:
        prefix = [] if os.geteuid() != 0 else ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        out = subprocess.run(prefix + [PY, "-c", code], capture_output=True, text=True, env=child_env, timeout=60)
        assert "ERR" in out.stdout and "needs root" in out.stdout, out.stdout + out.stderr
    else:  # nobody cannot reach the interpreter (under /root): drop every capability instead
        out = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", PY, "-c", code],
                             capture_output=True, text=True, env=child_env, timeout=60)
        assert "ERR" in out.stdout and "namespaces" in out.stdout, out.stdout + out.stderr


def test_loopback_refuses_caps_unless_ignored():
    with pytest.raises(TestbedConfigError, match="cannot cap"):
        LoopbackTestbed(["w0"], "1gbit")
    tb = LoopbackTestbed(["w0"], "1gbit", ignore_bandwidth=True)
    assert tb.bandwidth_bps == float("inf")


def test_ssh_standin_parses_horovod_command():
    host, cmd = ssh_parse(["-o", "PasswordAuthentication=no", "-o", "StrictHostKeyChecking=no", "10.231.0.2",
                           "-p", "22", "-o", "ConnectTimeout=10", "cd", "/x", ">", "/dev/null", "2>&1", ";", "true"])
    assert host == "10.231.0.2" and cmd == "cd /x > /dev/null 2>&1 ; true"
    assert ssh_parse(["root@h", "echo", "hi"]) == ("h", "echo hi")


@needs_netns
@pytest.mark.needs_root
def test_delay_without_netem_is_reported():
    """This kernel has no netem: asking for delay must say so (elsewhere it may work)."""
    try:
        with Testbed(["w0"], "100mbit", prefix="tbtdelay", delay="5ms") as tb:
            assert tb.delay_ms == 5
    except TestbedError as exc:
        assert "netem" in str(exc)


@needs_netns
@pytest.mark.needs_root
def test_unknown_task_in_calls():
    with Testbed(["worker0"], prefix="tbtunk") as tb:
        with pytest.raises(TestbedConfigError, match="unknown task"):
            tb.host("ps0")
        with pytest.raises(TestbedConfigError, match="unknown task"):
            tb.popen("ps0", ["true"])
    with pytest.raises(TestbedError, match="not running"):
        tb.popen("worker0", ["true"])


def test_netns_module_exposes_support_check():
    ok, why = netns_mod.netns_support()
    assert ok or why


def test_install_script_is_valid_bash():
    import pathlib

    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "install_horovod.sh"
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
