"""``python -m scheduler.pss_table``: the documented command, kept at its old path. The module is
:mod:`scheduler.evaluation.pss_table`; this one re-exports its public names and runs its ``main``."""
from __future__ import annotations

from scheduler.evaluation.pss_table import *  # noqa: F401,F403 (the re-export)
from scheduler.evaluation.pss_table import __all__ as _names
from scheduler.evaluation.pss_table import main

__all__ = list(_names)

if __name__ == "__main__":
    raise SystemExit(main())
