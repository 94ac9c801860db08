"""`@ralp_tf.placement` on a model-building function, trained with `Model.fit` and a `DatasetCreator`.

    python examples/keras_fit.py --workers 2 --ps 1 --steps 5 --batch_size 16

Shows the shortest path for a Keras user: start a local ParameterServerStrategy cluster (one
OS process per task, on 127.0.0.1), decorate the function that builds the model with
``@ralp_tf.placement("ralp")``, call it inside ``strategy.scope()``, then ``compile`` and
``fit`` as usual. Prints the analyzer's decision, the plan (which layers compute on a PS task)
and the devices the placed layers' variables were created on, then the loss per epoch. The
cluster's task processes are stopped when the ``with`` block ends, also on error.
"""
from __future__ import annotations

from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=5, batch_size=16)
flags.DEFINE_string("model", "small_cnn", "Built-in model name or package.module:function that builds it.")
flags.DEFINE_integer("epochs", 1, "Epochs of --steps steps each.", lower_bound=1)


def main(argv: list[str]) -> None:
    del argv
    import tf_keras

    import ralp_tf

    _common.quiet_logs()
    build = ralp_tf.model.builtin.resolve_model(FLAGS.model)

    @ralp_tf.placement("ralp", batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth)
    def build_model() -> Any:
        return build()

    with ralp_tf.LocalCluster(workers=FLAGS.workers, ps=FLAGS.ps) as cluster:
        strategy = cluster.strategy()
        with strategy.scope():
            model = build_model()  # profiled, planned and placed
        print(model.ralp_analysis.report())
        _common.print_placement(model)
        with strategy.scope():
            model.compile(tf_keras.optimizers.SGD(0.01), ralp_tf.model.data.per_sample_loss(model))
        # dataset_fn(input_context) runs on each worker: its input never crosses the network
        data = tf_keras.utils.experimental.DatasetCreator(_common.synthetic_dataset_fn(model, FLAGS.batch_size))
        history = model.fit(data, epochs=FLAGS.epochs, steps_per_epoch=FLAGS.steps, verbose=0)
        for epoch, loss in enumerate(history.history["loss"], 1):
            print(f"epoch {epoch}: loss {loss:.4f} ({FLAGS.steps} steps on {FLAGS.workers} workers)")
    print("keras_fit: done, cluster stopped")


if __name__ == "__main__":
    app.run(main)
