"""Baseline jobs across namespaces: Horovod (skipped unless built: `make horovod`) and
MultiWorkerMirroredStrategy. Both must end with identical weights on every rank (`valid`)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time

import pytest

from ralp_tf.errors import ValidationError
from ralp_tf.testbed import LoopbackTestbed, Testbed
from ralp_tf.testbed.horovod_job import horovod_available
from ralp_tf.testbed.jobs import parse_line
from tbhelpers import NETNS_OK, needs_netns


def _horovod_importable() -> tuple[bool, str]:
    """(True, "") when ``import horovod.tensorflow`` works in this interpreter's environment, else
    (False, why). Tried in a child interpreter, and only when the package is installed at all."""
    ok, why = horovod_available()
    if not ok:
        return ok, why
    probe = subprocess.run([sys.executable, "-c", "import horovod.tensorflow"], capture_output=True, text=True,
                           timeout=300)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        return False, f"Horovod is installed but `import horovod.tensorflow` fails ({last}); rerun `make horovod`"
    return True, ""


_hvd, _hvd_why = _horovod_importable()


def test_link_meter_reports_host_cpu_per_step_over_the_window():
    """CPU seconds per global step of each budgeted host, between rank 0's start and end marks."""
    import os
    import time

    from ralp_tf.testbed import _nsops, jobs

    class FakeBed:
        cpu = {"host0": 10.0, "host1": 4.0}

        def link_bytes(self):
            return {}

        def host_cpu_seconds(self):
            return dict(self.cpu)

        def task_cpu_seconds(self):
            return {"worker0": self.cpu.get("host0", 0.0) / 2, "ps0": 1.0} if self.cpu else {}

        def host_throttled_seconds(self):
            return {h: c / 4 for h, c in self.cpu.items()}

    tb = FakeBed()
    meter = jobs.LinkMeter(tb)
    meter("start")
    tb.cpu = {"host0": 16.0, "host1": 7.0}
    time.sleep(0.05)  # a few clock ticks of the machine's CPU times
    meter("end")
    assert meter.cpu_per_step(3) == {"host0": 2.0, "host1": 1.0}
    assert meter.task_cpu_per_step(3) == {"worker0": 1.0, "ps0": 0.0}
    assert meter.throttled_per_step(3) == {"host0": 0.5, "host1": 0.25}
    machine = meter.machine_cpu()  # this machine's /proc/stat over the window
    assert machine is not None and 0.0 <= machine["softirq_share"] <= machine["busy_share"] <= 1.0
    assert 0.0 <= machine["steal_share"] <= 1.0
    assert meter.cpu_fields(3)["host_throttled_s_per_step"] == {"host0": 0.5, "host1": 0.25}
    assert set(meter.cpu_fields(3)) == {"host_cpu_s_per_step", "task_cpu_s_per_step", "host_throttled_s_per_step",
                                        "machine_cpu"}
    assert jobs.LinkMeter(tb, per_task=False).task_cpu_per_step(3) is None  # Horovod's ranks are not tasks
    tb.cpu = {}
    empty = jobs.LinkMeter(tb)
    empty("start"), empty("end")
    assert empty.cpu_per_step(3) is None
    assert _nsops.process_cpu_seconds(os.getpid()) > 0 and _nsops.process_cpu_seconds(2 ** 22 + 7) == 0.0


def test_machine_cpu_is_read_from_proc_stat_in_seconds():
    from ralp_tf.testbed import _nsops

    text = "cpu  100 5 50 800 20 3 12 0 7 0\ncpu0 50 2 25 400 10 1 6 0 0 0\nintr 1\n"
    got = _nsops.parse_proc_stat(text, 100.0)
    assert got["user"] == 1.0 and got["softirq"] == 0.12 and got["idle"] == 8.0
    assert got["total"] == pytest.approx(9.9) and got["busy"] == pytest.approx(9.9 - 8.0 - 0.2)
    with pytest.raises(ValueError):
        _nsops.parse_proc_stat("intr 1\n", 100.0)


def test_protocol_lines_survive_prefixes():
    assert parse_line('[1,0]<stdout>:RALP_JOB result {"rank": 0}') == ("result", {"rank": 0})
    assert parse_line("plain log line") is None


def _check(r, strategy):
    assert r["valid"], r.get("invalid_reason", "") + "\n" + r.get("log_tail", "")
    assert r["strategy"] == strategy and r["workers"] == 2 and r["global_batch"] == 32
    assert len(set(r["weights_sha256"].values())) == 1 and len(r["weights_sha256"]) == 2
    assert r["samples_per_s"] > 0 and len(r["step_times_s"]) == 4
    # small_cnn has ~0.4M parameters: a 2-worker ring sends about one model copy per worker per step.
    assert 1.0e6 < r["bytes_per_step"] < 6.0e6, r["bytes_per_step"]
    return r


