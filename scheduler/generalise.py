"""``python -m scheduler.generalise``: the documented command, kept at its old path. The module is
:mod:`scheduler.evaluation.generalise`; this one re-exports its public names and runs its ``main``."""
from __future__ import annotations

from scheduler.evaluation.generalise import *  # noqa: F401,F403 (the re-export)
from scheduler.evaluation.generalise import __all__ as _names
from scheduler.evaluation.generalise import main

__all__ = list(_names)

if __name__ == "__main__":
    raise SystemExit(main())
