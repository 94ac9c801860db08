"""``python -m scheduler.policy_eval``: the documented command, kept at its old path. The module is
:mod:`scheduler.evaluation.policy_eval`; this one re-exports its public names and runs its ``main``."""
from __future__ import annotations

from scheduler.evaluation.policy_eval import *  # noqa: F401,F403 (the re-export)
from scheduler.evaluation.policy_eval import __all__ as _names
from scheduler.evaluation.policy_eval import main

__all__ = list(_names)

if __name__ == "__main__":
    raise SystemExit(main())
