"""The graph-rewriting pass on a live ParameterServerStrategy (in-process cluster: 1 worker, 2 PS).

Pins what users rely on: variables, forward ops and gradient ops of PS-placed layers live on
the planned PS task; placement does not change the math (losses, gradients, trained weights).
"""
from __future__ import annotations

import numpy as np
import pytest

from ralp_tf import models
from ralp_tf.errors import ModelError, PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import sgd_losses
from ralp_tf.place.applier import place, placement, unplace
from trains_like import eager_sgd_losses

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
PLAN = Plan({"flatten": PS1, "fc1": PS1, "fc2": PS0, "logits": PS1}, policy="test")
BATCH = 8


def _loss(y, logits):  # type: ignore[no-untyped-def]
    import tensorflow as tf
    import tf_keras

    return tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))


def _base():  # type: ignore[no-untyped-def]
    import tf_keras

    tf_keras.utils.set_random_seed(3)
    return models.small_cnn(fc=64)


def _base_reference_and_placed(strategy):  # type: ignore[no-untyped-def]
    """The model, an unplaced copy with the same weights, and the placed copy under ``strategy``."""
    import tf_keras

    base = _base()
    reference = tf_keras.models.clone_model(base)
    reference.set_weights(base.get_weights())
    return base, reference, place(base, PLAN, strategy)


def test_variables_live_together_on_the_planned_ps_task(inprocess) -> None:  # type: ignore[no-untyped-def]
    _, strategy, _ = inprocess
    placed = place(_base(), PLAN, strategy)
    checked = set()
    for layer in placed.layers:
        want = PLAN.placements.get(layer.name)
        for v in layer.weights:
            if want:
                assert v.device == want, (layer.name, v.name, v.device)
                checked.add(layer.name)
            else:
                assert "/job:ps/" in v.device  # stock PSS round-robin
    assert checked == {"fc1", "fc2", "logits"}  # every planned layer with weights was looked at
    assert placed.ralp_plan is PLAN


def test_forward_and_gradient_ops_run_on_the_ps(inprocess) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf

    _, strategy, _ = inprocess
    placed = place(_base(), PLAN, strategy)
    x, y = models.synthetic_batch(placed, BATCH)

    @tf.function
    def step(x, y):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss = _loss(y, placed(x, training=True))
        return tape.gradient(loss, placed.trainable_variables)

    graph = step.get_concrete_function(tf.TensorSpec(x.shape, tf.float32), tf.TensorSpec(y.shape, tf.int32)).graph
    seen_forward, seen_grad = set(), set()
    colocated = {"ReadVariableOp", "Placeholder", "NoOp"}
    for op in graph.get_operations():
        parts = op.name.split("/")
        is_grad = parts[0] == "gradient_tape"
        scope = parts[1:] if is_grad else parts
        if len(scope) < 3 or scope[0] != placed.name or op.type in colocated:
            continue
        layer = scope[1]
        want = PLAN.placements.get(layer)
        if want is None:
            assert "/job:ps" not in op.device, (op.name, op.device)
            continue
        assert op.device == want, (op.name, op.type, op.device)
        (seen_grad if is_grad else seen_forward).add(layer)
    assert seen_forward == set(PLAN.placements)
    assert {"fc1", "fc2", "logits"} <= seen_grad
    matmul_grads = [op for op in graph.get_operations()
                    if op.name.startswith(f"gradient_tape/{placed.name}/fc1/") and op.type == "MatMul"]
    assert matmul_grads and all(op.device == PS1 for op in matmul_grads)


def test_loss_and_gradients_equal_the_unplaced_model(inprocess) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf

    _, strategy, coordinator = inprocess
    base = _base()
    placed = place(base, PLAN, strategy)
    x, y = models.synthetic_batch(base, BATCH)

    @tf.function
    def step(x, y):  # type: ignore[no-untyped-def]
        with tf.GradientTape() as tape:
            loss = _loss(y, placed(x, training=True))
        return loss, tape.gradient(loss, placed.trainable_variables)

    loss_placed, grads_placed = coordinator.schedule(step, args=(tf.constant(x), tf.constant(y))).fetch()
    with tf.GradientTape() as tape:
        loss = _loss(y, base(x, training=True))
    grads = tape.gradient(loss, base.trainable_variables)
    assert float(loss_placed) == pytest.approx(float(loss), rel=1e-6, abs=1e-6)
    assert grads and len(grads_placed) == len(grads)
    for g, gp in zip(grads, grads_placed):
        np.testing.assert_allclose(gp, g.numpy(), rtol=1e-5, atol=1e-6)


