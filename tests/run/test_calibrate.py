"""``ralp-tf calibrate`` on live clusters (ralp_tf/run/calibrate.py, ralp_tf/cli/calibrate.py): what it
measures and how; the file's format and its pricing are tests/plan/test_calibration.py's."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_exit import exit_code
from ralp_tf.plan.calibration import load_calibration
from ralp_tf.run.calibrate import QUICK, Budget, compute_tasks, device_kinds, device_string, link_pairs

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))
SPEC = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "ps": ["10.0.0.1:2223", "10.0.0.2:2223"]}
HOSTS = {"worker:0": "a", "ps:0": "a", "worker:1": "b", "ps:1": "b"}


def test_the_pairs_timed_cross_hosts_both_ways() -> None:
    full = link_pairs(SPEC, HOSTS)
    assert ("worker:0", "ps:0") not in full and ("ps:0", "ps:1") not in full  # loopback; PS<->PS does not matter
    assert set(full) == {("worker:0", "worker:1"), ("worker:1", "worker:0"), ("worker:0", "ps:1"), ("ps:1", "worker:0"),
                         ("worker:1", "ps:0"), ("ps:0", "worker:1")}
    quick = link_pairs(SPEC, HOSTS, quick=True)
    assert set(quick) == {("worker:0", "worker:1"), ("worker:1", "worker:0"), ("worker:0", "ps:1"), ("ps:1", "worker:0")}


def test_the_gpu_device_path_is_named_by_device_strings() -> None:
    """A worker whose task lists a GPU is timed on '/job:worker/replica:0/task:0/device:GPU:0'
    (this machine has none: the path is chosen from the names TensorFlow lists)."""
    listed = ["/job:chief/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0",
              "/job:worker/replica:0/task:0/device:GPU:0", "/job:worker/replica:0/task:1/device:CPU:0",
              "/job:ps/replica:0/task:0/device:CPU:0"]
    kinds = device_kinds({"worker": ["w0:1", "w1:1"], "ps": ["p0:1"]}, listed)
    assert kinds == {"worker:0": "GPU", "worker:1": "CPU", "ps:0": "CPU"}
    assert device_string("worker:0", kinds["worker:0"]) == "/job:worker/replica:0/task:0/device:GPU:0"
    from ralp_tf.plan.calibration import CalibratedTask

    tasks = [CalibratedTask(k, "h:1", h, device_string(k, kinds[k]), kinds[k])
             for k, h in (("worker:0", "a"), ("worker:1", "b"), ("ps:0", "a"))]
    # worker:1 differs from worker:0's kind, so it is timed too, even with a small budget
    assert [t.key for t in compute_tasks(tasks, all_hosts=False)] == ["worker:0", "worker:1", "ps:0"]


@pytest.mark.parametrize("argv, words", [
    (["calibrate", "--cluster", "c.json", "--testbed"], "give one of them"),
    (["calibrate", "--host-cpu", "0.5"], "add --testbed"),
    (["calibrate", "--cluster", "c.json", "--bandwidth", "1gbit"], "never given"),
    (["calibrate", "--models", "no_such_model"], "no_such_model"),
    (["calibrate", "--agent-port", "2230"], "add --cluster"),
    (["calibrate", "--max-seconds", "-1"], "--max-seconds"),
    (["calibrate", "--ring-probes", "1"], "--testbed hosts with --host-cpu"),
    (["calibrate", "--testbed", "--host-cpu", "0.3", "--ring-probes", "-1"], "--ring-probes must be"),
])
def test_bad_arguments_are_refused_before_anything_starts(argv: list[str], words: str,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith("ralp-tf: error: ") and len(err.strip().splitlines()) == 1 and words in err


def test_quick_is_small() -> None:
    assert QUICK.max_seconds < 60 and QUICK.transfers <= Budget().transfers and not QUICK.all_hosts
    assert QUICK.ring_probes == 0 and Budget().ring_probes == 1


@pytest.mark.slow
def test_layers_are_timed_on_the_device_string_given() -> None:
    """:func:`ralp_tf.run.device_times.time_model` on this process's CPU by its device string (the
    path a GPU worker's '/job:worker/.../device:GPU:0' takes): every computing layer timed, the
    shares scaled to the whole step."""
    import tensorflow as tf

    from ralp_tf.run.device_times import time_model

    # the name TensorFlow lists for this process's CPU: a fixed '/job:localhost/...' is unknown once an
    # earlier test in the same pytest worker has trained a model (CI: InvalidArgumentError, unknown device)
    device = tf.config.list_logical_devices("CPU")[0].name
    t = time_model("small_cnn", 8, device, steps=8, min_loop_s=0.3)  # long enough to stand above the noise
    layers = dict(t.layers)
    assert t.model == "small_cnn" and t.step_s > 0 and {"conv1", "fc1"} <= set(layers)
    assert sum(layers.values()) == pytest.approx(t.step_s)


def test_the_summary_says_the_ring_cpu_or_why_it_was_not_measured() -> None:
    import dataclasses

    from calibration_docs import calibration_doc
    from ralp_tf.cli.calibrate import summary
    from ralp_tf.plan.calibration import Calibration
    from ralp_tf.plan.rates import RingCpu

    doc = calibration_doc(2, 2, layout="colocated")
    doc["testbed"] = {"layout": "colocated", "bandwidth_bps": 1e9, "host_cpu": None, "prefix": "p"}
    cal = Calibration.from_dict(doc)
    assert "ring CPU: not measured (no --host-cpu" in summary(cal, "c.json")
    budgeted = dataclasses.replace(cal, testbed={**cal.testbed, "host_cpu": 0.3}, budget={"ring_probes": 0.0})
    assert "ring CPU: not measured (--quick)" in summary(budgeted, "c.json")
    measured = dataclasses.replace(budgeted, ring_cpu=RingCpu("mwms", 2.5e-9, 0.012, 6e-5, 9e-4))
    assert "ring CPU (mwms, 0 probes): 2.50 ns per byte sent or received + 12.00 ms per step + 60 us per gradient " \
        "tensor and hop + 0.90 ms per sparse gradient" in summary(measured, "c.json")
    assert "ring CPU: not measured (measured on --testbed" in summary(dataclasses.replace(cal, testbed=None), "c.json")
    assert "dense update" not in summary(cal, "c.json")
    served = dataclasses.replace(cal, serving=dataclasses.replace(cal.serving, ps_chained_message_s=2e-4,
                                                                   worker_chained_message_s=1.5e-4, chief_closure_s=3e-3))
    lines = summary(served, "c.json").splitlines()
    assert any(l.split()[:2] == ["PS", "task"] and "200 us" in l for l in lines)
    assert any(l.startswith("chief") and "3.00 ms per closure" in l for l in lines)
    assert "chief" not in summary(cal, "c.json")
    updated = dataclasses.replace(cal, dense_update_s_per_byte={"sgd": 1.5e-9, "legacy-sgd": 4e-10})
    assert "dense update per variable byte, every PS task at once: sgd 1.50 ns, legacy-sgd 0.40 ns" \
        in summary(updated, "c.json")


TWO_DEVICES = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from ralp_tf.run.device_times import loops_seconds, time_dense_updates, time_table_passes
names = [d.name for d in tf.config.list_logical_devices("CPU")]
seen = {}
def on(device):
    def body():
        seen[device] = tf.constant(1.0).device  # where the loop's ops were placed
        return [tf.constant(1.0)]
    return body
assert loops_seconds({d: on(d) for d in names}, 2) >= 0 and sorted(seen) == sorted(names)
assert all(seen[d] == d for d in names), seen
updates = time_dense_updates(names, steps=4, nbytes=16 << 20)
assert set(updates) == {"sgd", "legacy-sgd"} and all(v > 0 for v in updates.values()), updates
print(time_table_passes(names, steps=4, nbytes=16 << 20))  # a pass well above the loop's noise
"""


