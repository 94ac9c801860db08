"""MultiWorkerMirroredStrategy (ring all-reduce) baseline: the worker script and its launcher.

Worker script (one process per worker, ``TF_CONFIG`` naming the cluster and this task)::

    TF_USE_LEGACY_KERAS=1 TF_CONFIG='{"cluster": {"worker": ["10.231.0.1:2222", "10.231.0.2:2222"]},
                                      "task": {"type": "worker", "index": 0}}' \\
        python -m ralp_tf.testbed.mwms_job --model alexnet_cifar --batch 32 --steps 10

It builds ``tf.distribute.MultiWorkerMirroredStrategy`` with ``CommunicationImplementation.RING``,
trains ``--model`` (tf_keras) under its scope on a fixed synthetic batch of ``--batch`` samples
per worker (global batch ``batch x workers``), times ``--steps`` steps after ``--warmup`` and
prints ``RALP_JOB result {...}`` like the Horovod job.

Launcher: :func:`run_mwms` starts one worker per task inside the testbed's namespaces (worker
*i* on port 2222 + *i*, so workers sharing a host do not collide; distinct free ports on loopback) and returns one record, ``valid`` only if all
workers end with identical weights. :func:`run_mwms_sequence` has the same workers train several
models one after another (``--sequence``), each timed in its own window: one record per model.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from typing import Any, NamedTuple, Sequence

from ralp_tf.errors import ValidationError
from ralp_tf.testbed import jobs

__all__ = ["STRATEGY", "main", "run_mwms", "run_mwms_sequence"]

STRATEGY = "allreduce"


# ------------------------------------------------------------------------------------------
# worker side


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="One MultiWorkerMirroredStrategy worker (see module docstring).")
    jobs.add_job_args(ap)
    ap.add_argument("--sequence", default=None,
                    help='JSON list of {"window", "model", "steps"}: train each in turn in this process, each '
                         "timed in its own window (instead of --model and --steps)")
    args = jobs.parse_job_args(ap, argv)
    if not os.environ.get("TF_CONFIG"):
        raise SystemExit("mwms_job needs TF_CONFIG naming the worker cluster and this task")
    tf = jobs.setup_tf(args)

    cfg = json.loads(os.environ["TF_CONFIG"])
    rank = int(cfg["task"]["index"])
    size = len(cfg["cluster"]["worker"])
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    # The strategy's coordination service catches SIGTERM as a preemption notice and keeps running;
    # a testbed rank is stopped by SIGTERM (the testbed's teardown), so it must end on it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def barrier() -> None:
        strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    if args.sequence is None:
        _train(tf, strategy, barrier, args, rank, size, window=None)
    else:
        for entry in json.loads(args.sequence):
            entry_args = argparse.Namespace(**{**vars(args), "model": entry["model"], "steps": int(entry["steps"])})
            _train(tf, strategy, barrier, entry_args, rank, size, window=str(entry["window"]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _train(tf: Any, strategy: Any, barrier: Any, args: argparse.Namespace, rank: int, size: int,
           window: str | None) -> None:
    """Build ``args.model`` in ``strategy``'s scope, train it for ``args.warmup`` + ``args.steps``
    steps (timed after the warmup; marks tagged with ``window``) and print this rank's result."""
    import tf_keras

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.data import dataset_batch, output_losses
    from ralp_tf.run.training import sgd_optimizer

    with strategy.scope():
        model = resolve_model(args.model)()
        if not type(model).__module__.startswith("tf_keras"):
            raise SystemExit("mwms_job needs a tf_keras model (TF_USE_LEGACY_KERAS=1)")
        model.compile(optimizer=sgd_optimizer(args.optimizer, args.lr), loss=output_losses(model))
    x, y = dataset_batch(model, args.batch, seed=args.seed + 1 + rank)

    def dataset_fn(ctx: Any) -> Any:
        # DatasetCreator datasets are per replica: every worker feeds its own batch of args.batch
        # samples, so the global batch is batch x workers, as with Horovod and PSS.
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    ds = tf_keras.utils.experimental.DatasetCreator(dataset_fn)
    timer = jobs.make_timer(args.warmup, args.steps, emit_marks=rank == 0, barrier=barrier, window=window)
    model.fit(ds, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0, callbacks=[timer])
    # Barrier: no worker leaves (or starts the next model) while another still trains or reports (a
    # worker whose peer has exited can hang in TF's collective/coordination shutdown).
    barrier()
    extra = {"window": window} if window is not None else {}
    jobs.report(STRATEGY, rank, size, args, timer, model, x, y,
                replicas_in_sync=int(strategy.num_replicas_in_sync), **extra)


# ------------------------------------------------------------------------------------------
# launcher side


