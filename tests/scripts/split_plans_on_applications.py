"""Head-split plans made by the analyzer's own ``split_head`` on models nobody here wrote
(``tf_keras.applications.VGG16`` with its softmax head, the Keras guide's functional MNIST MLP with
unnamed layers), both patterns, over two PS tasks of an in-process cluster: each placed (and
verified) and trained three SGD steps like the unplaced model (losses and weights, rtol 1e-5).

``python tests/scripts/split_plans_on_applications.py`` (about a minute; prints each plan's
splits and "trains like the unplaced model", or raises).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import tensorflow as tf
import tf_keras
from inprocess_cluster import InProcessCluster
from trains_like import assert_trains_like
from ralp_tf.model.profiler import profile
from ralp_tf.plan.spread import split_head
from ralp_tf.plan.plans import Plan
from ralp_tf.place.applier import place

cluster = InProcessCluster(workers=1, ps=2)
strategy = cluster.strategy()
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
L = tf_keras.layers

def vgg():
    return tf_keras.applications.VGG16(weights=None, input_shape=(32, 32, 3), classes=10)

def keras_mlp():  # the Keras guide's functional MNIST MLP
    inputs = tf_keras.Input(shape=(784,))
    x = L.Dense(64, activation="relu")(inputs)
    x = L.Dense(64, activation="relu")(x)
    return tf_keras.Model(inputs, L.Dense(10)(x))

for build, head, batch_shape in ((vgg, ["flatten", "fc1", "fc2", "predictions"], (4, 32, 32, 3)),
                                 (keras_mlp, None, (4, 784))):
    for pattern in ("columns", "megatron"):
        model = build()
        prof = profile(model, 4)
        names = head or [l.name for l in prof.layers if l.class_name == "Dense"]
        plan = split_head(Plan({}, policy="apps"), prof, cluster.cluster(), names, [0, 1], pattern)
        print(model.name, pattern, {k: v.by for k, v in plan.splits.items()})
        placed = place(model, plan, strategy)
        rng = np.random.default_rng(0)
        batches = [(rng.normal(size=batch_shape).astype("float32"), rng.integers(0, 10, size=(batch_shape[0],)))
                   for _ in range(3)]
        assert_trains_like(model, placed, strategy, coordinator, batches)
        print("  trains like the unplaced model")
