"""The ring's CPU measured on a cluster (ralp_tf/plan/ring_cpu.py): the fit of the probes, the
calibration file's ``ring``, and the cost model pricing it instead of its constants. Pure."""
from __future__ import annotations

import copy
import json

import pytest

from ralp_tf.errors import CalibrationError, ClusterConfigError, ValidationError
from ralp_tf.plan.calibration import Calibration
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import (RING_CPU_S_PER_BYTE, RING_STEP_CPU_S, RING_TENSOR_HOP_CPU_S, estimate_allreduce,
                                    ring_cpu_seconds)
from ralp_tf.plan.profiles import cached_profile
from ralp_tf.plan.rates import RingCpu
from ralp_tf.model.ring_probe import PROBES
from ralp_tf.plan.ring_cpu import RingProbeSample, fit_ring_cpu, ring_moved_bytes, ring_tensor_hops
from calibration_docs import calibration_doc

TRUE = RingCpu("mwms", s_per_byte=2.5e-9, step_s=0.012, tensor_hop_s=6e-5, sparse_gradient_s=9e-4,
               table_pass_s_per_byte=2e-10)
PASSES = 2  # tf_keras.optimizers.SGD's whole-table passes


def probe_samples(terms: RingCpu, workers: int = 2, noise: float = 0.0) -> list[RingProbeSample]:
    out = []
    for i, p in enumerate(PROBES.values()):
        cpu = (terms.s_per_byte * ring_moved_bytes(workers, p.param_bytes) + terms.step_s
               + terms.tensor_hop_s * ring_tensor_hops(workers, p.tensors) + terms.sparse_gradient_s * p.tables
               + (terms.table_pass_s_per_byte or 0.0) * PASSES * p.table_bytes)
        out.append(RingProbeSample(probe=p.name, tensors=p.tensors, param_bytes=p.param_bytes, workers=workers,
                                   host_cpu_s={f"host{h}": cpu * (1 + noise * (-1) ** (h + i)) for h in range(workers)},
                                   step_s=0.1, tables=p.tables, table_pass_bytes=PASSES * p.table_bytes))
    return out


def test_the_probes_vary_bytes_tensors_sparse_gradients_and_table_bytes_apart():
    shapes = {(p.param_bytes, p.tensors, p.tables, p.table_bytes) for p in PROBES.values()}
    assert len(shapes) == 5 and len({b for b, _, _, _ in shapes}) == 2 and len({t for _, t, _, _ in shapes}) == 2
    assert {p.tables for p in PROBES.values()} == {0, 1, 16}
    assert PROBES["large_table"].table_bytes == 32 << 20 and PROBES["sparse_tables"].table_bytes == 1 << 20
    assert ring_moved_bytes(2, 100) == 200 and ring_moved_bytes(4, 100) == 300 and ring_tensor_hops(3, 5) == 20


@pytest.mark.parametrize("workers", [2, 3])
def test_the_fit_recovers_the_terms_that_made_the_samples(workers):
    fit = fit_ring_cpu(probe_samples(TRUE, workers))
    assert fit.implementation == "mwms"
    assert fit.s_per_byte == pytest.approx(TRUE.s_per_byte, rel=1e-6)
    assert fit.step_s == pytest.approx(TRUE.step_s, rel=1e-6)
    assert fit.tensor_hop_s == pytest.approx(TRUE.tensor_hop_s, rel=1e-6)
    assert fit.sparse_gradient_s == pytest.approx(TRUE.sparse_gradient_s, rel=1e-6)
    assert fit.table_pass_s_per_byte == pytest.approx(TRUE.table_pass_s_per_byte, rel=1e-6)


def test_without_the_large_table_the_passes_are_not_a_term():
    """The small tables' passes alone grow with their count: the sparse term absorbs them, and the
    pass rate is not measured (None: the cost model prices the passes as before)."""
    samples = [s for s in probe_samples(TRUE) if s.probe != "large_table"]
    fit = fit_ring_cpu(samples)
    assert fit.table_pass_s_per_byte is None
    small = PROBES["sparse_tables"]
    assert fit.sparse_gradient_s == pytest.approx(
        TRUE.sparse_gradient_s + TRUE.table_pass_s_per_byte * PASSES * small.table_bytes / small.tables, rel=1e-6)
    old = {k: v for k, v in samples[-1].to_dict().items() if k != "table_pass_bytes"}  # a file of before the probe
    assert RingProbeSample.from_dict(old).table_pass_bytes == 0.0


