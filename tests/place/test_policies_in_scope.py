"""Every placement policy works as the README shows it: ``@ralp_tf.placement(policy)`` called
inside ``with strategy.scope():`` of a ParameterServerStrategy, then trained with ``Model.fit``
and with a custom ``ClusterCoordinator`` loop.

Pins the contract of :mod:`ralp_tf.place.isolation`: solvers that train or evaluate TF models (BO's
Gaussian process, RL's LSTM policy) do it outside the user's strategy, so they neither crash in
its cross-replica context nor create variables on its cluster; solver errors reach the caller
with their own type and traceback. Uses the session's in-process cluster (1 worker, 2 PS) and
small solver budgets.
"""
from __future__ import annotations

import signal
import threading
import time
import traceback
from typing import Any, Callable

import numpy as np
import pytest

from ralp_tf.errors import PlanError

import scheduler
from ralp_tf import models
from ralp_tf.place.applier import placement
from scheduler.solvers.base import Solver
from ralp_tf.place.isolation import outside_strategy
from test_placement import BATCH, PLAN, _base, _loss

pytestmark = pytest.mark.slow

STEPS = 2
#: Variables tf_keras creates in every ``Model.__init__`` (under the active strategy), beside weights.
KERAS_MODEL_COUNTERS = ("_train_counter", "_test_counter", "_predict_counter")
#: Each policy as a fresh object per test; solver budgets are the smallest that still solve.
POLICIES: dict[str, Callable[[], Any]] = {
    "ralp": lambda: "ralp",
    "plan": lambda: PLAN,
    "exact": lambda: scheduler.Exact(),
    "greedy": lambda: scheduler.Greedy(),
    "random": lambda: scheduler.RandomSearch(samples=64, time_limit_s=5.0),
    "bo": lambda: scheduler.BayesOpt(evaluations=4, initial=2, candidates=64, fit_steps=3, time_limit_s=10.0),
    "rl": lambda: scheduler.RL(seed=0, train_seconds=5.0, iterations=2, batch=4, hidden=8, max_solve_seconds=10.0,
                               post_seconds=1.0),
    "ralp_solver": lambda: scheduler.RALP(),
}

#: make test keeps one policy of each way a solver runs: the analyzer (ralp), a plan as data (plan), a
#: search over the cost model (greedy) and a solver that trains TF models outside the strategy (rl).
#: The others go the same path (:func:`ralp_tf.place.isolation.outside_strategy`): make test-full.
EXTENDED_POLICIES = {"exact", "random", "bo", "ralp_solver"}


def _policy_params() -> list[Any]:
    return [pytest.param(n, marks=pytest.mark.extended) if n in EXTENDED_POLICIES else n for n in POLICIES]