@pytest.mark.slow
@pytest.mark.integration
def test_an_mwms_rank_ends_on_sigterm_while_it_trains() -> None:
    """The testbed stops its ranks with SIGTERM. MultiWorkerMirroredStrategy's coordination service
    catches SIGTERM as a preemption notice and runs on, so a teardown waited out its grace for every
    rank (and a Ctrl-C'd `calibrate` outlived its own 4 s: its file left behind). A rank ends on it."""
    import json
    import socket

    from ralp_tf.testbed import jobs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = jobs.base_env({"TF_CONFIG": json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]},
                                                  "task": {"type": "worker", "index": 0}})})
    proc = subprocess.Popen([sys.executable, "-m", "ralp_tf.testbed.mwms_job", "--model", "small_cnn", "--batch", "4",
                             "--warmup", "1", "--steps", "100000"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    stall = threading.Timer(120.0, proc.kill)  # a rank that never reaches its timed steps ends the wait
    stall.start()
    try:
        seen: list[str] = []
        for line in proc.stdout:  # the start mark: the strategy is up and the timed steps run
            seen.append(line)
            if (parse_line(line) or ("",))[0] == "start":
                break
        stall.cancel()
        started = bool(seen) and (parse_line(seen[-1]) or ("",))[0] == "start"
        assert started, "the rank ended or stalled before its timed steps:\n" + "".join(seen[-30:])
        proc.terminate()
        t0 = time.monotonic()
        assert proc.wait(timeout=30) == -15 and time.monotonic() - t0 < 3.0
    finally:
        stall.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_horovod
@pytest.mark.skipif(not _hvd, reason=_hvd_why)
def test_horovod_across_namespaces():
    """Runs whenever Horovod imports: across namespaces where this process may build them (root),
    otherwise on the loopback testbed (uncapped, TCP payload bytes). With CPU budgets where the
    cgroup v1 controller is there: the ssh stand-in puts each remote rank in its host's group
    from inside the namespace, where ``ip netns exec`` has hidden the cgroup mount."""
    from ralp_tf.testbed import cpu_budget_support
    from ralp_tf.testbed.horovod_job import run_horovod

    if NETNS_OK:
        budget = 0.5 if cpu_budget_support()[0] else None
        tb = Testbed(["worker0", "worker1"], "1gbit", prefix="tbthvd", host_cpu=budget)
    elif shutil.which("ss") is None:
        pytest.skip("no namespace testbed here, and the loopback fallback's byte counts need 'ss' (iproute2)")
    else:
        tb = LoopbackTestbed(["worker0", "worker1"], None, prefix="tbthvd")
    with tb:
        r = run_horovod(tb, "small_cnn", batch=16, steps=4, warmup=2, timeout=240)
    _check(r, "horovod")


@needs_netns
@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.integration
def test_mwms_ring_across_namespaces(monkeypatch):
    """With a launcher slow to read its counters at the start mark, the window still holds
    exactly the timed steps' bytes: rank 0 waits for the launcher's answer, and the other rank for
    rank 0 (a bare mark once let the first timed all-reduce start before the read: -15%)."""
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.plan.costmodel import estimate_allreduce, wire_bytes
    from ralp_tf.plan.profiles import cached_profile
    from ralp_tf.testbed import jobs
    from ralp_tf.testbed.mwms_job import run_mwms

    class SlowStartMeter(jobs.LinkMeter):
        def __call__(self, kind: str) -> None:
            if kind == "start":
                time.sleep(2.0)
            super().__call__(kind)

    monkeypatch.setattr(jobs, "LinkMeter", SlowStartMeter)
    with Testbed(["worker0", "worker1"], "1gbit", prefix="tbtmwms") as tb:
        r = run_mwms(tb, "small_cnn", batch=16, steps=4, warmup=2, timeout=240)
    _check(r, "allreduce")
    predicted = wire_bytes(estimate_allreduce(cached_profile("small_cnn"), Cluster.local(2, 0)).bytes_per_step)
    assert r["bytes_per_step"] == pytest.approx(predicted, rel=0.03), (r["bytes_per_step"], predicted)


@needs_netns
@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.integration
def test_failed_job_is_invalid_with_log_tail():
    from ralp_tf.testbed.mwms_job import run_mwms

    with Testbed(["worker0", "worker1"], None, prefix="tbtbad") as tb:
        with pytest.raises(ValidationError, match="unknown model"):
            run_mwms(tb, "no_such_model")
        r = run_mwms(tb, "ralp_tf.model.builtin:no_such_builder", batch=4, steps=2, warmup=1, timeout=120)
    assert not r["valid"] and "non-zero exit" in r["invalid_reason"] and "no_such_builder" in r["log_tail"]
