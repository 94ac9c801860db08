"""The benchmark's predictions per host link of a cell's layout (ralp_tf.bench over the cost model);
the pure host, storage and plan-format tests are in tests/plan/."""
from __future__ import annotations

import dataclasses

import pytest

from plan.plan_helpers import builtin, cnn_with_head
from ralp_tf.plan.costmodel import estimate


def test_bench_predicts_bytes_per_host_link_of_the_cells_layout() -> None:
    """The benchmark compares predictions with link counters, which never see loopback: a colocated
    cell is priced on its hosts (worker i + PS i share a link), so its PSS bytes are the link bytes,
    not every worker<->PS byte."""
    from ralp_tf.bench.config import Cell
    from ralp_tf.bench.predictions import cell_cluster, predictions

    prof = cnn_with_head()
    rate = 100e6
    dedicated = predictions(prof, Cell("cnn", 2, "100mbit"), rate)
    colocated_cell = Cell("cnn", 2, "100mbit", layout="colocated")
    colocated = predictions(prof, colocated_cell, rate)
    cluster = cell_cluster(colocated_cell, rate)
    assert [h.tasks for h in cluster.hosts] == [("worker:0", "ps:0"), ("worker:1", "ps:1")]
    stock = estimate(prof, cluster)
    assert colocated["ps"]["payload_bytes_per_step"] == pytest.approx(stock.link_bytes_per_step)
    assert stock.link_bytes_per_step < 2 * stock.bytes_per_step  # the loopback share is left out
    # Dedicated hosts: every worker<->PS byte crosses a link, once per worker step; so do the chief's calls.
    ded = estimate(prof, cell_cluster(Cell("cnn", 2, "100mbit"), rate))
    assert dedicated["ps"]["payload_bytes_per_step"] == pytest.approx(2 * ded.bytes_per_step + ded.dispatch_bytes)
    assert colocated["ralp"]["payload_bytes_per_step"] < dedicated["ralp"]["payload_bytes_per_step"]


def test_bench_compressed_strategies_are_priced_at_their_codecs_ratio() -> None:
    """``bench --compression fp16`` adds ralp_fp16 and horovod_fp16 after their uncompressed
    strategies; the ring's fp16 all-reduce moves half the bytes."""
    from ralp_tf.bench.config import BenchConfigError, Cell, strategy_base, with_compression
    from ralp_tf.bench.predictions import predictions

    assert with_compression(("ps", "ralp", "allreduce", "horovod"), "fp16") == (
        "ps", "ralp", "ralp_fp16", "allreduce", "horovod", "horovod_fp16")
    assert with_compression(("ralp", "horovod"), "bf16") == ("ralp", "ralp_bf16", "horovod", "horovod_fp16")
    assert strategy_base("ralp_bf16") == ("ralp", "bf16") and strategy_base("ps") == ("ps", None)
    with pytest.raises(BenchConfigError, match="int8.*ralp-tf run --compression"):
        with_compression(("ralp",), "int8")
    from ralp_tf.bench.predictions import cell_cluster
    from ralp_tf.plan.costmodel import estimate

    cell = Cell("cnn", 2, "100mbit", layout="colocated")
    pred = predictions(cnn_with_head(), cell, 100e6)
    assert pred["horovod_fp16"]["payload_bytes_per_step"] == pytest.approx(pred["horovod"]["payload_bytes_per_step"] / 2)
    compressed = pred["ralp_fp16"]["plan"]  # the analyzer's own choice under fp16: its cut, priced without the codec
    plain = estimate(cnn_with_head(), cell_cluster(cell, 100e6, None), dataclasses.replace(compressed, compression={}))
    assert pred["ralp_fp16"]["payload_bytes_per_step"] < plain.link_bytes_per_step


def test_ralp_weighs_head_splits_and_ralp_nosplit_does_not() -> None:
    """``ralp`` weighs head splits; ``ralp_nosplit`` is ``ralp`` planned with ``split=False``: a plan
    file like ralp's, and on a colocated cell whose head is worth spreading, no splits where
    ``ralp`` has them."""
    from ralp_tf.bench.config import Cell, parse_strategies, strategy_base
    from ralp_tf.bench.predictions import predictions

    assert strategy_base("ralp_nosplit") == ("ralp", None) and "ralp_nosplit" in parse_strategies("ralp_nosplit")
    pred = predictions(builtin("alexnet_cifar"), Cell("alexnet_cifar", 4, "1gbit", layout="colocated"), 1e9)
    assert not pred["ralp_nosplit"]["plan"].splits
    assert pred["ralp"]["plan"].splits, pred["ralp"]["label"]
    assert pred["ralp"]["step_s"] <= pred["ralp_nosplit"]["step_s"]


def test_two_per_host_and_fused_variants_are_planned_for_their_own_cluster() -> None:
    """``ralp_x2`` is the analyzer's plan for the cell's hosts with two workers each (2H workers, H PS
    tasks), priced there: twice the link bytes per global step of twice the samples; ``ralp_fused`` and
    ``ralp_x2_fused`` as ``--fuse-transfers`` prices ``ralp`` and ``ralp_x2``."""
    from ralp_tf.bench.config import Cell, fused_strategy, strategy_base, workers_per_host
    from ralp_tf.bench.predictions import cell_cluster, predictions

    assert [strategy_base(s) for s in ("ralp_x2", "ralp_fused")] == [("ralp", None)] * 2
    assert [workers_per_host(s) for s in ("ralp", "ralp_x2", "ralp_x2_fused")] == [1, 2, 2]
    assert [fused_strategy(s) for s in ("ralp", "ralp_x2", "ralp_fused")] == [False, False, True]
    prof, cell = cnn_with_head(), Cell("cnn", 2, "100mbit", layout="colocated", workers_per_host=2)
    pred = predictions(prof, cell, 100e6, host_cpu=0.3, strategies=("ralp", "ralp_x2", "ralp_fused", "ralp_x2_fused"))
    assert "ralp_x2" not in predictions(prof, cell, 100e6, host_cpu=0.3)
    assert cell_cluster(cell, 100e6, 0.3, workers_per_host=2).num_workers == 4
    one, two = pred["ralp"], pred["ralp_x2"]
    assert two["payload_bytes_per_step"] == pytest.approx(2 * one["payload_bytes_per_step"], rel=0.01)
    assert two["step_s"] == pytest.approx(2 * one["step_s"], rel=0.01)  # hosts' links and CPU bound: no gain
    fused = predictions(prof, cell, 100e6, host_cpu=0.3, fuse_transfers=True, strategies=("ralp_x2",))
    for name, same in (("ralp_fused", "ralp"), ("ralp_x2_fused", "ralp_x2")):  # as --fuse-transfers prices them
        assert {k: v for k, v in pred[name].items() if k != "plan"} == {k: v for k, v in fused[same].items() if k != "plan"}
