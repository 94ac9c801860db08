"""Horovod (gloo) baseline: the rank script and its launcher across testbed namespaces.

Rank script (started by ``horovodrun``; tf_keras only, because with Keras 3 Horovod silently
stops averaging gradients)::

    TF_USE_LEGACY_KERAS=1 horovodrun --gloo -np 2 -H 10.231.0.1:1,10.231.0.2:1 \\
        python -m ralp_tf.testbed.horovod_job --model alexnet_cifar --batch 32 --steps 10

Each rank trains ``--model`` on one fixed synthetic batch of ``--batch`` samples with
``hvd.DistributedOptimizer(SGD)`` (weights broadcast from rank 0 first), times ``--steps``
steps after ``--warmup``, and prints ``RALP_JOB result {...}`` with its samples/s, step times,
final loss and the sha256 of its final weights.

Launcher: :func:`run_horovod` runs that across a :class:`~ralp_tf.testbed.Testbed` (an ``ssh``
stand-in enters the target address's namespace; the testbed's per-namespace hosts file maps the
machine hostname to the namespace's own address) or a :class:`~ralp_tf.testbed.LoopbackTestbed`
(``-H localhost:N``), and returns one record whose ``valid`` is false unless every rank
finished with identical weights.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
from typing import Any, Sequence

from ralp_tf.testbed import jobs

__all__ = ["STRATEGY", "HOROVOD_CODECS", "horovod_available", "main", "run_horovod"]

STRATEGY = "horovod"
#: ``hvd.Compression`` settings Horovod 0.28 ships: fp16 casts each gradient before the all-reduce.
HOROVOD_CODECS = ("none", "fp16")


def horovod_available() -> tuple[bool, str]:
    """(True, "") if Horovod is installed in this interpreter's environment (no TF import)."""
    if importlib.util.find_spec("horovod") is None:
        return False, ("Horovod is not installed; run `make horovod` (scripts/install_horovod.sh builds it "
                       "with gloo and caches the wheel)")
    return True, ""


# ------------------------------------------------------------------------------------------
# rank side


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="One Horovod rank (see module docstring).")
    jobs.add_job_args(ap)
    ap.add_argument("--compression", choices=HOROVOD_CODECS, default="none",
                    help="hvd.Compression of the all-reduced gradients: none or fp16 (Horovod has no other)")
    args = jobs.parse_job_args(ap, argv)
    tf = jobs.setup_tf(args)
    import tf_keras  # noqa: F401
    import horovod.tensorflow.keras as hvd

    from ralp_tf.model.builtin import resolve_model

    from ralp_tf.model.data import dataset_batch, output_losses
    from ralp_tf.run.training import sgd_optimizer

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    model = resolve_model(args.model)()
    if not type(model).__module__.startswith("tf_keras"):
        raise SystemExit("horovod_job needs a tf_keras model (TF_USE_LEGACY_KERAS=1); with Keras 3 Horovod "
                         "does not average gradients")
    x, y = dataset_batch(model, args.batch, seed=args.seed + 1 + rank)
    compression = hvd.Compression.fp16 if args.compression == "fp16" else hvd.Compression.none
    opt = hvd.DistributedOptimizer(sgd_optimizer(args.optimizer, args.lr), compression=compression)
    model.compile(optimizer=opt, loss=output_losses(model))
    ds = tf.data.Dataset.from_tensors((x, y)).repeat()
    timer = jobs.make_timer(args.warmup, args.steps, emit_marks=rank == 0)
    model.fit(ds, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), timer])
    jobs.report(STRATEGY, rank, size, args, timer, model, x, y, hostname=os.uname().nodename)
    return 0


# ------------------------------------------------------------------------------------------
# launcher side


