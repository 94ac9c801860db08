"""The ralp-tf command: outputs users script against, and one-line errors for bad arguments."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ralp_tf.cli.main import main
from ralp_tf.plan.plans import Plan

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))


def test_plan_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "plan.json"
    assert main(["plan", "--model", "alexnet_cifar", "--workers", "2", "--ps", "1", "--bandwidth", "1gbit",
                 "--json", "--out", str(out_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["split"] is True
    assert set(out["plan"]["placements"]) >= {"fc1", "fc2", "logits"}
    assert out["profile"]["layers"][1]["name"] == "conv1"
    assert Plan.load(str(out_file)).ps_layers()["fc1"] == 0


def test_plan_text_for_resnet_says_no_split(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "resnet_cifar"]) == 0
    assert "Decision: no split" in capsys.readouterr().out


def test_plan_accepts_module_function_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "ralp_tf.model.builtin:small_cnn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "small_cnn"


@pytest.mark.parametrize("argv, message", [
    (["plan", "--model", "nosuchmodel"], "unknown model 'nosuchmodel'"),
    (["plan", "--model", "nosuch.module:fn"], "cannot import module"),
    (["plan", "--model", "ralp_tf.model.builtin:nope"], "has no function"),
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


def test_plan_with_a_scheduler_policy_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "plan.json"
    assert main(["plan", "--model", "small_cnn", "--policy", "greedy", "--policy-option", "seed=1", "--json",
                 "--out", str(out_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "greedy" and out["model"] == "small_cnn"
    assert {"plan", "estimate", "baseline", "profile"} <= set(out)
    assert Plan.load(str(out_file)).to_dict() == out["plan"]


@pytest.mark.parametrize("argv, words", [
    (["plan", "--model", "small_cnn", "--policy", "rl", "--policy-option", "method=dp"],
     ["'scheduler.rl' does not take the option 'method'", "an option of scheduler.exact", "train_seconds"]),
    (["plan", "--model", "small_cnn", "--policy", "nope"], ["unknown placement policy 'nope'", "scheduler.rl (also: rl)"]),
    (["run", "--model", "small_cnn", "--policy", "stock", "--policy-option", "seed=1"],
     ["'ps' does not take the option 'seed'"]),
    (["run", "--model", "small_cnn", "--policy", "plan.json", "--policy-option", "seed=1"], ["takes no options"]),
])
def test_bad_policy_input_is_one_error_line_exit_2(argv: list[str], words: list[str],
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALP_TF_NO_REEXEC", "1")  # `run` would re-exec this process with the loopback shim
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ralp-tf: error: ") and len(err.strip().splitlines()) == 1
    for w in words:
        assert w in err


def test_policy_option_syntax_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "--model", "small_cnn", "--policy-option", "no-equals-sign"])
    assert info.value.code == 2 and "is not KEY=VALUE" in capsys.readouterr().err


def test_every_registered_command_module_adds_its_subcommands() -> None:
    from ralp_tf.cli import main as cli

    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == ["plan", "run", "explain", "server", "agent", "manifest", "schedule",
                                 "compare-schedulers", "execute-schedule", "soak", "bench", "floor", "calibrate", "chaos", "project",
                                 "provision", "zoo"]
    for module in cli.COMMAND_MODULES:
        assert callable(module.register)
    args = cli.build_parser().parse_args(["run", "--model", "mypkg:build", "--policy", "rl"])
    assert args.policy == "rl" and args.needs_loopback_shim(args)
    remote = cli.build_parser().parse_args(["run", "--cluster", "cluster.json"])
    assert not remote.needs_loopback_shim(remote)  # the coordinator of a real cluster must be reachable


def test_the_exit_code_table() -> None:
    from ralp_tf.cli.args import ExitCode, exit_code_for, run_command
    from ralp_tf.errors import ClusterRuntimeError, CommandFailed, PlanError

    assert exit_code_for(PlanError("x")) == ExitCode.BAD_INPUT == 2
    assert exit_code_for(ClusterRuntimeError("x")) == exit_code_for(CommandFailed("x")) == ExitCode.NOT_DONE == 3
    assert exit_code_for(KeyboardInterrupt()) == ExitCode.INTERRUPTED == 130
    assert exit_code_for(ZeroDivisionError()) == ExitCode.FAILURE == 1

    def fail(args: object) -> int:
        raise ClusterRuntimeError("a task died")

    assert run_command(fail, None) == 3
    with pytest.raises(ZeroDivisionError):  # a bug is not turned into a one-line error
        run_command(lambda args: 1 / 0, None)


@pytest.mark.parametrize("extra, message", [
    (["--restart-failed"], "--check-gradients is not supported by the supervised runs"),
    (["--cluster", "TF_CONFIG"], "--check-gradients compares with the unplaced model on this machine"),
])
def test_check_gradients_where_it_cannot_run_is_one_error_exit_2(extra: list[str], message: str,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from cli_exit import exit_code

    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}}))
    assert exit_code(["run", "--model", "small_cnn", "--check-gradients", *extra], monkeypatch) == 2
    assert message in capsys.readouterr().err
