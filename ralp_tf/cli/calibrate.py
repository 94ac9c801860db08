"""``ralp-tf calibrate``: measure the cluster the cost model prices, and ``--calibration FILE`` for the
commands that price with it.

Where it measures (one of):

* ``--cluster FILE`` (or ``TF_CONFIG``): the running tasks of a cluster file (``ralp-tf server`` on
  each machine); with ``--agent-port`` the tasks' CPU comes from ``ralp-tf agent`` on every host
  (without it the serving CPU is not measured). Written by default beside the file,
  ``<file>.calibration.json``, where ``run --cluster FILE`` finds it.
* ``--workers N --ps M``: a local cluster of task processes on this machine (loopback).
* ``--testbed``: the namespace testbed's hosts (root): ``--bandwidth`` caps every link with ``tc``
  (the measurement is not told it), ``--layout`` and ``--host-cpu`` as ``ralp-tf bench`` takes them.

What it measures is :mod:`ralp_tf.run.calibrate`'s (links, serving CPU, floor, per-layer compute on
the tasks' devices); the file's format is :mod:`ralp_tf.plan.calibration`'s. The budget is work:
``--transfers`` per tensor size, ``--steps`` per timed loop, ``--closures`` per floor case;
``--quick`` makes it small (under a minute for a few tasks) and ``--max-seconds`` is a safety cap.
On ``--testbed`` with ``--host-cpu`` the ring's CPU is measured too (:mod:`ralp_tf.testbed.ring_probe`;
``--ring-probes SCALE`` scales its probes' steps, 0 skips them; ``--quick`` skips them).
A progress bar runs on a terminal; a summary table (``--json``: the file's document) at the end.

:func:`add_calibration_arg` and :func:`read_calibration` give the other commands (``plan``,
``explain``, ``run``, ``bench``, ``project``) their ``--calibration FILE``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from ralp_tf.cli.args import add_output_arg, bandwidth, positive_int
from ralp_tf.errors import ValidationError

__all__ = ["register", "cmd_calibrate", "add_calibration_arg", "read_calibration", "default_path", "tensorflow_version",
           "given_counts", "planning_inputs", "run_calibration", "cluster_bind_env", "summary"]

#: Where ``calibrate --cluster TF_CONFIG`` writes, and ``run --cluster TF_CONFIG`` looks (this folder).
TF_CONFIG_DEFAULT = "ralp-calibration.json"
#: Where ``calibrate --workers/--ps`` and ``--testbed`` write (``run`` reads it only when given).
LOCAL_DEFAULT = "ralp-calibration-local.json"
#: ``--calibration none``: price without one (``run --cluster`` finds one by default).
NONE = "none"


def default_path(cluster_source: str | None) -> str:
    """``<file>.calibration.json`` beside a cluster file (``cluster.json`` -> ``cluster.calibration.json``);
    :data:`TF_CONFIG_DEFAULT` in this folder for ``TF_CONFIG`` or JSON text; :data:`LOCAL_DEFAULT` for
    a local cluster or the testbed (None)."""
    if not cluster_source:
        return LOCAL_DEFAULT
    if cluster_source == "TF_CONFIG" or cluster_source.lstrip().startswith("{"):
        return TF_CONFIG_DEFAULT
    p = Path(cluster_source)
    return str(p.with_name(p.stem + ".calibration.json"))


def tensorflow_version() -> str:
    """The installed TensorFlow's version, read without importing it."""
    from ralp_tf.plan.calibration import installed_tensorflow

    return installed_tensorflow()


def add_calibration_arg(parser: argparse.ArgumentParser, *, default_note: str = "") -> None:
    """``--calibration FILE``: price with what ``ralp-tf calibrate`` measured (``none``: without)."""
    parser.add_argument("--calibration", metavar="FILE", default=None,
                        help="price with what `ralp-tf calibrate` measured on the cluster (link rates, per-layer "
                             "times on its devices, serving CPU, floor) instead of defaults; a file of other hosts, "
                             "another TensorFlow or another device kind is refused" + default_note)


def read_calibration(args: argparse.Namespace, default: str | None = None) -> Any:
    """The :class:`~ralp_tf.plan.calibration.Calibration` of ``--calibration`` (or of ``default`` when
    that file exists and none was given; ``none``: none), or None."""
    from ralp_tf.plan.calibration import load_calibration

    import dataclasses

    path = getattr(args, "calibration", None)
    if path == NONE:
        return None
    if path is not None:
        return load_calibration(path)
    if not default or not os.path.isfile(default):
        return None
    cal = load_calibration(default)
    return dataclasses.replace(cal, path=f"{cal.path} (read by default; --calibration none skips it)")


