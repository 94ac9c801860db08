"""The testbed's errors: :class:`TestbedError` (cannot build, use or tear down), its bad-input
kind :class:`TestbedConfigError`, and :class:`TestbedInterrupted` (SIGTERM/SIGHUP while open).

Below :mod:`ralp_tf.testbed.layout` and :mod:`ralp_tf.testbed.base`, which re-exports them.
"""
from __future__ import annotations

from ralp_tf.errors import ClusterConfigError, RalpError

__all__ = ["TestbedError", "TestbedConfigError", "TestbedInterrupted"]


class TestbedError(RalpError, RuntimeError):
    """The emulated cluster cannot be built, used or torn down; the message says why and what to do."""

    __test__ = False  # not a pytest test class


class TestbedConfigError(TestbedError, ClusterConfigError):
    """Bad testbed input: task names, bandwidth, subnet, prefix, delay, size of the cluster."""


class TestbedInterrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived while a testbed was open (raised like Ctrl-C, so teardown runs)."""
