"""Cluster construction from a live tf.train.ClusterSpec (TensorFlow); the pure cluster and plan
tests are in tests/plan/."""
from __future__ import annotations

from ralp_tf.plan.cluster import Cluster


def test_from_cluster_spec_and_rates() -> None:
    import tensorflow as tf

    spec = tf.train.ClusterSpec({"worker": ["a:1", "b:1"], "ps": ["c:1", "d:1"]})
    c = Cluster.from_cluster_spec(spec, bandwidth={"worker": "1gbit", "ps": "10gbit"}, gpus={"worker": 1})
    assert c.worker_device == "/job:worker/device:GPU:0"
    assert c.task("ps", 1).bandwidth_bps == 10e9 and c.workers[0].bandwidth_bps == 1e9
    assert "/job:ps/replica:0/task:1/device:CPU:0" in c.devices()
    assert c.with_rates(bandwidth="100mbit").ps[0].bandwidth_bps == 100e6

