"""Watchdog that cleans up after a testbed whose owner died without tearing it down (SIGKILL, OOM).

Run by path (``python _reaper.py``), in its own session, with stdin a pipe from the owner and the
owner's prefix lock inherited as fd 3. The owner writes lines:

* ``ns NAME``       a namespace it created,
* ``pgid N``        a process group it started,
* ``cg PATH``       a CPU group (cgroup v1) it created,
* ``done``          teardown finished; the reaper exits without doing anything.

When stdin reaches EOF without ``done`` (the owner died), the reaper kills the process groups and
the processes inside the namespaces and CPU groups, deletes the namespaces and groups and exits.
It holds the prefix lock until then, so a new testbed with the same prefix waits for it instead of racing it.
"""
from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for the owner must not kill the watchdog
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _cgroups  # noqa: E402  (stdlib-only sibling modules)
    import _nsops  # noqa: E402

    namespaces: list[str] = []
    pgids: list[int] = []
    groups: list[str] = []
    done = False
    for raw in sys.stdin:
        words = raw.split()
        if not words:
            continue
        if words[0] == "done":
            done = True
            break
        if words[0] == "ns" and len(words) == 2:
            namespaces.append(words[1])
        elif words[0] == "pgid" and len(words) == 2 and words[1].isdigit():
            pgids.append(int(words[1]))
        elif words[0] == "cg" and len(words) == 2:
            groups.append(words[1])
    if done:
        return 0
    for pgid in pgids:
        _nsops.killpg_quiet(pgid, signal.SIGKILL)
        _nsops.kill_pids(_nsops.session_pids(pgid), signal.SIGKILL, wait_s=2)
    for name in namespaces:
        try:
            _nsops.delete_netns(name)
        except Exception as exc:  # keep going: delete as much as possible
            print(f"ralp_tf testbed reaper: {exc}", file=sys.stderr)
    for path in groups:
        try:
            _cgroups.remove_group(path)
        except Exception as exc:
            print(f"ralp_tf testbed reaper: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
