"""A finished job rerun (issue 42, item 4): ``ralp-tf run --checkpoint-dir D --steps N`` when D's
checkpoint is at the run's last step, or past it, says "already at step N of N; nothing to do" and
exits 0 without starting a cluster (:mod:`ralp_tf.cli.finished`)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli_exit import exit_code

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))


def _checkpoint(folder: Path, step: int) -> None:
    """A checkpoint at ``step`` as the training loop names it (``tf.train.CheckpointManager``'s layout)."""
    import tensorflow as tf

    ckpt = tf.train.Checkpoint(step=tf.Variable(step, dtype=tf.int64))
    tf.train.CheckpointManager(ckpt, str(folder), max_to_keep=1).save(checkpoint_number=step)


class _Started(Exception):
    """Raised where the command would start (or reach) a cluster."""


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make starting a local cluster or reaching ``--cluster``'s raise :class:`_Started`; the list
    collects what was started."""
    import ralp_tf.run.remote
    import ralp_tf.run.training

    started: list[str] = []

    def start(what: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            started.append(what)
            raise _Started(what)
        return fail

    monkeypatch.setattr(ralp_tf.run.training, "compare", start("local"))
    monkeypatch.setattr(ralp_tf.run.remote, "train_on_cluster", start("cluster"))
    return started


RUN = ["run", "--model", "small_cnn", "--workers", "2", "--ps", "1"]


def test_a_rerun_at_the_last_step_says_so_without_a_cluster(tmp_path: Path, no_cluster: list[str],
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _checkpoint(tmp_path, 7)  # 2 warm-up steps (one per worker) + 5
    argv = RUN + ["--steps", "5", "--warmup-steps", "1", "--checkpoint-dir", str(tmp_path)]
    assert exit_code(argv, monkeypatch) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ralp: already at step 7 of 7; nothing to do (2 warm-up + 5 steps, checkpoint in {tmp_path};")
    assert "nan" not in out.lower() and len(out.strip().splitlines()) == 1
    assert exit_code(argv + ["--json"], monkeypatch) == 0
    entry = json.loads(capsys.readouterr().out)["ralp"]
    assert entry["nothing_to_do"] is True and entry["final_loss"] is None and entry["losses"] == []
    assert entry["total_steps"] == entry["resumed_from_step"] == 7 and entry["bytes_per_step"] is None
    assert entry["message"].startswith("already at step 7 of 7; nothing to do")
    assert no_cluster == []


def test_past_the_last_step_and_compare(tmp_path: Path, no_cluster: list[str], monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Past the end is nothing to do too; with --compare every policy's folder must be done, else
    the run starts (and the done policy's result will say nothing_to_do)."""
    _checkpoint(tmp_path / "ps", 12)
    _checkpoint(tmp_path / "ralp", 3)
    argv = RUN + ["--compare", "--warmup-steps", "0", "--checkpoint-dir", str(tmp_path), "--json"]
    assert exit_code(argv + ["--steps", "3"], monkeypatch) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"baseline", "ralp"} and all(e["nothing_to_do"] for e in out.values())
    assert out["baseline"]["message"].startswith("already at step 12, past the last step 3; nothing to do")
    assert out["baseline"]["checkpoint_dir"] == str(tmp_path / "ps")
    with pytest.raises(_Started):  # ralp's checkpoint is at 3 of 4: a local cluster trains
        exit_code(argv + ["--steps", "4"], monkeypatch)
    assert no_cluster == ["local"]


def test_a_cluster_run_at_the_last_step_does_not_connect(tmp_path: Path, no_cluster: list[str],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``run --cluster``: the last step counts the cluster file's workers (3 here), not --workers."""
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"worker": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], "ps": ["127.0.0.1:4"]}))
    _checkpoint(tmp_path / "ckpt", 13)  # 3 warm-up steps (one per worker) + 10
    argv = RUN + ["--cluster", str(spec), "--steps", "10", "--checkpoint-dir", str(tmp_path / "ckpt")]
    assert exit_code(argv, monkeypatch) == 0
    assert capsys.readouterr().out.startswith("ralp: already at step 13 of 13; nothing to do (3 warm-up + 10 steps")
    with pytest.raises(_Started):
        exit_code(argv[:-3] + ["11"] + argv[-2:], monkeypatch)
    assert no_cluster == ["cluster"]


@pytest.mark.slow
@pytest.mark.integration
def test_a_real_run_then_its_rerun(tmp_path: Path) -> None:
    """A short real run (small_cnn, 1 worker, 1 PS, 3 steps), then the same command: exit 0,
    nothing to do, no task started (its log folder stays empty), no NaN."""
    ckpt, logs = tmp_path / "ckpt", tmp_path / "logs"
    argv = [RALP_TF, "run", "--model", "small_cnn", "--workers", "1", "--ps", "1", "--batch-size", "8",
            "--steps", "3", "--warmup-steps", "0", "--checkpoint-dir", str(ckpt), "--json"]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=400)
    assert first.returncode == 0, first.stderr[-3000:]
    ran = json.loads(first.stdout)["ralp"]
    assert ran["nothing_to_do"] is False and ran["total_steps"] == 3 and len(ran["losses"]) == 3
    t0 = time.perf_counter()
    again = subprocess.run(argv + ["--log-dir", str(logs)], capture_output=True, text=True, timeout=400)
    took = time.perf_counter() - t0
    assert again.returncode == 0, again.stderr[-3000:]
    assert "NaN" not in again.stdout and "Traceback" not in again.stderr
    done = json.loads(again.stdout)["ralp"]
    assert done["nothing_to_do"] is True and done["total_steps"] == 3 and done["final_loss"] is None
    assert not logs.exists() or not any(logs.iterdir()), "a rerun with nothing to do started tasks"
    text = subprocess.run(argv[:-1], capture_output=True, text=True, timeout=400)
    assert text.returncode == 0 and text.stdout.startswith("ralp: already at step 3 of 3; nothing to do"), text.stdout
    print(f"rerun with nothing to do: {took:.1f} s")
