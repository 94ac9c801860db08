"""Top-k error feedback with 2 workers: each keeps its own residual. Prints ``RESULT {json}``.

Run in a process of its own (its in-process cluster would replace a test process's). Schedules
``steps`` gradients (seeded) through ``ralp_tf.place.codecs.send`` with ``topk:0.2`` on one PS
variable, then reads each worker's residual on that worker
(``ClusterCoordinator._create_per_worker_resources``), and reports: the largest error of
``sum(sent) + sum over workers of residual - sum(gradients)``, and each worker's residual norm.
"""
import json
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, __file__.rsplit("/", 2)[0])  # tests/, for inprocess_cluster
from inprocess_cluster import InProcessCluster  # noqa: E402

from ralp_tf.place.codecs import WorkerResidual, new_prefix, residual_name, send  # noqa: E402

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
cluster = InProcessCluster(workers=2, ps=1)
strategy = cluster.strategy()
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    var = tf.Variable(tf.zeros([4, 5]), name="kernel")
prefix = new_prefix()


@tf.function
def step(g):
    return strategy.run(lambda g: send(g, "topk:0.2", var, "dense: gradient of kernel", prefix), args=(g,))


@tf.function
def residual():
    return WorkerResidual(residual_name(prefix, var), 20).read()


grads = [np.random.default_rng(i).standard_normal((4, 5)).astype("float32") for i in range(steps)]
sent = [coordinator.schedule(step, args=(tf.constant(g),)) for g in grads]
coordinator.join()
sent_total = np.sum([np.asarray(s.fetch()).ravel() for s in sent], axis=0)
per_worker = coordinator._create_per_worker_resources(residual)
residuals = [np.asarray(v.fetch()) for v in per_worker._values]
error = np.abs(sent_total + np.sum(residuals, axis=0) - np.sum(grads, axis=0).ravel()).max()
norms = [float(np.linalg.norm(r)) for r in residuals]
print("RESULT " + json.dumps({"max_error": float(error), "residual_norms": norms, "workers": len(residuals)}),
      flush=True)
