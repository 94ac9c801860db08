"""``ralp-tf bench``: argument errors, the report pieces, the quick cell (namespace testbed as root,
loopback fallback without root), the one-cell JSON form, and teardown when the bench is killed.

The runs use ``small_cnn`` (seconds per strategy); the whole file takes about 3 minutes on 2 cores.
"""
from __future__ import annotations

import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ralp_tf import bench
from ralp_tf.testbed import _nsops, netns_support

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
REQUIRED = ("samples_per_s", "bytes_per_step", "predicted_step_s", "measured_step_s", "valid")

_ok, _why = netns_support()
needs_netns = pytest.mark.skipif(not _ok, reason=f"namespace testbed unavailable: {_why}")
IS_ROOT = os.geteuid() == 0


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra or {})
    return env


def _bench(args: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "ralp_tf.cli.main", "bench", *args], cwd=REPO, env=kw.pop("env", _env()),
                          capture_output=True, text=True, timeout=timeout, **kw)


def _namespaces(prefix: str) -> list[str]:
    return [n for n in _nsops.list_netns() if n.startswith(prefix + "-")] if IS_ROOT else []


def _last_json(stdout: str) -> dict:
    start = stdout.index("{")
    return json.loads(stdout[start:])


# ------------------------------------------------------------------------------------------
# bad input: one line, exit 2, before anything starts


@pytest.mark.parametrize("args, words", [
    (["--strategies", "ps,warp"], "unknown strategy 'warp'"),
    (["--model", "gpt5"], "unknown model 'gpt5'"),
    (["--bandwidth", "fast"], "cannot parse bandwidth 'fast'"),
    (["--bandwidths", "1gbit,-3mbit"], "bandwidth"),
    (["--workers", "100000"], "more than this machine can hold"),
    (["--workers", "two"], "not an integer"),
    (["--repeats", "0"], "--repeats must be a positive integer"),
    (["--cell", "alexnet_cifar:2"], "MODEL:WORKERS:BANDWIDTH"),
    (["--prefix", "Bad-Prefix"], "--prefix"),
])
def test_bad_input_is_one_line_exit_2(args, words, tmp_path):
    r = _bench(args + ["--out-dir", str(tmp_path)], timeout=60)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("ralp-tf: error:") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()


def test_parsers_and_config():
    assert bench.parse_bandwidths("100mbit,1g,uncapped,1gbit") == ["100mbit", "1gbit", "uncapped"]
    assert bench.parse_workers(["1,2", "3"]) == [1, 2, 3]
    assert bench.parse_strategies("ralp,ps,ralp") == ("ralp", "ps")
    c = bench.parse_cell("alexnet_cifar:3:1gbit")
    assert c.tasks == ["chief", "worker0", "worker1", "worker2", "ps0"] and c.key == "alexnet_cifar/w3/1gbit"
    assert bench.max_workers() >= 3


def test_choose_steps_fits_the_window():
    cfg = bench.BenchConfig(cells=[], strategies=("ps",), window_s=20, min_steps=2, max_steps=10)
    assert bench.choose_steps(cfg, 46.0) == (2, 1)  # slow: minimum steps, 1 warm-up step
    assert bench.choose_steps(cfg, 4.0) == (5, 2)
    assert bench.choose_steps(cfg, 0.5) == (10, 4)  # fast: 2 s of warm-up steps
    assert bench.choose_steps(cfg, 0.01) == (10, 10)  # at most 10
    assert bench.choose_steps(cfg, None) == (10, 2)
    cfg.steps, cfg.warmup = 3, 4
    assert bench.choose_steps(cfg, 46.0) == (3, 4)


def test_summary_medians_validity_and_errors():
    runs = [{"valid": True, "samples_per_s": s, "measured_step_s": 64 / s, "bytes_per_step": 1.0e6,
             "predicted_step_s": 0.5, "predicted_bytes_per_step": 1.05e6} for s in (100.0, 120.0, 110.0)]
    m = bench.summarize_strategy(runs, 3)
    assert m["valid"] and m["status"] == "ok" and m["samples_per_s"] == 110.0
    assert math.isclose(m["spread"], 20 / 110) and math.isclose(m["bytes_error"], 1 / 1.05 - 1)
    bad = runs[:2] + [{"valid": False, "invalid_reason": "coordinator exited -9", "log_tail": "boom"}]
    m = bench.summarize_strategy(bad, 3)
    assert not m["valid"] and m["status"] == "partial" and m["valid_runs"] == 2
    assert "exited -9" in m["invalid_reason"] and m["log_tail"] == "boom"
    assert bench.summarize_strategy(bad[2:], 1)["status"] == "failed"


