"""Balanced and partitioned storage of worker-computed layers. No TensorFlow."""
from __future__ import annotations

import pytest

from plan_helpers import BATCH, MB, builtin, cnn_with_head, layer, ps
from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import RPC_CONTROL_BYTES, STEP_OVERHEAD_BYTES, estimate, estimate_allreduce
from ralp_tf.plan.plans import PLAN_FORMAT_V3, Plan
from ralp_tf.plan.projection import projection_cluster
from ralp_tf.plan.profiles import resnet50_profile
from ralp_tf.plan.shards import Sharded, VariableStorage
from ralp_tf.plan.storage import (balance_storage, partition_storage, split_axis, stored_bytes, with_balanced_storage,
                                  with_partitioned_storage)


def test_balanced_storage_by_traffic_lpt() -> None:
    p = cnn_with_head()
    stored = balance_storage(p, 2, {"fc": "/job:ps/replica:0/task:0/device:CPU:0"}, partition=False)
    assert stored == {"c4": (0,), "c3": (1,), "c2": (1,), "c1": (0,)}  # 4+1 vs 3+2 MB
    assert stored_bytes(p, stored, 2) == [10 * MB, 10 * MB]  # (calls + 1) x bytes each


def test_a_layer_above_a_share_is_partitioned() -> None:
    layers = [layer("x", "input", [], 64, []), layer("big", "dense", [9 * MB], 64, ["x"]),
              layer("small", "dense", [1 * MB], 40, ["big"])]
    p = ModelProfile.from_dict({"model_name": "m", "batch_size": BATCH, "outputs": ["small"], "layers": layers})
    stored = balance_storage(p, 2, None)
    assert stored["big"] == (0, 1) and stored["small"] in ((0,), (1,))
    assert balance_storage(p, 2, None, partition=False)["big"] == (0,)
    cluster = Cluster.local(2, 2, bandwidth="1gbit")
    plan = with_balanced_storage(Plan({}), p, cluster)
    assert plan.storage["big"] == ("/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0")
    e = estimate(p, cluster, plan)
    # big's shard is read and pushed (two messages), and so is small where it lives; each message's
    # control is half each way
    on_0 = stored["small"] == (0,)
    assert e.bytes_between[("ps:0", "worker")] == pytest.approx(4.5 * MB + (MB if on_0 else 0) + STEP_OVERHEAD_BYTES / 2
                                                                + (2 + 2 * on_0) * RPC_CONTROL_BYTES / 2)
    assert with_balanced_storage(Plan({}), p, Cluster.local(2, 1)) == Plan({})  # one PS: nothing to balance


def test_the_split_axis_is_0_when_it_is_long_enough_else_the_longest() -> None:
    assert split_axis((4096, 4096), 64) == 0
    assert split_axis((3, 3, 256, 512), 4) == 3 and split_axis((1, 1, 1024, 256), 8) == 2
    assert split_axis((10,), 4) == 0 and split_axis((), 2) == 0


def test_partitioned_storage_cuts_large_variables_into_pieces_and_keeps_small_ones_whole() -> None:
    p = builtin("alexnet_cifar")
    plan = Plan({n: ps(0) for n in ("flatten", "fc1", "fc2", "logits")})
    storage = partition_storage(p, [0, 1, 2, 3], plan, piece_bytes=1e6)
    conv5 = storage["conv5"]  # kernel [3, 3, 256, 256] (2.36 MB), bias [256] (1 KB)
    assert isinstance(conv5, VariableStorage)
    kernel, bias = conv5.variables
    assert isinstance(kernel, Sharded) and kernel.axis == 0 and len(kernel.devices) == 3  # ceil(2.36 MB / 1 MB) rows
    assert isinstance(bias, str)
    finer = partition_storage(p, [0, 1, 2, 3], plan, piece_bytes=0.5e6)["conv5"].variables[0]
    assert finer.axis == 2 and len(finer.devices) == 4  # 5 pieces wanted, 3 rows: the longest axis, one per task
    assert storage["conv1"] in [ps(k) for k in range(4)]  # 7 KB: whole
    stored = Plan(plan.placements, storage=storage)
    assert stored.format == PLAN_FORMAT_V3
    stored.validate(p, Cluster.local(4, 4))
    everything = Plan({}, storage=partition_storage(p, [0, 1, 2, 3], None, piece_bytes=1e6))
    e = estimate(p, Cluster.local(4, 4, layout="colocated"), everything)
    loads = [e.bytes_between[(f"ps:{k}", "worker")] for k in range(4)]
    assert max(loads) - min(loads) < 1e6  # balanced within a piece


def test_partitioned_storage_uses_the_layer_wide_form_when_it_says_the_same() -> None:
    layers = [layer("x", "input", [], 64, []),
              layer("fc", "dense", [4 * 64 * 4096, 4 * 4096], 64, ["x"], shapes=[(64, 4096), (4096,)]),
              layer("head", "dense", [400], 4, ["fc"], shapes=[(100,)])]
    p = ModelProfile.from_dict({"model_name": "m", "batch_size": BATCH, "outputs": ["head"], "layers": layers})
    storage = partition_storage(p, [0, 1], None, piece_bytes=1e3)
    assert storage["fc"] == (ps(0), ps(1)) or storage["fc"] == (ps(1), ps(0))
    assert storage["head"] in (ps(0), ps(1))  # 400 bytes: whole
    whole = partition_storage(p, [0, 1], None, piece_bytes=1e9)  # every variable whole, balanced one by one
    assert whole["fc"] == VariableStorage((ps(0), ps(1))) and whole["head"] == ps(1)


def test_without_shapes_nothing_is_partitioned() -> None:
    p = cnn_with_head()
    storage = partition_storage(p, [0, 1], None, piece_bytes=1)
    assert all(isinstance(v, str) for v in storage.values())
    with pytest.raises(PlanError, match="at least one PS task"):
        partition_storage(p, [], None)
    assert with_partitioned_storage(Plan({}), p, Cluster.local(2, 0)) == Plan({})


def test_partitioned_resnet50_moves_a_ring_share_per_host_link(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every large kernel over all 64 colocated PS tasks: each host link carries about the ring's
    2 (N-1)/N of the model, and the step priced without overlap is within 1% of the ring's. With
    the overlap the pulls hide behind the forward too, the ring's all-reduce only behind the backward."""
    from ralp_tf.plan import costmodel

    p = resnet50_profile()
    cluster = projection_cluster(64, 100e9)
    plan = with_partitioned_storage(Plan({}), p, cluster, piece_bytes=250e3)
    e, ring = estimate(p, cluster, plan), estimate_allreduce(p, cluster)
    assert e.max_link_bytes == pytest.approx(ring.max_link_bytes, rel=0.05)
    assert e.samples_per_s >= ring.samples_per_s
    monkeypatch.setattr(costmodel, "PULL_PUSH_OVERLAP", 0.0)
    e, ring = estimate(p, cluster, plan), estimate_allreduce(p, cluster)
    assert e.samples_per_s == pytest.approx(ring.samples_per_s, rel=0.01)
    whole = with_partitioned_storage(Plan({}), p, cluster, piece_bytes=1e12)  # nothing split: a hot task
    assert estimate(p, cluster, whole).max_link_bytes > 3 * ring.max_link_bytes
