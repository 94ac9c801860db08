"""The emulated hosts of a supervised run on the namespace testbed, and their CPU budgets.

A supervised run on the testbed uses the dedicated layout: a host per task, named like it,
``worker0 .. worker{N+J-1}`` (``J`` workers join mid-run; their hosts are built with the testbed,
as a machine an operator will add already exists), ``ps0 ..`` and ``chief`` (the coordinator).

With ``--host-cpu CORES`` every one of those hosts gets the same CPU budget (a cgroup v1 CPU
quota, :mod:`ralp_tf.testbed._cgroups`, and TF thread pools sized by
:func:`ralp_tf.testbed.base.tf_thread_env`), the joining hosts included: a worker that joins is a
new machine with CPUs of its own, not a third process on the old machines' cores. Rule:
``CORES x (N + J + P + 1) <= cores of this machine``, or emulated hosts would take CPU from each
other and the join would look slower than it is.
"""
from __future__ import annotations

import math

from ralp_tf.testbed.base import TestbedConfigError

__all__ = ["supervised_hosts", "host_budgets"]


def supervised_hosts(workers: int, ps: int, joins: int = 0) -> list[str]:
    """Hosts of a supervised run: ``worker0..worker{workers + joins - 1}``, ``ps0..``, ``chief``."""
    return [f"worker{i}" for i in range(workers + joins)] + [f"ps{i}" for i in range(ps)] + ["chief"]


def host_budgets(cores: float | None, workers: int, ps: int, joins: int = 0) -> dict[str, float] | None:
    """``{host: cores}`` for every host of :func:`supervised_hosts` (None when ``cores`` is None).

    Raises :class:`~ralp_tf.testbed.base.TestbedConfigError` when ``cores`` is not a number of
    cores >= 0.01, or when ``cores x hosts`` (the joining workers' hosts counted) exceeds the cores
    this process may use (:func:`ralp_tf.testbed.base.usable_cores`); the message names the hosts,
    the joining ones, and the largest budget that fits."""
    from ralp_tf.testbed import base

    if cores is None:
        return None
    hosts = supervised_hosts(workers, ps, joins)
    here = base.usable_cores()
    if isinstance(cores, (int, float)) and not isinstance(cores, bool) and math.isfinite(cores) \
            and cores * len(hosts) > here + 1e-9:
        joining = hosts[workers:workers + joins]
        also = f", and {', '.join(joining)}, which join{'s' if joins == 1 else ''} mid-run" if joins else ""
        fits = math.floor(here / len(hosts) * 100) / 100
        raise TestbedConfigError(
            f"--host-cpu {cores:g} x {len(hosts)} hosts ({', '.join(h for h in hosts if h not in joining)}{also}) "
            f"= {cores * len(hosts):g} cores, more than the {here} cores here: every emulated host, a joining "
            f"worker's included, needs a budget of its own. Use --host-cpu {fits:g} or fewer workers")
    return base.validate_host_cpu(cores, hosts)