def run_mwms(tb: Any, model: str = "alexnet_cifar", workers: Sequence[str] | None = None, *,
             batch: int = 32, steps: int = 10, warmup: int = 3, lr: float = 0.01, port: int = 2222,
             intra_threads: int = 0, inter_threads: int = 0, timeout: float = 600.0,
             log_path: str | None = None, optimizer: str = jobs.LOOP_OPTIMIZER) -> dict[str, Any]:
    """Train ``model`` with MultiWorkerMirroredStrategy (ring) and ``optimizer``
    (:data:`ralp_tf.run.training.OPTIMIZERS`), one process per task in ``workers``
    (default: the testbed's ``worker*`` tasks), and return the summary record
    (:func:`jobs.summarize`). A failed or hung job gives ``valid: false`` with the log tail."""
    jobs.check_model_name(model)
    args = {"model": model, "batch": batch, "steps": steps, "warmup": warmup, "lr": lr,
            "intra_threads": intra_threads or None, "inter_threads": inter_threads or None,
            "optimizer": optimizer}
    meter = jobs.LinkMeter(tb)
    job = _run_job(tb, workers, args, port, timeout, log_path, meter, None, results_per_rank=1)
    return jobs.summarize(STRATEGY, job.size, args, job.watcher, meter, job.returncodes, job.timed_out, tb)


def run_mwms_sequence(tb: Any, entries: Sequence[tuple[str, str, int]], workers: Sequence[str] | None = None, *,
                      batch: int = 32, warmup: int = 3, lr: float = 0.01, port: int = 2222, timeout: float = 600.0,
                      log_path: str | None = None, optimizer: str = jobs.LOOP_OPTIMIZER) -> list[dict[str, Any]]:
    """:func:`run_mwms` for several models in one job: ``entries`` are ``(window, model, steps)``,
    trained one after another by the same worker processes (one start-up of TensorFlow and of the
    strategy for all), each timed in its own window with its own counters. Returns one summary
    record per entry, in order (``timeout`` is the whole job's)."""
    windows = [w for w, _, _ in entries]
    if not entries or len(set(windows)) != len(windows):
        raise ValidationError(f"run_mwms_sequence needs one or more (window, model, steps) entries, each window "
                              f"named once; got windows {windows}")
    for _, model, _ in entries:
        jobs.check_model_name(model)
    args = {"batch": batch, "warmup": warmup, "lr": lr, "optimizer": optimizer,
            "sequence": json.dumps([{"window": w, "model": m, "steps": int(k)} for w, m, k in entries])}
    meters = {w: jobs.LinkMeter(tb) for w in windows}
    job = _run_job(tb, workers, args, port, timeout, log_path, None, lambda w, kind: meters[w](kind),
                   results_per_rank=len(entries))
    plain = {k: v for k, v in args.items() if k != "sequence"}
    return [jobs.summarize(STRATEGY, job.size, {**plain, "model": m, "steps": k}, job.watcher, meters[w],
                           job.returncodes, job.timed_out, tb, window=w) for w, m, k in entries]


class _FinishedJob(NamedTuple):
    size: int
    watcher: jobs.JobWatcher
    returncodes: dict[str, int | None]
    timed_out: bool


def _run_job(tb: Any, workers: Sequence[str] | None, args: dict[str, Any], port: int, timeout: float,
             log_path: str | None, on_mark: Any, on_window_mark: Any, results_per_rank: int) -> _FinishedJob:
    """One MWMS job on ``tb``: a rank per worker task, rank 0's marks answered (so the counters are
    read before any rank sends a byte of a timed step), waited for up to ``timeout`` s and killed
    past it."""
    from ralp_tf.testbed import _nsops

    workers = jobs.resolve_workers(tb, workers)
    n = len(workers)
    ports = [port + i for i in range(n)] if tb.emulated else [tb.free_port() for _ in workers]
    cluster = {"worker": [tb.address(t, p) for t, p in zip(workers, ports)]}
    procs = []
    for i, t in enumerate(workers):
        env = jobs.base_env({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
        cmd = [sys.executable, "-m", "ralp_tf.testbed.mwms_job"] + jobs.job_argv(args)
        marking = {jobs.ACK_ENV: "1"} if i == 0 else {}
        procs.append((t, tb.popen(t, cmd, env={**env, **marking}, stdout=-1, stderr=-2, text=True,
                                  stdin=subprocess.PIPE if i == 0 else subprocess.DEVNULL)))
    watcher = jobs.JobWatcher(procs, on_mark=on_mark, on_window_mark=on_window_mark, log_path=log_path, ack=True)
    finished = watcher.wait(timeout, expected_results=n * results_per_rank)
    if not finished:
        for _, p in procs:
            _nsops.killpg_quiet(p.pid, 9)
        for _, p in procs:
            p.wait()
        watcher.wait(10)
    return _FinishedJob(n, watcher, {t: p.returncode for t, p in procs}, not finished)


if __name__ == "__main__":
    sys.exit(main())