def given_counts(args: argparse.Namespace) -> dict[str, int | None]:
    """``--workers``/``--ps`` when they differ from their defaults (2 and 1), else None: a calibration's
    shape wins over the defaults and refuses other counts."""
    return {"workers": args.workers if args.workers != 2 else None, "ps": args.ps if args.ps != 1 else None}


def planning_inputs(args: argparse.Namespace, profile: Any) -> tuple[Any, Any]:
    """``(profile, cluster)`` a command that plans on a cluster shape (``plan``, ``explain``) prices
    with: with ``--calibration``, the calibrated profile and the calibrated cluster itself (other
    ``--workers``/``--ps`` refused; ``--bandwidth``/``--flops`` still win); else ``Cluster.local`` of
    the arguments."""
    from ralp_tf.cli.args import cluster_rates
    from ralp_tf.plan.calibration import priced
    from ralp_tf.plan.cluster import Cluster

    cal = read_calibration(args)
    if cal is None:
        return profile, Cluster.local(args.workers, args.ps, **cluster_rates(args))
    counts = given_counts(args)
    return priced(cal, profile, workers=counts["workers"], ps=counts["ps"], rates=cluster_rates(args),
                  tensorflow_version=tensorflow_version())


def run_calibration(args: argparse.Namespace, config: Any = None) -> Any:
    """``run``'s calibration (``--calibration``; with ``--cluster FILE``, FILE's by default), checked
    before a local cluster starts or a running one is reached: of this cluster's tasks and hosts
    (``config``'s, or a local cluster of ``--workers``/``--ps`` on this machine) and this TensorFlow.
    The device kinds are checked on the live cluster (:func:`ralp_tf.run.calibrated.calibrated_job`)."""
    import socket

    from ralp_tf.plan.cluster import Cluster

    if config is None:
        cal, cluster = read_calibration(args), Cluster.local(args.workers, args.ps)
    else:
        cal, cluster = read_calibration(args, default_path(args.cluster)), config.cost_cluster()
    if cal is not None:
        cal.check(cluster, tensorflow_version=tensorflow_version(), machine=socket.gethostname(),
                  device_kinds={t.key: t.device_kind for t in cal.tasks})
    return cal


def register(subparsers: Any) -> None:
    """Add ``calibrate`` to an argparse subparsers object."""
    p = subparsers.add_parser(
        "calibrate", help="measure a cluster's links, RPC floor, serving CPU and per-layer compute on its devices, "
                          "for plan/explain/run/bench/project --calibration",
        description="Measure the cluster the cost model prices (ralp_tf.run.calibrate) and write one calibration "
                    "file (ralp_tf.plan.calibration).")
    where = p.add_argument_group("where")
    where.add_argument("--cluster", metavar="TF_CONFIG|FILE", help="the running tasks of this cluster file")
    where.add_argument("--workers", type=positive_int, default=2, help="local cluster or testbed: workers (default 2)")
    where.add_argument("--ps", type=positive_int, default=1, help="local cluster or testbed: PS tasks (default 1)")
    where.add_argument("--testbed", action="store_true", help="on the namespace testbed's hosts (root)")
    where.add_argument("--bandwidth", type=bandwidth, default=None,
                       help="--testbed: the tc cap of every link, e.g. 100mbit (default 1gbit); never told to the "
                            "measurement")
    where.add_argument("--layout", choices=("dedicated", "colocated"), default="dedicated",
                       help="--testbed: hosts as ralp-tf bench --layout (default dedicated)")
    where.add_argument("--host-cpu", type=float, default=None, metavar="CORES",
                       help="--testbed: every host's CPU budget in cores (cgroup quota)")
    where.add_argument("--prefix", default="ralpcal", help="--testbed: namespace prefix (default ralpcal)")
    where.add_argument("--agent-port", type=positive_int, default=None,
                       help="--cluster: read the tasks' CPU from `ralp-tf agent` on every host at this port")
    where.add_argument("--connect-timeout", type=float, default=30.0, help="--cluster: seconds to wait for the tasks")
    what = p.add_argument_group("what and how much")
    what.add_argument("--models", default=None, help="comma-separated models whose layers are timed on the devices "
                                                     "(default alexnet_cifar; --quick: small_cnn)")
    what.add_argument("--batch-size", type=positive_int, default=32, help="batch per worker step (default 32)")
    what.add_argument("--quick", action="store_true", help="a small budget: under a minute for a few tasks")
    what.add_argument("--transfers", type=positive_int, default=None, help="timed transfers per tensor size (3)")
    what.add_argument("--steps", type=positive_int, default=None, help="timed iterations per compute loop (10)")
    what.add_argument("--closures", type=positive_int, default=None, help="closures per floor case (40)")
    what.add_argument("--max-seconds", type=float, default=None, help="safety cap on the measuring time (2400)")
    what.add_argument("--ring-probes", type=float, default=None, metavar="SCALE",
                      help="--testbed with --host-cpu: the ring CPU probes' steps times SCALE (1; --quick 0: none)")
    p.add_argument("--json", action="store_true", help="print the calibration document")
    add_output_arg(p, "--out", help="write here (default: beside --cluster's file as <name>.calibration.json; "
                                    f"{TF_CONFIG_DEFAULT} for TF_CONFIG; else {LOCAL_DEFAULT})")
    add_output_arg(p, "--log-dir", kind="dir", help="where task logs go (default: a temporary folder)")
    p.set_defaults(func=cmd_calibrate, needs_loopback_shim=lambda a: not a.cluster and not a.testbed,
                   reexec_env=cluster_bind_env)