def _write_standin(tb: Any, workers: Sequence[str], folder: str) -> str:
    """Create ``folder/ssh`` (the stand-in) and its host map (address or task -> the host's namespace
    and, with CPU budgets, its CPU group, so remote ranks run on that host's budget); returns the
    folder for PATH."""
    mapping: dict[str, dict[str, str | None]] = {}
    # The stand-in runs inside a namespace entered with `ip netns exec`, which remounts /sys in a new
    # mount namespace: the cgroup mount is not there. This (launcher) process's view of it is, via
    # /proc/<pid>/root, for as long as the launcher runs (it waits for horovodrun).
    outside = f"/proc/{os.getpid()}/root"
    for t in workers:
        group = tb.cpu_group(tb.host_of(t))
        procs = outside + os.path.join(group, "cgroup.procs") if group else None
        target = {"netns": tb.netns(t), "cgroup_procs": procs}
        mapping[tb.host(t)] = target
        mapping[t] = target
    map_path = os.path.join(folder, "hosts.json")
    with open(map_path, "w") as f:
        json.dump(mapping, f)
    script = os.path.join(folder, "ssh")
    standin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ssh_standin.py")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" -S "{standin}" "{map_path}" "$@"\n')
    os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def run_horovod(tb: Any, model: str = "alexnet_cifar", workers: Sequence[str] | None = None, *,
                batch: int = 32, steps: int = 10, warmup: int = 3, lr: float = 0.01,
                intra_threads: int = 0, inter_threads: int = 0, timeout: float = 600.0,
                log_path: str | None = None, start_timeout: int = 120, compression: str = "none",
                optimizer: str = jobs.LOOP_OPTIMIZER) -> dict[str, Any]:
    """Train ``model`` with Horovod/gloo, one rank per task in ``workers`` (default: the testbed's
    tasks named ``worker*``), and return the summary record (see :func:`jobs.summarize`).
    ``compression`` is the ``hvd.Compression`` of the gradients (:data:`HOROVOD_CODECS`),
    ``optimizer`` the SGD wrapped in ``hvd.DistributedOptimizer`` (:data:`ralp_tf.run.training.OPTIMIZERS`).

    ``horovodrun`` itself runs in the first worker's namespace. Never raises for a failed or
    hung job: the record then has ``valid: false``, ``invalid_reason`` and ``log_tail``. Raises
    :class:`~ralp_tf.testbed.TestbedError` if Horovod is not installed.
    """
    from ralp_tf.testbed.base import TestbedError

    ok, why = horovod_available()
    if not ok:
        raise TestbedError(why)
    jobs.check_model_name(model)
    workers = jobs.resolve_workers(tb, workers)
    n = len(workers)
    args = {"model": model, "batch": batch, "steps": steps, "warmup": warmup, "lr": lr,
            "intra_threads": intra_threads or None, "inter_threads": inter_threads or None,
            "compression": compression if compression != "none" else None,
            "optimizer": optimizer}
    if compression not in HOROVOD_CODECS:
        raise TestbedError(f"Horovod compression {compression!r} does not exist; use one of {', '.join(HOROVOD_CODECS)}")
    tmp = tempfile.mkdtemp(prefix="ralp_hvd_")
    try:
        env = jobs.base_env({"HOROVOD_LOG_LEVEL": "warning"})
        horovodrun = [sys.executable, "-m", "horovod.runner.launch", "--gloo", "-np", str(n),
                      "--start-timeout", str(start_timeout)]
        if tb.emulated and n > 1:
            _write_standin(tb, workers, tmp)
            env["PATH"] = tmp + os.pathsep + os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
            slots = collections.Counter(tb.host(t) for t in workers)  # ranks per host address
            horovodrun += ["-H", ",".join(f"{ip}:{n}" for ip, n in slots.items()), "--network-interface", "eth0"]
        else:  # loopback, or one rank: horovodrun runs it locally (inside that worker's namespace)
            horovodrun += ["-H", f"localhost:{n}"]
        cmd = horovodrun + [sys.executable, "-m", "ralp_tf.testbed.horovod_job"] + jobs.job_argv(args)
        meter = jobs.LinkMeter(tb, per_task=False)
        proc = tb.popen(workers[0], cmd, env=env, stdout=-1, stderr=-2, text=True, cwd=os.getcwd())
        watcher = jobs.JobWatcher([("horovodrun", proc)], on_mark=meter, log_path=log_path)
        finished = watcher.wait(timeout, expected_results=n)
        if not finished:
            from ralp_tf.testbed import _nsops

            _nsops.killpg_quiet(proc.pid, 9)
            if tb.emulated:  # ranks started through the stand-in live in other sessions
                for t in workers:
                    _nsops.kill_pids(_nsops.netns_pids(tb.netns(t)), 9, wait_s=2)
            proc.wait()
            watcher.wait(10)
        return jobs.summarize(STRATEGY, n, args, watcher, meter, {"horovodrun": proc.returncode},
                              not finished, tb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
