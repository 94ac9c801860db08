"""Every example script runs to completion with tiny settings and leaves no task process behind.

Each example runs as a subprocess (``python examples/NAME.py --steps=2 ...``), as a user would run
it; the test checks exit status 0, a line that shows the example did its job, and that no
LocalCluster task process started by it (``ralp_tf.run._task ... --parent-pid PID``) is still alive.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polling import local_tasks_of, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[1]
TINY = ["--steps=2", "--batch_size=8"]


def _run_example(name: str, args: list[str], timeout: float) -> str:
    """Run ``examples/<name>.py``; assert exit 0 and no task process left; return stdout."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen([sys.executable, str(REPO / "examples" / f"{name}.py"), *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    wait_until(lambda: not local_tasks_of(proc.pid), 10, what=f"{name}'s task processes to be gone")
    return out


@pytest.mark.parametrize("name, args, expect", [
    ("keras_fit", TINY, "epoch 1: loss"),
    ("custom_loop", TINY, "step 2: loss"),
    # make test runs the two ways to train (fit, a custom loop); the others only in make test-full
    pytest.param("subclassed", TINY + ["--hidden=64"], "trained 2 steps: loss", marks=pytest.mark.extended),
    pytest.param("recommender", TINY + ["--examples=256", "--features=user:5000,item:2000,hour:24"],
                 "trained 2 steps from the TFRecord files", marks=pytest.mark.extended),
    pytest.param("rl_placement", TINY + ["--rl_train_seconds=2", "--rl_iterations=10", "--rl_max_solve_seconds=8"],
                 "trained 2 steps on the RL plan", marks=pytest.mark.extended),
    pytest.param("cnn_ps", ["--model=small_cnn", "--steps=2", "--batch_size=8"], "final loss",
                 marks=pytest.mark.extended),
])
def test_example_runs(name: str, args: list[str], expect: str) -> None:
    out = _run_example(name, args, timeout=60)
    assert expect in out, out[-3000:]
    if name not in ("cnn_ps", "recommender"):  # the recommender prints its embeddings' placement instead
        assert "computes on /job:" in out, out[-3000:]  # the plan and the devices were printed
    if name == "recommender":  # it explains where its embeddings go and how its input is split
        assert "RALP analysis of recommender" in out
        assert "user_embedding" in out and "InputContext(num_input_pipelines=" in out


@pytest.mark.extended  # twin: test_bench.py::test_quick_json_cell_with_every_strategy (the same bench cell)
def test_vs_horovod_runs_a_bench_cell_and_says_why_horovod_is_missing() -> None:
    out = _run_example("vs_horovod", ["--model=small_cnn", "--strategies=ralp,horovod", "--repeats=1",
                                      "--steps=2", "--warmup=1", "--batch_size=8"], timeout=120)
    assert "testbed: " in out
    assert any(line.startswith("ralp ") and " ok " in line for line in out.splitlines()), out
    from ralp_tf.testbed.horovod_job import horovod_available

    if not horovod_available()[0]:
        assert "horovod skipped: " in out
    assert "vs_horovod: done" in out
