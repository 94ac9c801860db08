"""Several steps per scheduled closure (``steps_per_closure``): the same training as one step per
closure, per-step losses, checkpoints that resume at the right step, ``Model.fit`` with
``steps_per_execution`` on a placed model, and the command-line flags.

The cluster tests use the session's in-process cluster (1 worker, 2 PS), where steps run in order.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cli_exit import exit_code
from ralp_tf import models
from ralp_tf.errors import ValidationError
from ralp_tf.run.training import TrainConfig, closure_sizes, warmup_steps_for

BATCH = 8


def _tiny() -> object:
    return models.small_cnn(fc=32)


def test_closure_sizes_fill_up_to_the_boundary() -> None:
    assert closure_sizes(0, 10, 4) == [4, 4, 2]
    assert closure_sizes(3, 9, 3) == [3, 3]
    assert closure_sizes(5, 5, 8) == []
    assert closure_sizes(0, 7, 1) == [1] * 7
    with pytest.raises(ValidationError, match="steps_per_closure must be a positive integer"):
        closure_sizes(0, 4, 0)
    with pytest.raises(ValidationError, match="steps_per_closure must be .* or 0 for the cost model's choice"):
        TrainConfig(steps_per_closure=-1)
    with pytest.raises(ValidationError, match="optimizer must be one of sgd, legacy-sgd, got 'adam'"):
        TrainConfig(optimizer="adam")


def test_a_warmup_gives_every_worker_a_step_before_the_measured_window() -> None:
    """A worker's first step registers the step function with the PS tasks (hundreds of KB for a
    recurrent model): with any warm-up, at least one warm-up step per worker; none stays none."""
    assert warmup_steps_for(0, 4) == 0
    assert warmup_steps_for(1, 2) == 2 and warmup_steps_for(3, 2) == 3 and warmup_steps_for(1, 1) == 1


def _run(inprocess, steps_per_closure: int, **config) -> tuple[list[float], list[np.ndarray], object]:  # type: ignore[no-untyped-def]
    from ralp_tf.place.applier import cluster_of
    from ralp_tf.run.training import prepare_job, run_steps

    _, strategy, coordinator = inprocess
    cfg = TrainConfig(policy="ralp", batch_size=BATCH, learning_rate=0.05, steps_per_closure=steps_per_closure,
                      **{"steps": 7, "warmup_steps": 2, **config})
    job = prepare_job(strategy, _tiny, cfg, cluster_of(strategy), coordinator)
    outcome = run_steps(job)
    return outcome.losses, job.model.get_weights(), outcome


@pytest.mark.slow
def test_k_steps_per_closure_train_like_k_single_step_closures(inprocess) -> None:  # type: ignore[no-untyped-def]
    """One worker: 2 warmup + 7 steps as closures of 1 step, or of 4 (2 | 4, 3: cut at the warmup and
    the end), give the same per-step losses and final weights."""
    single, w_single, _ = _run(inprocess, 1)
    looped, w_looped, outcome = _run(inprocess, 4)
    assert len(single) == len(looped) == 9 and outcome.measured == 7
    np.testing.assert_allclose(looped, single, rtol=1e-5)
    assert len(w_looped) == len(w_single)
    for a, b in zip(w_looped, w_single):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert looped[-1] < looped[0]
    legacy, w_legacy, _ = _run(inprocess, 4, optimizer="legacy-sgd")  # the same SGD update
    np.testing.assert_allclose(legacy, single, rtol=1e-5)
    for a, b in zip(w_legacy, w_single):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_auto_steps_per_closure_runs_the_cost_models_choice(inprocess) -> None:  # type: ignore[no-untyped-def]
    """``steps_per_closure=0`` (``--steps-per-closure auto``): the job runs the K that
    best_steps_per_closure picks for its plan on its cluster, with this machine's floor priced, at
    most its steps over its workers (every worker gets closures)."""
    from ralp_tf.place.applier import cluster_of
    from ralp_tf.plan.closures import MEASURED_FLOOR
    from ralp_tf.plan.costmodel import best_steps_per_closure
    from ralp_tf.run.training import prepare_job

    _, strategy, coordinator = inprocess
    cfg = TrainConfig(policy="ralp", batch_size=BATCH, steps_per_closure=0, steps=4, warmup_steps=0)
    job = prepare_job(strategy, _tiny, cfg, cluster_of(strategy), coordinator)
    k = job.config.steps_per_closure
    assert k >= 1 and job.cluster.steps_per_closure == k and job.cluster.floor == MEASURED_FLOOR
    assert k == best_steps_per_closure(job.prepared.profile, job.cluster.with_closures(1), job.plan, limit=4)
    long = prepare_job(strategy, _tiny, dataclasses.replace(cfg, steps=64), cluster_of(strategy), coordinator)
    assert long.config.steps_per_closure == best_steps_per_closure(job.prepared.profile, job.cluster.with_closures(1),
                                                                   job.plan)


@pytest.mark.slow
def test_a_checkpointed_run_with_k_above_one_resumes_at_the_right_step(inprocess, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Checkpoints every 4 steps with 3 steps per closure: closures stop at 4, so a run of 5 saves
    steps 4 and 5; a rerun to 9 resumes at 5 and its losses are those of an uninterrupted run."""
    from ralp_tf.run.training import train

    _, strategy, coordinator = inprocess
    common = dict(policy="ralp", warmup_steps=0, batch_size=BATCH, learning_rate=0.05, coordinator=coordinator,
                  checkpoint_every=4, steps_per_closure=3)
    first = train(strategy, _tiny, steps=5, checkpoint_dir=str(tmp_path / "ckpt"), **common)
    assert first.total_steps == 5 and len(first.losses) == 5 and first.steps_per_closure == 3
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("ckpt-*/ckpt-*.index")) == ["ckpt-4.index", "ckpt-5.index"]
    resumed = train(strategy, _tiny, steps=9, checkpoint_dir=str(tmp_path / "ckpt"), **common)
    assert resumed.resumed_from_step == 5 and resumed.total_steps == 9 and len(resumed.losses) == 4
    whole = train(strategy, _tiny, steps=9, checkpoint_dir=str(tmp_path / "whole"), **{**common, "steps_per_closure": 1})
    np.testing.assert_allclose(first.losses + resumed.losses, whole.losses, rtol=1e-5)
    assert resumed.final_weights_checksum == pytest.approx(whole.final_weights_checksum, rel=1e-5)