def _doc() -> dict:
    def st(sps_list, step, pred_step, b, pred_b):
        return {"status": "ok", "valid": True, "samples_per_s": sorted(sps_list)[len(sps_list) // 2],
                "samples_per_s_all": sps_list, "measured_step_s": step, "predicted_step_s": pred_step,
                "bytes_per_step": b, "predicted_bytes_per_step": pred_b, "step_error": step / pred_step - 1,
                "bytes_error": b / pred_b - 1, "valid_runs": 3, "n_runs": 3, "steps": 2, "warmup": 1}

    cells = []
    for bw, k in (("100mbit", 10), ("1gbit", 1)):
        cells.append({"model": "alexnet_cifar", "workers": 2, "bandwidth": bw, "key": f"alexnet_cifar/w2/{bw}",
                      "bench_predictions": {"analysis": {"split": True}},
                      "strategies": {"ps": st([1.4 / k * 10, 1.5 / k * 10, 1.6 / k * 10], 4.0 * k, 4.5 * k, 6e8, 6e8),
                                     "ralp": st([20.0, 21.0, 22.0], 3.0, 3.0, 4e7, 4e7),
                                     "horovod": {"status": "skipped", "reason": "not installed", "valid": False,
                                                 "runs": []}}})
    cells.append({"model": "alexnet_cifar", "workers": 3, "bandwidth": "1gbit", "key": "alexnet_cifar/w3/1gbit",
                  "bench_predictions": {"analysis": {"split": True}},
                  "strategies": {"ps": st([10.0], 9.0, 8.0, 9e8, 9e8), "ralp": st([30.0], 3.2, 3.0, 6e7, 6e7)}})
    for c in cells:
        base = c["strategies"]["ps"]["samples_per_s"]
        for s in c["strategies"].values():
            if s.get("samples_per_s"):
                s["speedup_vs_ps"] = s["samples_per_s"] / base
    return {"name": "t", "command": "ralp-tf bench --test", "started": "now", "wall_s": 1.0, "complete": True,
            "config": {"strategies": ["ps", "ralp", "horovod"]}, "cells": cells}


def test_targets_tables_and_readme_markers(tmp_path):
    doc = _doc()
    doc["targets"] = bench.targets(doc)
    by = {t["target"]: t for t in doc["targets"]}
    t100 = by["alexnet_cifar, 2 workers, 100mbit: RALP / stock PSS samples/s"]
    assert math.isclose(t100["value"], 21 / 1.5) and t100["met"]
    assert not by["alexnet_cifar, 2 workers, 1gbit: RALP / stock PSS samples/s"]["met"]  # 21/15 < 4
    md = bench.markdown_tables(doc)
    assert "| alexnet_cifar | 2 | 100mbit | ralp | 21.0 |" in md and "skipped: not installed" in md
    readme = tmp_path / "README.md"
    readme.write_text("# Hand-written\n\nintro\n\n" + bench.README_BEGIN + "\nold\n" + bench.README_END + "\n\nouttro\n")
    bench.update_readme(readme, md)
    text = readme.read_text()
    assert text.startswith("# Hand-written\n\nintro") and text.rstrip().endswith("outtro")
    assert "old" not in text and md in text
    bench.update_readme(readme, "second")  # idempotent replacement, hand text kept
    text = readme.read_text()
    assert text.count(bench.README_BEGIN) == 1 and "second" in text and md not in text and "intro" in text


def test_plots_have_files(tmp_path):
    pytest.importorskip("matplotlib")
    from ralp_tf.bench import plots

    written = plots.plot_all(_doc(), tmp_path)
    names = {Path(p).name for p in written}
    assert names == {"bench_speedup_vs_bandwidth.png", "bench_scaling_vs_workers.png",
                     "bench_bytes_per_step.png", "bench_predicted_vs_measured.png"}
    for p in written:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(p).stat().st_size > 10_000



@pytest.mark.parametrize("name", ["issue4", "issue4-ctr", "scaling", "scaling-hvd1"])
def test_records_round_trip_the_stored_results_files(name):
    """Old results files load into the records and come back with exactly their keys and values;
    the targets file reproduces the targets stored with them."""
    doc = json.loads((REPO / "benchmarks" / "results" / f"{name}.json").read_text())
    for cell in doc["cells"]:
        again = bench.CellRecord.from_dict(cell).to_dict()
        assert again == cell and list(again) == list(cell)
        for s, st in cell["strategies"].items():
            assert list(again["strategies"][s]) == list(st)
    assert bench.targets(doc) == doc["targets"]


def test_a_run_whose_launcher_raised_keeps_its_keys():
    for strategy, extra in (("ralp", set()), ("horovod", {"predicted_step_s"})):
        rec = bench.RunRecord(strategy=strategy, model="m", workers=2, valid=False, invalid_reason="OSError: x",
                              log_tail="tb", measured=False, steps=3, warmup=1, wall_s=1.0, repetition=1)
        d = rec.to_dict()
        assert set(d) == {"strategy", "model", "workers", "valid", "invalid_reason", "log_tail", "steps", "warmup",
                          "wall_s", "repetition", "predicted_payload_bytes_per_step", "predicted_bytes_per_step",
                          "bytes_kind"} | extra
        assert bench.RunRecord.from_dict(d) == rec


def test_targets_file_is_validated(tmp_path):
    spec = bench.load_targets(REPO / "benchmarks" / "targets.json")
    assert {t.kind for t in spec} == {"ratio", "traffic_bound_share", "analyzer_choice", "step_time_error",
                                      "bytes_error"}
    bad = tmp_path / "targets.json"
    for text, words in (("{", "not valid JSON"), ("[]", "'targets' list"),
                        ('{"targets": [{"kind": "speed"}]}', "unknown kind 'speed'"),
                        ('{"targets": [{"kind": "ratio", "label": "x", "goal": 2}]}', "missing 'model'"),
                        ('{"targets": [{"kind": "bytes_error", "label": "x", "tolerance": 0.1, "goal": 1, '
                         '"tolerence": 1}]}', "unknown key(s) tolerence"),
                        ('{"targets": [{"kind": "bytes_error", "label": "x", "tolerance": -1, "goal": 1}]}',
                         "tolerance must be a positive number")):
        bad.write_text(text)
        with pytest.raises(bench.TargetsError) as info:
            bench.load_targets(bad)
        assert words in str(info.value)
    bad.write_text('{"targets": [{"kind": "ratio", "label": "mine", "model": "alexnet_cifar", "workers": 2, '
                   '"bandwidth": "1gbit", "strategy": "ralp", "baseline": "ps", "goal": 1.2}]}')
    assert [t["target"] for t in bench.targets(_doc(), out_dir=tmp_path)] == ["mine"]  # <out-dir>/targets.json wins

# ------------------------------------------------------------------------------------------
# real runs


def _check_cell_json(out: dict, strategies: list[str]) -> None:
    assert list(out) == strategies
    for s in strategies:
        for k in REQUIRED:
            assert k in out[s], (s, k)


@pytest.mark.slow
@pytest.mark.integration
def test_quick_without_root_uses_the_loopback_fallback(tmp_path):
    """As root, run the bench in a fresh user namespace (``unshare -U``): there it is uid 65534
    with no capabilities, so the fallback path really runs (files stay readable, unlike with
    a plain uid switch, because the kernel still checks them against the outside uid)."""
    out_dir = tmp_path / "out"
    # ralp and the ring: the PS job (stock PS runs it too) and the collective job, each on the fallback
    cmd = [PY, "-m", "ralp_tf.cli.main", "bench", "--quick", "--json", "--strategies", "ralp,allreduce", "--out-dir",
           str(out_dir), "--prefix", "rbtl"]
    (tmp_path / "tmp").mkdir()  # own TMPDIR: the unprivileged lock folder lives under it
    env = _env({"PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path / "tmp")})
    if IS_ROOT:
        if shutil.which("unshare") is None:
            pytest.skip("running as root and unshare is missing: cannot drop privileges")
        probe = subprocess.run(["unshare", "-U", PY, "-c", "import os; print(os.geteuid())"],
                               capture_output=True, text=True)
        if probe.returncode != 0 or probe.stdout.strip() == "0":
            pytest.skip(f"user namespaces unavailable: {probe.stderr.strip()}")
        cmd = ["unshare", "-U", *cmd]
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = _last_json(r.stdout)
    _check_cell_json(out, ["ralp", "allreduce"])
    for s in out:
        assert out[s]["valid"] and out[s]["bytes_kind"] == "tcp_payload_live_sockets", out[s]
    assert "falling back to LoopbackTestbed" in r.stderr


@needs_netns
@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.integration
def test_quick_json_cell_with_every_strategy(tmp_path):
    """The quick cell in the documented one-cell JSON form, with every strategy, on the namespace
    testbed: stock PS, ralp and the ring valid with wire bytes within 10% of the cost model;
    horovod/scheduler may be skipped (with the reason) where they are unavailable, never faked;
    progress with an ETA; one results file; the report left alone; no namespace left."""
    strategies = ["ps", "ralp", "scheduler", "allreduce", "horovod", "rejected"]
    t0 = time.monotonic()
    r = _bench(["--quick", "--json", "--progress", "--strategies", ",".join(strategies), "--out-dir", str(tmp_path),
                "--prefix", "rbtj"], timeout=400)
    assert r.returncode in (0, 1), r.stderr[-3000:]
    out = _last_json(r.stdout)
    _check_cell_json(out, strategies)
    for s in ("ps", "ralp", "allreduce"):
        assert out[s]["valid"] and out[s]["bytes_kind"] == "wire", out[s]
        assert out[s]["samples_per_s"] > 0 and out[s]["predicted_step_s"] > 0
        assert abs(out[s]["bytes_error"]) < 0.10, out[s]  # exact wire counts vs the cost model
    assert out["ralp"]["bytes_per_step"] * 10 < out["ps"]["bytes_per_step"]
    assert out["rejected"]["status"] == "skipped" and "stock PS" in out["rejected"]["reason"]
    from ralp_tf.testbed.horovod_job import horovod_available

    if horovod_available()[0]:
        assert out["horovod"]["valid"], out["horovod"]
    else:
        assert out["horovod"]["status"] == "skipped" and "make horovod" in out["horovod"]["reason"]
    assert out["scheduler"]["status"] in ("ok", "skipped", "failed")
    if out["scheduler"]["status"] == "skipped":
        assert out["scheduler"]["reason"]
    assert "cell 1/1 small_cnn/w2/1gbit | ralp rep 1/1" in r.stderr and "ETA" in r.stderr
    results = list((tmp_path / "results").glob("quick-*.json"))
    assert len(results) == 1
    doc = json.loads(results[0].read_text())
    assert doc["cells"][0]["key"] == "small_cnn/w2/1gbit" and len(doc["cells"][0]["strategies"]["ps"]["runs"]) == 1
    assert not (tmp_path / "README.md").exists()  # --quick leaves the report alone
    assert _namespaces("rbtj") == []
    assert time.monotonic() - t0 < 300


# ------------------------------------------------------------------------------------------
# killed midway: nothing may remain


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGKILL, marks=pytest.mark.extended), signal.SIGINT],
                         ids=["SIGKILL", "SIGINT"])  # SIGKILL's twin: tests/testbed/test_testbed_teardown.py
