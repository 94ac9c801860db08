"""SIGINT or SIGTERM to the main `ralp-tf run` process alone (what `timeout`, systemd and
Kubernetes send) ends it within 5 s at any phase, and leaves no task process behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polling import local_tasks_of, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
EXIT_WITHIN_S = 5.0


@pytest.mark.parametrize("sig, phase, ignored", [
    (signal.SIGINT, "start-up", False),
    (signal.SIGTERM, "phase: first step scheduled", False),
    # started by a script in the background (`cmd &`): SIGINT arrives inherited as ignored
    pytest.param(signal.SIGINT, "phase: measuring", True, marks=pytest.mark.extended),  # "running ralp" goes through it
    (signal.SIGINT, "running ralp", True),  # the middle of the steps of --compare's second run
])
def test_signal_to_the_main_process_stops_run_promptly(sig: signal.Signals, phase: str, ignored: bool) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "ralp_tf.cli", "-v", "run", "--model", "small_cnn", "--workers", "2", "--ps", "1",
           "--steps", "100000", "--warmup-steps", "2"]
    if phase == "running ralp":  # stock PSS first, then the ralp run, whose 400 steps outlast the 2 s wait
        cmd[cmd.index("100000")] = "400"  # one step per closure: with the auto K they ran in under 2 s
        cmd += ["--compare", "--steps-per-closure", "1"]

    def inherit() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.SIG_DFL)

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=inherit)  # this process alone is signalled
    seen: list[str] = []
    try:
        if phase == "start-up":
            wait_until(lambda: local_tasks_of(proc.pid), 60, what="the first task process")
        else:
            wanted = "phase: measuring" if phase == "running ralp" else phase
            armed = phase != "running ralp"
            for line in proc.stderr:
                seen.append(line)
                armed = armed or "running ralp" in line
                if armed and wanted in line:
                    break
            assert any(wanted in l for l in seen) and armed, "".join(seen[-20:])
            if wanted == "phase: measuring":
                time.sleep(2)
        tasks = local_tasks_of(proc.pid)
        assert tasks, "the run had started its local cluster"
        t0 = time.monotonic()
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert took < EXIT_WITHIN_S, f"exited {took:.1f} s after {sig.name}"
    assert proc.returncode in (128 + sig, -sig), proc.returncode
    wait_until(lambda: not any(Path(f"/proc/{t}").exists() and
                               Path(f"/proc/{t}/stat").read_text().split()[2] != "Z" for t in tasks),
               5, what="every task process to be gone")
