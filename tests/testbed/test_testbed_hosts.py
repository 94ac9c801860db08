"""Hosts on the testbed: layouts, tasks sharing a host's namespace, address and capped link,
per-host byte counts, per-host CPU budgets (cgroup v1) and their teardown."""
from __future__ import annotations

import json
import os
import signal
import textwrap
import time

import pytest

from ralp_tf.run.launch import LocalCluster
from ralp_tf.testbed import (LoopbackTestbed, Testbed, TestbedConfigError, TestbedError, _cgroups, cleanup_stale,
                             layout_hosts, tasks_of, tf_thread_env)
from ralp_tf.testbed.netperf import measure, measure_concurrent
from polling import wait_until
from tbhelpers import (CLIENT, PY, SERVER, needs_cgroup, needs_netns, pid_alive, start_owner, tbt_cpu_groups,
                       tbt_namespaces)

COLOCATED2 = {"host0": ["worker0", "ps0"], "host1": ["worker1", "ps1"]}


# ---- layouts and validation (no root) ------------------------------------------------------------------------


def test_layout_hosts():
    assert layout_hosts(2, 1) == {"chief": ["chief"], "worker0": ["worker0"], "worker1": ["worker1"], "ps0": ["ps0"]}
    assert layout_hosts(2, 2, "colocated") == {"host0": ["chief", "worker0", "ps0"], "host1": ["worker1", "ps1"]}
    assert layout_hosts(3, 1, "colocated", chief=False) == {"host0": ["worker0", "ps0"], "host1": ["worker1"],
                                                            "host2": ["worker2"]}
    tb = LoopbackTestbed(["chief", "worker0", "ps0", "worker1", "ps1"], hosts=layout_hosts(2, 2, "colocated"))
    assert tb.layout == "colocated" and tb.host_of("ps1") == "host1" and tb.host_of("chief") == "host0"
    assert LoopbackTestbed(["worker0", "ps0"]).layout == "dedicated"
    two = layout_hosts(4, 2, "colocated", workers_per_host=2)  # strided: the first 2 workers one per host
    assert two == {"host0": ["chief", "worker0", "worker2", "ps0"], "host1": ["worker1", "worker3", "ps1"]}
    assert LoopbackTestbed(tasks_of(two), hosts=two).layout == "colocated"
    with pytest.raises(TestbedConfigError, match="workers_per_host=2 needs the colocated layout"):
        layout_hosts(4, 2, workers_per_host=2)
    with pytest.raises(TestbedConfigError, match="workers_per_host must be a positive integer, got 0"):
        layout_hosts(4, 2, "colocated", workers_per_host=0)
    assert LoopbackTestbed(["worker0", "ps0"], hosts={"a": ["worker0", "ps0"]}).layout == "custom"


