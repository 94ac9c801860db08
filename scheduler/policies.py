"""Registers every scheduler solver as a ralp_tf placement policy named ``scheduler.<solver>``
(``scheduler.exact``, ``scheduler.greedy``, ...), so that ralp_tf finds them by name without
importing this package: setup.py declares :func:`register` in the entry point group
``ralp_tf.place.policies``, and :func:`ralp_tf.place.policies.resolve_policy` calls it lazily.

``resolve_policy("scheduler.exact", **options)`` returns ``scheduler.SOLVERS["exact"](**options)``.
"""
from __future__ import annotations

from ralp_tf.place import register_policy

__all__ = ["PREFIX", "register"]

#: Prefix of the policy names of this package's solvers.
PREFIX = "scheduler."


def register() -> None:
    """Register ``scheduler.<name>`` for every entry of :data:`scheduler.SOLVERS`."""
    from scheduler import SOLVERS

    for name, solver_class in SOLVERS.items():
        register_policy(PREFIX + name, solver_class)
