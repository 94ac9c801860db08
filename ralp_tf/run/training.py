"""Training jobs on a ParameterServerStrategy cluster: stock or placed, measured.

:func:`train` runs one job with a custom loop driven by ``ClusterCoordinator`` on synthetic
data created on the workers (so no input data crosses the network), in three steps over one
:class:`TrainConfig`: :func:`prepare_job` (build and profile the model outside the strategy,
plan it, place it, the optimizer, the step function, the checkpoint), :func:`run_steps` (schedule
and measure the steps) and :func:`summarise` (the :class:`RunResult`: measured steps/s, bytes per
step between each pair of tasks when a meter counts them, per-step losses, and the cost model's
predictions).

The step's loss is :func:`ralp_tf.model.data.per_sample_loss` averaged over the batch, plus
``model.losses`` (weight regularisers, ``add_loss``), as ``Model.fit`` adds them.

:func:`compare` runs stock PSS and RALP on the same LocalCluster one after the other. Steps are
scheduled ``steps_per_closure`` to a closure (default 1); "bytes per step" is total bytes between
workers and PS tasks divided by the number of worker steps, whatever the closures.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ralp_tf.errors import ClusterRuntimeError, ValidationError, check_int
from ralp_tf.model.builtin import resolve_model
from ralp_tf.model.data import dataset_batch, per_sample_loss, weights_checksum
from ralp_tf.place.applier import Prepared, cluster_of, place_from_builder, prepare
from ralp_tf.place.fusion import fused_groups, train_on_batch
from ralp_tf.place.policies import plan_with_policy
from ralp_tf.place.verify import reference_gradients, verify_gradients
from ralp_tf.plan.analyzer import Analysis
from ralp_tf.plan.cluster import Cluster, Rates
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE, MEASURED_FLOOR
from ralp_tf.plan.costmodel import best_steps_per_closure, estimate
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.strategies import is_stock_plan
from ralp_tf.run.checkpoints import CheckpointStore, model_digest
from ralp_tf.run.traffic import Endpoint, TrafficMeter, per_step, suspect_bytes_warning

__all__ = ["DEFAULT_CHECKPOINT_EVERY", "OPTIMIZERS", "LOOP_OPTIMIZER", "sgd_optimizer", "RunResult", "TrainConfig", "Job", "StepsOutcome", "sgd_losses",
           "train_loss", "prepare_model", "prepare_job", "closure_sizes", "warmup_steps_for", "run_steps", "summarise",
           "train", "compare"]

log = logging.getLogger(__name__)
DEFAULT_CHECKPOINT_EVERY = 10
#: The training loop's optimizers (SGD, the same update): ``"sgd"`` is ``tf_keras.optimizers.SGD``,
#: ``"legacy-sgd"`` ``tf_keras.optimizers.legacy.SGD``, whose sparse (embedding) updates cost far less
#: (ctr_dnn, batch 32, one process: 41 ms against 2.3 ms per step, benchmarks/optimizer_ab.py).
OPTIMIZERS = ("sgd", "legacy-sgd")
#: The loop's default (``ralp-tf run``, ``bench``, :func:`train`, the testbed's jobs): Keras's own default
#: class, which the control bytes and every recorded figure were measured with (BUILD_NOTES.md says why
#: ``legacy-sgd``, the same update with far cheaper sparse updates, is not the default yet).
LOOP_OPTIMIZER = "sgd"


def sgd_optimizer(name: str, learning_rate: float) -> Any:
    """The optimizer :data:`OPTIMIZERS` names, with ``learning_rate`` (create it under the strategy's
    scope where the loop needs that). ValidationError names the choices for any other name."""
    import tf_keras

    from ralp_tf.errors import ValidationError

    if name not in OPTIMIZERS:
        raise ValidationError(f"optimizer {name!r} is not one of {', '.join(OPTIMIZERS)}")
    return (tf_keras.optimizers.legacy.SGD if name == "legacy-sgd" else tf_keras.optimizers.SGD)(learning_rate)


@dataclasses.dataclass
class RunResult:
    """One measured job. ``to_dict()`` is its JSON form (``plan`` as the plan's JSON object,
    ``analysis`` as the analyzer's report text)."""

    policy: str
    steps: int
    batch_size: int
    steps_per_s: float
    samples_per_s: float
    final_loss: float
    losses: list[float]  # step order within a closure, closures in schedule order (docs/cli.md, `run --json`)
    bytes_per_step: float | None
    bytes_between: dict[str, float]
    predicted_bytes_per_step: float
    predicted_step_s: float
    measured_step_s: float
    #: the placement plan of a PSS run (stock PSS: the plan that places nothing); None for a ring run
    plan: Plan | None
    analysis: Analysis | None = None
    total_steps: int = 0
    resumed_from_step: int | None = None
    restored_weights_checksum: float | None = None
    #: :func:`ralp_tf.run.checkpoints.model_digest` of the restored model: equal to the checkpoint's
    #: :func:`~ralp_tf.run.checkpoints.checkpoint_model_digest` when every model variable was restored
    restored_weights_digest: str | None = None
    final_weights_checksum: float | None = None
    #: bytes crossing host links per synchronous step (``workers`` worker steps), loopback excluded:
    #: the cost model's ``StepEstimate.link_bytes_per_step``, comparable with a testbed's link counters
    predicted_link_bytes_per_step: float | None = None
    #: steps each scheduled closure ran (at most; a closure stops at warmup end, checkpoints and the end)
    steps_per_closure: int = 1
    #: the loop's optimizer (:data:`OPTIMIZERS`)
    optimizer: str = LOOP_OPTIMIZER
    #: whether the worker's variables moved fused, one pull and one push per PS task (:mod:`ralp_tf.place.fusion`)
    fuse_transfers: bool = False
    #: with ``check_gradients``: True when the placed model's first-step loss and gradients equal the
    #: unplaced model's (:func:`ralp_tf.place.verify.verify_gradients`), False when the unplaced
    #: model's own evaluations disagree (it samples, or is ill-conditioned: nothing to compare); None
    #: when not asked
    gradients_checked: bool | None = None
    #: the distributed strategy that trained (:data:`ralp_tf.plan.strategies.STRATEGIES`): ``ps`` or
    #: ``pss`` (ParameterServerStrategy, stock or with a plan), ``mwms`` (the ring)
    strategy: str = "pss"

    @property
    def report(self) -> str | None:
        """The analyzer's decision in words (None for a plan no analyzer chose)."""
        return self.analysis.report() if self.analysis is not None else None

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["plan"] = self.plan.to_dict() if self.plan is not None else None
        d["analysis"] = self.report
        return d


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What one training job runs (see :func:`train` for each field)."""

    policy: Any = "ralp"
    steps: int = 30
    warmup_steps: int = 3
    batch_size: int = 32
    learning_rate: float = 0.01
    seed: int = 0
    checkpoint_dir: str | None = None
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
    measure_compute: bool = False
    compute_scale: float = 1.0
    compression: Any = None
    sequence_length: int | None = None
    steps_per_closure: int = 1
    optimizer: str = LOOP_OPTIMIZER
    check_gradients: bool = False
    fuse_transfers: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValidationError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        check_int(self.steps, "steps")
        check_int(self.steps_per_closure, "steps_per_closure", minimum=AUTO_STEPS_PER_CLOSURE,
                  hint="pass e.g. 8 (steps run in one scheduled closure), or 0 for the cost model's choice")
        check_int(self.batch_size, "batch_size", hint="pass e.g. 32")
        check_int(self.warmup_steps, "warmup_steps", minimum=0)
        if self.checkpoint_dir:
            check_int(self.checkpoint_every, "checkpoint_every")


def train_loss(model: Any, spec: Any = None) -> Callable[[Any, Any], Any]:
    """``loss(labels, outputs)``: the batch mean of :func:`ralp_tf.model.data.per_sample_loss` plus
    ``model.losses`` (the custom loop's loss, what ``Model.fit`` minimises)."""
    import tensorflow as tf

    per_sample = per_sample_loss(spec if spec is not None else model)

    def loss(labels: Any, outputs: Any) -> Any:
        value = tf.reduce_mean(per_sample(labels, outputs))
        extra = [tf.cast(l, value.dtype) for l in model.losses]
        return tf.add_n([value, *extra]) if extra else value

    return loss


def sgd_losses(strategy: Any, coordinator: Any, model: Any, batches: Sequence[tuple[Any, Any]],
               learning_rate: float = 0.05) -> list[float]:
    """Train ``model`` (built under ``strategy``) with SGD(``learning_rate``), one scheduled step
    per ``(inputs, labels)`` batch in order, and return each step's loss (:func:`train_loss`). With
    one worker the steps run in order."""
    import tensorflow as tf
    import tf_keras

    with strategy.scope():
        optimizer = tf_keras.optimizers.SGD(learning_rate)
    loss_fn = train_loss(model)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        return strategy.run(lambda x, y: train_on_batch(model, loss_fn, optimizer, x, y), args=(x, y))

    scheduled = [coordinator.schedule(step, args=(tf.nest.map_structure(tf.constant, x),
                                                  tf.nest.map_structure(tf.constant, y)))
                 for x, y in batches]
    coordinator.join()
    return [float(np.asarray(r.fetch())) for r in scheduled]


@dataclasses.dataclass
class Job:
    """A prepared job: the placed model and everything its steps need."""

    config: TrainConfig
    cluster: Cluster
    prepared: Prepared
    plan: Plan
    analysis: Analysis | None
    model: Any
    coordinator: Any
    iterator: Any
    train_step: Any
    step_var: Any
    manager: Any = None
    resumed_from: int | None = None
    #: one step without the loop (``train_step(iterator, 1)``'s math); None: closures of one step loop too
    train_step_once: Any = None
    restored_checksum: float | None = None
    #: :func:`ralp_tf.run.checkpoints.model_digest` of the model as restored (None: a fresh start)
    restored_digest: str | None = None
    gradients_checked: bool | None = None


def prepare_model(builder: Callable[[], Any], config: TrainConfig) -> Prepared:
    """``builder``'s model built (seeded with ``config.seed``), profiled and recorded outside any
    strategy (:func:`ralp_tf.place.applier.prepare`): a model that cannot be profiled is refused
    here, before a job starts."""
    import tf_keras

    tf_keras.utils.set_random_seed(config.seed)
    log.info("phase: profiling")
    prepared = prepare(builder, config.batch_size, sequence_length=config.sequence_length,
                       measure=config.measure_compute)
    prepared.profile = prepared.profile.with_optimizer(config.optimizer)  # the loop's own optimizer, priced
    if config.measure_compute:
        prepared.profile = prepared.profile.scaled_compute(config.compute_scale)
    if config.check_gradients:
        x, y = _batch(prepared.spec, config)
        prepared.reference = reference_gradients(prepared.base, train_loss(prepared.base, prepared.spec), x, y)
    return prepared


def _batch(spec: Any, config: TrainConfig) -> tuple[Any, Any]:
    """The job's synthetic batch, one nested structure for tf.data (:func:`~ralp_tf.model.data.dataset_batch`)."""
    return dataset_batch(spec, config.batch_size, seed=config.seed)


def prepare_job(strategy: Any, builder: Callable[[], Any], config: TrainConfig, cluster: Cluster,
                coordinator: Any = None, prepared: Prepared | None = None) -> Job:
    """Plan ``builder``'s model (``prepared``, or :func:`prepare_model`), place it, and make the
    optimizer, the per-worker synthetic dataset, the step function and the checkpoint (restoring
    the latest one in ``config.checkpoint_dir``).

    The step function ``train_step(iterator, k)`` runs ``k`` steps (an int32 tensor, so one trace
    serves every ``k``) in one closure, a ``tf.range`` loop around ``strategy.run``, and returns
    their ``k`` losses stacked (float32); ``train_step_once(iterator)`` is one step without the loop
    (its float32 loss), the closure of one step: a loop's iterations cost control messages between
    the worker and every PS task its body reaches (``ralp-tf floor``: a looped one-step closure
    costs about 3x a plain one)."""
    import tensorflow as tf
    import tf_keras

    prepared = prepared or prepare_model(builder, config)
    prepared.profile = prepared.profile.with_optimizer(config.optimizer)  # a shared one was priced with another
    if cluster.floor is None:  # this machine's closure floor, priced at the loop's steps per closure
        cluster = cluster.with_closures(max(config.steps_per_closure, 1), MEASURED_FLOOR)
    cluster = cluster.with_fused_transfers(config.fuse_transfers)
    plan, analysis = plan_with_policy(config.policy, prepared.profile, cluster, compression=config.compression)
    if config.steps_per_closure == AUTO_STEPS_PER_CLOSURE:  # every worker gets closures; none spans a checkpoint
        limit = min(max(1, config.steps // cluster.num_workers), config.checkpoint_every if config.checkpoint_dir else config.steps)
        chosen = best_steps_per_closure(prepared.profile, cluster, plan, limit)
        log.info("steps per closure: %d (the cost model's choice)", chosen)
        config = dataclasses.replace(config, steps_per_closure=chosen)
        cluster = cluster.with_closures(chosen, cluster.floor)
    model = place_from_builder(builder, prepared, plan, strategy, sequence_length=config.sequence_length)
    plan = model.ralp_plan
    with strategy.scope():
        optimizer = sgd_optimizer(config.optimizer, config.learning_rate)
    spec = prepared.spec
    loss_fn = train_loss(model, spec)
    x, y = _batch(spec, config)
    coordinator = coordinator or tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    checked = None
    if config.check_gradients:
        if prepared.reference is None:
            raise ValidationError("check_gradients needs the unplaced model's gradients, taken before connecting "
                                  "to the cluster: prepare the model with prepare_model(builder, config) and the "
                                  "same config")
        checked = verify_gradients(model, loss_fn, x, y, coordinator, prepared.reference)
    iterator = iter(coordinator.create_per_worker_dataset(lambda: tf.data.Dataset.from_tensors((x, y)).repeat()))

    groups = fused_groups(model, plan, prepared.profile) if config.fuse_transfers else ()

    def replica_fn(batch: Any) -> Any:
        return tf.cast(train_on_batch(model, loss_fn, optimizer, *batch, groups), tf.float32)

    @tf.function
    def train_step_once(it: Any) -> Any:
        return strategy.run(replica_fn, args=(next(it),))

    @tf.function
    def train_step(it: Any, k: Any) -> Any:
        losses = tf.TensorArray(tf.float32, size=k)
        for i in tf.range(k):
            losses = losses.write(i, strategy.run(replica_fn, args=(next(it),)))
        return losses.stack()

    step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="ralp_step")
    job = Job(config=config, cluster=cluster, prepared=prepared, plan=plan, analysis=analysis, model=model,
              coordinator=coordinator, iterator=iterator, train_step=train_step, step_var=step_var,
              train_step_once=train_step_once, gradients_checked=checked)
    if config.checkpoint_dir:
        job.manager = CheckpointStore(tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var),
                                      config.checkpoint_dir)
        restored = job.manager.restore()
        if restored:
            job.resumed_from = int(step_var.numpy())
            job.restored_checksum = weights_checksum(model)[1]
            job.restored_digest = model_digest(model)
            log.info("resumed from %s (step %d)", restored.prefix, job.resumed_from)
    return job


@dataclasses.dataclass
class StepsOutcome:
    """What :func:`run_steps` measured: the losses of the steps it ran, the measured window's
    seconds and steps, the step counter at the end, and the bytes the meter counted (or None)."""

    losses: list[float]
    elapsed: float
    measured: int
    done: int
    delta: dict[Any, float] | None


def closure_sizes(start: int, boundary: int, steps_per_closure: int) -> list[int]:
    """The steps of each closure scheduled from step ``start`` up to ``boundary``:
    ``steps_per_closure`` each, the last one what is left (``[]`` when ``start >= boundary``)."""
    check_int(steps_per_closure, "steps_per_closure")
    left = max(boundary - start, 0)
    return [steps_per_closure] * (left // steps_per_closure) + ([left % steps_per_closure] if left % steps_per_closure
                                                                 else [])


def warmup_steps_for(warmup_steps: int, workers: int) -> int:
    """The warm-up a job runs: none when ``warmup_steps`` is 0, else at least one step per worker,
    ``max(warmup_steps, workers)``. A worker's first step registers the step function with the PS
    tasks and instantiates it there (hundreds of KB for recurrent models: measured 650 KB in the
    first step of bidirectional_lstm_imdb's second worker), so the measured window must start after
    every worker has run one."""
    return max(warmup_steps, workers) if warmup_steps else 0


def run_steps(job: Job, *, meter: Any = None, on_step: Callable[[int], None] | None = None,
              on_measure: Callable[[str], None] | None = None) -> StepsOutcome:
    """Schedule :func:`warmup_steps_for` warm-up steps plus ``steps`` (less what a restored
    checkpoint already did) in closures of ``steps_per_closure`` steps (:func:`closure_sizes`: a
    closure never crosses the end of the warm-up, a multiple of ``checkpoint_every`` when
    checkpointing, or the end; warm-up closures are small enough that every worker gets one, and
    run the loop function when ``steps_per_closure`` is above 1), checkpointing every
    ``checkpoint_every``; measure the last ``steps`` (wall time, and bytes when ``meter``
    counts them). ``on_step(i)`` is called once per step, after the closure holding step ``i`` is
    scheduled; the losses are one per step, in step order within each closure. A task failure
    raises ClusterRuntimeError naming the last checkpoint."""
    import tensorflow as tf

    config, coordinator = job.config, job.coordinator
    workers = job.cluster.num_workers
    warmup = warmup_steps_for(config.warmup_steps, workers)
    total = warmup + config.steps
    done = int(job.step_var.numpy())
    measured_from = max(done, warmup)
    measured = total - measured_from
    scheduled: list[Any] = []
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
            if job.manager and config.checkpoint_every:
                boundary = min(boundary, (done // config.checkpoint_every + 1) * config.checkpoint_every)
            size = config.steps_per_closure
            if done < measured_from:  # one closure per worker at least
                size = max(1, min(size, (boundary - done) // workers))
            _schedule_closures(job, done, boundary, scheduled, on_step, size, loop=config.steps_per_closure > 1)
            coordinator.join()
            done = boundary
            if job.manager:
                job.step_var.assign(done)
                job.manager.save(done)
        elapsed = time.perf_counter() - t0
        if on_measure:
            on_measure("end")
        losses = [float(v) for r in scheduled for v in np.asarray(r.fetch()).reshape(-1)]
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
            tf.errors.DeadlineExceededError, tf.errors.InternalError) as exc:
        manager = job.manager
        last = f"step {manager.latest.step} in {config.checkpoint_dir}" if manager and manager.latest else "none"
        raise ClusterRuntimeError(
            f"training stopped near step {done} because a cluster task failed or became unreachable "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). Last checkpoint: {last}. "
            + ("Rerun the same command to resume from it." if manager else
               "Pass a checkpoint directory (--checkpoint-dir) so a rerun can resume.")) from None
    counted = meter is not None and measured > 0  # a resumed run with no steps left measures nothing
    return StepsOutcome(losses=losses, elapsed=elapsed, measured=measured, done=done,
                        delta=meter.stop() if counted else None)


def _schedule_closures(job: Job, start: int, boundary: int, scheduled: list[Any],
                       on_step: Callable[[int], None] | None, size: int, *, loop: bool = False) -> None:
    """Schedule steps ``start..boundary-1`` as closures of :func:`closure_sizes` of ``size`` (a
    closure of one step: ``job.train_step_once`` unless ``loop``; of ``k``:
    ``job.train_step(iterator, k)``), appending each closure's remote value to ``scheduled`` and
    calling ``on_step`` for each of its steps."""
    import tensorflow as tf

    i = start
    for k in closure_sizes(start, boundary, size):
        if k == 1 and job.train_step_once is not None and not loop:
            scheduled.append(job.coordinator.schedule(job.train_step_once, args=(job.iterator,)))
        else:
            scheduled.append(job.coordinator.schedule(job.train_step, args=(job.iterator, tf.constant(k, tf.int32))))
        if i == 0:
            log.info("phase: first step scheduled")
        for step in range(i, i + k):
            if on_step:
                on_step(step)
        i += k


def summarise(job: Job, outcome: StepsOutcome, meter: Any = None) -> RunResult:
    """The :class:`RunResult` of ``job`` after ``outcome``, with the cost model's predictions; warns
    when the measured bytes are far off the prediction."""
    config = job.config
    pred = estimate(job.prepared.profile, job.cluster, job.plan)
    measured = max(outcome.measured, 1)
    counted = outcome.delta is not None
    bytes_per_step = meter.total(("worker", "ps")) / measured if counted else None
    suspect = suspect_bytes_warning(f"{job.prepared.base.name} ({job.plan.policy})", bytes_per_step,
                                    pred.bytes_per_step)
    if suspect:
        warnings.warn(suspect, RuntimeWarning, stacklevel=3)
    elapsed = outcome.elapsed
    policy = config.policy if isinstance(config.policy, str) else job.plan.policy
    return RunResult(
        policy=policy, steps=measured, batch_size=config.batch_size,
        steps_per_s=measured / elapsed if elapsed else 0.0,
        samples_per_s=measured * config.batch_size / elapsed if elapsed else 0.0,
        final_loss=outcome.losses[-1] if outcome.losses else float("nan"), losses=outcome.losses,
        bytes_per_step=bytes_per_step, bytes_between=per_step(outcome.delta, measured) if counted else {},
        predicted_bytes_per_step=pred.bytes_per_step, predicted_step_s=pred.step_s,
        predicted_link_bytes_per_step=pred.link_bytes_per_step,
        measured_step_s=elapsed / measured * job.cluster.num_workers, plan=job.plan, analysis=job.analysis,
        total_steps=outcome.done, resumed_from_step=job.resumed_from, restored_weights_checksum=job.restored_checksum,
        restored_weights_digest=job.restored_digest,
        final_weights_checksum=weights_checksum(job.model)[1], steps_per_closure=config.steps_per_closure,
        optimizer=config.optimizer, gradients_checked=job.gradients_checked, fuse_transfers=config.fuse_transfers,
        strategy="ps" if is_stock_plan(job.plan) else "pss")


def train(strategy: Any, build_model: Callable[[], Any] | str, *, policy: Any = "ralp", steps: int = 30,
          warmup_steps: int = 3, batch_size: int = 32, learning_rate: float = 0.01, seed: int = 0,
          endpoints: Sequence[Endpoint] | None = None, cluster: Cluster | None = None, meter: Any = None,
          on_step: Callable[[int], None] | None = None, coordinator: Any = None,
          checkpoint_dir: str | None = None, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
          on_measure: Callable[[str], None] | None = None, measure_compute: bool = False,
          compute_scale: float = 1.0, compression: Any = None, sequence_length: int | None = None,
          prepared: Prepared | None = None, steps_per_closure: int = 1, optimizer: str = LOOP_OPTIMIZER,
          check_gradients: bool = False, fuse_transfers: bool = False) -> RunResult:
    """Train ``build_model`` for ``warmup_steps + steps`` steps on ``strategy``; measure the last ``steps``.

    ``policy`` is a policy name of :mod:`ralp_tf.place.policies` ("ralp", "ps", "rl", ...), a Plan,
    or a placement policy object; ``compression`` (see :mod:`ralp_tf.plan.compression`; ``"auto"``
    lets the analyzer weigh fp16) goes to the planner. ``cluster`` gives the rates the planner and
    the predictions use (default: from the strategy). ``sequence_length`` is the length given to
    inputs of variable length. ``on_step(i)`` is called after scheduling step ``i`` (fault
    injection, progress); ``on_measure("start")`` / ``on_measure("end")`` when the measured window
    opens and closes. ``meter`` (anything with :class:`~ralp_tf.run.traffic.TrafficMeter`'s
    ``start``/``stop``/``total``, e.g. :class:`ralp_tf.run.remote.AgentMeter`) counts the bytes
    instead of one built from ``endpoints``; with neither, ``bytes_per_step`` is None.

    With ``measure_compute`` the planner and the predictions use each layer's measured
    forward+backward time on this machine times ``compute_scale`` (e.g. the number of tasks that
    share the cores during training) instead of FLOP rates.

    With ``checkpoint_dir``, model, optimizer and the step counter are saved every
    ``checkpoint_every`` steps; a rerun with the same directory restores the latest checkpoint
    and trains only the remaining steps, so a failure loses at most ``checkpoint_every - 1``
    steps. A task failure raises ClusterRuntimeError naming the last checkpoint. ``prepared`` (from
    :func:`prepare_model`) reuses a model already built and profiled outside the strategy.

    ``steps_per_closure`` steps run in each scheduled closure (a loop inside the ``tf.function``;
    :func:`run_steps`): the coordinator's fixed cost per closure is paid once per that many steps.
    Losses, checkpoints, warmup and the measured window stay per step. ``optimizer`` is one of
    :data:`OPTIMIZERS` (SGD at ``learning_rate`` either way). With ``check_gradients`` the placed
    model's first step is compared with the unplaced model's before training
    (:func:`ralp_tf.place.verify.verify_gradients`; ``RunResult.gradients_checked``). With
    ``fuse_transfers`` each step moves the worker's variables fused (:mod:`ralp_tf.place.fusion`).
    """
    config = TrainConfig(policy=policy, steps=steps, warmup_steps=warmup_steps, batch_size=batch_size,
                         learning_rate=learning_rate, seed=seed, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, measure_compute=measure_compute,
                         compute_scale=compute_scale, compression=compression, sequence_length=sequence_length,
                         steps_per_closure=steps_per_closure, optimizer=optimizer, check_gradients=check_gradients,
                         fuse_transfers=fuse_transfers)
    builder = resolve_model(build_model) if isinstance(build_model, str) else build_model
    job = prepare_job(strategy, builder, config, cluster or cluster_of(strategy), coordinator, prepared)
    meter = meter if meter is not None else (TrafficMeter(endpoints) if endpoints else None)
    outcome = run_steps(job, meter=meter, on_step=on_step, on_measure=on_measure)
    return summarise(job, outcome, meter)


def compare(model: str | Callable[[], Any] = "alexnet_cifar", *, workers: int = 2, ps: int = 1, steps: int = 30,
            batch_size: int = 32, bandwidth: Any = None, flops: Any = None, policies: Sequence[Any] = ("ps", "ralp"),
            seed: int = 0, log_dir: str | None = None, checkpoint_dir: str | None = None,
            checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, warmup_steps: int = 3,
            fault: tuple[str, int, int] | None = None, compression: Any = None,
            on_measure: Callable[[str], None] | None = None,
            step_callback: Callable[[str, int], None] | None = None,
            sequence_length: int | None = None, prepared: Prepared | None = None,
            steps_per_closure: int = 1, optimizer: str = LOOP_OPTIMIZER, check_gradients: bool = False,
            fuse_transfers: bool = False, calibration: Any = None) -> dict[str, RunResult]:
    """Run each policy on one LocalCluster (real task processes) and measure it. The model is built
    and profiled once, while the cluster's tasks start; a model that cannot be profiled is refused
    before any step, and the tasks are stopped. Each policy's run places a fresh build of it with
    the same initial weights.

    With several policies, each gets its own ``checkpoint_dir/<policy>``. ``fault`` =
    ``(job, index, step)`` kills that task after scheduling that step (fault injection).
    ``step_callback(policy name, step)`` is called after scheduling each step (progress).
    ``prepared`` (:func:`prepare_model`, with the same batch size, seed and sequence length) is the
    model already built and profiled. ``steps_per_closure``, ``optimizer``, ``check_gradients`` and
    ``fuse_transfers`` go to :func:`train`. ``calibration`` (``ralp-tf calibrate``'s, of a local
    cluster of this shape on this machine) prices the plans and predictions.
    """
    from ralp_tf.run.launch import LocalCluster
    from ralp_tf.run.traffic import cluster_endpoints

    rates = Rates(bandwidth, flops).kwargs()
    builder = resolve_model(model) if isinstance(model, str) else model
    results: dict[str, RunResult] = {}
    with LocalCluster(workers=workers, ps=ps, log_dir=log_dir).start(wait=False) as lc:
        import tensorflow as tf

        prepared = prepared or prepare_model(builder, TrainConfig(batch_size=batch_size, seed=seed,
                                                                  sequence_length=sequence_length,
                                                                  check_gradients=check_gradients, optimizer=optimizer))
        strategy = lc.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        cluster = lc.cluster(**rates)
        if calibration is not None:
            from ralp_tf.run.calibrated import calibrated_job

            prepared.profile, cluster = calibrated_job(calibration, cluster, prepared.profile, rates=rates)
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
                results[str(name)] = train(strategy, builder, policy=policy, steps=steps, batch_size=batch_size,
                                           seed=seed, endpoints=cluster_endpoints(lc), cluster=cluster,
                                           coordinator=coordinator, checkpoint_dir=ckpt,
                                           checkpoint_every=checkpoint_every, warmup_steps=warmup_steps,
                                           on_step=on_step if fault or step_callback else None,
                                           compression=compression, on_measure=on_measure,
                                           sequence_length=sequence_length, prepared=prepared,
                                           steps_per_closure=steps_per_closure, optimizer=optimizer,
                                           check_gradients=check_gradients, fuse_transfers=fuse_transfers)
            except ClusterRuntimeError as exc:
                dead = [f"{t.job}:{t.index} (exit {t.proc.returncode})" for t in lc.tasks if not t.alive()]
                raise ClusterRuntimeError(f"{exc}" + (f" Dead task(s): {', '.join(dead)}." if dead else "")) from None
            if not fault:
                lc.check_alive()
    return results