@pytest.mark.parametrize("hosts, host_cpu, match", [
    ({"host0": ["chief", "worker0", "ps0", "worker1", "ps1"]}, None,
     r"host 'host0' runs 5 tasks but a testbed host supports at most 4.*spread the tasks over more hosts"),
    ({"host0": ["worker0", "ps0"], "host1": ["ps0", "worker1", "ps1", "chief"]}, None, r"\['ps0'\] are on more than one"),
    ({"host0": ["worker0", "ps0"], "host1": ["worker1"]}, None, r"no host for \['chief', 'ps1'\]"),
    ({"Host-0": ["chief", "worker0", "ps0", "worker1", "ps1"]}, None, "bad host name"),
    ({"host0": [], "host1": ["chief", "worker0", "ps0", "worker1", "ps1"]}, None, "needs a non-empty list"),
    ({"ps1": ["chief", "worker0", "ps0"], "host1": ["worker1", "ps1"]}, None, "also names of tasks on other hosts"),
    (None, 0.5, r"sum to 2\.5 cores over 5 hosts but this machine has \d+.*at most"),
    (COLOCATED2 | {"host0": ["chief", "worker0", "ps0"]}, {"host0": 0.5}, r"missing \['host1'\]"),
    (COLOCATED2 | {"host0": ["chief", "worker0", "ps0"]}, 0.001, "must be a number of cores >= 0.01"),
    (COLOCATED2 | {"host0": ["chief", "worker0", "ps0"]}, float("nan"), "must be a number of cores"),
])
def test_bad_layouts_and_budgets_are_refused(hosts, host_cpu, match, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # the reference machine: 2 cores
    with pytest.raises(TestbedConfigError, match=match):
        LoopbackTestbed(["chief", "worker0", "ps0", "worker1", "ps1"], hosts=hosts, host_cpu=host_cpu)
    with pytest.raises(TestbedConfigError, match="unknown layout 'ring'; use one of dedicated, colocated"):
        layout_hosts(2, 2, "ring")


def test_budgets_without_root_name_what_is_missing(monkeypatch):
    monkeypatch.setattr(_cgroups.os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="per-host CPU budgets need root"):
        LoopbackTestbed(["worker0", "ps0"], host_cpu=0.5)


def test_thread_pools_follow_the_budget():
    assert tf_thread_env(0.5) == {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"}
    assert tf_thread_env(1.0) == {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"}
    assert tf_thread_env(1.5) == {"TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "2"}


class _HostLauncher:
    """A launcher stub: worker i and ps i share address 10.0.0.i+1 (the colocated layout)."""

    def host(self, task: str) -> str:
        return f"10.0.0.{int(task[-1]) + 1}"


def test_local_cluster_ports_are_unique_per_colocated_host():
    lc = LocalCluster(workers=2, ps=2, launcher=_HostLauncher(), check_memory=False)
    spec = lc._make_spec()
    addresses = spec["worker"] + spec["ps"]
    assert len(set(addresses)) == 4 and spec["worker"][0].startswith("10.0.0.1:") and spec["ps"][0].startswith("10.0.0.1:")


def test_loopback_counts_per_host_without_same_host_traffic():
    import shutil

    if shutil.which("ss") is None:
        pytest.skip("per-socket counts need 'ss' (iproute2)")
    hosts = {"host0": ["worker0", "ps0"], "host1": ["ps1"]}
    with LoopbackTestbed(["worker0", "ps0", "ps1"], hosts=hosts, prefix="tbtlohost") as tb:
        assert {tb.host(t) for t in tb.tasks} == {"127.0.0.1"}
        for dst, n in (("ps0", 2_000_000), ("ps1", 3_000_000)):  # same host, then the other host
            port = tb.free_port()
            srv = tb.popen(dst, [PY, "-c", SERVER, str(port), str(n)], stdout=-1, text=True)
            assert srv.stdout.readline().strip() == "ready"
            cli = tb.popen("worker0", [PY, "-c", CLIENT, str(port), str(n)], stdout=-1, text=True)
            assert cli.stdout.readline().strip() == "sent" and srv.stdout.readline().startswith("got")
        counts = tb.link_bytes()
    assert set(counts) == {"host0", "host1"}
    assert 3_000_000 <= counts["host0"]["tx"] < 3_001_000 and counts["host1"]["rx"] >= 3_000_000
    assert counts["host0"]["rx"] < 1000  # worker0 -> ps0 stayed on host0


# ---- namespaces (root) ---------------------------------------------------------------------------------------


@needs_netns
@pytest.mark.needs_root
def test_colocated_tasks_share_namespace_address_and_capped_link():
    with Testbed(["worker0", "ps0", "worker1", "ps1"], "100mbit", hosts=COLOCATED2, prefix="tbtcolo") as tb:
        assert tb.host("worker0") == tb.host("ps0") == "10.231.0.1" and tb.host("ps1") == "10.231.0.2"
        assert tb.netns("worker0") == tb.netns("ps0") == "tbtcolo-host0"
        assert sorted(n for n in tbt_namespaces() if n.startswith("tbtcolo")) == [
            "tbtcolo--switch", "tbtcolo-host0", "tbtcolo-host1"]
        code = "import socket; print(*[socket.gethostbyname(n) for n in ('ps0', 'worker1', 'host1')])"
        assert tb.run("worker0", [PY, "-c", code], check=True).stdout.split() == ["10.231.0.1", "10.231.0.2",
                                                                                  "10.231.0.2"]
        assert set(tb.link_bytes()) == {"host0", "host1"}
        # Same host: the traffic stays on host0's loopback and never touches its link.
        local = measure(tb, "worker0", "ps0", nbytes=5_000_000, seconds=10)
        assert local["bytes"] == 5_000_000 and local["link"]["host0"]["tx"] < 20_000, local["link"]
        # Two tasks of host0 sending at once to host1 share host0's one capped link.
        both = measure_concurrent(tb, [("worker0", "worker1"), ("ps0", "ps1")], nbytes=6_000_000, seconds=20)
    assert [s["bytes"] for s in both["streams"]] == [6_000_000, 6_000_000]
    wire_rate = both["link"]["host0"]["tx"] * 8 / both["seconds"]
    print(f"\nshared link: two streams host0 -> host1 at 100mbit: wire {wire_rate / 1e6:.1f} Mbit/s in all, "
          f"payload {both['mbit_s']:.1f} Mbit/s, per stream {[round(s['mbit_s'], 1) for s in both['streams']]}")
    # The streams ran at the same time, yet together they got one link's rate, not two links'.
    overlap = min(s["last_t"] for s in both["streams"]) - max(s["first_t"] for s in both["streams"])
    assert overlap > 0.3 * both["seconds"], both
    assert 85e6 <= wire_rate <= 115e6, both
    assert both["mbit_s"] <= 100


BUSY = textwrap.dedent("""
    import json, os, sys, time
    procs = int(sys.argv[1]); seconds = float(sys.argv[2]); parent = os.getpid()
    for _ in range(procs - 1):
        if os.fork() == 0:
            break
    start, cpu0 = time.monotonic(), time.process_time()
    while time.monotonic() - start < seconds:
        pass
    cgroup = [l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if ":cpu:" in l or ":cpu," in l]
    line = json.dumps({"cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - start, "cgroup": cgroup,
                       "intra": os.environ.get("TF_NUM_INTRAOP_THREADS")})
    os.write(1, (line + "\\n").encode())  # one write: the processes' lines must not interleave
    if os.getpid() != parent:
        os._exit(0)
    for _ in range(procs - 1):
        os.wait()
""")


@needs_netns
@needs_cgroup
@pytest.mark.needs_root
def test_cpu_budget_holds_and_groups_go_with_the_testbed():
    with Testbed(["worker0", "ps0"], "1gbit", host_cpu={"worker0": 0.5, "ps0": 0.25}, prefix="tbtcpu") as tb:
        group = tb.cpu_group("worker0")
        assert group == "/sys/fs/cgroup/cpu/tbtcpu-worker0" and _cgroups.quota_cores(group) == 0.5
        assert _cgroups.quota_cores(tb.cpu_group("ps0")) == 0.25
        # Two busy processes on a 0.5-core host get half a core between them.
        r = tb.run("worker0", [PY, "-c", BUSY, "2", "3"], timeout=30, check=True)
        stat = _cgroups.cpu_stat(group)
        assert tb.describe()["hosts"]["worker0"]["cpu_cores"] == 0.5
        # Per task: the live processes started as it; the finished run above is not counted.
        spin = tb.popen("ps0", [PY, "-c", "import time\nt = time.process_time()\n"
                                          "while time.process_time() - t < 0.3: pass\ntime.sleep(60)"])
        wait_until(lambda: tb.task_cpu_seconds().get("ps0", 0.0) >= 0.3, 15, interval_s=0.1,
                   what="the spinning task's CPU seconds")
        assert "worker0" not in tb.task_cpu_seconds()
        spin.kill()
    runs = [json.loads(line) for line in r.stdout.splitlines()]
    share = sum(x["cpu_s"] for x in runs) / max(x["wall_s"] for x in runs)
    print(f"\nCPU budget 0.5 core, 2 busy processes for 3 s: {share:.3f} cores used, "
          f"throttled in {stat['nr_throttled']}/{stat['nr_periods']} periods")
    assert len(runs) == 2 and all(x["cgroup"] == ["/tbtcpu-worker0"] and x["intra"] == "1" for x in runs), runs
    assert 0.35 <= share <= 0.55, runs
    assert stat["nr_throttled"] > 0
    assert not os.path.exists(group) and tbt_cpu_groups() == []


OWNER = textwrap.dedent("""
    import json, sys, time
    from ralp_tf.testbed import Testbed
    with Testbed(["worker0", "ps0"], None, prefix=sys.argv[1], host_cpu=0.5, term_grace_s=1.0) as tb:
        a = tb.popen("worker0", ["sleep", "600"])
        print(json.dumps({"pid": a.pid, "reaper": tb._reaper.pid}), flush=True)
        time.sleep(600)
""")


@needs_netns
@needs_cgroup
@pytest.mark.needs_root
@pytest.mark.parametrize("how", ["sigterm", "sigkill_owner", "sigkill_owner_and_reaper"])
def test_cpu_groups_removed_after_signals_and_crashes(how, child_env):
    prefix = "tbtcgk"
    proc, info = start_owner(OWNER, prefix, child_env)
    group = "/sys/fs/cgroup/cpu/tbtcgk-worker0"
    try:  # the wrapper joins the group before it execs the command (the Popen may return before that)
        wait_until(lambda: info["pid"] in _cgroups.group_pids(group), 10, interval_s=0.05,
                   what=f"pid {info['pid']} to join {group}")
        if how == "sigkill_owner_and_reaper":
            os.kill(info["reaper"], signal.SIGKILL)
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if how == "sigkill_owner_and_reaper":  # nobody cleaned up: the next start (or cleanup_stale) does
        time.sleep(0.5)
        assert os.path.isdir(group)
        assert group in cleanup_stale(prefix)
    wait_until(lambda: not os.path.exists(group) and not pid_alive(info["pid"]) and not tbt_namespaces(), 20,
               interval_s=0.1, what=lambda: f"cleanup; left: groups {tbt_cpu_groups()}, ns {tbt_namespaces()}")


@needs_cgroup
@pytest.mark.needs_root
def test_stale_cpu_group_is_removed_at_start():
    stale = _cgroups.create_group("tbtcgst-oldhost", 0.1)
    with LoopbackTestbed(["worker0"], prefix="tbtcgst", host_cpu=0.5) as tb:
        assert not os.path.exists(stale) and os.path.isdir(tb.cpu_group("worker0"))
        assert tb.run("worker0", ["cat", "/proc/self/cgroup"], check=True).stdout.count("/tbtcgst-worker0") >= 1
    assert tbt_cpu_groups() == []
