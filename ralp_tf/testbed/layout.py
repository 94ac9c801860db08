"""Host layouts: which emulated host (namespace, address, capped link, CPU budget) runs which task.

A *host map* is ``{host name: [task names]}``; every task is on exactly one host, and all tasks of
a host share its namespace, its address, its one capped link and its CPU budget. Two layouts:

* ``dedicated`` (the default, the testbed's behaviour before hosts existed): every task on a host
  of its own, named like the task, so per-host keys equal per-task keys;
* ``colocated``: host *i* (``host0``, ``host1``, ...) runs ``worker<i>`` and ``ps<i>``, the layout
  of real PS deployments (BytePS, TF's CNN benchmarks). The chief runs on ``host0``: every
  strategy then uses the same number of machines (a ring has no chief; a chief host of its own
  would be an extra machine only the PS strategies get), and the coordinator's traffic
  (closures and small results) is negligible next to the variables'. Its CPU use counts against
  host 0's budget, as it would on a real cluster.

  With ``workers_per_host`` W > 1 (two closures in flight per host on stock TensorFlow, whose
  coordinator runs one closure at a time per worker), host *i* of H = ceil(workers / W) runs
  workers ``i, i + H, ..., i + (W-1) H`` beside ``ps<i>``: strided, so the first H workers are
  one per host, and a job on them alone (a ring, or PSS at one worker per host) runs on the
  one-worker layout of the same hosts.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from ralp_tf.testbed.errors import TestbedConfigError

__all__ = ["TASK_NAME", "validate_tasks", "DEDICATED", "COLOCATED", "LAYOUTS", "CHIEF", "MAX_TASKS_PER_HOST",
           "layout_hosts", "tasks_of", "validate_hosts"]

DEDICATED = "dedicated"
COLOCATED = "colocated"
LAYOUTS = (DEDICATED, COLOCATED)
CHIEF = "chief"
#: Most tasks one emulated host may run. Its tasks share one address (distinct ports), one link and
#: one CPU budget; worker + PS + chief is 3. Pass ``max_tasks_per_host=`` to a testbed to allow more.
MAX_TASKS_PER_HOST = 4
TASK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,23}$")


def validate_tasks(task_names: Sequence[str]) -> list[str]:
    """Check task names: non-empty list of unique lowercase identifiers like ``worker0``, ``ps0``."""
    if isinstance(task_names, str) or not isinstance(task_names, Sequence):
        raise TestbedConfigError(f"task_names must be a list of names like ['worker0', 'worker1', 'ps0'], "
                                 f"got {task_names!r}")
    names = list(task_names)
    if not names:
        raise TestbedConfigError("a testbed needs at least one task name, e.g. ['worker0', 'ps0']")
    for n in names:
        if not isinstance(n, str) or not TASK_NAME.match(n):
            raise TestbedConfigError(f"bad task name {n!r}: use 1-24 characters, a lowercase letter then "
                                     "lowercase letters, digits or '_' (e.g. 'chief', 'worker0', 'ps0')")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TestbedConfigError(f"duplicate task names {dup}; each task needs its own name")
    return names


def layout_hosts(workers: int, ps: int, layout: str = DEDICATED, *, chief: bool = True,
                 workers_per_host: int = 1) -> dict[str, list[str]]:
    """The host map of ``workers`` workers (``worker0..``), ``ps`` PS tasks (``ps0..``) and, with
    ``chief``, a ``chief`` task, in ``layout`` (see the module docstring). Colocated with
    ``workers != ps``: host *i* runs ``worker<i>`` if ``i < workers`` and ``ps<i>`` if ``i < ps``;
    with ``workers_per_host`` W, host *i* of H = ceil(workers / W) runs the workers ``j`` with
    ``j % H == i`` (colocated only).

    Example: ``layout_hosts(2, 2, "colocated")`` ->
    ``{"host0": ["chief", "worker0", "ps0"], "host1": ["worker1", "ps1"]}``;
    ``layout_hosts(4, 2, "colocated", workers_per_host=2)`` ->
    ``{"host0": ["chief", "worker0", "worker2", "ps0"], "host1": ["worker1", "worker3", "ps1"]}``.
    """
    if layout not in LAYOUTS:
        raise TestbedConfigError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    for value, what, low in ((workers, "workers", 0), (ps, "ps", 0), (workers_per_host, "workers_per_host", 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise TestbedConfigError(f"{what} must be a {'positive' if low else 'non-negative'} integer, got {value!r}")
    if workers + ps == 0:
        raise TestbedConfigError("a layout needs at least one worker or PS task")
    if layout == DEDICATED:
        if workers_per_host != 1:
            raise TestbedConfigError(f"workers_per_host={workers_per_host} needs the colocated layout; the dedicated "
                                     "layout puts every task on a host of its own")
        tasks = ([CHIEF] if chief else []) + [f"worker{i}" for i in range(workers)] + [f"ps{i}" for i in range(ps)]
        return {t: [t] for t in tasks}
    worker_hosts = -(-workers // workers_per_host)
    hosts: dict[str, list[str]] = {}
    for i in range(max(worker_hosts, ps)):
        hosts[f"host{i}"] = ([CHIEF] if chief and i == 0 else []) + \
            [f"worker{j}" for j in range(i, workers, worker_hosts) if i < worker_hosts] + ([f"ps{i}"] if i < ps else [])
    return hosts


def tasks_of(hosts: Mapping[str, Sequence[str]]) -> list[str]:
    """Every task of a host map, host by host, in order."""
    return [t for tasks in hosts.values() for t in tasks]


def validate_hosts(hosts: Mapping[str, Sequence[str]] | None, task_names: Sequence[str],
                   max_tasks_per_host: int = MAX_TASKS_PER_HOST) -> dict[str, list[str]]:
    """Check a host map against the testbed's tasks and return it as ``{host: [tasks]}``.

    ``None`` means the ``dedicated`` layout (a host per task, named like it). Host names follow the
    task-name rules; every task must be on exactly one host; no host may be empty or run more than
    ``max_tasks_per_host`` tasks. Raises :class:`TestbedConfigError` naming the problem and the fix.
    """
    tasks = validate_tasks(task_names)
    if hosts is None:
        return {t: [t] for t in tasks}
    if not isinstance(hosts, Mapping) or not hosts:
        raise TestbedConfigError(f"hosts must be a non-empty mapping host name -> task names, e.g. "
                                 f"{{'host0': ['worker0', 'ps0']}} (see layout_hosts), got {hosts!r}")
    out: dict[str, list[str]] = {}
    for name, members in hosts.items():
        if not isinstance(name, str) or not TASK_NAME.match(name):
            raise TestbedConfigError(f"bad host name {name!r}: use 1-24 characters, a lowercase letter then "
                                     "lowercase letters, digits or '_' (e.g. 'host0')")
        if isinstance(members, str) or not isinstance(members, Sequence) or not members:
            raise TestbedConfigError(f"host {name!r} needs a non-empty list of task names, got {members!r}")
        if len(members) > max_tasks_per_host:
            raise TestbedConfigError(
                f"host {name!r} runs {len(members)} tasks but a testbed host supports at most {max_tasks_per_host} "
                "(its tasks share one address, one link and one CPU budget); spread the tasks over more hosts "
                "(e.g. layout_hosts(..., 'colocated')), or pass max_tasks_per_host= if you mean it")
        out[name] = list(members)
    placed = tasks_of(out)
    twice = sorted({t for t in placed if placed.count(t) > 1})
    if twice:
        raise TestbedConfigError(f"task(s) {twice} are on more than one host; put each task on exactly one")
    missing, unknown = [t for t in tasks if t not in placed], [t for t in placed if t not in tasks]
    if missing or unknown:
        raise TestbedConfigError("the host map does not match the tasks: "
                                 + (f"no host for {missing}" if missing else "")
                                 + ("; " if missing and unknown else "")
                                 + (f"unknown task(s) {unknown}" if unknown else "")
                                 + f". Every task of {tasks} must be on exactly one host")
    clash = sorted(set(out) & set(tasks) - {h for h, m in out.items() if h in m})
    if clash:
        raise TestbedConfigError(f"host name(s) {clash} are also names of tasks on other hosts; rename the hosts "
                                 "(e.g. 'host0') so names in /etc/hosts are unambiguous")
    return out
