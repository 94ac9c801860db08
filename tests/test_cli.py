"""The ralp-tf command: outputs users script against, and one-line errors for bad arguments."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralp_tf.cli import main

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))


def test_plan_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "plan.json"
    assert main(["plan", "--model", "alexnet_cifar", "--workers", "2", "--ps", "1", "--bandwidth", "1gbit",
                 "--json", "--out", str(out_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["split"] is True
    assert set(out["plan"]["placements"]) >= {"fc1", "fc2", "logits"}
    assert out["profile"]["layers"][1]["name"] == "conv1"
    from ralp_tf.plan import Plan

    assert Plan.load(str(out_file)).ps_layers()["fc1"] == 0


def test_plan_text_for_resnet_says_no_split(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "resnet_cifar"]) == 0
    assert "Decision: no split" in capsys.readouterr().out


def test_plan_accepts_module_function_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "ralp_tf.models:small_cnn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "small_cnn"


@pytest.mark.parametrize("argv, message", [
    (["plan", "--model", "nosuchmodel"], "unknown model 'nosuchmodel'"),
    (["plan", "--model", "nosuch.module:fn"], "cannot import module"),
    (["plan", "--model", "ralp_tf.models:nope"], "has no function"),
    (["plan", "--model", "bad ref:"], "malformed"),
])
def test_bad_model_references(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["plan", "--model", "alexnet_cifar", "--bandwidth", "fast"], "cannot parse bandwidth"),
    (["plan", "--model", "alexnet_cifar", "--workers", "0"], "must be >= 1"),
    (["plan", "--model", "alexnet_cifar", "--batch-size", "0"], "must be >= 1"),
    (["run", "--steps", "x"], "not an integer"),
])
def test_bad_arguments_exit_2_with_one_line(argv: list[str], message: str) -> None:
    proc = subprocess.run([RALP_TF, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_with_missing_plan_file_is_a_clear_error() -> None:
    proc = subprocess.run([RALP_TF, "run", "--model", "small_cnn", "--policy", "/nonexistent/plan.json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "cannot read plan file" in proc.stderr and "Traceback" not in proc.stderr
