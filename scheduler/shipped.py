"""``python -m scheduler.shipped``: the documented command, kept at its old path. The shipped
weights' format and loading are :mod:`scheduler.policy.shipped`, their training recipes and this
command :mod:`scheduler.evaluation.recipes`; this module re-exports both modules' public names and
runs the command."""
from __future__ import annotations

from scheduler.evaluation.recipes import *  # noqa: F401,F403 (the re-export)
from scheduler.evaluation.recipes import __all__ as _recipes
from scheduler.evaluation.recipes import main
from scheduler.policy.shipped import *  # noqa: F401,F403 (the re-export)
from scheduler.policy.shipped import __all__ as _shipped

__all__ = [*_shipped, *_recipes]

if __name__ == "__main__":
    raise SystemExit(main())
