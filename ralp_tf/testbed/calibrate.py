"""``ralp-tf calibrate --testbed``: calibrate the testbed's namespace hosts as a user's cluster.

:func:`calibrate_on_testbed` builds a testbed (network namespaces, ``tc tbf`` caps, optional CPU
budgets per host; root) of ``workers`` workers and ``ps`` PS tasks on the hosts of ``layout``, starts
their task processes (:class:`ralp_tf.run.launch.LocalCluster` with the testbed as launcher, as the
bench's PSS runs do), and runs the measuring child (``python -m ralp_tf.run.calibrate``) as task
``chief`` inside the chief's namespace, the only place the hosts' addresses are reachable from. The
child reads the tasks' CPU from their PIDs (one machine). Its progress lines are passed to
``on_progress``. With CPU budgets (``host_cpu``) and workers on two or more hosts, the PS tasks are
then stopped and the ring's probes trained on the worker hosts (:mod:`ralp_tf.testbed.ring_probe`,
``budget["ring_probes"]``, 0: none); their fit is the file's ``ring``. The calibration is returned.
Ctrl-C, SIGTERM or a failure tear everything down (the testbed's guarantees); nothing is told the
caps: the child measures them.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from typing import Any, Callable

from ralp_tf.model.ring_probe import PROBES
from ralp_tf.plan.calibration import Calibration, load_calibration
from ralp_tf.plan.ring_cpu import RingProbeSample
from ralp_tf.plan.rates import format_bandwidth, parse_bandwidth
from ralp_tf.testbed import jobs
from ralp_tf.testbed.errors import TestbedError
from ralp_tf.testbed.layout import layout_hosts, tasks_of
from ralp_tf.testbed.ring_probe import measure_ring_cpu, ring_probe_hosts

__all__ = ["calibrate_on_testbed"]


def calibrate_on_testbed(workers: int, ps: int, out_path: str, *, bandwidth: Any = "1gbit", layout: str = "dedicated",
                         host_cpu: float | None = None, models: tuple[str, ...] = ("alexnet_cifar",),
                         batch_size: int = 32, budget: dict[str, Any] | None = None, prefix: str = "ralpcal",
                         on_progress: Callable[[str, int, int, str], None] | None = None,
                         log_dir: str | None = None, timeout: float = 3600.0) -> Calibration:
    """Calibrate a fresh testbed cluster (module docstring) into ``out_path`` and return it. The
    measuring child writes a file beside it, which becomes ``out_path`` only once the ring's probes
    are done too: an interrupted or failed run leaves no file that looks whole."""
    measuring = f"{out_path}.measuring"
    try:
        _calibrate(workers, ps, measuring, bandwidth=bandwidth, layout=layout, host_cpu=host_cpu, models=models,
                   batch_size=batch_size, budget=budget, prefix=prefix, on_progress=on_progress, log_dir=log_dir,
                   timeout=timeout)
        os.replace(measuring, out_path)
    finally:
        if os.path.exists(measuring):
            os.remove(measuring)
    return load_calibration(out_path)


def _calibrate(workers: int, ps: int, out_path: str, *, bandwidth: Any, layout: str, host_cpu: float | None,
               models: tuple[str, ...], batch_size: int, budget: dict[str, Any] | None, prefix: str,
               on_progress: Callable[[str, int, int, str], None] | None, log_dir: str | None, timeout: float) -> None:
    """:func:`calibrate_on_testbed`'s measurements, written to ``out_path``."""
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
        cal = load_calibration(out_path)
        scale = float((budget or {}).get("ring_probes", 1.0))
        workers_ = [t for t in tb.tasks if t.startswith("worker")]
        if host_cpu and scale > 0 and len(ring_probe_hosts(tb, workers_)) == len(workers_) >= 2:
            if cal.wall_s >= float((budget or {}).get("max_seconds", math.inf)):
                cal = dataclasses.replace(cal, budget={**cal.budget, "skipped": [*cal.budget.get("skipped", []), "ring"]})
            else:
                cal = _with_ring(cal, tb, workers_, scale, on_progress, log_dir)
            with open(out_path, "w") as f:
                json.dump(cal.to_dict(), f, indent=1)


def _with_ring(cal: Calibration, tb: Any, workers: list[str], scale: float,
               on_progress: Callable[[str, int, int, str], None] | None, log_dir: str | None) -> Calibration:
    """``cal`` with the ring's CPU measured on ``tb``'s worker hosts (the PS tasks stopped)."""
    done = [0]

    def probed(name: str, sample: RingProbeSample) -> None:
        done[0] += 1
        if on_progress:
            cpu = ", ".join(f"{h} {v * 1e3:.0f} ms" for h, v in sample.host_cpu_s.items())
            on_progress("ring", done[0], len(PROBES), f"{name}: {sample.step_s * 1e3:.0f} ms a step, CPU {cpu}")

    started = time.monotonic()
    fit, samples = measure_ring_cpu(tb, workers, scale=scale, on_probe=probed,
                                    log_path=os.path.join(log_dir, "ring-probes.log") if log_dir else None)
    return dataclasses.replace(cal, ring_cpu=fit, ring_probes=tuple(samples),
                               wall_s=cal.wall_s + time.monotonic() - started)


def _finite(bps: float) -> float | None:
    return bps if bps != float("inf") else None
