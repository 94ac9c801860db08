"""Subclassed models and layers inside nested models: profiled by tracing, named by path,
placed (variables, forward and gradient ops) and trained like their Functional twins."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ralp_tf import models
from ralp_tf.place.applier import place, placement
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import sgd_losses

pytestmark = pytest.mark.slow

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
HEAD = Plan({"fc1": PS1, "fc2": PS0, "logits": PS1}, policy="test")


def small_cnn_subclassed() -> Any:
    """:func:`ralp_tf.model.builtin.small_cnn` (fc=64) as a subclassed model, same layer names, unbuilt."""
    import tf_keras as k

    L = k.layers

    class SmallCnn(k.Model):
        def __init__(self) -> None:
            super().__init__(name="small_cnn")
            self.conv1 = L.Conv2D(8, 3, padding="same", activation="relu", name="conv1")
            self.pool1 = L.MaxPooling2D(2, name="pool1")
            self.conv2 = L.Conv2D(16, 3, padding="same", activation="relu", name="conv2")
            self.pool2 = L.MaxPooling2D(2, name="pool2")
            self.flatten = L.Flatten(name="flatten")
            self.fc1 = L.Dense(64, activation="relu", name="fc1")
            self.fc2 = L.Dense(64, activation="relu", name="fc2")
            self.logits = L.Dense(10, name="logits")

        def call(self, x: Any, training: bool = False) -> Any:
            x = self.pool2(self.conv2(self.pool1(self.conv1(x))))
            return self.logits(self.fc2(self.fc1(self.flatten(x))))

    return SmallCnn()


def _seeded(build: Any) -> Any:
    import tf_keras

    tf_keras.utils.set_random_seed(11)
    return build()


def test_subclassed_model_is_placed_in_place_and_trains_like_the_functional_one(inprocess: Any) -> None:
    _, strategy, coordinator = inprocess
    functional = place(_seeded(lambda: models.small_cnn(fc=64)), HEAD, strategy)
    subclassed = place(_seeded(small_cnn_subclassed), HEAD, strategy, input_shape=(16, 16, 3))  # verified
    for name in HEAD.placements:
        assert [v.device for v in subclassed.get_layer(name).weights] == [HEAD.placements[name]] * 2
    batches = [models.synthetic_batch(functional, 8, seed=s % 2) for s in range(4)]
    np.testing.assert_allclose(sgd_losses(strategy, coordinator, subclassed, batches),
                               sgd_losses(strategy, coordinator, functional, batches), rtol=1e-5, atol=1e-6)


def test_decorator_places_a_subclassed_model_built_by_its_constructor(inprocess: Any) -> None:
    _, strategy, _ = inprocess

    @placement("ralp", batch_size=8, bandwidth="100mbit")
    def build() -> Any:
        return models.alexnet_cifar_subclassed()  # builds itself in its constructor

    with strategy.scope():
        model = build()
    assert {"fc1", "fc2", "logits"} <= set(model.ralp_plan.ps_layers())
    for name, k in model.ralp_plan.ps_layers().items():
        assert all(v.device.startswith(f"/job:ps/replica:0/task:{k}/") for v in model.get_layer(name).weights)


def test_head_inside_a_nested_classifier_is_placed_and_fit_trains(inprocess: Any) -> None:
    import tensorflow as tf
    import tf_keras

    _, strategy, _ = inprocess

    @placement("ralp", batch_size=8, bandwidth="100mbit")
    def build() -> Any:
        return models.transfer_classifier(hidden=256)

    with strategy.scope():
        model = build()
        model.compile(tf_keras.optimizers.SGD(0.01), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    head = {p for p in model.ralp_plan.ps_layers() if p.startswith("classifier/")}
    assert head == {"classifier/fc1", "classifier/fc2", "classifier/logits"}
    classifier = model.get_layer("classifier")
    for name in ("fc1", "fc2", "logits"):
        k = model.ralp_plan.ps_layers()[f"classifier/{name}"]
        assert all(f"/job:ps/replica:0/task:{k}/" in v.device for v in classifier.get_layer(name).weights)
    x, y = models.synthetic_batch(model, 8)
    history = model.fit(tf_keras.utils.experimental.DatasetCreator(
        lambda ctx: tf.data.Dataset.from_tensors((x, y)).repeat()), epochs=1, steps_per_epoch=2, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_plan_naming_an_unknown_path_gets_close_matches(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    with pytest.raises(PlanError, match="did you mean 'classifier/fc1'"):
        place(models.transfer_classifier(hidden=32), Plan({"classifier/fc_1": PS0}), strategy)


def test_sublayer_creating_variables_outside_build_is_refused_by_name(inprocess: Any) -> None:
    import tensorflow as tf
    import tf_keras as k

    _, strategy, _ = inprocess

    class Eager(k.layers.Layer):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.w = tf.Variable(tf.ones([4, 2]), name="w")  # created before placement can act

        def call(self, x: Any) -> Any:
            return tf.matmul(x, self.w)

    class Model(k.Model):
        def __init__(self) -> None:
            super().__init__(name="eager_vars")
            self.head = Eager(name="head")

        def call(self, x: Any) -> Any:
            return self.head(x)

    with strategy.scope():
        model = Model()
    elsewhere = PS0 if "/task:1/" in model.head.w.device else PS1  # not where round-robin put it
    with pytest.raises(PlanError, match="layer .head.*outside the layer.s build"):
        place(model, Plan({"head": elsewhere}), strategy, input_shape=(4,))


@pytest.mark.integration
def test_measured_bytes_of_subclassed_and_nested_models_match() -> None:
    from measure import compare_many_in_subprocess

    short = {"steps": 3, "warmup_steps": 1}
    functional, subclassed, nested = (r["ralp"] for r in compare_many_in_subprocess(
        [(name, ["ralp"], short) for name in ("alexnet_cifar", "alexnet_cifar_subclassed", "transfer_classifier")]))
    assert subclassed.plan["placements"] == functional.plan["placements"]
    # Same initial weights, and every worker feeds the same batch: the forward that starts first in
    # each run (one of the first two closures, one per worker) sees the initial weights. Which of the
    # two it is, and every later loss, depends on the order the asynchronous workers update in.
    assert any(s == pytest.approx(f, rel=1e-6) for s in subclassed.losses[:2] for f in functional.losses[:2]), (
        subclassed.losses[:2], functional.losses[:2])
    assert functional.bytes_per_step and subclassed.bytes_per_step == pytest.approx(functional.bytes_per_step, rel=0.01)
    assert "classifier/fc2" in nested.plan["placements"]
    assert nested.bytes_per_step == pytest.approx(nested.predicted_bytes_per_step, rel=0.10)
