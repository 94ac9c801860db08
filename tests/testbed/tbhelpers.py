"""Helpers shared by the testbed tests (skip marks, namespace listing)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ralp_tf.testbed import _nsops, netns_support

PY = sys.executable

_ok, _why = netns_support()
if _ok:
    probe = subprocess.run(["ip", "netns", "add", "tbtprobe"], capture_output=True, text=True)
    if probe.returncode != 0:
        _ok, _why = False, f"'ip netns add' is not allowed here: {probe.stderr.strip()}"
    else:
        subprocess.run(["ip", "netns", "delete", "tbtprobe"], capture_output=True)

NETNS_OK: bool = _ok  # this process may build namespace testbeds (root, iproute2, `ip netns add` allowed)
needs_netns = pytest.mark.skipif(not _ok, reason=f"namespace testbed unavailable: {_why}")


def tbt_namespaces() -> list[str]:
    return [n for n in _nsops.list_netns() if n.startswith("tbt")]


def pid_alive(pid: int) -> bool:
    return _nsops._alive(pid)
