"""Planning, pure: the cluster as data, the one cost model, variable storage, the RALP analyzer,
the Plan format, compression settings, profiles as data, the projection to large clusters and
the provisioning of CPU-only PS hosts.

Plain Python and numpy in, data out: nothing here imports TensorFlow or touches a cluster.
"""
from ralp_tf.plan.analyzer import Analysis, Candidate, analyze
from ralp_tf.plan.cluster import Cluster, Host, Rates, Task, TaskRef, format_bandwidth, parse_bandwidth
from ralp_tf.plan.compression import Compression, parse_compression, parse_setting
from ralp_tf.plan.costmodel import (StepEstimate, estimate, estimate_allreduce, layer_seconds, ring_allreduce_bytes,
                                    transfer_seconds)
from ralp_tf.plan.plans import PLAN_FORMAT, PLAN_FORMAT_V1, PLAN_FORMAT_V2, PLAN_FORMAT_V3, DeviceName, Plan, parse_device
from ralp_tf.plan.provisioning import Recommendation, recommend_ps_hosts
from ralp_tf.plan.shards import LayerSplit, Sharded, VariableStorage, shard_sizes
from ralp_tf.plan.storage import with_balanced_storage, with_partitioned_storage

__all__ = [
    "Analysis", "Candidate", "analyze", "Cluster", "Host", "Rates", "Task", "TaskRef", "format_bandwidth",
    "parse_bandwidth", "Compression", "parse_compression", "parse_setting", "StepEstimate", "estimate",
    "estimate_allreduce", "layer_seconds", "ring_allreduce_bytes", "transfer_seconds", "PLAN_FORMAT", "PLAN_FORMAT_V1",
    "PLAN_FORMAT_V2", "PLAN_FORMAT_V3", "DeviceName", "Plan", "parse_device", "Recommendation", "recommend_ps_hosts",
    "LayerSplit", "Sharded", "VariableStorage", "shard_sizes", "with_balanced_storage", "with_partitioned_storage",
]