def test_killed_bench_leaves_nothing(sig, tmp_path):
    prefix = "rbtk" if sig == signal.SIGKILL else "rbti"
    proc = subprocess.Popen([PY, "-m", "ralp_tf.cli.main", "bench", "--quick", "--progress", "--out-dir", str(tmp_path),
                             "--prefix", prefix, "--strategies", "ps,ralp", "--steps", "400"],
                            cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tasks: set[int] = set()
    try:
        deadline = time.monotonic() + 150
        for line in proc.stderr:  # wait until the first strategy runs
            if "| ps rep 1/1" in line:
                break
            assert time.monotonic() < deadline, "the bench never started a run"
        # let the cluster and the coordinator come up, then collect every process of the bench
        while time.monotonic() < deadline:
            time.sleep(2)
            tasks = _descendants(proc.pid)
            if len(tasks) >= 4:  # PS + 2 workers + chief (+ reaper)
                break
        for ns in _namespaces(prefix):
            tasks |= set(_nsops.netns_pids(ns))
        assert len(tasks) >= 4, tasks
        assert proc.poll() is None
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGINT:
        assert rc == 130, rc
        doc = json.loads(next((tmp_path / "results").glob("*.json")).read_text())
        assert doc.get("interrupted") and not doc["complete"]
    else:
        assert rc == -9
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (_namespaces(prefix) or any(_alive(p) for p in tasks)):
        time.sleep(1)
    assert _namespaces(prefix) == []
    assert [p for p in tasks if _alive(p)] == []


# ------------------------------------------------------------------------------------------
# layouts and per-host CPU budgets


def _config(argv: list[str]) -> "bench.BenchConfig":
    import argparse

    from ralp_tf.cli.bench import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return bench.config_from_args(parser.parse_args(["bench", *argv]), argv)


def test_layout_and_host_cpu_config(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # the reference machine: 2 cores
    cfg = _config(["--quick", "--layout", "colocated", "--host-cpu", "1"])
    (cell,) = cfg.cells
    assert cfg.layout == "colocated" and cfg.host_cpu == 1.0 and cell.num_ps == 2
    assert cell.hosts == {"host0": ["chief", "worker0", "ps0"], "host1": ["worker1", "ps1"]}
    assert cell.key == "small_cnn/w2/1gbit" and sorted(cell.tasks) == ["chief", "ps0", "ps1", "worker0", "worker1"]
    dedicated = _config(["--quick"]).cells[0]
    assert dedicated.layout == "dedicated" and dedicated.num_ps == 1 and len(dedicated.hosts) == 4
    with pytest.raises(bench.BenchConfigError, match=r"--host-cpu 0\.75 x 4 hosts .* use --host-cpu 0\.5"):
        _config(["--quick", "--host-cpu", "0.75"])
    with pytest.raises(bench.BenchConfigError, match="--host-cpu must be a number of cores >= 0.01"):
        _config(["--quick", "--host-cpu", "0"])


def test_two_workers_per_host_variants_widen_the_cells_testbed(monkeypatch):
    """``ralp_x2`` (two workers per colocated host) puts 2H workers on the cell's H hosts, strided, so the
    other strategies run on the first H, one per host; it needs the colocated layout, one line otherwise."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    cfg = _config(["--layout", "colocated", "--host-cpu", "0.3", "--cell", "resnet_cifar:2:100mbit:ralp+ralp_x2+horovod"])
    (cell,) = cfg.cells
    assert cell.workers_per_host == 2 and cell.key == "resnet_cifar/w2/100mbit" and cell.num_ps == 2
    assert cell.hosts == {"host0": ["chief", "worker0", "worker2", "ps0"], "host1": ["worker1", "worker3", "ps1"]}
    assert _config(["--layout", "colocated", "--cell", "resnet_cifar:2:100mbit:ralp+ralp_fused"]).cells[0].workers_per_host == 1
    with pytest.raises(bench.BenchConfigError, match="strategy ralp_x2_fused runs 2 workers per host: add --layout colocated"):
        _config(["--cell", "resnet_cifar:2:100mbit:ralp+ralp_x2_fused"])


def test_the_optimizer_reaches_every_strategy_s_job():
    """``--optimizer`` (default the loop's, sgd) is in the config and in the flags of the PSS and
    the ring jobs, always named."""
    from ralp_tf.testbed import jobs
    from ralp_tf.testbed.ps_job import _options

    assert _config(["--quick", "--optimizer", "legacy-sgd"]).optimizer == "legacy-sgd"
    assert _config(["--quick"]).optimizer == "sgd"
    assert jobs.job_argv({"model": "m", "optimizer": "legacy-sgd"}) == ["--model", "m", "--optimizer", "legacy-sgd"]
    assert _options(False, 1.0, None, 1, "sgd")[-2:] == ["--optimizer", "sgd"]  # always named
    import argparse

    ap = argparse.ArgumentParser()
    jobs.add_job_args(ap)
    assert jobs.parse_job_args(ap, ["--optimizer", "legacy-sgd"]).optimizer == "legacy-sgd"
    assert jobs.parse_job_args(ap, []).optimizer == "sgd"


def test_fused_transfers_reach_the_pss_jobs_and_their_predictions():
    """``--fuse-transfers`` is in the config, in the PSS job's flags, and priced in the bench's
    predictions: resnet_cifar's stock PSS then sends fewer control bytes."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import predictions
    from ralp_tf.plan.profiles import cached_profile
    from ralp_tf.testbed.ps_job import _options

    assert _config(["--quick", "--fuse-transfers"]).fuse_transfers and not _config(["--quick"]).fuse_transfers
    assert "--fuse-transfers" in _options(False, 1.0, None, 1, "sgd", True)
    assert "--fuse-transfers" not in _options(False, 1.0, None, 1, "sgd")
    # the bench's own profile, when it has one, replaces the coordinator's measurement
    assert _options(True, 1.0, None, 1, "sgd", profile_path="/p.json")[:4] == ["--profile", "/p.json", "--compute-scale", "1.0"]
    assert _options(True, 1.0, None, 1, "sgd")[:3] == ["--measure-compute", "--compute-scale", "1.0"]
    prof, cell = cached_profile("resnet_cifar"), Cell("resnet_cifar", 2, "100mbit")
    stock, fused = predictions(prof, cell, 100e6), predictions(prof, cell, 100e6, fuse_transfers=True)
    assert fused["ps"]["payload_bytes_per_step"] < stock["ps"]["payload_bytes_per_step"]


def test_bad_layout_is_one_line_exit_2(tmp_path):
    r = _bench(["--layout", "ring", "--out-dir", str(tmp_path)], timeout=60)
    assert r.returncode == 2 and "invalid choice: 'ring'" in r.stderr, r.stderr


def test_bytes_per_host_link_and_layout_in_json():
    runs = [{"valid": True, "steps": 2, "samples_per_s": s, "link_bytes": {"host0": {"tx": tx, "rx": 10},
                                                                          "host1": {"tx": 4, "rx": tx}}}
            for s, tx in ((100.0, 200), (110.0, 400), (120.0, 600))]
    m = bench.summarize_strategy(runs, 3)
    assert m["link_bytes_per_step"] == {"host0": {"tx": 200.0, "rx": 5.0}, "host1": {"tx": 2.0, "rx": 200.0}}
    assert bench.StrategySummary.from_dict(m).to_dict() == m
    from ralp_tf.bench.records import CellRecord
    from ralp_tf.bench.report import strategy_json

    cell = {"model": "m", "workers": 2, "bandwidth": "1gbit", "key": "m/w2/1gbit", "status": "ok",
            "strategies": {"ps": m}, "layout": "colocated", "hosts": {"host0": ["worker0", "ps0"]},
            "host_cpu": {"host0": 0.5}, "num_ps": 2, "testbed": {"bytes_kind": "wire"}}
    assert CellRecord.from_dict(cell).to_dict() == cell
    out = strategy_json({"cells": [cell], "config": {"strategies": ["ps"]}})["ps"]
    assert out["layout"] == "colocated" and out["host_cpu"] == {"host0": 0.5}
    assert out["link_bytes_per_step"]["host0"]["tx"] == 200.0


@needs_netns
@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.integration
def test_quick_colocated_with_host_budgets(tmp_path):
    """The quick cell on 2 colocated hosts (worker i + PS i, chief on host 0), each host capped at 1
    core; bytes reported per host link. ralp and the ring: the PS job (stock PS runs the same job)
    and the collective job."""
    from ralp_tf.testbed import cpu_budget_support

    budget = ["--host-cpu", "1"] if cpu_budget_support()[0] else []
    r = _bench(["--quick", "--json", "--layout", "colocated", *budget, "--strategies", "ralp,allreduce",
                "--out-dir", str(tmp_path), "--prefix", "rbtqc"], timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    out = _last_json(r.stdout)
    _check_cell_json(out, ["ralp", "allreduce"])
    for s in ("ralp", "allreduce"):
        assert out[s]["valid"] and out[s]["layout"] == "colocated", out[s]
        assert set(out[s]["hosts"]) == {"host0", "host1"} and set(out[s]["link_bytes_per_step"]) == {"host0", "host1"}
        assert out[s]["host_cpu"] == {"host0": 1.0 if budget else None, "host1": 1.0 if budget else None}
    doc = json.loads(next((tmp_path / "results").glob("quick-*.json")).read_text())
    assert doc["cells"][0]["testbed"]["layout"] == "colocated" and doc["cells"][0]["num_ps"] == 2
    assert doc["cells"][0]["bench_predictions"]["analysis"]["compute_scale"] == 1.0
    if budget:  # the bench-side profile: layer shares calibrated to whole passes timed under the quota
        calibration = doc["profile_calibration"]["small_cnn"]
        assert calibration["cores"] == 1.0 and calibration["step_s"] > 0
        layers = doc["profiles"]["small_cnn"]["layers"]
        assert sum(l.get("measured_seconds") or 0 for l in layers) == pytest.approx(calibration["step_s"])
    for s in ("ralp", "allreduce"):  # CPU seconds per global step of each host, in its budget
        cpu = doc["cells"][0]["strategies"][s]["runs"][0]["host_cpu_s_per_step"]
        if budget:
            assert set(cpu) == {"host0", "host1"} and all(v > 0 for v in cpu.values()), (s, cpu)
        else:
            assert cpu is None
    run = doc["cells"][0]["strategies"]["ralp"]["runs"][0]  # per task, measured and predicted
    if budget:
        assert {"worker0", "worker1", "ps0", "ps1", "chief"} <= set(run["task_cpu_s_per_step"]), run["task_cpu_s_per_step"]
        assert sum(run["task_cpu_s_per_step"].values()) == pytest.approx(sum(run["host_cpu_s_per_step"].values()), rel=0.2)
        assert set(run["predicted_task_cpu_s_per_step"]) == {"worker:0", "worker:1", "ps:0", "ps:1"}
    else:
        assert run["task_cpu_s_per_step"] is None and "predicted_task_cpu_s_per_step" not in run
    assert _namespaces("rbtqc") == [] and not glob.glob("/sys/fs/cgroup/cpu/rbtqc-*")


def test_compute_scale_is_one_under_host_budgets(monkeypatch):
    """Without budgets, workers beyond the cores share them (layer times x workers / cores); with
    budgets the profile was measured under one host's budget and each host has its own."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert bench.compute_scale(4) == 2.0 and bench.compute_scale(1) == 1.0
    assert bench.compute_scale(4, host_cpu=0.4) == 1.0


def test_models_are_built_ins_or_references():
    from ralp_tf.bench.config import BenchConfigError, parse_models

    assert parse_models("small_cnn,mypkg.models:build") == ["small_cnn", "mypkg.models:build"]
    with pytest.raises(BenchConfigError, match="unknown model 'nope'.*package.module:function"):
        parse_models("nope")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.extended  # a study; the codecs' training is pinned by tests/plan/test_compression.py
def test_compression_accuracy_study_runs_every_setting(tmp_path):
    """In a process of its own: its LocalCluster would otherwise take this process's eager context
    from the in-process cluster the other tests share."""
    from ralp_tf.bench.accuracy import SETTINGS

    out = tmp_path / "accuracy.json"
    proc = subprocess.run([sys.executable, "-m", "ralp_tf.cli.accuracy", "--steps", "5", "--batch-size", "8",
                           "--out", str(out)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["setting"] for r in rows] == list(SETTINGS)
    assert all(math.isfinite(r["final_loss"]) and 0.0 <= r["accuracy"] <= 1.0 for r in rows)
    assert rows[0]["loss_vs_none"] == 0.0 and rows[0]["accuracy_points_vs_none"] == 0.0


def test_every_strategy_has_a_plot_colour_and_label() -> None:
    from ralp_tf.bench.config import STRATEGIES
    from ralp_tf.bench.plots import STRATEGY_COLORS, STRATEGY_LABELS

    assert set(STRATEGIES) <= set(STRATEGY_COLORS) and set(STRATEGIES) <= set(STRATEGY_LABELS)


def test_quiet_progress_still_shows_warnings(capsys) -> None:
    from ralp_tf.bench.progress import Progress

    p = Progress(quiet=True)
    p.say("cell 1/1 | ralp rep 1/3")
    p.warn("warning: bytes look wrong")
    err = capsys.readouterr().err
    assert "rep 1/3" not in err and "warning: bytes look wrong" in err


def test_a_repetition_whose_process_crashed_runs_again_once(tmp_path, monkeypatch):
    """A coordinator killed by SIGSEGV measured nothing: the bench runs that repetition again once
    and keeps the crash in the record; a second crash is the result."""
    from ralp_tf.bench.run import Bench
    from ralp_tf.bench.records import RunRecord

    class FakeTestbed:
        bandwidth_bps = 1e9
        bytes_kind = "wire"

        def start(self): ...

        def close(self): ...

        def describe(self):
            return {"kind": "fake"}

    def crashed(strategy):
        return RunRecord.from_dict({"strategy": strategy, "model": "small_cnn", "workers": 2, "valid": False,
                                    "invalid_reason": "coordinator exited -11", "log_tail": "Fatal Python error",
                                    "crash_signal": 11})

    def good(strategy):
        return RunRecord.from_dict({"strategy": strategy, "model": "small_cnn", "workers": 2, "valid": True,
                                    "samples_per_s": 100.0, "measured_step_s": 0.64, "bytes_per_step": 1e6})

    outcomes = {"ps": [crashed("ps"), good("ps")], "ralp": [crashed("ralp"), crashed("ralp")]}
    calls = []

    def fake_run_one(self, strategy, *args, **kw):
        calls.append(strategy)
        return outcomes[strategy].pop(0)

    cfg = _config(["--quick", "--strategies", "ps,ralp", "--out-dir", str(tmp_path), "--name", "crash"])
    b = Bench(cfg, bench.Progress(quiet=True))
    monkeypatch.setattr(Bench, "_run_one", fake_run_one)
    monkeypatch.setattr(Bench, "_make_testbed", lambda self, cell: FakeTestbed())
    monkeypatch.setattr(Bench, "_profile", lambda self, model: (_ for _ in ()).throw(bench.BenchError("no profile")))
    b.run_cell(cfg.cells[0], 0)
    assert calls == ["ps", "ps", "ralp", "ralp"]
    (cell,) = b.document()["cells"]
    ps_run, = cell["strategies"]["ps"]["runs"]
    assert ps_run["valid"] and ps_run["crashed_attempt"]["crash_signal"] == 11
    assert "exited -11" in ps_run["crashed_attempt"]["invalid_reason"]
    ralp_run, = cell["strategies"]["ralp"]["runs"]
    assert not ralp_run["valid"] and ralp_run["crash_signal"] == 11


def test_an_auto_repetition_that_crashed_runs_its_choice_again(tmp_path, monkeypatch):
    """auto's repetition runs the strategy its probe chose; after a crash it runs that one again
    (not a strategy named "auto"), and the record is still auto's."""
    from ralp_tf.bench import auto
    from ralp_tf.bench.run import Bench
    from ralp_tf.bench.records import RunRecord

    outcomes = [RunRecord.from_dict({"strategy": "ralp", "model": "small_cnn", "workers": 2, "valid": False,
                                     "invalid_reason": "coordinator exited -11", "crash_signal": 11}),
                RunRecord.from_dict({"strategy": "ralp", "model": "small_cnn", "workers": 2, "valid": True,
                                     "samples_per_s": 100.0, "measured_step_s": 0.64, "bytes_per_step": 1e6})]
    calls = []

    def fake_run_one(self, strategy, *args, **kw):
        calls.append(strategy)
        return outcomes.pop(0)

    cfg = _config(["--quick", "--strategies", "ps,ralp,auto", "--out-dir", str(tmp_path), "--name", "autocrash"])
    b = Bench(cfg, bench.Progress(quiet=True))
    b._pred, b._plans = {"ralp": {"step_s": 0.5}, "ps": {"step_s": 0.6}}, {}
    monkeypatch.setattr(Bench, "_run_one", fake_run_one)
    monkeypatch.setattr(auto, "choose", lambda *a, **kw: ("ralp", {"chosen": "ralp", "order": ["ralp", "ps"],
                                                                "probe_samples_per_s": {"ralp": 110.0, "ps": 90.0}}))
    rec = b._repetition("auto", 0, None, cfg.cells[0], (3, 1), {"order": ["ralp", "ps"], "step_s": 0.5}, None,
                        "cell", lambda x: x)
    assert calls == ["ralp", "ralp"]
    assert rec.valid and rec.strategy == "auto" and rec.launcher["crashed_attempt"]["crash_signal"] == 11
    assert rec.launcher["auto"]["chosen"] == "ralp"


def test_floor_sources_name_their_fix(tmp_path):
    """``--floor``: builtin, none, measure or a `ralp-tf floor --out` file; anything else is one
    BenchConfigError naming the choices. A file written before the plain closure was a term gets it
    from its plain cases."""
    from ralp_tf.bench.config import BenchConfigError, check_floor_source, floor_terms
    from ralp_tf.plan.closures import MEASURED_FLOOR

    assert floor_terms("builtin") == MEASURED_FLOOR and floor_terms("none") is None
    assert check_floor_source("measure") == "measure"
    old = floor_terms(str(Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "floor.json"))
    assert old.plain_closure_s == pytest.approx(7.7e-3, rel=0.01) and old.closure_s == pytest.approx(3.46e-3, rel=0.01)
    with pytest.raises(BenchConfigError, match="cannot read it .* give builtin, measure, none, or a file written by"):
        check_floor_source(str(tmp_path / "missing.json"))
    (tmp_path / "plan.json").write_text('{"placements": {}}')
    with pytest.raises(BenchConfigError, match="is not a floor JSON with the fitted 'terms'"):
        check_floor_source(str(tmp_path / "plan.json"))


def test_the_coordinator_is_told_the_testbeds_cpu_budgets_or_the_shared_cores() -> None:
    """Its cost model prices the overlap only where a core is free (docs/costmodel.md, "Overlap")."""
    from ralp_tf.run.launch import machine_cores
    from ralp_tf.testbed.ps_job import _cores_options

    assert _cores_options(None) == ["--shared-cores", str(machine_cores())]
    assert _cores_options({"host0": 0.3, "host1": 0.3}) == ["--host-cores", "0.3"]
    assert _cores_options({"host0": 0.3, "host1": 0.5}) == []