def cluster_bind_env(args: argparse.Namespace) -> dict[str, str] | None:
    """``--cluster`` with a chief in the spec (``run``, ``calibrate``): the environment to restart with,
    this process's gRPC server bound to the chief's address (:func:`ralp_tf.run.server.coordinator_bind_env`);
    None without ``--cluster`` or when it cannot be read (the command then reports why)."""
    from ralp_tf.errors import RalpError
    from ralp_tf.run.server import coordinator_bind_env
    from ralp_tf.run.tfconfig import load_cluster_config

    if not args.cluster:
        return None
    try:
        return coordinator_bind_env(load_cluster_config(None if args.cluster == "TF_CONFIG" else args.cluster))
    except RalpError:
        return None


def _budget(args: argparse.Namespace) -> Any:
    import dataclasses

    from ralp_tf.run.calibrate import QUICK, STANDARD

    given = {k: v for k, v in (("transfers", args.transfers), ("steps", args.steps), ("closures", args.closures),
                               ("max_seconds", args.max_seconds), ("ring_probes", args.ring_probes)) if v is not None}
    if "max_seconds" in given and not (math.isfinite(given["max_seconds"]) and given["max_seconds"] > 0):
        raise ValidationError(f"--max-seconds must be a positive number of seconds, got {args.max_seconds}")
    return dataclasses.replace(QUICK if args.quick else STANDARD, **given)


