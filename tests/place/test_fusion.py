"""Fused transfers (``fuse_transfers``, :mod:`ralp_tf.place.fusion`): the same training as stock
transfers, which variables are fused, and what the cost model prices for them.

The cluster tests use the session's in-process cluster (1 worker, 2 PS), where steps run in order.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ralp_tf import models
from ralp_tf.model.graph import walk
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.costmodel import RPC_CONTROL_BYTES, estimate
from ralp_tf.plan.profiles import cached_profile
from ralp_tf.plan.compression import Compression
from ralp_tf.plan.traffic import STEP_OVERHEAD_BYTES, fusable, resolve_placements, step_traffic

BATCH = 8
PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
HEAD_ON_PS = Plan(placements={"fc1": PS0, "fc2": PS0, "logits": PS0}, policy="head-on-ps")


def _shared_and_batchnorm() -> Any:
    """BatchNorm (untrainable statistics), a Dense layer called twice, and a head the analyzer may
    put on a PS task."""
    import tf_keras as k

    inp = k.Input((8, 8, 3))
    x = k.layers.Conv2D(8, 3, padding="same")(inp)
    x = k.layers.BatchNormalization()(x)
    x = k.layers.Flatten()(k.layers.ReLU()(x))
    shared = k.layers.Dense(16, activation="relu")
    x = k.layers.Concatenate()([shared(x[:, :256]), shared(x[:, 256:])])
    out = k.layers.Dense(10)(k.layers.Dense(64, activation="relu")(x))
    return k.Model(inp, out)


def _run(inprocess: Any, build: Any, policy: Any, fuse: bool, steps_per_closure: int = 1
         ) -> tuple[list[float], list[np.ndarray], Any]:
    from ralp_tf.place.applier import cluster_of
    from ralp_tf.run.training import TrainConfig, prepare_job, run_steps

    _, strategy, coordinator = inprocess
    cfg = TrainConfig(policy=policy, batch_size=BATCH, learning_rate=0.05, steps=4, warmup_steps=1,
                      fuse_transfers=fuse, steps_per_closure=steps_per_closure)
    job = prepare_job(strategy, build, cfg, cluster_of(strategy), coordinator)
    outcome = run_steps(job)
    return outcome.losses, job.model.get_weights(), job


@pytest.mark.slow
@pytest.mark.parametrize("build, policy, k", [(_shared_and_batchnorm, "ps", 1), (_shared_and_batchnorm, "ps", 4),
                                              (lambda: models.small_cnn(fc=32), HEAD_ON_PS, 1)],
                         ids=["batchnorm-shared-stock", "batchnorm-shared-4-per-closure", "small_cnn-head-on-ps"])
def test_fused_steps_train_like_stock_transfers(inprocess: Any, build: Any, policy: Any, k: int) -> None:
    """One worker: 5 fused steps give the losses and weights of 5 stock steps (BatchNorm statistics,
    a layer called twice, a PS-computed head, 4 steps per closure included), and fuse the worker's
    variables only."""
    from ralp_tf.place.fusion import fused_groups

    stock, w_stock, _ = _run(inprocess, build, policy, False)
    fused, w_fused, job = _run(inprocess, build, policy, True, k)
    np.testing.assert_allclose(fused, stock, rtol=1e-5)
    for a, b in zip(w_fused, w_stock):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert fused[-1] < fused[0]
    groups = fused_groups(job.model, job.plan, job.prepared.profile)
    fused_ids = {id(v) for g in groups for v in g.variables}
    assert groups and all("/job:ps" in g.device for g in groups)
    head = [p for p, d in job.plan.placements.items() if "/job:ps" in d]
    assert (policy is HEAD_ON_PS) == bool(head)
    for path in head:
        layer = next(u.layer for u in walk(job.model) if u.path == path)
        assert not {id(w) for w in layer.weights} & fused_ids, path  # read on its PS task, not fused
    assert len(fused_ids) == sum(1 for v in job.model.variables if id(v) in fused_ids)


def test_fused_transfers_price_one_pull_and_one_push_per_ps_task() -> None:
    """resnet_cifar on 2 PS tasks: the same data bytes, control of one message each way per task
    plus one per untrainable variable's update, no per-layer overlap, fewer floor seconds."""
    from ralp_tf.plan.closures import MEASURED_FLOOR

    p = cached_profile("resnet_cifar")
    where = resolve_placements(p, None)
    stock, fused = step_traffic(p, where, 2), step_traffic(p, where, 2, fused=True)
    data = lambda s: sum(b for k, b in s.bytes.items()) - sum(s.control.values())  # noqa: E731
    assert data(fused) == pytest.approx(data(stock))
    untrainable = sum(l.untrainable_variables for l in p.layers)
    assert untrainable == 2 * sum(1 for l in p.layers if l.class_name == "BatchNormalization")
    messages = sum(fused.control.values()) / RPC_CONTROL_BYTES
    assert messages == pytest.approx(2 * 2 + untrainable + 2 * STEP_OVERHEAD_BYTES / RPC_CONTROL_BYTES)
    assert fused.layer_variables == {} and stock.layer_variables
    ctr = cached_profile("ctr_dnn")
    tables = [l for l in ctr.layers if l.kind == "embedding"]
    assert tables and not any(fusable(l, Compression()) for l in tables)  # rows looked up, not read whole
    assert not fusable(p.layers[-1], Compression(weights="fp16")) and fusable(p.layers[-1], Compression())
    cluster = Cluster.local(2, 2, bandwidth="10gbit").with_closures(1, MEASURED_FLOOR)
    assert estimate(p, cluster.with_fused_transfers()).step_s < estimate(p, cluster).step_s
    assert estimate(p, cluster.with_fused_transfers()).bytes_per_step < estimate(p, cluster).bytes_per_step
