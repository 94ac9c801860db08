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
