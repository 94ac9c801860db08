"""A custom training loop driven by `ClusterCoordinator`, with a per-worker dataset and a placed model.

    python examples/custom_loop.py --workers 2 --ps 1 --steps 10 --batch_size 16

Shows the loop the TensorFlow guide writes for ParameterServerStrategy, unchanged except for
``@ralp_tf.placement``: ``coordinator.create_per_worker_dataset(dataset_fn)`` makes each
worker's input pipeline on that worker, ``coordinator.schedule(train_step, ...)`` queues one
step on whichever worker is free, and ``tape.gradient`` puts each placed layer's gradient ops on
the PS task the plan chose (the placement lives in the layers, not in the training step).
Prints the plan and each step's loss; the cluster's task processes stop when the ``with`` block
ends.
"""
from __future__ import annotations

from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=10, batch_size=16)
flags.DEFINE_string("model", "small_cnn", "Built-in model name or package.module:function that builds it.")
flags.DEFINE_string("policy", "ralp", "Placement policy: ralp, ps (stock), or a scheduler solver name (exact, rl...).")
flags.DEFINE_float("learning_rate", 0.05, "SGD learning rate.")


def main(argv: list[str]) -> None:
    del argv
    import tensorflow as tf
    import tf_keras

    import ralp_tf

    _common.quiet_logs()
    build = ralp_tf.model.builtin.resolve_model(FLAGS.model)

    @ralp_tf.placement(FLAGS.policy, batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth)
    def build_model() -> Any:
        return build()

    with ralp_tf.LocalCluster(workers=FLAGS.workers, ps=FLAGS.ps) as cluster:
        strategy = cluster.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = build_model()
            optimizer = tf_keras.optimizers.SGD(FLAGS.learning_rate)
        _common.print_placement(model)
        per_sample = ralp_tf.model.data.per_sample_loss(model)
        per_worker = coordinator.create_per_worker_dataset(_common.synthetic_dataset_fn(model, FLAGS.batch_size))
        iterator = iter(per_worker)

        @tf.function
        def train_step(it: Any) -> Any:
            def replica_fn(batch: Any) -> Any:
                x, y = batch
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(per_sample(y, model(x, training=True)))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            return strategy.run(replica_fn, args=(next(it),))

        losses = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(FLAGS.steps)]
        coordinator.join()
        for i, loss in enumerate(losses, 1):
            print(f"step {i}: loss {float(loss.fetch()):.4f}")
    print("custom_loop: done, cluster stopped")


if __name__ == "__main__":
    app.run(main)
