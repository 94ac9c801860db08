"""Progress lines: drawn on a terminal, absent when piped or under --json."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ralp_tf.cli.progress import MIN_STEPS, StepProgress


def test_progress_line_with_eta(capsys: pytest.CaptureFixture[str]) -> None:
    p = StepProgress("run", 40, enabled=True, min_interval_s=0)
    for i in range(10):
        p.update("ralp", i)
    p.close()
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("[run ") and "| ETA " in last and "ralp step 10/40" in last and err.endswith("\n")


def test_quiet_when_piped_or_short(capsys: pytest.CaptureFixture[str]) -> None:
    for p in (StepProgress("run", 1000), StepProgress("run", MIN_STEPS - 1, enabled=None)):
        p.update("ralp", 0)
        p.close()
    assert capsys.readouterr().err == ""  # pytest's stderr is not a terminal


def test_terminal_seen_through_the_noise_filter() -> None:
    """Under ralp-tf's stderr filter, a terminal is still a terminal (and a pipe still a pipe)."""
    script = ("import os, sys; from ralp_tf.cli.quiet import filter_stderr, stderr_is_tty; filter_stderr(); "
              "print(stderr_is_tty(), sys.stderr.isatty())")
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert piped.stdout.split() == ["False", "False"]
    master, slave = os.openpty()
    try:
        tty = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=slave, text=True,
                             timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert tty.stdout.split() == ["True", "False"]