def _check_args(args: argparse.Namespace) -> list[str]:
    """The models to time; bad combinations refused before anything starts."""
    from ralp_tf.model.builtin import resolve_model

    if args.cluster and args.testbed:
        raise ValidationError("--cluster measures a running cluster and --testbed starts one; give one of them")
    if args.cluster and given_counts(args) != {"workers": None, "ps": None}:
        raise ValidationError("--workers/--ps come from --cluster's file; drop them")
    if not args.testbed and (args.host_cpu is not None or args.layout != "dedicated" or args.bandwidth is not None):
        raise ValidationError("--bandwidth, --layout and --host-cpu shape the testbed's hosts; add --testbed (a "
                              "running cluster's links are measured, never given)")
    if args.host_cpu is not None and not (math.isfinite(args.host_cpu) and args.host_cpu > 0):
        raise ValidationError(f"--host-cpu must be a positive number of cores, got {args.host_cpu}")
    if args.ring_probes is not None and not (args.testbed and args.host_cpu is not None):
        raise ValidationError("--ring-probes scales the ring CPU probes, which run on --testbed hosts with --host-cpu "
                              "budgets; add both, or drop it")
    if args.ring_probes is not None and not (math.isfinite(args.ring_probes) and args.ring_probes >= 0):
        raise ValidationError(f"--ring-probes must be a number >= 0 (0: no probes), got {args.ring_probes}")
    if args.agent_port and not args.cluster:
        raise ValidationError("--agent-port reads a running cluster's agents; add --cluster")
    models = [m.strip() for m in (args.models or ("small_cnn" if args.quick else "alexnet_cifar")).split(",")
              if m.strip()]
    if not models:
        raise ValidationError("--models names no model; give e.g. alexnet_cifar,ctr_dnn")
    for m in models:
        resolve_model(m)
    return models


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure where the arguments say, write the file, print the summary (``--json``: the document)."""
    from ralp_tf.cli.progress import ItemProgress

    models, budget = _check_args(args), _budget(args)
    out = args.out or default_path(args.cluster if args.cluster else None)
    from ralp_tf.errors import writable_file

    writable_file(out, "--out")
    bar = ItemProgress("calibrate", enabled=None if not args.json else False)
    try:
        if args.testbed:
            cal = _on_testbed(args, models, budget, out, bar.update)
        elif args.cluster:
            cal = _on_cluster(args, models, budget, bar.update)
        else:
            cal = _on_local(args, models, budget, bar.update)
    finally:
        bar.close()
    if not args.testbed:
        with open(out, "w") as f:
            json.dump(cal.to_dict(), f, indent=1)
            f.write("\n")
    print(json.dumps(cal.to_dict(), indent=1) if args.json else summary(cal, out))
    return 0


def _on_local(args: argparse.Namespace, models: list[str], budget: Any, progress: Any) -> Any:
    from ralp_tf.run.calibrate import measure_cluster, pid_reader
    from ralp_tf.run.launch import LocalCluster, machine_cores

    with LocalCluster(workers=args.workers, ps=args.ps, log_dir=args.log_dir) as lc:
        pids = {f"{t.job}:{t.index}": t.pid for t in lc.tasks}
        return measure_cluster(lc.cluster_spec_dict, models=models, batch_size=args.batch_size, budget=budget,
                               cpu=pid_reader(pids), on_progress=progress, shared_cores=machine_cores(),
                               source=f"local cluster ({args.workers} workers, {args.ps} PS, loopback)")


def _on_cluster(args: argparse.Namespace, models: list[str], budget: Any, progress: Any) -> Any:
    from ralp_tf.run.calibrate import measure_cluster
    from ralp_tf.run.remote import AgentMeter, wait_reachable
    from ralp_tf.run.tfconfig import load_cluster_config

    config = load_cluster_config(None if args.cluster == "TF_CONFIG" else args.cluster)
    wait_reachable(config.spec, args.connect_timeout)
    cpu = AgentMeter(config, args.agent_port).cpu if args.agent_port else None
    spec = {j: a for j, a in config.spec.items() if j in ("chief", "worker", "ps")}
    return measure_cluster(spec, models=models, batch_size=args.batch_size, budget=budget, cpu=cpu,
                           on_progress=progress, source=config.source)


def _on_testbed(args: argparse.Namespace, models: list[str], budget: Any, out: str, progress: Any) -> Any:
    from ralp_tf.testbed.calibrate import calibrate_on_testbed

    return calibrate_on_testbed(args.workers, args.ps, os.path.abspath(out),
                                bandwidth=args.bandwidth if args.bandwidth is not None else 1e9,
                                layout=args.layout, host_cpu=args.host_cpu, models=tuple(models),
                                batch_size=args.batch_size, budget=budget.to_dict(), prefix=args.prefix,
                                on_progress=progress, log_dir=args.log_dir)


def _rate(bps: float) -> str:
    return f"{bps / 1e9:.3g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.3g} Mbit/s"


def ring_line(cal: Any) -> str:
    """The ring's CPU as measured, or why it was not."""
    r = cal.ring_cpu
    if r is not None:
        return (f"ring CPU ({r.implementation}, {len(cal.ring_probes)} probes): {r.s_per_byte * 1e9:.2f} ns per byte "
                f"sent or received + {r.step_s * 1e3:.2f} ms per step + {r.tensor_hop_s * 1e6:.0f} us per gradient "
                f"tensor and hop + {r.sparse_gradient_s * 1e3:.2f} ms per sparse gradient"
                + (f" + {r.table_pass_s_per_byte * 1e9:.2f} ns per byte of a whole-table pass"
                   if r.table_pass_s_per_byte is not None else ""))
    if "ring" in (cal.budget.get("skipped") or []):
        why = "the --max-seconds cap"
    elif cal.testbed is None:
        why = "measured on --testbed with --host-cpu only"
    elif not cal.testbed.get("host_cpu"):
        why = "no --host-cpu: the cost model prices the ring's CPU only on hosts with a known budget"
    elif not cal.budget.get("ring_probes", 1.0):
        why = "--quick"
    else:
        why = "needs 2 or more workers on hosts of their own"
    return f"ring CPU: not measured ({why}); the cost model's constants"


