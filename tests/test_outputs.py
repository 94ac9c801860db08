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
