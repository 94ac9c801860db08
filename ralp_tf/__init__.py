"""ralp_tf: resource-aware layer placement for tf.distribute.ParameterServerStrategy.

Profile a tf_keras model, plan where each layer stores and computes (RALP analyzer or any
placement policy), and apply the plan to a live ParameterServerStrategy cluster.

The package follows the data flow (docs/architecture.md): :mod:`ralp_tf.model` reads a model,
:mod:`ralp_tf.plan` plans (pure), :mod:`ralp_tf.place` applies a plan on a live strategy,
:mod:`ralp_tf.run` runs jobs on clusters, :mod:`ralp_tf.cli` is the ``ralp-tf`` command; the
benchmark (:mod:`ralp_tf.bench`), faults (:mod:`ralp_tf.faults`) and the emulated network
(:mod:`ralp_tf.testbed`) sit on top. The names users call are re-exported here.

``ralp_tf.costmodel``, ``ralp_tf.models``, ``ralp_tf.policies``, ``ralp_tf.traffic``
and ``ralp_tf.train`` stay importable under those names (as attributes and
as module paths, e.g. ``from ralp_tf.policies import register_policy``): each is the module of
its subpackage listed in :data:`MODULE_ALIASES`.
"""
import sys as _sys

from ralp_tf.errors import (ClusterConfigError, ClusterRuntimeError, KerasVersionError, ModelError,
                            PlacementMismatchError, PlanError, RalpError, ValidationError)
from ralp_tf.model import builtin as models
from ralp_tf.model.kinds import register_layer_kind
from ralp_tf.model.profiler import profile
from ralp_tf.model.profiles import LayerProfile, ModelProfile, TensorProfile
from ralp_tf.place import policies
from ralp_tf.place.applier import place, placement, unplace
from ralp_tf.place.verify import verify_placement
from ralp_tf.plan import costmodel
from ralp_tf.plan.analyzer import Analysis, analyze
from ralp_tf.plan.cluster import Cluster, parse_bandwidth
from ralp_tf.plan.plans import Plan
from ralp_tf.run import traffic
from ralp_tf.run import training as train
from ralp_tf.run.fit import Fitted, fit
from ralp_tf.run.launch import LocalCluster
from ralp_tf.run.tfconfig import ClusterConfig, load_cluster_config

#: Module paths of earlier releases -> the module that now holds them (importable under both).
MODULE_ALIASES = {"ralp_tf.costmodel": costmodel, "ralp_tf.models": models, "ralp_tf.policies": policies,
                  "ralp_tf.traffic": traffic, "ralp_tf.train": train}
for _name, _module in MODULE_ALIASES.items():
    _sys.modules.setdefault(_name, _module)

__all__ = [
    "Analysis", "analyze", "place", "placement", "unplace", "Cluster", "parse_bandwidth", "ClusterConfigError",
    "ClusterRuntimeError", "KerasVersionError", "ModelError", "PlacementMismatchError", "PlanError", "RalpError",
    "ValidationError", "LocalCluster", "Plan", "LayerProfile", "ModelProfile", "TensorProfile", "profile",
    "register_layer_kind", "verify_placement", "costmodel", "models", "policies", "traffic", "train",
    "ClusterConfig", "load_cluster_config", "fit", "Fitted",
]