@pytest.mark.slow
def test_fit_with_steps_per_execution_trains_a_placed_model(inprocess) -> None:  # type: ignore[no-untyped-def]
    """``@placement("ralp")`` model compiled with ``steps_per_execution=4`` and fitted under PSS ends
    with the weights of the unplaced model fitted the same way (one worker)."""
    import tensorflow as tf
    import tf_keras

    from ralp_tf.place.applier import placement

    _, strategy, _ = inprocess

    @placement("ralp", batch_size=BATCH, bandwidth="1gbit", strategy=strategy)
    def build():  # type: ignore[no-untyped-def]
        return models.small_cnn(fc=64)

    with strategy.scope():
        placed = build()
    assert placed.ralp_plan.is_split
    reference = models.small_cnn(fc=64)
    reference.set_weights(placed.get_weights())
    x, y = models.synthetic_batch(reference, BATCH, seed=5)
    loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with strategy.scope():
        placed.compile(tf_keras.optimizers.SGD(0.05), loss, steps_per_execution=4)
    reference.compile(tf_keras.optimizers.SGD(0.05), loss, steps_per_execution=4)

    def dataset_fn(_ctx=None):  # type: ignore[no-untyped-def]
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    history = placed.fit(tf_keras.utils.experimental.DatasetCreator(dataset_fn), epochs=2, steps_per_epoch=8,
                         verbose=0)
    reference.fit(dataset_fn(), epochs=2, steps_per_epoch=8, verbose=0)
    assert int(placed.optimizer.iterations.numpy()) == 16
    assert all(np.isfinite(history.history["loss"]))
    for a, b in zip(placed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["run", "--model", "small_cnn", "--steps-per-closure", "0"], "must be >= 1, got 0; give a step count such as 8, or auto"),
    (["run", "--model", "small_cnn", "--steps-per-closure", "eight"], "'eight' is not an integer"),
    (["bench", "--quick", "--testbed", "loopback", "--steps-per-closure", "0"], "must be >= 1, got 0"),
    (["run", "--model", "small_cnn", "--optimizer", "adam"], "invalid choice: 'adam'"),
])
def test_bad_steps_per_closure_is_one_error_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert exit_code(argv, monkeypatch) == 2
    assert message in capsys.readouterr().err