def test_without_a_probe_of_tables_the_sparse_term_is_not_measured_and_prices_nothing():
    samples = [s for s in probe_samples(TRUE) if not s.tables]
    dense_only = RingCpu("mwms", TRUE.s_per_byte, TRUE.step_s, TRUE.tensor_hop_s)
    assert fit_ring_cpu(samples).table_pass_s_per_byte is None
    fit = fit_ring_cpu([RingProbeSample(**{**s.to_dict(), "host_cpu_s": t.host_cpu_s})
                        for s, t in zip(samples, probe_samples(dense_only))])
    assert fit.sparse_gradient_s == 0.0 and fit.step_s == pytest.approx(TRUE.step_s, rel=1e-6)
    old = {k: v for k, v in samples[0].to_dict().items() if k != "tables"}  # a file of before the sparse probe
    assert RingProbeSample.from_dict(old).tables == 0


def test_a_term_the_probes_cannot_see_is_zero_not_negative():
    samples = probe_samples(RingCpu("mwms", 2e-9, 0.01, 0.0))
    many = next(s for s in samples if s.probe == "many_small")
    cheaper = RingProbeSample(**{**many.to_dict(), "host_cpu_s": {h: v * 0.8 for h, v in many.host_cpu_s.items()}})
    fit = fit_ring_cpu([s if s is not many else cheaper for s in samples])  # a negative hop term would fit best
    assert fit.tensor_hop_s == 0.0 and fit.s_per_byte > 0 and fit.step_s > 0


def test_probes_of_too_few_shapes_are_refused():
    with pytest.raises(ValidationError, match="3 shapes"):
        fit_ring_cpu(probe_samples(TRUE)[:2])
    with pytest.raises(ValidationError, match="2 or more workers"):
        RingProbeSample(probe="x", tensors=2, param_bytes=8, workers=1, host_cpu_s={"h": 0.1}, step_s=0.1)
    with pytest.raises(ClusterConfigError, match="'mwms' or 'horovod'"):
        RingCpu("nccl", 1e-9, 0.0, 0.0)
    with pytest.raises(ClusterConfigError, match="sparse_gradient_s must be a number of core-seconds"):
        RingCpu("mwms", 1e-9, 0.0, 0.0, sparse_gradient_s=-1.0)
    with pytest.raises(ClusterConfigError, match="table_pass_s_per_byte must be a number of core-seconds"):
        RingCpu("mwms", 1e-9, 0.0, 0.0, table_pass_s_per_byte=float("nan"))
    with pytest.raises(ValidationError, match="2 or more workers"):
        RingProbeSample(probe="x", tensors=2, param_bytes=8, workers=2, host_cpu_s={"h": 0.1}, step_s=0.1,
                        table_pass_bytes=-1.0)


def test_a_measured_ring_cpu_replaces_the_constants_for_its_implementation_only():
    cluster = Cluster.local(2, 0, layout="dedicated").with_host_cores(0.3)
    measured = cluster.with_ring_cpu(TRUE)
    out = {w.host: 4e7 for w in cluster.workers}
    into = dict(out)
    for h, s in ring_cpu_seconds(measured, out, into, "mwms", gradients=10, sparse_gradients=3).items():
        assert s == pytest.approx((TRUE.s_per_byte * 8e7 + TRUE.step_s + TRUE.tensor_hop_s * 10 * 2
                                   + TRUE.sparse_gradient_s * 3) / 0.3)
    for cl in (cluster, measured):  # Horovod keeps its constants either way, which price no sparse term
        for h, s in ring_cpu_seconds(cl, out, into, "horovod", gradients=10, sparse_gradients=3).items():
            assert s == pytest.approx((RING_CPU_S_PER_BYTE["horovod"] * 8e7 + RING_STEP_CPU_S
                                       + RING_TENSOR_HOP_CPU_S["horovod"] * 10 * 2) / 0.3)
    prof = cached_profile("alexnet_cifar")
    before = estimate_allreduce(prof, cluster, implementation="mwms")
    after = estimate_allreduce(prof, measured, implementation="mwms")
    assert after.step_s < before.step_s  # 2.5 ns a byte against 3.2
    assert after.bytes_per_step == before.bytes_per_step


