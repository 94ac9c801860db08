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

TRUE = RingCpu("mwms", s_per_byte=2.5e-9, step_s=0.012, tensor_hop_s=6e-5)


def probe_samples(terms: RingCpu, workers: int = 2, noise: float = 0.0) -> list[RingProbeSample]:
    out = []
    for i, p in enumerate(PROBES.values()):
        cpu = (terms.s_per_byte * ring_moved_bytes(workers, p.param_bytes) + terms.step_s
               + terms.tensor_hop_s * ring_tensor_hops(workers, p.tensors))
        out.append(RingProbeSample(probe=p.name, tensors=p.tensors, param_bytes=p.param_bytes, workers=workers,
                                   host_cpu_s={f"host{h}": cpu * (1 + noise * (-1) ** (h + i)) for h in range(workers)},
                                   step_s=0.1))
    return out


def test_the_probes_vary_bytes_and_tensors_apart():
    shapes = {(p.param_bytes, p.tensors) for p in PROBES.values()}
    assert len(shapes) == 3 and len({b for b, _ in shapes}) == 2 and len({t for _, t in shapes}) == 2
    assert ring_moved_bytes(2, 100) == 200 and ring_moved_bytes(4, 100) == 300 and ring_tensor_hops(3, 5) == 20


@pytest.mark.parametrize("workers", [2, 3])
def test_the_fit_recovers_the_terms_that_made_the_samples(workers):
    fit = fit_ring_cpu(probe_samples(TRUE, workers))
    assert fit.implementation == "mwms"
    assert fit.s_per_byte == pytest.approx(TRUE.s_per_byte, rel=1e-6)
    assert fit.step_s == pytest.approx(TRUE.step_s, rel=1e-6)
    assert fit.tensor_hop_s == pytest.approx(TRUE.tensor_hop_s, rel=1e-6)


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


def test_a_measured_ring_cpu_replaces_the_constants_for_its_implementation_only():
    cluster = Cluster.local(2, 0, layout="dedicated").with_host_cores(0.3)
    measured = cluster.with_ring_cpu(TRUE)
    out = {w.host: 4e7 for w in cluster.workers}
    into = dict(out)
    for h, s in ring_cpu_seconds(measured, out, into, "mwms", gradients=10).items():
        assert s == pytest.approx((TRUE.s_per_byte * 8e7 + TRUE.step_s + TRUE.tensor_hop_s * 10 * 2) / 0.3)
    for cl in (cluster, measured):  # Horovod keeps its constants either way
        for h, s in ring_cpu_seconds(cl, out, into, "horovod", gradients=10).items():
            assert s == pytest.approx((RING_CPU_S_PER_BYTE["horovod"] * 8e7 + RING_STEP_CPU_S
                                       + RING_TENSOR_HOP_CPU_S["horovod"] * 10 * 2) / 0.3)
    prof = cached_profile("alexnet_cifar")
    before = estimate_allreduce(prof, cluster, implementation="mwms")
    after = estimate_allreduce(prof, measured, implementation="mwms")
    assert after.step_s < before.step_s  # 2.5 ns a byte against 3.2
    assert after.bytes_per_step == before.bytes_per_step


def test_the_calibration_file_carries_the_ring_and_applies_it(tmp_path):
    samples = probe_samples(TRUE)
    doc = calibration_doc(2, 2, layout="colocated", host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    assert Calibration.from_dict(doc).cluster().ring_cpu is None  # files without it still read
    doc["ring"] = {**TRUE.to_dict(), "probes": [s.to_dict() for s in samples]}
    cal = Calibration.from_dict(doc)
    assert cal.ring_cpu == TRUE and cal.ring_probes == tuple(samples)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    assert cal.cluster().ring_cpu == TRUE


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
