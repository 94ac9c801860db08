"""``ralp-tf``'s exit code for an argument list, run in this process (no loopback re-exec)."""
from __future__ import annotations

import pytest


def exit_code(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """:func:`ralp_tf.cli.main.main` on ``argv`` with ``RALP_TF_NO_REEXEC`` set; argparse's usage
    errors (SystemExit) give their code."""
    from ralp_tf.cli.main import main

    monkeypatch.setenv("RALP_TF_NO_REEXEC", "1")
    try:
        return int(main(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
