"""A subclassed `tf_keras.Model` (the Keras guides' "custom model" pattern) placed and trained.

    python examples/subclassed.py --workers 2 --ps 1 --steps 5 --hidden 256

Shows that ralp_tf needs no Sequential/Functional layer graph: the decorator traces the model's
``call`` to find its layers and their order, plans, and places the model *in place* (a subclassed
model has no config to clone from), creating each placed sublayer's variables on its PS task.
The model here builds nothing in its constructor, so the decorator gets
``input_shape=(32, 32, 3)`` (without the batch dimension) to build it. Prints the plan and the
devices of every layer's variables, then trains with ``Model.fit`` and a ``DatasetCreator``.
"""
from __future__ import annotations

from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=5, batch_size=16)
flags.DEFINE_integer("hidden", 256, "Width of the two hidden Dense layers of the classifier head.", lower_bound=1)
flags.DEFINE_integer("classes", 10, "Output classes.", lower_bound=2)

INPUT_SHAPE = (32, 32, 3)


def make_model(hidden: int, classes: int) -> Any:
    """A small conv feature extractor and a Dense head, written as a subclassed model, unbuilt."""
    import tf_keras

    L = tf_keras.layers

    class ConvClassifier(tf_keras.Model):
        def __init__(self) -> None:
            super().__init__(name="conv_classifier")
            self.conv1 = L.Conv2D(16, 3, padding="same", activation="relu", name="conv1")
            self.conv2 = L.Conv2D(32, 3, padding="same", activation="relu", name="conv2")
            self.pool = L.MaxPooling2D(2, name="pool")  # one layer, called twice
            self.flatten = L.Flatten(name="flatten")
            self.fc1 = L.Dense(hidden, activation="relu", name="fc1")
            self.fc2 = L.Dense(hidden, activation="relu", name="fc2")
            self.logits = L.Dense(classes, name="logits")

        def call(self, x: Any, training: bool = False) -> Any:
            x = self.pool(self.conv2(self.pool(self.conv1(x))))
            return self.logits(self.fc2(self.fc1(self.flatten(x))))

    return ConvClassifier()


def main(argv: list[str]) -> None:
    del argv
    import ralp_tf

    _common.quiet_logs()

    @ralp_tf.placement("ralp", batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth, input_shape=INPUT_SHAPE)
    def build_model() -> Any:
        return make_model(FLAGS.hidden, FLAGS.classes)

    with ralp_tf.LocalCluster(workers=FLAGS.workers, ps=FLAGS.ps) as cluster:
        strategy = cluster.strategy()
        with strategy.scope():
            model = build_model()  # traced, planned, built with the planned layers' variables on the PS
        print(f"{type(model).__name__} (subclassed tf_keras.Model), {model.count_params():,} parameters")
        print(model.ralp_analysis.report())
        _common.print_placement(model)
        losses = _common.fit_on_synthetic(model, strategy, batch_size=FLAGS.batch_size, steps=FLAGS.steps)
        print(f"trained {FLAGS.steps} steps: loss {losses[-1]:.4f}")
    print("subclassed: done, cluster stopped")


if __name__ == "__main__":
    app.run(main)
