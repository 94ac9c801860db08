"""Real task processes: loopback binding, readiness, measured traffic vs the cost model, no orphans."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ralp_tf.errors import ClusterConfigError
from ralp_tf.run.launch import LocalCluster
from polling import wait_until

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _listening(pids: list[int]) -> list[tuple[str, int]]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        if any(f"pid={p}," in line for p in pids):
            local = line.split()[3]
            host, port = local.rsplit(":", 1)
            found.append((host, int(port)))
    return found


@pytest.mark.slow
@pytest.mark.integration
def test_tasks_bind_loopback_only_and_die_on_exit(tmp_path: Path) -> None:
    with LocalCluster(workers=1, ps=1, log_dir=tmp_path) as lc:
        pids = lc.pids()
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        listening = _listening(pids)
        ports = {t.port for t in lc.tasks}
        assert len(ports) == 2 and ports <= {port for _, port in listening}
        for host, port in listening:
            assert host in ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]"), f"port {port} bound on {host}"
        addrs = [a for task_addrs in lc.cluster_spec_dict.values() for a in task_addrs]
        assert len(addrs) == 2 and all(a.startswith("127.0.0.1:") for a in addrs)
        assert (tmp_path / "ps-0.log").read_text().count("RALP_TF_TASK_READY") == 1
    wait_until(lambda: not any(_alive(p) for p in pids), 10, what="the task processes to exit")


@pytest.mark.slow
@pytest.mark.integration
def test_user_script_coordinator_listens_on_loopback_and_exits_without_grpc_errors() -> None:
    """The README's Python example run as a plain script (no `ralp-tf` re-exec under the shim)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="0")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "scripts" / "user_fit_on_local_cluster.py")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("LISTENING "), (line, proc.stderr.read() if proc.poll() is not None else "")
        listening = _listening([proc.pid])
        assert listening, "the coordinator runs a gRPC server: it must be listening somewhere"
        exposed = [(h, p) for h, p in listening if h not in ("127.0.0.1", "[::ffff:127.0.0.1]", "[::1]")]
        assert exposed == [], f"the coordinator listens beyond loopback: {exposed}"
        out, err = proc.communicate("\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "CLEAN EXIT" in out, err[-2000:]
    grpc_errors = [l for l in err.splitlines() if "Failed to remove function" in l or "grpc_status" in l
                   or "Connection refused" in l]
    assert grpc_errors == [], grpc_errors[:3]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ClusterConfigError, match="workers"):
        LocalCluster(workers=0)
    with pytest.raises(ClusterConfigError, match=r"200 tasks needs about 200 GiB.*check_memory=False"):
        LocalCluster(workers=199, ps=1)  # refused before anything is spawned
    assert LocalCluster(workers=199, ps=1, check_memory=False).tasks == []  # the explicit override


def test_memory_rule_counts_one_gib_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    import ralp_tf.run.launch as launch

    monkeypatch.setattr(launch, "available_memory_bytes", lambda: 10 * 2**30)  # 8 tasks + 2 GiB headroom
    launch.check_tasks_fit_in_memory(8)
    with pytest.raises(ClusterConfigError, match="at most 8 tasks fit"):
        launch.check_tasks_fit_in_memory(9)


def test_non_loopback_bind_needs_asking_and_warns() -> None:
    with pytest.warns(UserWarning, match="unauthenticated"):
        LocalCluster(workers=1, ps=1, bind_address="0.0.0.0")


@pytest.mark.slow
@pytest.mark.integration
def test_exception_midway_leaves_no_task_alive() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tests/scripts/crash_midway.py")], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode != 0
    assert "injected failure" in proc.stderr
    pids = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("{")))["pids"]
    assert pids
    wait_until(lambda: not any(_alive(p) for p in pids), 10, what=f"the task processes {pids} to exit")


@pytest.mark.slow
@pytest.mark.integration
def test_parent_killed_takes_its_tasks_with_it() -> None:
    code = ("import json, time\nfrom ralp_tf.run.launch import LocalCluster\n"
            "lc = LocalCluster(workers=1, ps=1).start()\nprint(json.dumps(lc.pids()), flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        pids = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        proc.kill()
        proc.wait(timeout=30)
        wait_until(lambda: not any(_alive(p) for p in pids), 10, interval_s=0.2,
                   what=f"the orphaned task processes {pids} to exit")
    finally:
        proc.kill()


@pytest.mark.slow
@pytest.mark.integration
def test_run_compare_measures_bytes_the_cost_model_predicts() -> None:
    """`ralp-tf run --compare --json` on real processes: RALP moves far fewer bytes, as predicted."""
    proc = subprocess.run([str(Path(sys.executable).with_name("ralp-tf")), "run", "--model", "small_cnn",
                           "--workers", "2", "--ps", "1", "--steps", "10", "--batch-size", "32", "--compare",
                           "--json"], capture_output=True, text=True, timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert set(out) == {"baseline", "ralp"}
    for key in ("bytes_per_step", "predicted_bytes_per_step", "steps_per_s", "final_loss"):
        assert key in out["baseline"] and key in out["ralp"]
    base, ralp = out["baseline"], out["ralp"]
    assert base["bytes_per_step"] == pytest.approx(base["predicted_bytes_per_step"], rel=0.10)
    assert ralp["bytes_per_step"] == pytest.approx(ralp["predicted_bytes_per_step"], rel=0.10)
    assert base["bytes_per_step"] / ralp["bytes_per_step"] > 20
    assert set(ralp["plan"]["placements"]) >= {"fc1", "fc2", "logits"}
