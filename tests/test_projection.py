"""Scale on paper: the data profiles and the predicted grid (no TensorFlow)."""
from __future__ import annotations

import pytest

from ralp_tf.plan.projection import (STRATEGIES, ProjectionRow, bert_base_profile, project, projection_cluster,
                                resnet50_profile, to_markdown)


def test_data_profiles_have_the_known_sizes() -> None:
    r50 = resnet50_profile()
    assert r50.trainable_param_bytes / 4 == pytest.approx(25.5e6, rel=0.01)
    assert r50.flops == pytest.approx(7.7e9, rel=0.05)  # 2 x ~3.9 GMACs per 224x224 image
    bert = bert_base_profile()
    assert bert.trainable_param_bytes / 4 == pytest.approx(109.5e6, rel=0.01)
    assert bert.layer("word_embeddings").param_bytes == 30_522 * 768 * 4
    assert bert.flops == pytest.approx(22.4e9, rel=0.05)


def test_projection_cluster_is_colocated_gpu_hosts() -> None:
    c = projection_cluster(4, 25e9)
    assert c.num_hosts == 4 and all(len(h.tasks) == 2 for h in c.hosts)
    assert c.workers[0].gpus == 1 and c.workers[0].flops == 100e12 and c.hosts[0].cpu_flops == 1e12


def test_grid_rows_and_markdown() -> None:
    rows = project([resnet50_profile(batch_size=32)], hosts=(2, 8), bandwidths_bps=(10e9,))
    assert len(rows) == 2 * len(STRATEGIES) and all(isinstance(r, ProjectionRow) for r in rows)
    by = {(r.hosts, r.strategy): r for r in rows}
    for n in (2, 8):
        ring = by[(n, "ring all-reduce")]
        assert ring.max_link_bytes == pytest.approx(2 * (n - 1) / n * 25.5e6 * 4, rel=0.01)
        assert by[(n, "colocated RALP")].samples_per_s >= by[(n, "stock PSS")].samples_per_s
    text = to_markdown(rows, "ralp_tf.plan.projection.project(...)")
    assert "predicted" in text.splitlines()[0] and "`ralp_tf.plan.projection.project(...)`" in text
    assert text.count("| 2 | 10gbit |") == 1 and "resnet50_size" in text
