"""SIGKILL of `ralp-tf run` inside a checkpoint write, and of its PS task while it computes the head:
each rerun resumes from the newest whole checkpoint with its variables, finishes with a finite loss,
and nothing is left behind (issue 42, item 1; the 30-instant table: benchmarks/checkpoint_kills.py,
docs/faults.md). Two instants on ctr_head (a 42 MB checkpoint, its head on ps0 at 1 Gbit/s)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # four runs on real task processes


@pytest.mark.parametrize("kind, value", [("bytes", 0.5), ("ps", 0.3)])
def test_a_kill_leaves_the_last_whole_checkpoint_and_the_rerun_resumes_from_it(tmp_path: Path, kind: str,
                                                                                value: float) -> None:
    from ralp_tf.faults.kill_checks import run_trial

    rec = run_trial({"kind": kind, "value": value, "index": 0}, tmp_path, model="ctr_head", steps=12, every=5,
                    target=10 if kind == "bytes" else 5)
    assert rec["whole_after_kill"][:2] == [3, 5], rec  # checkpoints at steps 3, 5, 10, 15
    if kind == "bytes":  # the write of step 10 was cut while its shard was half written
        assert 0 < rec["shard_bytes_at_kill"] < rec["full_shard_bytes"] and not rec["data_done_before_kill"], rec
        assert rec["left_by_kill"] == "temporary folder, shards being written", rec  # at most one retry
        assert any("the unfinished write of a run that was stopped during it" in w for w in rec["warnings"]), rec
    else:  # the run stopped by itself, naming the checkpoint to resume from
        assert rec["first_exit"] == 3 and f"Last checkpoint: step {rec['expected_resume']}" in rec["first_stop"], rec
        assert rec["ps_ticks_last_20ms"] >= 2, rec
    assert rec["rerun_exit"] == 0 and rec["resumed_from"] == rec["expected_resume"] > 0, rec
    assert rec["variables_equal"] is True and rec["variables_compared"] > 0, rec
    assert rec["loss_finite"] and rec["total_steps"] == 15, rec
    assert rec["left_behind"] == {"processes": [], "ports": [], "files": []}, rec
    assert rec["ok"], rec
