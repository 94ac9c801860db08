"""Training jobs on a ParameterServerStrategy cluster: stock or placed, measured.

:func:`train` runs one job with a custom loop driven by ``ClusterCoordinator`` on synthetic
data created on the workers (so no input data crosses the network), and returns a
:class:`RunResult`: measured steps/s, bytes per step between each pair of tasks (when the
tasks' endpoints are given), per-step losses, and the cost model's predictions.

:func:`compare` runs stock PSS and RALP on the same LocalCluster one after the other. Every
step is scheduled as one closure; "bytes per step" is total bytes between workers and PS tasks
divided by the number of closures (worker steps).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate
from ralp_tf.errors import ClusterRuntimeError, check_int
from ralp_tf.model.builtin import per_sample_loss, resolve_model, synthetic_batch, weights_checksum
from ralp_tf.place.applier import cluster_of, place_from_builder, plan_with_policy
from ralp_tf.model.profiler import profile
from ralp_tf.run.traffic import Endpoint, TrafficMeter, per_step, suspect_bytes_warning

__all__ = ["DEFAULT_CHECKPOINT_EVERY", "RunResult", "sgd_losses", "train", "compare"]

log = logging.getLogger(__name__)
DEFAULT_CHECKPOINT_EVERY = 10


@dataclasses.dataclass
class RunResult:
    policy: str
    steps: int
    batch_size: int
    steps_per_s: float
    samples_per_s: float
    final_loss: float
    losses: list[float]
    bytes_per_step: float | None
    bytes_between: dict[str, float]
    predicted_bytes_per_step: float
    predicted_step_s: float
    measured_step_s: float
    plan: dict[str, Any]
    analysis: str | None = None
    total_steps: int = 0
    resumed_from_step: int | None = None
    restored_weights_checksum: float | None = None
    final_weights_checksum: float | None = None
    #: bytes crossing host links per synchronous step (``workers`` worker steps), loopback excluded:
    #: the cost model's ``StepEstimate.link_bytes_per_step``, comparable with a testbed's link counters
    predicted_link_bytes_per_step: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _loss_fn(model: Any) -> Callable[[Any, Any], Any]:
    """The batch-mean of :func:`ralp_tf.model.builtin.per_sample_loss` (the custom loop's loss)."""
    import tensorflow as tf

    loss = per_sample_loss(model)
    return lambda y, logits: tf.reduce_mean(loss(y, logits))


def sgd_losses(strategy: Any, coordinator: Any, model: Any, batches: Sequence[tuple[Any, Any]],
               learning_rate: float = 0.05) -> list[float]:
    """Train ``model`` (built under ``strategy``) with SGD(``learning_rate``), one scheduled step
    per ``(inputs, labels)`` batch in order, and return each step's loss (the batch mean of
    :func:`ralp_tf.model.builtin.per_sample_loss`). With one worker the steps run in order."""
    import tensorflow as tf
    import tf_keras

    with strategy.scope():
        optimizer = tf_keras.optimizers.SGD(learning_rate)
    loss_fn = _loss_fn(model)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(x, y))

    scheduled = [coordinator.schedule(step, args=(tf.nest.map_structure(tf.constant, x), tf.constant(y)))
                 for x, y in batches]
    coordinator.join()
    return [float(np.asarray(r.fetch())) for r in scheduled]