def test_per_step_losses_equal_the_unplaced_model(inprocess) -> None:  # type: ignore[no-untyped-def]
    """Custom loop, one worker (fixed update order), same seed and data: same losses each step."""
    _, strategy, coordinator = inprocess
    base, reference, placed = _base_reference_and_placed(strategy)
    batches = [models.synthetic_batch(base, BATCH, seed=s % 2) for s in range(8)]
    placed_losses = sgd_losses(strategy, coordinator, placed, batches, learning_rate=0.05)
    ref_losses = eager_sgd_losses(reference, batches, _loss)
    np.testing.assert_allclose(placed_losses, ref_losses, rtol=1e-5, atol=1e-6)
    assert placed_losses[-2:] < placed_losses[:2]


def test_fit_trains_the_placed_model_like_the_unplaced_one(inprocess) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf
    import tf_keras

    _, strategy, _ = inprocess
    base, reference, placed = _base_reference_and_placed(strategy)
    x, y = models.synthetic_batch(base, BATCH, seed=7)
    with strategy.scope():
        placed.compile(tf_keras.optimizers.SGD(0.05),
                       tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    reference.compile(tf_keras.optimizers.SGD(0.05), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def dataset_fn(_ctx=None):  # type: ignore[no-untyped-def]
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    history = placed.fit(tf_keras.utils.experimental.DatasetCreator(dataset_fn), epochs=1, steps_per_epoch=3,
                         verbose=0)
    reference.fit(dataset_fn(), epochs=1, steps_per_epoch=3, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert placed.get_weights() and len(placed.get_weights()) == len(reference.get_weights())
    for a, b in zip(placed.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert placed.get_layer("fc1").weights
    for v in placed.get_layer("fc1").weights:
        assert v.device == PS1


def test_decorator_policies(inprocess) -> None:  # type: ignore[no-untyped-def]
    _, strategy, _ = inprocess

    @placement("ralp", batch_size=BATCH, bandwidth="1gbit")
    def build():  # type: ignore[no-untyped-def]
        return models.small_cnn()

    with strategy.scope():
        m = build()
    assert m.ralp_plan.is_split and "fc1" in m.ralp_plan.ps_layers()
    assert "Decision: split" in m.ralp_analysis.report()

    given = placement(PLAN, strategy=strategy)(_base)()
    assert given.ralp_plan is PLAN

    class AllHeadOnPs0:
        def plan(self, profile, cluster):  # type: ignore[no-untyped-def]
            return Plan({l.name: cluster.ps_device(0) for l in profile.layers if l.kind == "dense"}, policy="custom")

    custom = placement(AllHeadOnPs0(), strategy=strategy)(_base)()
    assert custom.get_layer("fc2").kernel.device == PS0
    stock = placement("ps", strategy=strategy)(_base)()
    assert not stock.ralp_plan.is_split


def test_errors(inprocess) -> None:  # type: ignore[no-untyped-def]
    import tensorflow as tf

    _, strategy, _ = inprocess
    with pytest.raises(PlanError, match="not in the model"):
        place(_base(), Plan({"fc9": PS0}), strategy)
    with pytest.raises(PlanError, match="not in the cluster"):
        place(_base(), Plan({"fc1": "/job:ps/replica:0/task:2/device:CPU:0"}), strategy)
    with pytest.raises(ModelError, match="ParameterServerStrategy"):
        place(_base(), PLAN, tf.distribute.OneDeviceStrategy("/cpu:0"))
    with pytest.raises(ModelError, match="needs a ParameterServerStrategy"):
        placement("ralp")(_base)()
    with pytest.raises(PlanError, match="unknown placement policy"):
        placement("fastest", strategy=strategy)(_base)()


@pytest.mark.slow  # over ~5 s: the fast tier's limit
def test_trained_placed_model_exports_to_savedmodel_and_weights(inprocess, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Train with placement, then save/load on a single machine: same predictions, no device pins."""
    import tensorflow as tf
    import tf_keras

    _, strategy, _ = inprocess
    base = _base()
    placed = place(base, PLAN, strategy)
    x, y = models.synthetic_batch(base, BATCH, seed=5)
    with strategy.scope():
        placed.compile(tf_keras.optimizers.SGD(0.1), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    placed.fit(tf_keras.utils.experimental.DatasetCreator(
        lambda _ctx=None: tf.data.Dataset.from_tensors((x, y)).repeat()), epochs=1, steps_per_epoch=2, verbose=0)
    single = unplace(placed)
    assert single.weights and all("/job:ps" not in v.device for v in single.weights)
    expected = single.predict(x, verbose=0)
    # the trained weights differ from the initial ones, and survive the copy
    assert not np.allclose(expected, base.predict(x, verbose=0))

    saved_dir = str(tmp_path / "savedmodel")
    single.save(saved_dir, save_format="tf")
    loaded = tf_keras.models.load_model(saved_dir)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    graph_devices = {op.device for f in tf.saved_model.load(saved_dir).signatures.values()
                     for op in f.graph.get_operations()}
    assert graph_devices and not any("/job:" in d for d in graph_devices)

    weights_file = str(tmp_path / "model.weights.h5")
    single.save_weights(weights_file)
    fresh = models.small_cnn(fc=64)
    fresh.load_weights(weights_file)
    np.testing.assert_allclose(fresh.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # over ~5 s: the fast tier's limit
def test_decorator_applies_a_scheduler_solver(inprocess) -> None:  # type: ignore[no-untyped-def]
    """`placement(policy=<scheduler solver>)`: the solver's Plan is applied on the live cluster."""
    import scheduler

    _, strategy, _ = inprocess
    model = placement(scheduler.Exact(), strategy=strategy, batch_size=BATCH)(_base)()
    plan = model.ralp_plan
    assert plan.placements, "the solver returned an empty plan"
    checked = 0
    for name, k in plan.ps_layers().items():
        for v in model.get_layer(name).weights:
            assert v.device == f"/job:ps/replica:0/task:{k}/device:CPU:0"
            checked += 1
    assert checked, f"no PS-placed layer with variables, nothing was checked: {plan.placements}"


def test_train_runs_a_two_input_embedding_model(inprocess) -> None:  # type: ignore[no-untyped-def]
    """The training runner feeds multi-input models (sparse ids + dense features) and places them."""
    from ralp_tf.run.training import train

    _, strategy, coordinator = inprocess

    def tiny_ctr():  # type: ignore[no-untyped-def]
        return models.ctr_dnn(vocab_sizes=(500, 300), embed_dim=8, dense_features=4, hidden=(16,))

    result = train(strategy, tiny_ctr, policy="ralp", steps=3, warmup_steps=1, batch_size=BATCH,
                   coordinator=coordinator)
    assert len(result.losses) == 4 and all(np.isfinite(result.losses))
    assert result.plan.placements


@pytest.mark.parametrize("name, placements", [("ctr_dnn", {"fc2": PS0, "fc3": PS0, "logit": PS0}),
                                              ("resnet_cifar", None)])
def test_the_round_robin_the_cost_model_prices_is_the_strategys(inprocess, name, placements) -> None:  # type: ignore[no-untyped-def]
    """Variables ParameterServerStrategy stores round-robin land on the PS task the cost model
    prices them on: it counts them in the order the model creates them (ctr_dnn's tables emb0
    first, which its topological order lists last; resnet_cifar's shortcut convolutions), whether
    the model is placed with a plan or built under the strategy's scope as stock PSS does."""
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.profiler import profile
    from ralp_tf.plan.homes import variable_shards
    from ralp_tf.plan.traffic import resolve_placements

    _, strategy, _ = inprocess
    builder = resolve_model(name)
    prof = profile(builder(), BATCH)
    assert [v for v in prof.variables_in_creation_order()] != [(l.name, i) for l in prof.layers
                                                              for i in range(len(l.var_bytes))]
    plan = Plan(placements, policy="test") if placements else None
    homes = variable_shards(prof, resolve_placements(prof, plan), 2)
    offset = strategy.extended._variable_count  # the strategy's counter goes on across the models this session built
    if plan:
        model = place(builder(), plan, strategy)
    else:
        with strategy.scope():
            model = builder()
    layers = {l.name: l for l in model.layers}
    checked = 0
    for l in prof.layers:
        for i, shards in enumerate(homes[l.name]):
            (task, _), = shards
            want = int(task.index) if (plan and l.name in plan.placements) else (int(task.index) + offset) % 2
            assert f"/task:{want}/" in layers[l.name].weights[i].device, (l.name, i, layers[l.name].weights[i].device)
            checked += 1
    assert checked == sum(len(l.var_bytes) for l in prof.layers) > 10
