"""The check that a placed model trains like the unplaced one: the same SGD steps, run eagerly on
the unplaced model and on the cluster for the placed one (one worker: a fixed update order)."""
from __future__ import annotations

from typing import Any, Callable, Sequence


def eager_sgd_losses(model: Any, batches: Sequence[tuple[Any, Any]], loss_fn: Callable[[Any, Any], Any],
                     learning_rate: float = 0.05) -> list[float]:
    """Each batch's loss as ``model`` (unplaced) takes one SGD(``learning_rate``) step on it, in order."""
    import tensorflow as tf
    import tf_keras

    optimizer, losses = tf_keras.optimizers.SGD(learning_rate), []
    for x, y in batches:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        losses.append(float(loss))
    return losses


def assert_trains_like(reference: Any, placed: Any, strategy: Any, coordinator: Any,
                       batches: Sequence[tuple[Any, Any]]) -> None:
    """SGD steps of ``placed`` on the cluster give ``reference``'s losses and final weights (rtol 1e-5)."""
    import numpy as np

    from ralp_tf.place.applier import unplace
    from ralp_tf.run.training import sgd_losses, train_loss

    placed_losses = sgd_losses(strategy, coordinator, placed, batches, learning_rate=0.05)
    ref_losses = eager_sgd_losses(reference, batches, train_loss(reference))
    np.testing.assert_allclose(placed_losses, ref_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(unplace(placed).get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
