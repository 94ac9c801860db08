"""Helpers shared by the testbed tests (skip marks, namespace listing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ralp_tf.testbed import _cgroups, _nsops, cpu_budget_support, netns_support

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


_cg_ok, _cg_why = cpu_budget_support()
needs_cgroup = pytest.mark.skipif(not _cg_ok, reason=f"CPU budgets unavailable: {_cg_why}")


def tbt_cpu_groups() -> list[str]:
    """CPU groups (paths) of test testbeds (prefix ``tbt``)."""
    if not _cg_ok:
        return []
    return sorted(_cgroups.group_path(n) for n in os.listdir(_cgroups.CPU_ROOT)
                  if n.startswith("tbt") and os.path.isdir(_cgroups.group_path(n)))


def tbt_namespaces() -> list[str]:
    return [n for n in _nsops.list_netns() if n.startswith("tbt")]


def pid_alive(pid: int) -> bool:
    return _nsops._alive(pid)


#: A loopback TCP server: ``SERVER PORT N`` prints "ready", reads N bytes, prints "got N", then idles (its socket
#: stays open, so per-socket counters can be read).
SERVER = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept(); n = 0
    while n < int(sys.argv[2]):
        n += len(c.recv(65536))
    print("got", n, flush=True); time.sleep(600)
""")
#: Its client: ``CLIENT PORT N`` sends N bytes to 127.0.0.1:PORT, prints "sent", then idles.
CLIENT = textwrap.dedent("""
    import socket, sys, time
    c = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); c.sendall(b"x" * int(sys.argv[2]))
    print("sent", flush=True); time.sleep(600)
""")


def start_owner(script: str, prefix: str, env: dict) -> tuple[subprocess.Popen, dict]:
    """Run ``script`` (a testbed owner that prints one JSON line once its testbed is up) with ``prefix``
    as its argument; returns the process and that line, or fails the test with the owner's stderr."""
    proc = subprocess.Popen([PY, "-c", script, prefix], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail(f"owner did not start: {proc.stderr.read()[-2000:]}")
    return proc, json.loads(line)
