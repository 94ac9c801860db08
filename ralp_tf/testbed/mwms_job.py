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
workers end with identical weights.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Sequence

from ralp_tf.testbed import jobs

__all__ = ["STRATEGY", "main", "run_mwms"]

STRATEGY = "allreduce"


# ------------------------------------------------------------------------------------------
# worker side


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="One MultiWorkerMirroredStrategy worker (see module docstring).")
    jobs.add_job_args(ap)
    args = jobs.parse_job_args(ap, argv)
    if not os.environ.get("TF_CONFIG"):
        raise SystemExit("mwms_job needs TF_CONFIG naming the worker cluster and this task")
    tf = jobs.setup_tf(args)
    import tf_keras

    from ralp_tf.model.builtin import resolve_model

    from ralp_tf.model.data import dataset_batch, output_losses
    from ralp_tf.run.training import sgd_optimizer

    cfg = json.loads(os.environ["TF_CONFIG"])
    rank = int(cfg["task"]["index"])
    size = len(cfg["cluster"]["worker"])
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
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
    def barrier() -> None:
        strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    timer = jobs.make_timer(args.warmup, args.steps, emit_marks=rank == 0, barrier=barrier)
    model.fit(ds, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0, callbacks=[timer])
    # Barrier: no worker leaves while another still trains or reports (a worker whose peer has
    # exited can hang in TF's collective/coordination shutdown). Then leave at once, together.
    barrier()
    jobs.report(STRATEGY, rank, size, args, timer, model, x, y,
                replicas_in_sync=int(strategy.num_replicas_in_sync))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


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
    from ralp_tf.testbed import _nsops

    jobs.check_model_name(model)
    workers = jobs.resolve_workers(tb, workers)
    n = len(workers)
    ports = [port + i for i in range(n)] if tb.emulated else [tb.free_port() for _ in workers]
    cluster = {"worker": [tb.address(t, p) for t, p in zip(workers, ports)]}
    args = {"model": model, "batch": batch, "steps": steps, "warmup": warmup, "lr": lr,
            "intra_threads": intra_threads or None, "inter_threads": inter_threads or None,
            "optimizer": optimizer}
    meter = jobs.LinkMeter(tb)
    procs = []
    for i, t in enumerate(workers):
        env = jobs.base_env({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
        cmd = [sys.executable, "-m", "ralp_tf.testbed.mwms_job"] + jobs.job_argv(args)
        # Rank 0 marks the window and waits for the launcher's answer (jobs.emit), so the counters
        # are read before any rank sends a byte of the first timed step.
        marking = {jobs.ACK_ENV: "1"} if i == 0 else {}
        procs.append((t, tb.popen(t, cmd, env={**env, **marking}, stdout=-1, stderr=-2, text=True,
                                  stdin=subprocess.PIPE if i == 0 else subprocess.DEVNULL)))
    watcher = jobs.JobWatcher(procs, on_mark=meter, log_path=log_path, ack=True)
    finished = watcher.wait(timeout, expected_results=n)
    if not finished:
        for _, p in procs:
            _nsops.killpg_quiet(p.pid, 9)
        for _, p in procs:
            p.wait()
        watcher.wait(10)
    return jobs.summarize(STRATEGY, n, args, watcher, meter, {t: p.returncode for t, p in procs}, not finished, tb)


if __name__ == "__main__":
    sys.exit(main())
