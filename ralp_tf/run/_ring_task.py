"""One worker of a ring all-reduce job: ``python -m ralp_tf.run._ring_task --model REF ...`` with ``TF_CONFIG``.

Started by :class:`ralp_tf.run.ring.RingJob`, one process per worker. It builds
``tf.distribute.MultiWorkerMirroredStrategy`` (RING) before anything else touches TensorFlow,
builds and records the model outside it (:func:`ralp_tf.place.applier.prepare`: the same seeded
initial weights and synthetic batch as a ParameterServerStrategy job of the same seed), builds it
again under the strategy with those weights, and trains with the loop's optimizer:

* a **worker step** is one batch of ``--batch`` samples on one worker, as under PSS; a synchronous
  step of N workers is N worker steps. ``--steps``/``--warmup`` count worker steps, the checkpoint's
  ``step`` counter too (so a checkpoint resumes under either strategy);
* each replica's loss is :func:`ralp_tf.run.training.train_loss` over its batch, divided by N, so the
  all-reduced (summed) gradient is the mean over the workers (every worker feeds the same batch:
  the update equals one PSS step's on that batch);
* checkpoints (``tf.train.Checkpoint(model, optimizer, step)``, the object graph of a PSS job's) are
  written by every worker, as MultiWorkerMirroredStrategy requires: the chief into
  ``--checkpoint-dir`` (:class:`~ralp_tf.run.checkpoints.CheckpointStore`), the others into a
  temporary folder they remove. Every worker restores the newest complete one; the chief alone
  removes torn ones, and the workers check they restored the same step.

Protocol (chief's stdout, one line each, flushed): ``RALP_RING step <done> <loss>`` after every
synchronous step, ``RALP_RING measure start|end`` around the measured window (the chief then waits
for a line on stdin, the parent's answer once it has read its byte counters, and every worker waits
for the chief in a barrier: none sends the window's first bytes, or exits and closes its sockets,
before the parent has read them), ``RALP_RING result <json>`` at the end. Every worker exits with
``os._exit``.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sys
import tempfile
import time
from typing import Any

from ralp_tf.run._procutil import die_with_parent

__all__ = ["MARK", "main", "sync_steps"]

MARK = "RALP_RING"


def sync_steps(worker_steps: int, workers: int) -> int:
    """Synchronous ring steps that cover ``worker_steps`` worker steps: ``ceil(worker_steps / workers)``."""
    return -(-max(worker_steps, 0) // workers)


def _say(kind: str, text: str, wait: bool = False) -> None:
    print(f"{MARK} {kind} {text}", flush=True)
    if wait:
        ready, _, _ = select.select([sys.stdin], [], [], 60.0)
        if ready:
            sys.stdin.readline()


def _args(argv: Any = None) -> argparse.Namespace:
    from ralp_tf.errors import ValidationError, check_int

    p = argparse.ArgumentParser(description="One ring all-reduce worker (see the module docstring).")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, required=True, help="worker steps to reach, warm-up included")
    p.add_argument("--warmup", type=int, default=0, help="worker steps before the measured window")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--checkpoint-dir", default="")
    p.add_argument("--checkpoint-every", type=int, default=10, help="worker steps between checkpoints")
    p.add_argument("--sequence-length", type=int, default=0)
    p.add_argument("--parent-pid", type=int, default=0)
    p.add_argument("--ack", action="store_true", help="wait for a stdin line after each measure mark")
    args = p.parse_args(argv)
    try:
        for name in ("batch", "steps", "checkpoint_every"):
            check_int(getattr(args, name), f"--{name.replace('_', '-')}")
        check_int(args.warmup, "--warmup", minimum=0)
    except ValidationError as exc:
        p.error(str(exc))
    return args


def main(argv: Any = None) -> int:
    args = _args(argv)
    die_with_parent(args.parent_pid)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    cfg = json.loads(os.environ["TF_CONFIG"])
    rank, workers = int(cfg["task"]["index"]), len(cfg["cluster"]["worker"])
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    result = _train(tf, strategy, args, rank, workers)
    if rank == 0:
        _say("result", json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _train(tf: Any, strategy: Any, args: argparse.Namespace, rank: int, workers: int) -> dict[str, Any]:
    """Build, restore, train and checkpoint (module docstring); the chief's result record."""
    import tf_keras

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.data import dataset_batch, weights_checksum
    from ralp_tf.place.applier import prepare
    from ralp_tf.run.checkpoints import model_digest
    from ralp_tf.run.training import sgd_optimizer, train_loss

    builder = resolve_model(args.model)
    tf_keras.utils.set_random_seed(args.seed)
    prepared = prepare(builder, args.batch, sequence_length=args.sequence_length or None)
    x, y = dataset_batch(prepared.spec, args.batch, seed=args.seed)
    with strategy.scope():
        model = builder()
        if not model.built:
            model(tf.nest.map_structure(lambda t: t[:1], x), training=False)
        model.set_weights(prepared.weights)
        optimizer = sgd_optimizer(args.optimizer, args.lr)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="ralp_step")
    loss_fn = train_loss(model, prepared.spec)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
    stores = _stores(checkpoint, args.checkpoint_dir, rank)
    restored = _restore(tf, strategy, stores, step_var)

    @tf.function
    def train_step() -> Any:
        def replica() -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                scaled = loss / strategy.num_replicas_in_sync
            variables = model.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(scaled, variables), variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(replica), axis=None)

    @tf.function
    def barrier() -> None:
        strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    done = int(step_var.numpy())
    total, every = args.steps, args.checkpoint_every
    measured_from = max(done, args.warmup)
    losses: list[float] = []
    t0 = 0.0
    measuring = False
    sync_measured = 0
    while done < total:
        if not measuring and done >= measured_from:
            if rank == 0:
                _say("measure", "start", wait=args.ack)
            barrier()  # the other workers wait here while the parent reads its counters
            t0, measuring = time.perf_counter(), True
        loss = float(train_step())
        done += workers
        sync_measured += measuring
        losses.append(loss)
        if rank == 0:
            _say("step", f"{min(done, total)} {loss!r}")
        if stores and (done // every > (done - workers) // every or done >= total):
            step_var.assign(done)
            stores[0].save(done)
    elapsed = time.perf_counter() - t0 if measuring else 0.0
    barrier()
    if rank == 0 and measuring:
        _say("measure", "end", wait=args.ack)
    barrier()  # no worker exits (closing its sockets) before the parent has read the counters
    _remove_private(stores, rank)
    return {"losses": losses, "elapsed": elapsed, "sync_steps": sync_measured,
            "measured_worker_steps": sync_measured * workers, "done": done, "workers": workers,
            "resumed_from_step": restored["step"], "restored_weights_checksum": restored["checksum"],
            "restored_weights_digest": restored["digest"], "final_weights_checksum": weights_checksum(model)[1],
            "final_weights_digest": model_digest(model)}


def _stores(checkpoint: Any, directory: str, rank: int) -> list[Any]:
    """The chief's store in ``directory``; another worker's in a private temporary folder (written,
    then removed), plus a read-only view of ``directory`` to restore from. ``[]`` without a folder."""
    from ralp_tf.run.checkpoints import CheckpointStore

    if not directory:
        return []
    if rank == 0:
        return [CheckpointStore(checkpoint, directory)]
    private = tempfile.mkdtemp(prefix=f".ralp_ring_worker{rank}_", dir=os.path.dirname(os.path.abspath(directory)))
    return [CheckpointStore(checkpoint, private), CheckpointStore(checkpoint, directory, read_only=True)]


def _restore(tf: Any, strategy: Any, stores: list[Any], step_var: Any) -> dict[str, Any]:
    """Restore the newest complete checkpoint of the shared folder (the chief's store, else the
    read-only view); check every worker restored the same step."""
    from ralp_tf.model.data import weights_checksum
    from ralp_tf.run.checkpoints import model_digest

    out: dict[str, Any] = {"step": None, "checksum": None, "digest": None}
    if not stores:
        return out
    found = stores[-1].restore()
    step = float(step_var.numpy())
    total, squares = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant([step, step * step])),
                                     axis=None).numpy()
    n = strategy.num_replicas_in_sync
    if abs(squares / n - (total / n) ** 2) > 1e-6:  # the steps' variance: 0 when every worker restored one step
        raise SystemExit(f"error: the ring's workers restored different checkpoints (this one step {int(step)}); "
                         "their checkpoint folder must be the same storage for every worker")
    if found is not None:
        model = stores[-1].checkpoint.model
        out = {"step": int(step), "checksum": weights_checksum(model)[1], "digest": model_digest(model)}
    return out


def _remove_private(stores: list[Any], rank: int) -> None:
    if rank != 0 and stores:
        shutil.rmtree(stores[0].directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
