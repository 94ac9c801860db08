"""``python -m scheduler.shipped``: the documented command, kept at its old path. The module is
:mod:`scheduler.policy.shipped`; this one re-exports its public names and runs its ``main``."""
from __future__ import annotations

from scheduler.policy.shipped import *  # noqa: F401,F403 (the re-export)
from scheduler.policy.shipped import __all__ as _names
from scheduler.policy.shipped import main

__all__ = list(_names)

if __name__ == "__main__":
    raise SystemExit(main())