def train(strategy: Any, build_model: Callable[[], Any] | str, *, policy: Any = "ralp", steps: int = 30,
          warmup_steps: int = 3, batch_size: int = 32, learning_rate: float = 0.01, seed: int = 0,
          endpoints: Sequence[Endpoint] | None = None, cluster: Cluster | None = None, meter: Any = None,
          on_step: Callable[[int], None] | None = None, coordinator: Any = None,
          checkpoint_dir: str | None = None, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
          on_measure: Callable[[str], None] | None = None, measure_compute: bool = False,
          compute_scale: float = 1.0, compression: Any = None) -> RunResult:
    """Train ``build_model`` for ``warmup_steps + steps`` steps on ``strategy``; measure the last ``steps``.

    ``compression`` (see :mod:`ralp_tf.plan.compression`; ``"auto"`` lets the analyzer weigh fp16)
    goes to the planner. ``policy`` is a policy name of :mod:`ralp_tf.place.policies` ("ralp", "ps", "rl", ...), a Plan, or
    a placement policy object. ``cluster`` gives
    the rates the planner and the predictions use (default: from the strategy).
    ``on_step(i)`` is called after scheduling step ``i`` (fault injection, progress);
    ``on_measure("start")`` / ``on_measure("end")`` when the measured window opens and closes
    (an outside byte counter snapshots its links then). ``meter`` (anything with
    :class:`~ralp_tf.run.traffic.TrafficMeter`'s ``start``/``stop``/``total``, e.g.
    :class:`ralp_tf.run.remote.AgentMeter`) counts the bytes instead of one built from ``endpoints``;
    with neither, ``bytes_per_step`` is None.

    With ``measure_compute`` the planner and the predictions use each layer's measured
    forward+backward time on this machine (``profile(measure=True)``) times ``compute_scale``
    (e.g. the number of tasks that share the cores during training) instead of FLOP rates.

    With ``checkpoint_dir``, model, optimizer and the step counter are saved every
    ``checkpoint_every`` steps; a rerun with the same directory restores the latest checkpoint
    and trains only the remaining steps, so a failure loses at most ``checkpoint_every - 1``
    steps. A task failure raises ClusterRuntimeError naming the last checkpoint.
    """
    import tensorflow as tf
    import tf_keras

    check_int(steps, "steps")
    check_int(batch_size, "batch_size", hint="pass e.g. 32")
    if checkpoint_dir:
        check_int(checkpoint_every, "checkpoint_every")
    builder = resolve_model(build_model) if isinstance(build_model, str) else build_model
    cluster = cluster or cluster_of(strategy)
    tf_keras.utils.set_random_seed(seed)
    base = builder()
    log.info("phase: profiling %s", base.name)
    prof = profile(base, batch_size=batch_size, measure=measure_compute)
    if measure_compute:
        prof = prof.scaled_compute(compute_scale)
    plan, analysis = plan_with_policy(policy, prof, cluster, compression=compression)
    plan.validate(prof, cluster)
    model = place_from_builder(builder, base, plan, strategy)
    with strategy.scope():
        optimizer = tf_keras.optimizers.SGD(learning_rate)
    loss_fn = _loss_fn(base)
    x, y = synthetic_batch(base, batch_size, seed=seed)
    if isinstance(x, list):  # multi-input models: a tuple is one nested structure for tf.data, a list is not
        x = tuple(x)
    coordinator = coordinator or tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

    def dataset_fn() -> Any:
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
    iterator = iter(per_worker)

    @tf.function
    def train_step(it: Any) -> Any:
        def replica_fn(batch: Any) -> Any:
            xb, yb = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(next(it),))

    step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="ralp_step")
    manager = None
    resumed_from = None
    restored_checksum = None
    if checkpoint_dir:
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
        manager = tf.train.CheckpointManager(ckpt, checkpoint_dir, max_to_keep=3)
        if manager.latest_checkpoint:
            ckpt.restore(manager.latest_checkpoint)
            resumed_from = int(step_var.numpy())
            restored_checksum = weights_checksum(model)[1]
            log.info("resumed from %s (step %d)", manager.latest_checkpoint, resumed_from)
    total = warmup_steps + steps
    done = int(step_var.numpy())
    losses: list[Any] = []
    meter = meter if meter is not None else (TrafficMeter(endpoints) if endpoints else None)
    measured_from = max(done, warmup_steps)
    measured = total - measured_from
    t0 = elapsed = 0.0
    try:
        while done < total:
            if done == measured_from:
                log.info("phase: measuring %d steps", total - measured_from)
                if on_measure:
                    on_measure("start")
                if meter:
                    meter.start()
                t0 = time.perf_counter()
            boundary = measured_from if done < measured_from else total
            if manager and checkpoint_every:
                boundary = min(boundary, (done // checkpoint_every + 1) * checkpoint_every)
            for i in range(done, boundary):
                losses.append(coordinator.schedule(train_step, args=(iterator,)))
                if i == 0:
                    log.info("phase: first step scheduled")
                if on_step:
                    on_step(i)
            coordinator.join()
            done = boundary
            if manager:
                step_var.assign(done)
                manager.save(checkpoint_number=done)
        elapsed = time.perf_counter() - t0
        if on_measure:
            on_measure("end")
        values = [float(np.asarray(r.fetch())) for r in losses]
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
            tf.errors.DeadlineExceededError, tf.errors.InternalError) as exc:
        last = f"step {int(step_var.numpy())} in {checkpoint_dir}" if manager and manager.latest_checkpoint else "none"
        raise ClusterRuntimeError(
            f"training stopped near step {done} because a cluster task failed or became unreachable "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). Last checkpoint: {last}. "
            + ("Rerun the same command to resume from it." if manager else
               "Pass a checkpoint directory (--checkpoint-dir) so a rerun can resume.")) from None
    counted = meter is not None and measured > 0  # a resumed run with no steps left measures nothing
    delta = meter.stop() if counted else {}
    pred = estimate(prof, cluster, plan)
    measured = max(measured, 1)
    bytes_per_step = meter.total(("worker", "ps")) / measured if counted else None
    suspect = suspect_bytes_warning(f"{base.name} ({plan.policy})", bytes_per_step, pred.bytes_per_step)
    if suspect:
        warnings.warn(suspect, RuntimeWarning, stacklevel=2)
    return RunResult(
        policy=plan.policy if not isinstance(policy, str) else policy, steps=measured, batch_size=batch_size,
        steps_per_s=measured / elapsed if elapsed else 0.0,
        samples_per_s=measured * batch_size / elapsed if elapsed else 0.0,
        final_loss=values[-1] if values else float("nan"), losses=values, bytes_per_step=bytes_per_step,
        bytes_between=per_step(delta, measured) if counted else {},
        predicted_bytes_per_step=pred.bytes_per_step, predicted_step_s=pred.step_s,
        predicted_link_bytes_per_step=pred.link_bytes_per_step,
        measured_step_s=elapsed / measured * cluster.num_workers, plan=plan.to_dict(),
        analysis=analysis.report() if analysis else None, total_steps=done, resumed_from_step=resumed_from,
        restored_weights_checksum=restored_checksum, final_weights_checksum=weights_checksum(model)[1])