@pytest.mark.slow
def test_table_passes_run_on_every_device_at_once() -> None:
    """:func:`ralp_tf.run.device_times.time_table_passes` runs one loop per device in one call, each
    loop's ops on its own device (two logical CPUs of a child process), and prices a pass > 0; so
    does each SGD's dense update (:func:`~ralp_tf.run.device_times.time_dense_updates`)."""
    proc = subprocess.run([sys.executable, "-c", TWO_DEVICES], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert float(proc.stdout.strip().splitlines()[-1]) > 0


@pytest.mark.slow
@pytest.mark.integration
def test_calibrate_a_local_cluster_with_a_tiny_budget(tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    proc = subprocess.run([RALP_TF, "calibrate", "--workers", "1", "--ps", "1", "--quick", "--models", "small_cnn",
                           "--transfers", "1", "--steps", "2", "--closures", "4", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["format"] == "ralp_tf.calibration/1"
    cal = load_calibration(str(out))
    assert [t.key for t in cal.tasks] == ["worker:0", "ps:0"] and cal.machine and cal.tensorflow_version
    assert {(l.src, l.dst) for l in cal.links} == {("worker:0", "ps:0"), ("ps:0", "worker:0")}
    for link in cal.links:  # loopback: fast; sizes from 4 bytes to at least 4 MB
        assert link.bandwidth_bps > 1e8 and link.samples[0].bytes == 4 and link.samples[-1].bytes >= 4 << 20
    assert [c.task for c in cal.compute] == ["worker:0", "ps:0"]
    assert all(m.model == "small_cnn" and m.step_s > 0 and "fc1" in dict(m.layers) for c in cal.compute for m in c.models)
    assert cal.floor is not None and cal.floor.plain_closure_s > 0 and cal.serving is not None
    assert cal.serving.chained  # the chain closures' CPU was read at both ends
    assert cal.serving.chief_closure_s is not None and cal.serving.chief_closure_s > 0  # this process's, per closure
    assert cal.table_pass_s_per_byte() > 0  # timed on the PS task
    assert cal.table_pass_served_cpu_s_per_byte > 0  # read from the PS task's CPU as the worker's closures passed
    assert set(cal.dense_update_s_per_byte) == {"sgd", "legacy-sgd"} and cal.cluster().dense_update_s_per_byte["sgd"] > 0
    assert cal.shared_cores and cal.budget["transfers"] == 1
    plan = subprocess.run([RALP_TF, "plan", "--model", "small_cnn", "--workers", "1", "--calibration", str(out),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    analysis = json.loads(plan.stdout)
    assert set(analysis["baseline"]["link_s"]) == {t.host for t in cal.tasks}  # the calibrated cluster's hosts
    timed = {l["name"]: l.get("device_seconds", {}) for l in analysis["profile"]["layers"]}
    assert set(timed["fc1"]) == {"worker:0", "worker", "ps:0", "ps"} and "measured_seconds" not in timed


def test_an_interrupted_testbed_calibration_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The measuring child's file becomes ``--out`` only when the ring's probes are done too: Ctrl-C
    during them (or any failure after the child) leaves neither the file nor its partial copy."""
    from ralp_tf.testbed import calibrate as testbed_calibrate

    out = tmp_path / "cal.json"

    def measured_then_interrupted(workers: int, ps: int, path: str, **_: object) -> None:
        Path(path).write_text("{}")  # the child's file, written before the ring's probes
        raise KeyboardInterrupt

    monkeypatch.setattr(testbed_calibrate, "_calibrate", measured_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        testbed_calibrate.calibrate_on_testbed(2, 2, str(out))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_root
def test_calibrate_finds_a_100mbit_cap_on_the_testbed(tmp_path: Path) -> None:
    """Namespace hosts whose links tc caps at 100 Mbit/s: the calibration, not told the cap, finds it
    within 10% on every link, and leaves no namespace behind."""
    from ralp_tf.testbed import netns_support

    ok, why = netns_support()
    if not ok:
        pytest.skip(why)
    out = tmp_path / "cal.json"
    proc = subprocess.run([RALP_TF, "calibrate", "--testbed", "--prefix", "rcaltest", "--workers", "1", "--ps", "1",
                           "--bandwidth", "100mbit", "--quick", "--models", "small_cnn", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cal = load_calibration(str(out))
    assert len(cal.links) == 2
    for link in cal.links:
        assert link.bandwidth_bps == pytest.approx(1e8, rel=0.10), (link.src, link.dst, link.bandwidth_bps)
    assert cal.testbed == {"layout": "dedicated", "bandwidth_bps": 1e8, "host_cpu": None, "prefix": "rcaltest"}
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "rcaltest" not in left


def test_the_agent_reports_its_tasks_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ralp-tf agent``'s ``GET /cpu``: each task of its host by the process listening on its port."""
    import os

    import ralp_tf.run.remote as remote
    from ralp_tf.run.tfconfig import load_cluster_config

    config = load_cluster_config('{"worker": ["10.0.0.1:2222"], "ps": ["10.0.0.1:2223", "10.0.0.2:2222"]}')
    monkeypatch.setattr(remote, "listening_ports", lambda: {os.getpid(): {2222}, 999999: {2223}})
    cpu = remote.host_cpu(config, "10.0.0.1")
    assert set(cpu) == {"worker:0", "ps:0"} and cpu["worker:0"] > 0  # ps:0's process is gone: NaN, still named
