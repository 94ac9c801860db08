"""The ring's CPU measured on namespace hosts with CPU budgets (ralp_tf/testbed/ring_probe.py): the
probe models train with MultiWorkerMirroredStrategy and their hosts' CPU fits the cost model's terms."""
from __future__ import annotations

import pytest

from ralp_tf.model.ring_probe import PROBES
from ralp_tf.testbed import Testbed, cpu_budget_support
from ralp_tf.testbed.errors import TestbedError
from ralp_tf.testbed.ring_probe import measure_ring_cpu
from tbhelpers import needs_netns


def test_the_probe_models_hold_their_gradients():
    import tensorflow as tf

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.data import output_losses, synthetic_batch

    for shape in PROBES.values():
        model = resolve_model(f"ralp_tf.model.ring_probe:{shape.name}")()
        x, y = synthetic_batch(model, 4)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(output_losses(model)(y, model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        dense = [g for g in grads if isinstance(g, tf.Tensor)]  # all-reduced
        sparse = [g for g in grads if isinstance(g, tf.IndexedSlices)]  # all-gathered, one by one
        assert len(dense) == shape.tensors and len(sparse) == shape.tables == len(grads) - shape.tensors
        assert sum(int(tf.size(g)) * 4 for g in dense) == shape.param_bytes
        assert all(g.indices.shape[0] == 4 for g in sparse)  # one row per sample


@needs_netns
@pytest.mark.needs_root
@pytest.mark.slow
@pytest.mark.integration
def test_the_ring_probes_measure_each_hosts_cpu_and_fit_it():
    ok, why = cpu_budget_support()
    if not ok:
        pytest.skip(why)
    with Testbed(["worker0", "worker1"], "1gbit", prefix="tbtring") as tb:
        with pytest.raises(TestbedError, match="--host-cpu"):
            measure_ring_cpu(tb)  # no CPU groups to read
    with Testbed(["worker0", "worker1"], "1gbit", prefix="tbtring", host_cpu=0.5) as tb:
        fit, samples = measure_ring_cpu(tb, scale=0.3, timeout=300)
    assert [s.probe for s in samples] == list(PROBES)
    by = {s.probe: s for s in samples}
    for s in samples:
        assert set(s.host_cpu_s) == {"worker0", "worker1"} and all(v > 0 for v in s.host_cpu_s.values())
    # 32 MB a step against 1 MB: the bytes dominate the large probe's CPU
    assert min(by["few_large"].host_cpu_s.values()) > 3 * max(by["few_small"].host_cpu_s.values())
    assert fit.implementation == "mwms" and 1e-10 < fit.s_per_byte < 1e-7
    # 16 sparse gradients, all-gathered one by one, beside few_small's packed all-reduce (0.5 core: 0.047
    # core-seconds a step against 0.010)
    assert min(by["sparse_tables"].host_cpu_s.values()) > 2 * max(by["few_small"].host_cpu_s.values())
    assert fit.sparse_gradient_s > 0
    # one 32 MB table: SGD's 2 passes over each worker's replica of it a step, beside one sparse gradient
    assert by["large_table"].table_pass_bytes == 2 * (32 << 20)
    assert min(by["large_table"].host_cpu_s.values()) > 1.5 * max(by["few_small"].host_cpu_s.values())
    assert fit.table_pass_s_per_byte is not None and 5e-11 < fit.table_pass_s_per_byte < 5e-9
    print("ring fit:", fit, {s.probe: s.host_cpu_s for s in samples})
