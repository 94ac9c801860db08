"""The README's path, as a user's own script: LocalCluster + the placement decorator + Model.fit.

Prints ``LISTENING <pid>`` once training is done, then waits for one line on stdin (the test
reads this process's listening sockets meanwhile) and leaves the ``with`` block.
"""
import os
import sys

import tensorflow as tf
import tf_keras as keras

import ralp_tf

with ralp_tf.LocalCluster(workers=1, ps=1) as lc:
    strategy = lc.strategy()

    @ralp_tf.placement("ralp", batch_size=8)
    def build():  # type: ignore[no-untyped-def]
        return ralp_tf.model.builtin.small_cnn()

    with strategy.scope():
        model = build()
        model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = ralp_tf.model.data.synthetic_batch(model, 8)
    model.fit(keras.utils.experimental.DatasetCreator(lambda ctx: tf.data.Dataset.from_tensors((x, y)).repeat()),
              epochs=1, steps_per_epoch=2, verbose=0)
    print(f"LISTENING {os.getpid()}", flush=True)
    sys.stdin.readline()
print("CLEAN EXIT", flush=True)