def _place_in_scope(strategy: Any, policy: Any) -> Any:
    """``@placement(policy)`` on a build function, called inside ``strategy.scope()``.

    Checks that every variable created in this thread under the scope belongs to the built
    model or to its placed copy (weights and tf_keras's step counters), or is one of placement's
    ``ralp_anchor`` variables (the policy created nothing on the cluster), and that the policy's own TF variables (RL) live off the
    cluster. Returns the placed model.
    """
    import tensorflow as tf

    built: list[Any] = []
    created: list[Any] = []

    @placement(policy, batch_size=BATCH, bandwidth="1gbit")
    def build() -> Any:
        built.append(_base())
        return built[-1]

    def record(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        created.append(variable)
        return variable

    with strategy.scope(), tf.variable_creator_scope(record):
        placed = build()
    owned = {v.ref() for model in (built[0], placed)
             for v in model.variables + [getattr(model, counter) for counter in KERAS_MODEL_COUNTERS]}
    strays = [v.name for v in created if v.ref() not in owned and not v.name.startswith("ralp_anchor")]
    assert not strays, f"variables created on the cluster beside the model's: {strays}"
    policy_model = getattr(policy, "policy", None)  # RL's trained LSTM policy
    for v in getattr(policy_model, "variables", []):
        assert "/job:ps" not in v.device and "/job:worker" not in v.device, (v.name, v.device)
    _assert_variables_where_planned(placed)
    return placed


def _assert_variables_where_planned(model: Any) -> None:
    for name, task in model.ralp_plan.ps_layers().items():
        for v in model.get_layer(name).weights:
            assert v.device == f"/job:ps/replica:0/task:{task}/device:CPU:0", (name, v.name, v.device)


@pytest.mark.parametrize("policy_name", _policy_params())
def test_policy_places_and_fits_in_scope(inprocess, policy_name: str) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf
    import tf_keras

    _, strategy, _ = inprocess
    model = _place_in_scope(strategy, POLICIES[policy_name]())
    x, y = models.synthetic_batch(model, BATCH, seed=7)
    with strategy.scope():
        model.compile(tf_keras.optimizers.SGD(0.05), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(tf_keras.utils.experimental.DatasetCreator(
        lambda _ctx=None: tf.data.Dataset.from_tensors((x, y)).repeat()), epochs=1, steps_per_epoch=STEPS, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert int(model.optimizer.iterations.numpy()) == STEPS
    _assert_variables_where_planned(model)


@pytest.mark.parametrize("policy_name", _policy_params())
def test_policy_places_and_trains_in_a_custom_loop(inprocess, policy_name: str) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf
    import tf_keras

    _, strategy, coordinator = inprocess
    model = _place_in_scope(strategy, POLICIES[policy_name]())
    with strategy.scope():
        optimizer = tf_keras.optimizers.SGD(0.05)
    x, y = models.synthetic_batch(model, BATCH, seed=5)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = _loss(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(x, y))

    losses = [float(coordinator.schedule(step, args=(tf.constant(x), tf.constant(y))).fetch()) for _ in range(STEPS)]
    assert all(np.isfinite(losses)), losses
    assert int(optimizer.iterations.numpy()) == STEPS


def test_failing_policy_is_named_in_the_error(inprocess) -> None:  # type: ignore[no-untyped-def]
    _, strategy, _ = inprocess

    class NoCapacityPolicy:
        def plan(self, profile: Any, cluster: Any) -> Any:
            raise RuntimeError("no PS task can hold fc1")

    with strategy.scope(), pytest.raises(PlanError) as info:
        placement(NoCapacityPolicy(), batch_size=BATCH)(_base)()
    assert "NoCapacityPolicy" in str(info.value) and "no PS task can hold fc1" in str(info.value)


# ------------------------------------------------------------------ ralp_tf.place.isolation contract
class _SolverError(ValueError):
    pass


class _BrokenSolver(Solver):
    name = "broken"

    def _solve(self, problem: Any) -> Any:
        raise _SolverError(f"cannot solve {problem!r}")


def test_solver_runs_outside_the_strategy_scope(inprocess) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf

    _, strategy, _ = inprocess
    with strategy.scope(), tf.device("/job:ps/replica:0/task:1/device:CPU:0"):
        seen = outside_strategy(lambda: (tf.distribute.has_strategy(), tf.Variable(1.0).device,
                                         threading.current_thread().name))
    has_strategy, device, thread = seen
    assert not has_strategy
    assert "/job:ps" not in device and "/job:worker" not in device, device
    assert thread != threading.current_thread().name


def test_nested_calls_stay_in_the_isolated_thread() -> None:
    assert outside_strategy(lambda: threading.get_ident() == outside_strategy(threading.get_ident))


def test_solver_error_keeps_its_type_and_traceback(inprocess) -> None:  # type: ignore[no-untyped-def]
    _, strategy, _ = inprocess
    with strategy.scope(), pytest.raises(_SolverError, match="cannot solve 'p1'") as info:
        _BrokenSolver().solve("p1")
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "_solve" and "solve" in frames, frames


def test_keyboard_interrupt_in_the_solver_reaches_the_caller() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        outside_strategy(interrupted)


def test_interrupting_the_caller_stops_the_solver() -> None:
    """Ctrl-C while a solver runs: the caller gets KeyboardInterrupt, the solver thread stops."""
    stopped = threading.Event()

    def solve_forever() -> None:
        try:
            while True:
                time.sleep(0.01)
        finally:
            stopped.set()

    main = threading.get_ident()
    timer = threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        outside_strategy(solve_forever)
    timer.join()
    assert stopped.wait(5.0)
