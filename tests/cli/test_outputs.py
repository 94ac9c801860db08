"""Output paths checked before any work starts (issue 42): by trying, so that root gets the same
answer as anyone (``os.access`` says yes to root on ``/proc``), changing nothing, one line, exit 2."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_exit import exit_code
from ralp_tf.errors import ValidationError, writable_dir, writable_file

#: A folder nobody can create files in, root included (procfs refuses new entries).
NO_FILES_HERE = "/proc"


def _listing(folder: Path) -> dict[str, tuple[int, float]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime) for p in folder.iterdir()}


@pytest.mark.parametrize("check, name, words", [
    (writable_file, "missing/out.json", "folder '{tmp}/missing' does not exist"),
    (writable_file, "afile/out.json", "'{tmp}/afile' is a file, not a folder"),
    (writable_file, "adir", "is a directory, where a file is expected"),
    (writable_dir, "afile", "is a file, where a folder is expected"),
    (writable_dir, "afile/sub/deeper", "is below '{tmp}/afile', a file, where a folder is expected"),
])
def test_wrong_kind_or_missing_folder_is_named(check: object, name: str, words: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "adir").mkdir()
    before = _listing(tmp_path)
    with pytest.raises(ValidationError) as info:
        check(tmp_path / name, "--out")  # type: ignore[operator]
    message = str(info.value)
    assert message.startswith(f"--out '{tmp_path / name}'") and words.format(tmp=tmp_path) in message
    assert "\n" not in message and _listing(tmp_path) == before


@pytest.mark.parametrize("check, path, doing", [
    (writable_file, f"{NO_FILES_HERE}/nope.png", f"creating it in '{NO_FILES_HERE}' fails with No such file"),
    (writable_dir, f"{NO_FILES_HERE}/nope/ckpt", f"making '{NO_FILES_HERE}/nope' fails with No such file"),
    (writable_dir, NO_FILES_HERE, f"creating a file in '{NO_FILES_HERE}' fails with"),
])
def test_a_folder_that_takes_no_files_is_refused_for_root_too(check: object, path: str, doing: str) -> None:
    with pytest.raises(ValidationError, match="cannot be written: " + doing):
        check(path, "--png")  # type: ignore[operator]


def test_writable_paths_pass_and_nothing_is_left_or_changed(tmp_path: Path) -> None:
    existing = tmp_path / "plan.json"
    existing.write_text("old")
    os.utime(existing, (1_000_000, 1_000_000))
    before = _listing(tmp_path)
    assert writable_file(existing, "--out") == str(existing)
    assert writable_file(tmp_path / "new.png", "--png") == str(tmp_path / "new.png")
    assert writable_dir(tmp_path / "ckpt" / "a" / "b", "--checkpoint-dir")  # mkdir -p: created by the command
    assert writable_dir(tmp_path, "--out-dir") == str(tmp_path)
    assert writable_file(tmp_path / "new" / "soak.json", "--out", parents=True)
    assert writable_file("/dev/null", "--out") == "/dev/null"
    assert _listing(tmp_path) == before and existing.read_text() == "old"


@pytest.mark.parametrize("path", ["", "bad\0name"])
def test_unusable_names(path: str) -> None:
    with pytest.raises(ValidationError, match="is not a usable path"):
        writable_file(path, "--out")


def test_explain_png_in_a_folder_that_takes_no_files(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``ralp-tf explain --png /proc/nope.png`` ended in matplotlib's FileNotFoundError traceback."""
    import ralp_tf.cli.explain as explain

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was profiled before --png was checked")

    monkeypatch.setattr(explain, "explain_data", no_work)
    assert exit_code(["explain", "--model", "small_cnn", "--png", f"{NO_FILES_HERE}/nope.png"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ralp-tf: error: --png '{NO_FILES_HERE}/nope.png' cannot be "
                                                   f"written: creating it in '{NO_FILES_HERE}'")


# ------------------------------------------------------------------------------------------
# every command's output options, checked by run_command before the command starts

BAD_FILE = f"{NO_FILES_HERE}/nope.json"
BAD_DIR = f"{NO_FILES_HERE}/nope"
#: Every output option of every ``ralp-tf`` command, with the arguments the command requires.
OUTPUT_OPTIONS = [
    (["plan", "--model", "small_cnn"], "--out", BAD_FILE),
    (["run", "--model", "small_cnn"], "--log-dir", BAD_DIR),
    (["run", "--model", "small_cnn"], "--tensorboard-dir", BAD_DIR),
    (["run", "--model", "small_cnn"], "--checkpoint-dir", BAD_DIR),
    (["run", "--model", "small_cnn", "--restart-failed"], "--checkpoint-dir", BAD_DIR),
    (["explain", "--model", "small_cnn"], "--png", f"{NO_FILES_HERE}/nope.png"),
    (["manifest", "--image", "img"], "--out", BAD_FILE),
    (["schedule", "--workload", "alexnet", "--solver", "greedy"], "--plan-out", BAD_FILE),
    (["compare-schedulers", "--quick"], "--out-dir", BAD_DIR),
    (["execute-schedule", "--workload", "ctr_head", "--catalog", "emu_a", "--throughput", "1"], "--out-dir", BAD_DIR),
    (["execute-schedule", "--workload", "ctr_head", "--catalog", "emu_a", "--throughput", "1"], "--cache-dir",
     BAD_DIR),
    (["soak", "--steps", "2"], "--out", f"{BAD_DIR}/soak.json"),
    (["bench", "--quick"], "--out-dir", BAD_DIR),
    (["floor"], "--out", BAD_FILE),
    (["floor"], "--log-dir", BAD_DIR),
    (["calibrate", "--quick"], "--out", BAD_FILE),
    (["calibrate", "--quick"], "--log-dir", BAD_DIR),
    (["chaos", "--minutes", "1"], "--log-dir", BAD_DIR),
    (["project"], "--out", BAD_FILE),
    (["zoo", "--models", "sample"], "--out", f"{NO_FILES_HERE}/zoo.md"),
    (["zoo", "--models", "sample"], "--results", BAD_FILE),
]


def _output_flags(parser: object) -> set[str]:
    """The options of an argparse parser that name an output path, by their names."""
    import re

    pattern = re.compile(r"^--(out|png|results)$|^--[a-z-]+-dir$|^--[a-z-]+-out$|^--out-[a-z-]+$")
    return {s for a in parser._actions for s in a.option_strings[:1] if pattern.match(s)}  # type: ignore[attr-defined]


def test_every_output_option_is_registered_and_in_the_table() -> None:
    from ralp_tf.cli.main import build_parser

    subparsers = next(a for a in build_parser()._actions if a.choices and "plan" in a.choices)  # type: ignore[operator]
    tested = {(argv[0], flag) for argv, flag, _ in OUTPUT_OPTIONS}
    for name, sub in subparsers.choices.items():
        registered = {flag for flag, *_ in sub.get_default("output_options") or ()}
        assert _output_flags(sub) <= registered, f"ralp-tf {name}: output options not checked up front"
        assert {(name, f) for f in registered} <= tested, f"ralp-tf {name}: output options missing from the table"


@pytest.mark.parametrize("argv, flag, path", OUTPUT_OPTIONS, ids=[f"{a[0]} {f}" for a, f, _ in OUTPUT_OPTIONS])
def test_unwritable_output_is_refused_before_the_command_starts(argv: list[str], flag: str, path: str,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from ralp_tf.cli import args as cli_args

    started = []
    real_check = cli_args.check_outputs

    def check_then_note(args: object) -> None:
        real_check(args)  # type: ignore[arg-type]
        started.append(argv[0])

    monkeypatch.setattr(cli_args, "check_outputs", check_then_note)
    assert exit_code([*argv, flag, path], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ralp-tf: error: {flag} '{path}'") and "cannot be" in err
    assert not started


def test_default_outputs_are_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``zoo``'s default --out (benchmarks/zoo.md) from a folder with no benchmarks/ in it."""
    monkeypatch.chdir(tmp_path)
    assert exit_code(["zoo", "--models", "sample"], monkeypatch) == 2
    assert "--out 'benchmarks/zoo.md': folder" in capsys.readouterr().err


def test_a_writable_output_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "m.json"
    out.write_text("old")
    assert exit_code(["manifest", "--image", "img", "--out", str(out)], monkeypatch) == 0
    assert out.read_text().startswith("{") and sorted(os.listdir(tmp_path)) == ["m.json"]


def test_python_m_accuracy_checks_its_out(capsys: pytest.CaptureFixture[str]) -> None:
    from ralp_tf.cli.accuracy import main

    assert main(["--out", BAD_FILE, "--steps", "1"]) == 2
    assert capsys.readouterr().err.startswith(f"python -m ralp_tf.cli.accuracy: error: --out '{BAD_FILE}'")
