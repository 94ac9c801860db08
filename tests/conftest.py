"""Shared fixtures. TF-heavy fixtures are session-scoped: one in-process cluster per test run."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def inprocess():
    """One worker and two PS tasks in this process, with a strategy and a coordinator."""
    import tensorflow as tf

    from ralp_tf.launch import InProcessCluster

    cluster = InProcessCluster(workers=1, ps=2)
    strategy = cluster.strategy()
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    return cluster, strategy, coordinator
