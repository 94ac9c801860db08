"""A profile under a CPU quota (ralp_tf.bench.quota_profile) and the coordinator planning with a
profile it is given (``train_job --profile``): layer shares scaled to the measured pass, and a
profile of another model refused."""
from __future__ import annotations

import json

import pytest

from ralp_tf.bench.config import BenchError
from ralp_tf.bench.quota_profile import calibrate
from ralp_tf.errors import ValidationError
from ralp_tf.model.profiles import ModelProfile


def _profile(seconds: tuple[float | None, ...]) -> ModelProfile:
    def layer(name: str, kind: str, inbound: list[str], t: float | None) -> dict:
        return {"name": name, "kind": kind, "class_name": kind, "param_bytes": 400, "trainable_param_bytes": 400,
                "var_bytes": [400], "flops": 1e6, "flops_source": "analytic", "output_bytes": 64,
                "inbound": inbound, "measured_seconds": t}

    names = [f"fc{i}" for i in range(len(seconds))]
    layers = [{**layer("x", "input", [], None), "param_bytes": 0, "trainable_param_bytes": 0, "var_bytes": []}]
    layers += [layer(n, "dense", [prev], t) for n, prev, t in zip(names, ["x", *names], seconds)]
    return ModelProfile.from_dict({"model_name": "toy", "batch_size": 8, "outputs": [names[-1]], "layers": layers})


def test_calibrate_scales_the_layer_shares_to_the_measured_pass():
    prof, layer_sum, flops = calibrate(_profile((0.01, 0.03)), 0.2)
    assert layer_sum == pytest.approx(0.04)
    assert [l.measured_seconds for l in prof.compute_layers] == pytest.approx([0.05, 0.15])
    assert flops == pytest.approx(3 * 8 * 2e6 / 0.2)


def test_calibrate_refuses_a_profile_without_measured_times():
    with pytest.raises(BenchError, match=r"no measured layer times .* measure with profile\(measure=True\)"):
        calibrate(_profile((None, None)), 0.2)


@pytest.mark.slow
def test_the_coordinator_plans_with_the_profile_it_is_given(tmp_path):
    """``train_job --profile``: the given layer times times the compute scale replace the
    coordinator's measurement; another model's profile, or another batch's, is refused."""
    from ralp_tf.cli.train_job import prepared_with_profile
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.profiler import profile

    own = profile(resolve_model("small_cnn")(), batch_size=8).to_dict()
    for l in own["layers"]:
        l["measured_seconds"] = 0.001
    path = tmp_path / "small_cnn.json"
    path.write_text(json.dumps(own))
    prepared = prepared_with_profile("small_cnn", str(path), batch_size=8, seed=0, optimizer="sgd", compute_scale=2.0)
    assert [l.measured_seconds for l in prepared.profile.layers] == pytest.approx([0.002] * len(own["layers"]))
    with pytest.raises(ValidationError, match=r"is not small_cnn's profile at this batch \(batch 8, not 16\); "
                                              r"profile the same model at --batch-size 16"):
        prepared_with_profile("small_cnn", str(path), batch_size=16, seed=0, optimizer="sgd", compute_scale=1.0)
    other = tmp_path / "other.json"
    from ralp_tf.plan.profiles import cached_profile

    other.write_text(json.dumps({**cached_profile("alexnet_cifar").to_dict(), "batch_size": 8}))
    with pytest.raises(ValidationError, match="is not small_cnn's profile at this batch .*layers"):
        prepared_with_profile("small_cnn", str(other), batch_size=8, seed=0, optimizer="sgd", compute_scale=1.0)
    path.write_text("{}")
    with pytest.raises(ValidationError, match="cannot read a model profile"):
        prepared_with_profile("small_cnn", str(path), batch_size=8, seed=0, optimizer="sgd", compute_scale=1.0)
