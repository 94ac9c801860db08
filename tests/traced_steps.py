"""The traced training step the placement tests read: forward, ``tape.gradient`` and the
optimizer's update of one ``strategy.run`` step, traced, not run."""
from __future__ import annotations

from typing import Any


def traced_update_step(strategy: Any, model: Any, optimizer: Any, ids: int) -> Any:
    """The graph of one ``strategy.run`` training step of ``model`` on a batch of 32 x ``ids`` ids:
    forward, ``tape.gradient`` and ``optimizer.apply_gradients`` (traced, not run)."""
    import tensorflow as tf

    @tf.function
    def step(x: Any) -> Any:
        def replica(x: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x, training=True))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss

        return strategy.run(replica, args=(x,))

    return step.get_concrete_function(tf.TensorSpec([32, ids], tf.int32)).graph
