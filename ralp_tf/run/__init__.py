"""Running jobs: local clusters of real processes, training jobs on ParameterServerStrategy,
measured traffic, running clusters (``--cluster``), task servers, TF_CONFIG files, TensorBoard."""
from ralp_tf.run.launch import LocalCluster
from ralp_tf.run.tfconfig import ClusterConfig, load_cluster_config
from ralp_tf.run.training import RunResult, compare, train

__all__ = ["LocalCluster", "ClusterConfig", "load_cluster_config", "RunResult", "compare", "train"]
