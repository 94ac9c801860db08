"""``ralp-tf calibrate --testbed``: calibrate the testbed's namespace hosts as a user's cluster.

:func:`calibrate_on_testbed` builds a testbed (network namespaces, ``tc tbf`` caps, optional CPU
budgets per host; root) of ``workers`` workers and ``ps`` PS tasks on the hosts of ``layout``, starts
their task processes (:class:`ralp_tf.run.launch.LocalCluster` with the testbed as launcher, as the
bench's PSS runs do), and runs the measuring child (``python -m ralp_tf.run.calibrate``) as task
``chief`` inside the chief's namespace, the only place the hosts' addresses are reachable from. The
child reads the tasks' CPU from their PIDs (one machine). Its progress lines are passed to
``on_progress``; the calibration it writes is returned. Ctrl-C, SIGTERM or a failure tear everything
down (the testbed's guarantees); nothing is told the caps: the child measures them.
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Callable

from ralp_tf.plan.calibration import Calibration, load_calibration
from ralp_tf.plan.rates import format_bandwidth, parse_bandwidth
from ralp_tf.testbed import jobs
from ralp_tf.testbed.errors import TestbedError
from ralp_tf.testbed.layout import layout_hosts, tasks_of

__all__ = ["calibrate_on_testbed"]


def calibrate_on_testbed(workers: int, ps: int, out_path: str, *, bandwidth: Any = "1gbit", layout: str = "dedicated",
                         host_cpu: float | None = None, models: tuple[str, ...] = ("alexnet_cifar",),
                         batch_size: int = 32, budget: dict[str, Any] | None = None, prefix: str = "ralpcal",
                         on_progress: Callable[[str, int, int, str], None] | None = None,
                         log_dir: str | None = None, timeout: float = 3600.0) -> Calibration:
    """Calibrate a fresh testbed cluster (module docstring) into ``out_path`` and return it."""
    from ralp_tf.run.calibrate import PROGRESS_LINE
    from ralp_tf.run.launch import LocalCluster, machine_cores
    from ralp_tf.testbed import Testbed

    hosts = layout_hosts(workers, ps, layout)
    with Testbed(tasks_of(hosts), bandwidth, hosts=hosts, host_cpu=host_cpu, prefix=prefix) as tb:
        with LocalCluster(workers=workers, ps=ps, launcher=tb, log_dir=log_dir, env=jobs.base_env()) as lc:
            pids = {f"{t.job}:{t.index}": t.pid for t in lc.tasks}
            cores = {tb.host(t): host_cpu for members in hosts.values() for t in members if t != "chief"} \
                if host_cpu else {}
            where = (f"testbed {prefix} ({layout}, links capped at {format_bandwidth(parse_bandwidth(bandwidth))}"
                     + (f", {host_cpu:g} core per host)" if host_cpu else ")"))
            cmd = [sys.executable, "-m", "ralp_tf.run.calibrate", "--spec", json.dumps(lc.cluster_spec_dict),
                   "--out", out_path, "--pids", json.dumps(pids), "--models", ",".join(models),
                   "--batch-size", str(batch_size), "--budget", json.dumps(budget or {}),
                   "--host-cores", json.dumps(cores), "--source", where,
                   "--testbed", json.dumps({"layout": layout, "prefix": prefix, "host_cpu": host_cpu,
                                            "bandwidth_bps": _finite(parse_bandwidth(bandwidth))})]
            if not host_cpu:
                cmd += ["--shared-cores", str(machine_cores())]
            child = tb.popen("chief", cmd, env=jobs.base_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
            tail: list[str] = []
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith(PROGRESS_LINE + " "):
                    item = json.loads(line[len(PROGRESS_LINE) + 1:])
                    if on_progress:
                        on_progress(item["stage"], item["done"], item["total"], item["detail"])
                else:
                    tail = (tail + [line.rstrip()])[-30:]
            code = child.wait(timeout=timeout)
            if code != 0:
                raise TestbedError(f"the calibration on testbed {prefix} failed (exit {code}); its output ends:\n"
                                   + "\n".join(tail))
    return load_calibration(out_path)


def _finite(bps: float) -> float | None:
    return bps if bps != float("inf") else None