def compare(model: str | Callable[[], Any] = "alexnet_cifar", *, workers: int = 2, ps: int = 1, steps: int = 30,
            batch_size: int = 32, bandwidth: Any = None, flops: Any = None, policies: Sequence[Any] = ("ps", "ralp"),
            seed: int = 0, log_dir: str | None = None, checkpoint_dir: str | None = None,
            checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, warmup_steps: int = 3,
            fault: tuple[str, int, int] | None = None, compression: Any = None,
            on_measure: Callable[[str], None] | None = None,
            step_callback: Callable[[str, int], None] | None = None) -> dict[str, RunResult]:
    """Run each policy on one LocalCluster (real task processes) and measure it.

    With several policies, each gets its own ``checkpoint_dir/<policy>``. ``fault`` =
    ``(job, index, step)`` kills that task after scheduling that step (fault injection).
    ``step_callback(policy name, step)`` is called after scheduling each step (progress).
    """
    import tensorflow as tf

    from ralp_tf.run.launch import LocalCluster
    from ralp_tf.run.traffic import cluster_endpoints

    rates: dict[str, Any] = {}
    if bandwidth is not None:
        rates["bandwidth"] = bandwidth
    if flops is not None:
        rates["flops"] = flops
    results: dict[str, RunResult] = {}
    with LocalCluster(workers=workers, ps=ps, log_dir=log_dir) as lc:
        strategy = lc.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        cluster = lc.cluster(**rates)
        for policy in policies:
            name = policy if isinstance(policy, str) else getattr(policy, "policy", type(policy).__name__)
            log.info("running %s on %s", name, cluster.describe())
            ckpt = None
            if checkpoint_dir:
                ckpt = os.path.join(checkpoint_dir, str(name)) if len(policies) > 1 else checkpoint_dir

            def on_step(i: int) -> None:
                if fault and i == fault[2] and lc.task(fault[0], fault[1]).alive():
                    log.warning("fault injection: killing %s:%d after step %d", *fault)
                    lc.kill(fault[0], fault[1])
                if step_callback:
                    step_callback(str(name), i)

            try:
                results[str(name)] = train(strategy, model, policy=policy, steps=steps, batch_size=batch_size,
                                           seed=seed, endpoints=cluster_endpoints(lc), cluster=cluster,
                                           coordinator=coordinator, checkpoint_dir=ckpt,
                                           checkpoint_every=checkpoint_every, warmup_steps=warmup_steps,
                                           on_step=on_step if fault or step_callback else None,
                                           compression=compression,
                                           on_measure=on_measure)
            except ClusterRuntimeError as exc:
                dead = [f"{t.job}:{t.index} (exit {t.proc.returncode})" for t in lc.tasks if not t.alive()]
                raise ClusterRuntimeError(f"{exc}" + (f" Dead task(s): {', '.join(dead)}." if dead else "")) from None
            if not fault:
                lc.check_alive()
    return results
