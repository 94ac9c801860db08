"""The exceptions ralp_tf raises for bad input. Every message names the problem and the fix."""
from __future__ import annotations

import json
from typing import Any


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


def parse_json(text: str | bytes, error: type[ValidationError], what: str) -> Any:
    """``json.loads(text)``, raising ``error`` ("<what> is not valid JSON: ...") on malformed text."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
        raise error(f"{what} is not valid JSON: {exc}") from None
