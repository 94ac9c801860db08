"""Emulated multi-host clusters for benchmarks (the core ralp_tf modules never import this package).

* :class:`Testbed` (root): one network namespace per task, joined by veth pairs to a bridge in a
  switch namespace, links capped both ways with ``tc tbf``, exact wire-byte counts.
* :class:`LoopbackTestbed`: the same API on 127.0.0.1 with no caps, for machines where namespaces
  are not allowed.
* :func:`make_testbed`: the namespace testbed where possible, else the loopback one.
* :func:`cleanup_stale`: remove what a crashed run left behind.
* :func:`layout_hosts`: the host map of a layout (``dedicated``: a host per task; ``colocated``:
  host *i* runs worker *i* and PS *i*, the chief on host 0), for ``hosts=``; ``host_cpu=`` gives
  every host a CPU budget (cgroup v1 quota, root).

Both testbeds fit ``ralp_tf.run.launch.LocalCluster``'s launcher protocol: ``host(task) -> str`` and
``popen(task, argv, env, stdout, stderr) -> subprocess.Popen``.

Example::

    from ralp_tf.testbed import Testbed, bytes_delta
    with Testbed(["worker0", "ps0"], bandwidth="1gbit") as tb:
        server = tb.popen("ps0", [sys.executable, "server.py", "--port", "2222"])
        before = tb.link_bytes()
        tb.run("worker0", [sys.executable, "client.py", tb.address("ps0", 2222)], check=True)
        print(bytes_delta(tb.link_bytes(), before))
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterator, Sequence

from ralp_tf.testbed.base import (BaseTestbed, TestbedConfigError, TestbedError, TestbedInterrupted,
                                  bytes_delta, max_tasks_for_memory, tf_thread_env, usable_cores)
from ralp_tf.testbed.layout import COLOCATED, DEDICATED, LAYOUTS, MAX_TASKS_PER_HOST, layout_hosts, tasks_of
from ralp_tf.testbed.loopback import LoopbackTestbed
from ralp_tf.testbed.netns import Testbed, cleanup_stale, netns_support

__all__ = ["BaseTestbed", "Testbed", "LoopbackTestbed", "TestbedError", "TestbedConfigError",
           "TestbedInterrupted", "bytes_delta", "cleanup_stale", "make_testbed", "netns_support",
           "max_tasks_for_memory", "layout_hosts", "tasks_of", "LAYOUTS", "DEDICATED", "COLOCATED",
           "MAX_TASKS_PER_HOST", "cpu_budget_support", "cpu_group", "run_ps", "tf_thread_env", "usable_cores"]

_log = logging.getLogger(__name__)


def run_ps(*args: Any, **kwargs: Any) -> Any:
    """One ParameterServerStrategy job on a testbed, measured: :func:`ralp_tf.testbed.ps_job.run_ps`."""
    from ralp_tf.testbed.ps_job import run_ps as run

    return run(*args, **kwargs)


@contextlib.contextmanager
def cpu_group(name: str, cores: float) -> Iterator[Callable[[list[str]], list[str]]]:
    """A CPU group (cgroup v1 quota) of ``cores`` cores for the life of the block (root); yields
    ``argv -> argv``, which runs a command inside it. The group is removed on exit, once its
    processes are gone. Raises TestbedConfigError naming what is missing where groups cannot be made."""
    from ralp_tf.testbed import _cgroups

    ok, why = _cgroups.cpu_controller_support()
    if not ok:
        raise TestbedConfigError(f"cannot cap CPU at {cores:g} cores: {why}")
    path = _cgroups.create_group(name, cores)
    try:
        yield lambda argv: _cgroups.join_argv(path, argv)
    finally:
        _cgroups.remove_group(path)


def cpu_budget_support() -> tuple[bool, str]:
    """(True, "") when testbeds here can give hosts CPU budgets (``host_cpu=``: root and the cgroup
    v1 CPU controller), else (False, what is missing)."""
    from ralp_tf.testbed._cgroups import cpu_controller_support

    return cpu_controller_support()


def make_testbed(task_names: Sequence[str], bandwidth: str | float | int | None = None, *,
                 loopback_fallback: bool = True, **kwargs: Any) -> BaseTestbed:
    """A :class:`Testbed` when this process may create namespaces, otherwise (with
    ``loopback_fallback``) a :class:`LoopbackTestbed` that runs uncapped and logs a warning naming
    the reason. Without ``loopback_fallback`` the reason is raised as :class:`TestbedError`.
    Check ``.emulated`` on the result to know which one you got."""
    ok, why = netns_support()
    if ok:
        return Testbed(task_names, bandwidth, **kwargs)
    if not loopback_fallback:
        raise TestbedError(why)
    _log.warning("%s; falling back to LoopbackTestbed: links are uncapped and byte counts are TCP payload",
                 why)
    kwargs = {k: v for k, v in kwargs.items()
              if k in ("prefix", "mem_per_task_gib", "term_grace_s", "hosts", "host_cpu", "max_tasks_per_host")}
    return LoopbackTestbed(task_names, bandwidth, ignore_bandwidth=True, **kwargs)
