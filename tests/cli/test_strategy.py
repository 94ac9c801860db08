"""``ralp-tf run --strategy pss|mwms|auto`` (ralp_tf/cli/strategies.py, ralp_tf/run/auto.py): what each
refuses, and an ``auto`` job that resumes under the strategy it chose after a kill -9."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_exit import exit_code

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))
RUN = ["run", "--model", "small_cnn", "--steps", "4"]


@pytest.mark.parametrize("extra, says", [
    (["--strategy", "horovod"], "Horovod runs in ralp-tf bench"),
    (["--strategy", "nccl"], "unknown strategy 'nccl'"),
    (["--strategy", "mwms", "--compare"], "--strategy mwms cannot be used with --compare"),
    (["--strategy", "ring", "--policy", "greedy"], "--strategy mwms cannot be used with --policy greedy"),
    (["--strategy", "auto", "--inject-fault", "ps:0:3"], "--strategy auto cannot be used with --inject-fault"),
    (["--strategy", "auto", "--restart-failed"], "--strategy auto cannot be used with --restart-failed"),
    (["--strategy", "mwms", "--control-port-offset", "0"], "--control-port-offset"),
    (["--strategy", "auto", "--probe-steps", "-1"], "--probe-steps"),
])
def test_options_a_strategy_cannot_take_are_refused_in_one_line(extra: list[str], says: str,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(RUN + extra, monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and err[-1].startswith("ralp-tf")


@pytest.mark.slow
@pytest.mark.integration
def test_a_killed_auto_run_resumes_under_the_strategy_it_chose(tmp_path: Path) -> None:
    """kill -9 of the whole ``ralp-tf run --strategy auto`` once it has decided and checkpointed;
    the rerun reads the decision (no probe) and resumes from the newest checkpoint."""
    from ralp_tf.run.checkpoints import latest_complete_step

    folder = tmp_path / "ckpt"
    argv = [RALP_TF, "run", "--model", "small_cnn", "--workers", "2", "--ps", "1", "--strategy", "auto",
            "--probe-steps", "2", "--steps", "400", "--checkpoint-every", "2", "--checkpoint-dir", str(folder),
            "--log-dir", str(tmp_path / "logs"), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if (folder / "strategy.json").exists() and latest_complete_step(str(folder)) >= 6:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    chosen = json.loads((folder / "strategy.json").read_text())
    assert chosen["source"] == "probe"
    assert set(chosen["probe_samples_per_s"]) in ({"pss", "mwms"}, {"ps", "mwms"})  # the top two, measured
    step = latest_complete_step(str(folder))
    rerun = subprocess.run(argv[:argv.index("400")] + ["12"] + argv[argv.index("400") + 1:],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    out = json.loads(rerun.stdout)
    assert out["auto"]["source"] == "checkpoint" and out["auto"]["strategy"] == chosen["strategy"]
    (key,) = [k for k in out if k != "auto"]
    assert out[key]["strategy"] == chosen["strategy"]
    assert out[key]["resumed_from_step"] == step and out[key]["total_steps"] >= 14
