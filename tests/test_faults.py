"""Failures during placed training on real task processes (2 workers, 1 PS, RALP plan)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # each test trains on real task processes

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))
BASE = [RALP_TF, "run", "--model", "small_cnn", "--policy", "ralp", "--workers", "2", "--ps", "1",
        "--batch-size", "16", "--warmup-steps", "0", "--json"]


def _run(extra: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(BASE + extra, capture_output=True, text=True, timeout=400)


def test_worker_killed_midway_training_completes_on_the_survivor() -> None:
    proc = _run(["--steps", "30", "--inject-fault", "worker:1:8"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)["ralp"]
    assert out["total_steps"] == 30
    losses = out["losses"]
    assert len(losses) == 30 and np.mean(losses[-5:]) < np.mean(losses[:5])


def test_ps_killed_stops_clearly_and_rerun_resumes_from_the_checkpoint(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    args = ["--steps", "30", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "5"]
    first = _run(args + ["--inject-fault", "ps:0:17"])
    assert first.returncode == 3
    err = first.stderr
    assert "Last checkpoint: step 15" in err and "Rerun the same command to resume" in err
    assert "ps:0" in err and "Traceback" not in err

    import tensorflow as tf

    saved = tf.train.load_checkpoint(str(ckpt))
    saved_step = int(saved.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))
    assert saved_step == 15
    saved_sum = sum(float(np.asarray(saved.get_tensor(name), dtype=np.float64).sum())
                    for name in saved.get_variable_to_shape_map()
                    if name.startswith("model/") and name.endswith("VARIABLE_VALUE")
                    and "optimizer" not in name)

    second = _run(args)
    assert second.returncode == 0, second.stderr[-3000:]
    out = json.loads(second.stdout)["ralp"]
    assert out["resumed_from_step"] == 15          # lost at most the 2 steps since that checkpoint
    assert out["total_steps"] == 30 and len(out["losses"]) == 15
    assert abs(out["restored_weights_checksum"] - saved_sum) < 1e-6 * max(1.0, abs(saved_sum))
    assert int(tf.train.load_checkpoint(str(ckpt)).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 30
