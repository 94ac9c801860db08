"""A byte kill that landed after the shards were written is not the trial asked for: it runs once
more (``ralp_tf.faults.kill_checks.run_trial``), and the record says so."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralp_tf.faults import kill_checks


def _fake(lefts: list[str], calls: list[int]) -> Any:
    def once(trial: dict[str, Any], workdir: Path, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        return {**trial, "left_by_kill": lefts[len(calls) - 1]}
    return once


@pytest.mark.parametrize("kind, lefts, attempts", [
    ("bytes", [kill_checks.MID_SHARD], 1),
    ("bytes", ["write complete", kill_checks.MID_SHARD], 2),
    ("bytes", ["write complete", "write complete"], 2),  # at most one retry: the second is recorded
    ("tail", ["write complete"], 1),  # a tail kill may land after the write: never retried
    ("ps", ["write complete"], 1),
])
def test_a_missed_byte_kill_runs_once_more(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str,
                                           lefts: list[str], attempts: int) -> None:
    calls: list[int] = []
    monkeypatch.setattr(kill_checks, "_trial_once", _fake(lefts, calls))
    rec = kill_checks.run_trial({"kind": kind, "value": 0.5, "index": 0}, tmp_path, model="m", steps=1, every=1,
                                target=1)
    assert len(calls) == attempts and rec["attempts"] == attempts
    assert rec["missed"] == lefts[:attempts - 1] and rec["left_by_kill"] == lefts[attempts - 1]