def summary(cal: Any, path: str) -> str:
    """The table printed at the end (module docstring)."""
    n = {job: sum(1 for t in cal.tasks if t.job == job) for job in ("worker", "ps")}
    lines = [f"calibrated {n['worker']} worker(s) and {n['ps']} PS task(s) on {len(cal.hosts)} host(s) of {cal.source} "
             f"in {cal.wall_s:.0f} s (TensorFlow {cal.tensorflow_version}) -> {path}", "",
             f"{'link':<24}{'rate':>14}{'payload':>14}{'latency':>11}{'largest':>10}"]
    for l in cal.links:
        lines.append(f"{l.src + ' -> ' + l.dst:<24}{_rate(l.bandwidth_bps):>14}{_rate(l.payload_bps):>14}"
                     f"{l.latency_s * 1e3:>8.2f} ms{l.samples[-1].bytes / 1e6:>7.1f} MB")
    rates = cal.host_rates()
    lines.append("hosts: " + ", ".join(f"{h} {_rate(rates[h]) if h in rates else 'no link measured'}"
                                       + (f" ({cal.host_cores[h]:g} cores)" if h in cal.host_cores else "")
                                       for h in cal.hosts))
    s = cal.serving
    lines += ["", f"{'serving CPU':<14}{'per byte':>12}{'per message':>14}{'chained':>10}{'per step':>12}"]
    if s is None:
        lines.append("  not measured (the tasks' CPU was not readable: --agent-port)")
    else:
        for who, b, m, c, st in (("PS task", s.ps_s_per_byte, s.ps_message_s, s.ps_chained_message_s, s.ps_step_s),
                                 ("worker", s.worker_s_per_byte, s.worker_message_s, s.worker_chained_message_s,
                                  s.worker_step_s)):
            chained = f"{c * 1e6:>7.0f} us" if c is not None else f"{'-':>10}"
            lines.append(f"{who:<14}{b * 1e9:>9.2f} ns{m * 1e6:>11.0f} us{chained}{st * 1e3:>9.2f} ms")
        if s.chief_closure_s is not None:
            lines.append(f"{'chief':<14}{'':>12}{'':>14}{'':>10}{s.chief_closure_s * 1e3:>9.2f} ms per closure")
    f = cal.floor
    if f is not None:
        lines += ["", f"floor: plain closure {f.plain_closure_s * 1e3:.2f} ms + {f.plain_step_per_variable_s * 1e3:.2f} ms "
                      f"per further variable; looped: {f.closure_s * 1e3:.2f} ms per closure + "
                      f"{f.closure_per_ps_s * 1e3:.2f} ms per PS task, {f.step_per_ps_s * 1e3:.2f} ms per step per PS "
                      f"task + {f.step_per_variable_s * 1e3:.2f} ms per further variable"]
    alone = [f"{c.task} {c.table_pass_s_per_byte * 1e9:.2f} ns" for c in cal.compute if c.table_pass_s_per_byte]
    if alone:
        together = cal.table_pass_together_s_per_byte
        lines += ["", "whole-table pass per byte: " + ", ".join(alone) + " alone"
                  + (f"; {together * 1e9:.2f} ns with every PS task passing at once" if together is not None else "")
                  + (f"; {cal.table_pass_served_cpu_s_per_byte * 1e9:.2f} ns of PS CPU as the workers' closures "
                     "passed" if cal.table_pass_served_cpu_s_per_byte is not None else "")
                  + f" (priced: {cal.table_pass_s_per_byte() * 1e9:.2f} ns)"]
    if cal.dense_update_s_per_byte:
        lines += ["", "dense update per variable byte, every PS task at once: "
                  + ", ".join(f"{k} {v * 1e9:.2f} ns" for k, v in cal.dense_update_s_per_byte.items())]
    lines += ["", ring_line(cal)]
    lines += ["", f"{'compute':<10}{'device':<44}{'FLOP/s':>10}  model (batch): forward+backward step"]
    for c in cal.compute:
        steps = ", ".join(f"{m.model} ({m.batch_size}): {m.step_s * 1e3:.1f} ms" for m in c.models)
        lines.append(f"{c.task:<10}{c.device:<44}{c.flops_per_s / 1e9:>8.1f} G  {steps}")
    skipped = cal.budget.get("skipped") or []
    if skipped:
        lines += ["", f"skipped at the --max-seconds cap: {', '.join(skipped)}"]
    return "\n".join(lines)
