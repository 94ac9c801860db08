"""ralp_tf: resource-aware layer placement for tf.distribute.ParameterServerStrategy.

Profile a tf_keras model, plan where each layer stores and computes (RALP analyzer or any
placement policy), and apply the plan to a live ParameterServerStrategy cluster.

Functions and classes users call are re-exported here; each lives in the submodule of its
concern (``ralp_tf.profiler``, ``ralp_tf.costmodel``, ``ralp_tf.analyzer``, ``ralp_tf.plan``,
``ralp_tf.applier``, ``ralp_tf.verify``, ``ralp_tf.launch``, ``ralp_tf.traffic``,
``ralp_tf.train``, ``ralp_tf.policies``, ``ralp_tf.tfconfig``; ``ralp_tf.remote`` trains on a
running cluster, ``ralp_tf.summaries`` has the TensorBoard callback).
"""
from ralp_tf import costmodel, models, policies, traffic, train
from ralp_tf.analyzer import Analysis, analyze
from ralp_tf.applier import place, placement, unplace
from ralp_tf.cluster import Cluster, parse_bandwidth
from ralp_tf.errors import (ClusterConfigError, ClusterRuntimeError, KerasVersionError, ModelError,
                            PlacementMismatchError, PlanError, RalpError, ValidationError)
from ralp_tf.launch import LocalCluster
from ralp_tf.plan import Plan
from ralp_tf.layer_kinds import register_layer_kind
from ralp_tf.profiler import LayerProfile, ModelProfile, TensorProfile, profile
from ralp_tf.tfconfig import ClusterConfig, load_cluster_config
from ralp_tf.verify import verify_placement

__all__ = [
    "Analysis", "analyze", "place", "placement", "unplace", "Cluster", "parse_bandwidth", "ClusterConfigError",
    "ClusterRuntimeError", "KerasVersionError", "ModelError", "PlacementMismatchError", "PlanError", "RalpError",
    "ValidationError", "LocalCluster", "Plan", "LayerProfile", "ModelProfile", "TensorProfile", "profile",
    "register_layer_kind", "verify_placement", "costmodel", "models", "policies", "traffic", "train",
    "ClusterConfig", "load_cluster_config",
]