def test_each_looked_up_table_of_a_ring_step_pays_the_measured_sparse_term():
    """ctr_dnn's 4 tables have IndexedSlices gradients, all-gathered one by one: a measured
    ``sparse_gradient_s`` adds 4 of it to each worker host's ring CPU; a regularised table (dense
    gradient) and a frozen one (none) do not count."""
    import dataclasses

    cluster = Cluster.local(2, 0, layout="dedicated").with_host_cores(0.3)
    prof = cached_profile("ctr_dnn")
    without = estimate_allreduce(prof, cluster.with_ring_cpu(dataclasses.replace(TRUE, sparse_gradient_s=0.0)), implementation="mwms")
    withit = estimate_allreduce(prof, cluster.with_ring_cpu(TRUE), implementation="mwms")
    for h, s in withit.host_cpu_s.items():
        assert s - without.host_cpu_s[h] == pytest.approx(4 * TRUE.sparse_gradient_s / 0.3)
    assert withit.step_s - without.step_s == pytest.approx(4 * TRUE.sparse_gradient_s / 0.3)
    tables = [l.name for l in prof.layers if l.kind == "embedding"]
    changed = dataclasses.replace(prof, layers=tuple(
        dataclasses.replace(l, regularised=(True,)) if l.name == tables[0]
        else dataclasses.replace(l, trainable_param_bytes=0) if l.name == tables[1] else l for l in prof.layers))
    two = estimate_allreduce(changed, cluster.with_ring_cpu(TRUE), implementation="mwms")
    without2 = estimate_allreduce(changed, cluster.with_ring_cpu(dataclasses.replace(TRUE, sparse_gradient_s=0.0)),
                                  implementation="mwms")
    for h, s in two.host_cpu_s.items():
        assert s - without2.host_cpu_s[h] == pytest.approx(2 * TRUE.sparse_gradient_s / 0.3)


def test_a_ring_worker_passes_its_tables_at_the_rate_the_ring_probes_measured():
    """ctr_dnn's ring step holds SGD's 2 passes over each worker's replicas of its tables: at the
    probes' core-seconds per byte over the host's cores where the ring measured it (either ring:
    the passes are the optimizer's), else at the rate timed on PS tasks."""
    import dataclasses

    from ralp_tf.plan.costmodel import DENSE_PASS_S_PER_BYTE, ring_table_pass_seconds
    from ralp_tf.plan.updates import ring_pass_s_per_byte

    prof = cached_profile("ctr_dnn")
    passed = ring_table_pass_seconds(prof, 1.0)  # bytes of the passes a step
    cluster = Cluster.local(2, 0, layout="dedicated").with_host_cores(0.3)
    ps_rate = dataclasses.replace(cluster, table_pass_s_per_byte=9e-10)
    unmeasured = dataclasses.replace(TRUE, table_pass_s_per_byte=None)
    assert ring_pass_s_per_byte(cluster) == DENSE_PASS_S_PER_BYTE
    assert ring_pass_s_per_byte(ps_rate.with_ring_cpu(unmeasured)) == 9e-10
    assert ring_pass_s_per_byte(ps_rate.with_ring_cpu(TRUE)) == pytest.approx(TRUE.table_pass_s_per_byte / 0.3)
    assert ring_pass_s_per_byte(Cluster.local(2, 0, layout="dedicated").with_ring_cpu(TRUE)) == DENSE_PASS_S_PER_BYTE
    for implementation in ("mwms", "horovod"):
        before = estimate_allreduce(prof, ps_rate.with_ring_cpu(unmeasured), implementation=implementation)
        after = estimate_allreduce(prof, ps_rate.with_ring_cpu(TRUE), implementation=implementation)
        assert before.worker_compute_s - after.worker_compute_s == pytest.approx(
            passed * (9e-10 - TRUE.table_pass_s_per_byte / 0.3))
        assert after.host_cpu_s == before.host_cpu_s


def test_the_calibration_file_carries_the_ring_and_applies_it(tmp_path):
    samples = probe_samples(TRUE)
    doc = calibration_doc(2, 2, layout="colocated", host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    assert Calibration.from_dict(doc).cluster().ring_cpu is None  # files without it still read
    doc["ring"] = {**TRUE.to_dict(), "probes": [s.to_dict() for s in samples]}
    cal = Calibration.from_dict(doc)
    assert cal.ring_cpu == TRUE and cal.ring_probes == tuple(samples)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    assert cal.cluster().ring_cpu == TRUE
    del doc["ring"]["sparse_gradient_s"]  # a file of before the sparse probe: its ring prices no sparse term
    assert Calibration.from_dict(doc).ring_cpu.sparse_gradient_s == 0.0
    del doc["ring"]["table_pass_s_per_byte"]  # of before the large table: the passes priced as before
    assert Calibration.from_dict(doc).ring_cpu.table_pass_s_per_byte is None


@pytest.mark.parametrize("field, value", [("implementation", "nccl"), ("s_per_byte", -1.0), ("step_s", "slow"),
                                          ("probes", [{"probe": "x"}])])
def test_a_malformed_ring_names_itself(field, value):
    doc = calibration_doc(2, 1)
    doc["ring"] = {**TRUE.to_dict(), "probes": [s.to_dict() for s in probe_samples(TRUE)]}
    doc = copy.deepcopy(doc)
    doc["ring"][field] = value
    with pytest.raises(CalibrationError, match="ring") as err:
        Calibration.from_dict(doc, path="calibration file c.json")
    assert "rerun" in str(err.value)
