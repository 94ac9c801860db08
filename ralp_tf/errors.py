"""The exceptions ralp_tf raises for bad input. Every message names the problem and the fix."""


class RalpError(Exception):
    """Base class of every error ralp_tf raises on purpose."""


class ValidationError(RalpError, ValueError):
    """An input (plan, cluster, workload, argument) is malformed or inconsistent."""


class PlanError(ValidationError):
    """A Plan names layers or devices that do not exist, or cannot be applied."""


class ClusterConfigError(ValidationError):
    """A cluster description (TF_CONFIG, ClusterSpec, bandwidth, local shape) is invalid."""


class ModelError(ValidationError):
    """A model cannot be profiled or placed (wrong Keras, not built, subclassed...)."""


class KerasVersionError(ModelError, TypeError):
    """A Keras 3 model was given where tf_keras (Keras 2) is required."""


class ClusterRuntimeError(RalpError, RuntimeError):
    """A local cluster task failed to start or died."""
