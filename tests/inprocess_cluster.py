"""Every task of a PS cluster as a ``tf.distribute.Server`` inside the test process (fast tests).

Starts in about a second. Servers cannot be stopped until the process exits, and traffic
cannot be measured per task; tests that need that use ``ralp_tf.LocalCluster``. Worker servers
get ``inter_op_parallelism_threads = workers + 2`` (fewer hangs on a 2-core machine). The
servers bind loopback (:func:`ralp_tf.run.launch.bind_loopback_in_this_process`).
"""
from __future__ import annotations

from typing import Any

from ralp_tf.plan.cluster import Cluster
from ralp_tf.errors import ClusterConfigError
from ralp_tf.run.launch import bind_loopback_in_this_process, free_port


class InProcessCluster:
    """``workers`` worker and ``ps`` PS servers in this process (see the module docstring)."""

    def __init__(self, workers: int = 1, ps: int = 1) -> None:
        import tensorflow as tf

        bind_loopback_in_this_process()
        if workers < 1 or ps < 0:
            raise ClusterConfigError("InProcessCluster needs workers >= 1 and ps >= 0")
        self.spec = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(workers)]}
        if ps:
            self.spec["ps"] = [f"127.0.0.1:{free_port()}" for _ in range(ps)]
        cluster_spec = tf.train.ClusterSpec(self.spec)
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=workers + 2)
        self.servers = [tf.distribute.Server(cluster_spec, job_name=job, task_index=i, protocol="grpc",
                                             config=config, start=True)
                        for job, addrs in self.spec.items() for i in range(len(addrs))]
        self.cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster_spec, rpc_layer="grpc")

    def strategy(self) -> Any:
        import tensorflow as tf

        return tf.distribute.ParameterServerStrategy(self.cluster_resolver)

    def cluster(self, **rates: Any) -> Cluster:
        return Cluster.from_dict(self.spec, **rates)
