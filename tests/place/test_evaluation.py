"""evaluate and predict on a placed model (ralp_tf.place.evaluation): every form a Keras user passes
returns the unplaced model's numbers on the same weights, or raises a one-line ValidationError
naming the forms that work."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from ralp_tf.errors import ValidationError
from ralp_tf.place.evaluation import install_evaluation

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
REPO = Path(__file__).resolve().parents[2]
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 5)).astype("float32")
Y = rng.integers(0, 3, 64).astype("int32")


def _build() -> Any:
    import tf_keras as keras

    keras.utils.set_random_seed(3)
    inp = keras.Input((5,))
    return keras.Model(inp, keras.layers.Dense(3, name="head")(keras.layers.Dense(16, activation="relu",
                                                                               name="fc")(inp)))


def _compiled(model: Any) -> Any:
    import tf_keras as keras

    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def _dataset() -> Any:
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(16)


def _creator() -> Any:
    import tf_keras as keras

    return keras.utils.experimental.DatasetCreator(lambda context: _dataset().repeat())


def _batches() -> Any:
    for i in range(0, 64, 16):
        yield X[i:i + 16], Y[i:i + 16]


@pytest.fixture(scope="module")
def pair(inprocess: Any) -> tuple[Any, Any]:
    """A placed model (one unit on each PS task) and the unplaced model on its weights, both compiled."""
    from ralp_tf.place.applier import place_from_builder, prepare, unplace
    from ralp_tf.plan.plans import Plan

    _, strategy, _ = inprocess
    prepared = prepare(_build, 16)
    with strategy.scope():
        placed = _compiled(place_from_builder(_build, prepared, Plan({"fc": PS0, "head": PS1}, policy="test"),
                                              strategy))
    return placed, _compiled(unplace(placed))


#: Each form of evaluate and predict: what the placed model is given, and what the unplaced one is
#: (the same, or its local equivalent: one worker's input of a DatasetCreator is the whole dataset).
FORMS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "evaluate(dataset)": (lambda m: m.evaluate(_dataset(), verbose=0),) * 2,
    "evaluate(dataset, steps=2)": (lambda m: m.evaluate(_dataset(), steps=2, verbose=0),) * 2,
    "evaluate(x, y)": (lambda m: m.evaluate(X, Y, batch_size=16, verbose=0),) * 2,
    "evaluate(x, y, steps=3)": (lambda m: m.evaluate(X, Y, batch_size=16, steps=3, verbose=0),) * 2,
    "evaluate(generator)": (lambda m: m.evaluate(_batches(), verbose=0),) * 2,
    "evaluate(DatasetCreator, steps=6)": (lambda m: m.evaluate(_creator(), steps=6, verbose=0),
                                          lambda m: m.evaluate(_dataset().repeat(), steps=6, verbose=0)),
    "predict(dataset)": (lambda m: m.predict(_dataset(), verbose=0),) * 2,
    "predict(dataset, steps=2)": (lambda m: m.predict(_dataset(), steps=2, verbose=0),) * 2,
    "predict(x)": (lambda m: m.predict(X, batch_size=16, verbose=0),) * 2,
    "predict(DatasetCreator, steps=2)": (lambda m: m.predict(_creator(), steps=2, verbose=0),
                                         lambda m: m.predict(_dataset(), steps=2, verbose=0)),
}


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_gives_the_unplaced_models_numbers(pair: tuple[Any, Any], form: str) -> None:
    placed, reference = pair
    on_placed, on_reference = FORMS[form]
    np.testing.assert_allclose(on_placed(placed), on_reference(reference), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_inside_the_strategy_scope_too(inprocess: Any, pair: tuple[Any, Any]) -> None:
    """Stock predict fails there ('pass this dataset to ClusterCoordinator.create_per_worker_dataset')."""
    _, strategy, _ = inprocess
    placed, reference = pair
    with strategy.scope():
        got = placed.evaluate(_dataset(), verbose=0), placed.predict(X, verbose=0)
    np.testing.assert_allclose(got[0], reference.evaluate(_dataset(), verbose=0), rtol=1e-5)
    np.testing.assert_allclose(got[1], reference.predict(X, verbose=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["evaluate", "predict"])
def test_input_the_workers_build_needs_steps(method: str) -> None:
    model = _compiled(_build())
    install_evaluation(model)
    with pytest.raises(ValidationError, match=rf"^{method}\(DatasetCreator\) on a placed model needs steps=: .*"
                                              r"pass steps=N, or pass a finite tf.data.Dataset or arrays"):
        getattr(model, method)(_creator(), verbose=0)


def _script(where: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "scripts" / "evaluate_placed.py"), where],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO)))
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS "):])


def _assert_equal_forms(results: dict[str, Any]) -> None:
    assert set(results) == {"before fit", "after fit"}
    for when, forms in results.items():
        assert len(forms) == 4
        for form, (placed, unplaced) in forms.items():
            np.testing.assert_allclose(placed, unplaced, rtol=1e-5, atol=1e-6, err_msg=f"{when}: {form}")


@pytest.mark.slow
def test_two_workers_evaluate_each_batch_once_before_and_after_fit() -> None:
    """Stock PSS evaluates a dataset on every worker whole (2 workers, steps=2: 1.66 against 2.12) and
    a finite one without steps ends in CancelledError; placed models evaluate on the coordinator.
    Evaluated before fit, the compiled metrics are built there, and fit then trains with them."""
    _assert_equal_forms(_script("inprocess"))


@pytest.mark.slow
@pytest.mark.integration
def test_two_workers_on_a_local_cluster() -> None:
    _assert_equal_forms(_script("local"))
