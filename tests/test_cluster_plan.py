"""Cluster descriptions and Plans: construction, JSON, validation, and the errors users see."""
from __future__ import annotations

import json
import math

import pytest

from ralp_tf import models
from ralp_tf.plan.cluster import Cluster, parse_bandwidth
from ralp_tf.errors import ClusterConfigError, PlanError
from ralp_tf.plan.plans import Plan, parse_device
from ralp_tf.model.profiler import profile

TF_CONFIG = json.dumps({"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"], "ps": ["h3:2222"]},
                        "task": {"type": "worker", "index": 1}})


def test_from_tf_config() -> None:
    c = Cluster.from_tf_config(TF_CONFIG, bandwidth="10gbit")
    assert c.num_workers == 2 and c.num_ps == 1
    assert c.ps_device(0) == "/job:ps/replica:0/task:0/device:CPU:0"
    assert c.workers[1].address == "h2:2222"
    assert len(c.tasks) == 4 and all(t.bandwidth_bps == 10e9 for t in c.tasks)  # chief, 2 workers, ps


def test_from_tf_config_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    assert Cluster.from_tf_config().num_workers == 2


@pytest.mark.parametrize("bad, match", [
    ("{not json", "not valid JSON"),
    ('{"task": {"type": "worker"}}', "'cluster'"),
    ('{"cluster": {"worker": "h1:2222"}}', "must list addresses"),
    ('{"cluster": {"worker": ["h1"]}}', "not 'host:port'"),
    ('{"cluster": {"gpu": ["h1:1"]}}', "unknown job"),
    ('{"cluster": {"worker": ["h1:1"]}, "task": {"type": "ps", "index": 0}}', "not a job"),
])
def test_malformed_tf_config(bad: str, match: str) -> None:
    with pytest.raises(ClusterConfigError, match=match):
        Cluster.from_tf_config(bad)


def test_unset_tf_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ClusterConfigError, match="TF_CONFIG is not set"):
        Cluster.from_tf_config()


def test_from_cluster_spec_and_rates() -> None:
    import tensorflow as tf

    spec = tf.train.ClusterSpec({"worker": ["a:1", "b:1"], "ps": ["c:1", "d:1"]})
    c = Cluster.from_cluster_spec(spec, bandwidth={"worker": "1gbit", "ps": "10gbit"}, gpus={"worker": 1})
    assert c.worker_device == "/job:worker/device:GPU:0"
    assert c.task("ps", 1).bandwidth_bps == 10e9 and c.workers[0].bandwidth_bps == 1e9
    assert "/job:ps/replica:0/task:1/device:CPU:0" in c.devices()
    assert c.with_rates(bandwidth="100mbit").ps[0].bandwidth_bps == 100e6


@pytest.mark.parametrize("text, bps", [("100mbit", 100e6), ("1gbit", 1e9), ("10gbit", 10e9), ("2.5g", 2.5e9),
                                       (1e9, 1e9), ("uncapped", math.inf)])
def test_parse_bandwidth(text: object, bps: float) -> None:
    assert parse_bandwidth(text) == bps  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["fast", "-1gbit", "0mbit", "1 gigabit"])
def test_bad_bandwidth(bad: str) -> None:
    with pytest.raises(ClusterConfigError, match="bandwidth"):
        parse_bandwidth(bad)


def test_local_cluster_shape_errors() -> None:
    with pytest.raises(ClusterConfigError, match="workers"):
        Cluster.local(0, 1)
    with pytest.raises(ClusterConfigError, match="base_port"):
        Cluster.local(2, 1, base_port=70000)


def test_any_positive_cluster_size_plans() -> None:
    """100,000 workers (once a StopIteration: placeholder ports ran out at 10,000 tasks) plan in
    pure arithmetic, with distinct, valid placeholder addresses."""
    from ralp_tf.plan.analyzer import analyze
    from ralp_tf.model.profiles import ModelProfile

    cluster = Cluster.local(100_000, 1, chief=True, base_port=60000)
    addresses = [t.address for t in cluster.tasks]
    assert cluster.num_workers == 100_000 and len(set(addresses)) == len(addresses) == 100_002
    assert all(1 <= int(a.rsplit(":", 1)[1]) <= 65535 for a in addresses)
    assert addresses[0] == "127.0.0.1:60000" and addresses[-1].startswith("127.0.0.")
    prof = ModelProfile.from_dict({"model_name": "m", "batch_size": 8, "outputs": ["fc"], "layers": [
        {"name": "x", "kind": "input", "param_bytes": 0, "flops": 0, "output_bytes": 64, "inbound": []},
        {"name": "fc", "kind": "dense", "param_bytes": 4_000_000, "flops": 2_000_000, "output_bytes": 40,
         "inbound": ["x"], "var_bytes": [3_999_960, 40], "output_shape": [10]}]})
    analysis = analyze(prof, cluster)
    assert set(analysis.plan.placements) == {"fc"}
    assert math.isfinite(analysis.plan.notes["predicted_step_s"])


def test_plan_json_round_trip_and_diff() -> None:
    plan = Plan({"fc1": "/job:ps/replica:0/task:1/device:CPU:0", "conv1": "/job:worker/device:GPU:0"},
                policy="ralp", provisioning={"worker": 2, "ps": 2}, notes={"cut": "fc1"})
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert again.ps_layers() == {"fc1": 1}
    other = Plan({"fc1": "/job:ps/replica:0/task:0/device:CPU:0"})
    assert set(plan.diff(other)) == {"fc1", "conv1"}


@pytest.mark.parametrize("text, match", [
    ("[1, 2]", "JSON object"),
    ('{"policy": "x"}', "lacks 'placements'"),
    ('{"placements": {"a": "/job:ps/device:CPU:0"}}', "names no PS task"),
    ('{"placements": {"a": "gpu0"}}', "not a full TF device string"),
    ('{"placements": {"a": "/job:worker/device:CPU:0"}, "extra": 1}', "unknown field"),
    ('{"placements": {}, "format": "v9"}', "not supported"),
    ('{"placements": {}, "provisioning": {"ps": -1}}', "provisioning"),
    ("not json", "not valid JSON"),
])
def test_malformed_plan_json(text: str, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        Plan.from_json(text)


def test_plan_validation_names_the_problem() -> None:
    prof = profile(models.small_cnn(), batch_size=4)
    cluster = Cluster.local(2, 1)
    with pytest.raises(PlanError, match=r"not in the model: 'fc3' \(did you mean 'fc2'\?\)"):
        Plan({"fc3": cluster.ps_device(0)}).validate(prof, cluster)
    with pytest.raises(PlanError, match="not in the cluster"):
        Plan({"fc1": "/job:ps/replica:0/task:4/device:CPU:0"}).validate(prof, cluster)
    with pytest.raises(PlanError, match="no 'ps' job"):
        Plan({"fc1": "/job:ps/replica:0/task:0/device:CPU:0"}).validate(prof, Cluster.local(2, 0))
    with pytest.raises(PlanError, match="not in the cluster"):
        Plan({"fc1": "/job:worker/device:GPU:0"}).validate(prof, cluster)
    Plan({"fc1": cluster.ps_device(0)}).validate(prof, cluster)


def test_parse_device() -> None:
    d = parse_device("/job:ps/replica:0/task:3/device:CPU:0")
    assert d.is_ps and d.task == 3
    with pytest.raises(PlanError, match="replica"):
        parse_device("/job:ps/replica:1/task:0/device:CPU:0")
