"""ralp_tf: resource-aware layer placement for tf.distribute.ParameterServerStrategy.

Profile a tf_keras model, plan where each layer stores and computes (RALP analyzer or any
scheduler policy), and apply the plan to a live ParameterServerStrategy cluster.
"""
from ralp_tf.analyzer import Analysis, analyze
from ralp_tf.cluster import Cluster, parse_bandwidth
from ralp_tf.errors import (ClusterConfigError, ClusterRuntimeError, KerasVersionError, ModelError, PlanError,
                            PlacementMismatchError,
                            RalpError, ValidationError)
from ralp_tf.launch import InProcessCluster, LocalCluster
from ralp_tf.plan import Plan
from ralp_tf.placement import place, placement, unplace
from ralp_tf.profile import LayerProfile, ModelProfile, profile, register_layer_kind
from ralp_tf import costmodel, models, traffic, train  # noqa: E402  (submodules users reach as ralp_tf.X)

__all__ = [
    "Analysis", "analyze", "Cluster", "parse_bandwidth", "ClusterConfigError", "ClusterRuntimeError",
    "KerasVersionError", "ModelError", "PlanError", "PlacementMismatchError", "RalpError", "ValidationError", "Plan", "LayerProfile",
    "ModelProfile", "profile", "register_layer_kind", "InProcessCluster", "LocalCluster", "place", "placement",
    "unplace", "costmodel", "models", "traffic", "train",
]
