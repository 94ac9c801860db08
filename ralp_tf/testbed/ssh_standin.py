"""An ``ssh`` stand-in for ``horovodrun`` across testbed namespaces (standard library only).

Horovod starts remote ranks with ``ssh -o ... HOST [-p PORT] [-i FILE] [-o ...] COMMAND...``. A
``ssh`` wrapper script placed first on ``PATH`` runs::

    python ssh_standin.py MAPFILE <ssh arguments...>

which looks HOST up in MAPFILE (JSON ``{address or task name: namespace}``, or
``{...: {"netns": namespace, "cgroup_procs": path or null}}``), joins the target host's CPU group
when one is given (writes its own PID to ``cgroup.procs``, so the command inherits the host's CPU
budget, not the caller's) and replaces itself with ``ip netns exec NAMESPACE sh -c "COMMAND"``:
the command runs as root in the target host's namespace, with this process's environment (real ssh would start a login shell; Horovod passes
every variable it needs on the command line anyway). Unknown hosts exit 255 like ssh does.
"""
from __future__ import annotations

import json
import os
import sys

__all__ = ["parse", "main"]

# ssh options that take a value (OpenSSH's getopt string), and flags that take none.
_WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")


def parse(argv: list[str]) -> tuple[str, str]:
    """(host, command) from ssh arguments; options may appear before and after the host."""
    host = None
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest = argv[i + 1:]
            break
        if a.startswith("-") and len(a) > 1:
            letter = a[1]
            if letter in _WITH_VALUE and len(a) == 2:
                i += 2
            else:
                i += 1
            continue
        if host is None:
            host = a
            i += 1
            continue
        rest = argv[i:]
        break
    if host is None:
        raise ValueError("no host in ssh arguments")
    if "@" in host:
        host = host.split("@", 1)[1]
    return host, " ".join(rest)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: ssh_standin.py MAPFILE <ssh args>", file=sys.stderr)
        return 255
    with open(argv[0]) as f:
        mapping = json.load(f)
    try:
        host, command = parse(argv[1:])
    except ValueError as exc:
        print(f"ssh stand-in: {exc}", file=sys.stderr)
        return 255
    target = mapping.get(host)
    if target is None:
        print(f"ssh stand-in: unknown host {host!r}; testbed hosts are {sorted(mapping)}", file=sys.stderr)
        return 255
    ns = target["netns"] if isinstance(target, dict) else target
    procs = target.get("cgroup_procs") if isinstance(target, dict) else None
    if procs:
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as exc:
            print(f"ssh stand-in: cannot join CPU group {procs}: {exc}", file=sys.stderr)
            return 255
    os.execvp("ip", ["ip", "netns", "exec", ns, "sh", "-c", command or "true"])
    return 255  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
