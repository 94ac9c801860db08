"""A job priced with a calibration file (``--calibration``): the checks against the live cluster and
the calibrated profile and cluster. Kept apart from :mod:`ralp_tf.run.calibrate` (which measures)
so that training imports it without the measuring code's imports."""
from __future__ import annotations

import socket
from typing import Any, Mapping

from ralp_tf.plan.calibration import Calibration

__all__ = ["calibrated_job"]


def calibrated_job(cal: Calibration, cluster: Any, profile: Any, *, rates: Mapping[str, Any] | None = None,
                   device_kinds: Mapping[str, str] | None = None) -> tuple[Any, Any]:
    """``(profile, cluster)`` of a job about to train on ``cluster`` priced with ``cal``
    (:func:`~ralp_tf.plan.calibration.calibrated_profile`, :func:`~ralp_tf.plan.calibration.calibrated_cluster`),
    after checking it is this cluster's, this TensorFlow's and (``device_kinds``, listed on the live
    cluster) these devices'; ``rates`` given on the command line still win."""
    import tensorflow as tf

    from ralp_tf.plan.calibration import calibrated_cluster, calibrated_profile

    cluster = calibrated_cluster(cal, cluster, tensorflow_version=tf.__version__, machine=socket.gethostname(),
                                 device_kinds=device_kinds)
    return calibrated_profile(cal, profile), cluster.with_rates(**rates) if rates else cluster
