"""``python -m scheduler.exact_reach``: the documented command, kept at its old path. The module is
:mod:`scheduler.evaluation.exact_reach`; this one re-exports its public names and runs its ``main``."""
from __future__ import annotations

from scheduler.evaluation.exact_reach import *  # noqa: F401,F403 (the re-export)
from scheduler.evaluation.exact_reach import __all__ as _names
from scheduler.evaluation.exact_reach import main

__all__ = list(_names)

if __name__ == "__main__":
    raise SystemExit(main())
