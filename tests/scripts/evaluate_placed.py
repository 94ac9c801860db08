"""evaluate and predict of a placed model on a 2-worker cluster, against the unplaced model's, as a
user's script: the placement decorator, Model.compile, evaluate before and after Model.fit.

``python evaluate_placed.py local``: a LocalCluster (one process per task); ``inprocess``: every task
a server in this process. Prints ``RESULTS <json>``: for each form, the placed model's numbers and
the unplaced model's on the same weights.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tf_keras as keras

import ralp_tf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
rng = np.random.default_rng(0)
X = rng.standard_normal((64, 5)).astype("float32")
Y = rng.integers(0, 3, 64).astype("int32")


def dataset():  # type: ignore[no-untyped-def]
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(16)


def compiled(model):  # type: ignore[no-untyped-def]
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


FORMS = {
    "evaluate(dataset)": lambda m: m.evaluate(dataset(), verbose=0),
    "evaluate(dataset, steps=2)": lambda m: m.evaluate(dataset(), steps=2, verbose=0),
    "evaluate(x, y)": lambda m: m.evaluate(X, Y, batch_size=16, verbose=0),
    "predict(dataset)": lambda m: m.predict(dataset(), verbose=0).tolist(),
}


def compare(placed):  # type: ignore[no-untyped-def]
    reference = compiled(ralp_tf.unplace(placed))
    return {name: [form(placed), form(reference)] for name, form in FORMS.items()}


def main(strategy):  # type: ignore[no-untyped-def]
    @ralp_tf.placement(ralp_tf.Plan({"fc": PS0, "head": PS0}, policy="test"), batch_size=16)
    def build():  # type: ignore[no-untyped-def]
        keras.utils.set_random_seed(3)
        inp = keras.Input((5,))
        return keras.Model(inp, keras.layers.Dense(3, name="head")(keras.layers.Dense(16, name="fc")(inp)))

    with strategy.scope():
        placed = compiled(build())
    results = {"before fit": compare(placed)}
    placed.fit(keras.utils.experimental.DatasetCreator(lambda ctx: dataset().repeat()), epochs=1,
               steps_per_epoch=4, verbose=0)
    results["after fit"] = compare(placed)
    print("RESULTS " + json.dumps(results), flush=True)


if sys.argv[1] == "local":
    with ralp_tf.LocalCluster(workers=2, ps=1) as lc:
        main(lc.strategy())
else:
    from inprocess_cluster import InProcessCluster

    main(InProcessCluster(workers=2, ps=1).strategy())
