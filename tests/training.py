"""One training loop for the in-process tests: SGD steps on a placed model through a ClusterCoordinator."""
from __future__ import annotations

from typing import Any, Sequence


def coordinator_losses(strategy: Any, coordinator: Any, model: Any, batches: Sequence[tuple[Any, Any]],
                       learning_rate: float = 0.05) -> list[float]:
    """The loss of each step of SGD(``learning_rate``) on ``batches`` (sparse categorical
    cross-entropy from logits), one scheduled step per batch, in order."""
    import tensorflow as tf
    import tf_keras

    with strategy.scope():
        opt = tf_keras.optimizers.SGD(learning_rate)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
                    y, model(x, training=True), from_logits=True))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(x, y))

    return [float(coordinator.schedule(step, args=(tf.nest.map_structure(tf.constant, x), tf.constant(y))).fetch())
            for x, y in batches]
