"""The cluster model: construction from TF_CONFIG and local shapes, hosts, rates, task references,
CPU-only PS hosts. Pure data, no TensorFlow."""
from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest

from ralp_tf.errors import ClusterConfigError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.cluster import Cluster, Rates, TaskRef, address_host, parse_bandwidth

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
    with pytest.raises(ClusterConfigError, match="ps_hosts must be an integer >= 0"):
        Cluster.local(2, 1, ps_hosts=-1)


@pytest.mark.slow  # over ~5 s: the fast tier's limit
def test_any_positive_cluster_size_plans() -> None:
    """100,000 workers (past 10,000 tasks, where placeholder ports would run out) plan in
    pure arithmetic, with distinct, valid placeholder addresses."""
    from ralp_tf.plan.analyzer import analyze

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


# ---------------------------------------------------------------------------------------- hosts
def test_hosts_come_from_the_address_host_part() -> None:
    c = Cluster.from_tf_config(json.dumps({"cluster": {
        "chief": ["10.0.0.1:2000"], "worker": ["10.0.0.1:2222", "Node-2.example:2222"],
        "ps": ["10.0.0.1:2223", "[fe80::1]:2223"]}}), bandwidth="1gbit")
    assert [t.host for t in c.tasks] == ["10.0.0.1", "10.0.0.1", "node-2.example", "10.0.0.1", "fe80::1"]
    assert [(h.name, h.tasks) for h in c.hosts] == [
        ("10.0.0.1", ("chief:0", "worker:0", "ps:0")), ("node-2.example", ("worker:1",)), ("fe80::1", ("ps:1",))]
    assert c.num_hosts == 3 and "on 3 host(s)" in c.describe()
    assert [h.name for h in c.ps_only_hosts] == ["fe80::1"]  # a PS machine without workers


def test_loopback_tasks_count_as_hosts_of_their_own() -> None:
    assert address_host("127.0.0.1:2222") == "127.0.0.1:2222"
    assert address_host("localhost:1") != address_host("localhost:2")
    c = Cluster.from_dict({"worker": ["localhost:1", "localhost:2"], "ps": ["localhost:3"]},
                          hosts={"worker": ["a", "b"], "ps": ["a"]})
    assert [h.tasks for h in c.hosts] == [("worker:0", "ps:0"), ("worker:1",)]


@pytest.mark.parametrize("address", ["h1", "a b:1", "host:99999", "-bad:1", "a..b:1", "[zz::1]:1", "h:port"])
def test_unparsable_tf_config_hosts_name_the_address_and_the_fix(address: str) -> None:
    with pytest.raises(ClusterConfigError, match=r"task 0: address .* write 'host:port', e\.g\."):
        Cluster.from_tf_config(json.dumps({"cluster": {"worker": [address]}}))


def test_local_layouts() -> None:
    dedicated = Cluster.local(2, 1, chief=True)
    assert [h.name for h in dedicated.hosts] == ["chief0", "worker0", "worker1", "ps0"]
    colocated = Cluster.local(3, 2, chief=True, layout="colocated")
    assert [(h.name, h.tasks) for h in colocated.hosts] == [
        ("host0", ("chief:0", "worker:0", "ps:0")), ("host1", ("worker:1", "ps:1")), ("host2", ("worker:2",))]
    assert [h.tasks for h in Cluster.local(1, 3, layout="colocated").hosts] == [("worker:0", "ps:0"), ("ps:1",),
                                                                                ("ps:2",)]
    with pytest.raises(ClusterConfigError, match="unknown layout 'shared'"):
        Cluster.local(2, 2, layout="shared")


def test_local_two_workers_per_host_are_strided() -> None:
    """Host i runs workers i and H + i: the first H workers are one per host, as the testbed lays them out."""
    c = Cluster.local(4, 2, chief=True, layout="colocated", workers_per_host=2)
    assert [(h.name, h.tasks) for h in c.hosts] == [("host0", ("chief:0", "worker:0", "worker:2", "ps:0")),
                                                   ("host1", ("worker:1", "worker:3", "ps:1"))]
    assert [h.tasks for h in Cluster.local(3, 2, layout="colocated", workers_per_host=2).hosts] == [
        ("worker:0", "worker:2", "ps:0"), ("worker:1", "ps:1")]
    with pytest.raises(ClusterConfigError, match="workers_per_host=2 needs layout='colocated'"):
        Cluster.local(4, 2, workers_per_host=2)
    with pytest.raises(ClusterConfigError, match="workers_per_host must be an integer >= 1, got 0"):
        Cluster.local(4, 2, layout="colocated", workers_per_host=0)


def test_host_link_rate_and_cpu_budget() -> None:
    c = Cluster.local(2, 2, layout="colocated", bandwidth={"worker": "1gbit", "ps": "100mbit"})
    assert all(h.bandwidth_bps == 100e6 for h in c.hosts)  # one link per host: the slowest task's rate
    assert c.with_rates(bandwidth="10gbit").hosts[0].bandwidth_bps == 10e9
    budgeted = c.with_host_cpu({"host1": 2e9})
    assert budgeted.host("host1").cpu_flops == 2e9 and budgeted.host("host0").cpu_flops == c.workers[0].flops
    assert budgeted.with_rates(bandwidth="1gbit").host("host1").cpu_flops == 2e9
    with pytest.raises(ClusterConfigError, match="host 'nowhere', which runs no task"):
        c.with_host_cpu({"nowhere": 1e9})


# ------------------------------------------------------------------------- CPU-only PS hosts
def test_ps_hosts_add_cpu_only_hosts_to_either_layout() -> None:
    c = Cluster.local(4, 4, layout="colocated", ps_hosts=2, bandwidth="25gbit", flops={"worker": 1e14, "ps": 1e12},
                      gpus={"worker": 1})
    assert c.num_ps == 6 and c.num_hosts == 6
    assert [(h.name, h.tasks) for h in c.ps_only_hosts] == [("pshost0", ("ps:4",)), ("pshost1", ("ps:5",))]
    assert c.host("pshost1").bandwidth_bps == 25e9 and c.host("pshost1").cpu_flops == 1e12
    assert c.task("ps", 5).host == "pshost1" and c.host_of(TaskRef.ps(5)) == "pshost1"
    dedicated = Cluster.local(2, 1, ps_hosts=1)
    assert [h.name for h in dedicated.hosts] == ["worker0", "worker1", "ps0", "pshost0"]
    assert [h.name for h in dedicated.ps_only_hosts] == ["ps0", "pshost0"]
    assert Cluster.local(2, 0, ps_hosts=2).num_ps == 2 and not Cluster.local(2, 2, layout="colocated").ps_only_hosts


# ----------------------------------------------------------------------------------- records
def test_task_refs_are_typed_and_read_as_their_keys() -> None:
    ref = TaskRef.ps(3)
    assert ref == "ps:3" and ref.job == "ps" and ref.index == 3 and ref.is_ps and not ref.is_worker
    assert TaskRef.worker() == "worker" and TaskRef.worker().index is None
    assert TaskRef.parse("ps:12").index == 12 and TaskRef.parse(ref) is ref
    assert {("ps:3", "worker"): 1}[(ref, TaskRef.worker())] == 1  # keys written as strings still match
    assert json.dumps({ref: 1}) == '{"ps:3": 1}' and pickle.loads(pickle.dumps(ref)).index == 3
    for bad in ("ps", "ps:x", "chief:0", "worker:1"):
        with pytest.raises(ClusterConfigError, match="neither 'worker' nor 'ps:K'"):
            TaskRef.parse(bad)
    with pytest.raises(ClusterConfigError, match="a task reference is"):
        TaskRef("ps", -1)


def test_rates_record_gives_the_cluster_keywords() -> None:
    assert Rates().kwargs() == {}
    rates = Rates(bandwidth="1gbit", flops={"worker": 1e13, "ps": 5e10})
    assert rates.kwargs() == {"bandwidth": "1gbit", "flops": {"worker": 1e13, "ps": 5e10}}
    c = Cluster.local(2, 1, **rates.kwargs())
    assert c.workers[0].bandwidth_bps == 1e9 and c.ps[0].flops == 5e10
    with pytest.raises(ClusterConfigError, match="cannot parse bandwidth 'fast'"):
        Rates(bandwidth="fast")
    with pytest.raises(ClusterConfigError, match="positive number of FLOP/s"):
        Rates(flops={"worker": 0})



@pytest.mark.parametrize("text, rate", [
    ("5e10", 5e10), ("100t", 1e14), ("2.5g", 2.5e9), ("800M", 8e8), ("1tflops", 1e12), (3e12, 3e12),
    ("worker=100t,ps=1t", {"worker": 1e14, "ps": 1e12}), ({"worker": "1t", "default": 5e10}, {"worker": 1e12, "default": 5e10}),
])
def test_flop_rates_parse_as_one_or_per_job(text: object, rate: object) -> None:
    from ralp_tf.plan.cluster import parse_flops

    assert parse_flops(text) == rate


@pytest.mark.parametrize("bad, match", [
    ("fast", "cannot parse FLOP rate 'fast'"), ("worker=0", "positive number of FLOP/s"),
    ("gpu=1t", "per job .*got 'gpu'; write e.g. worker=100t,ps=1t"), (True, "positive number"),
])
def test_bad_flop_rates_name_the_value_and_the_form(bad: object, match: str) -> None:
    from ralp_tf.plan.cluster import parse_flops

    with pytest.raises(ClusterConfigError, match=match):
        parse_flops(bad)


def test_worker_and_ps_speeds_differ_in_the_cost_model() -> None:
    """GPU-fast workers and CPU PS tasks: computing a conv base on the PS prices as what it is."""
    from plan_helpers import builtin

    from ralp_tf.plan.analyzer import analyze

    p = builtin("alexnet_cifar")
    fast_workers = Cluster.local(2, 1, bandwidth="10gbit", flops=Rates(flops="worker=100t,ps=50g").flops)
    assert fast_workers.workers[0].flops == 1e14 and fast_workers.ps[0].flops == 5e10
    a = analyze(p, fast_workers)
    convs = {l.name for l in p.layers if l.kind == "conv"}
    assert not convs & set(a.plan.ps_layers())
    everything = next(c for c in a.candidates if c.cut == "everything on the PS")
    assert everything.estimate.step_s > 5 * a.chosen.estimate.step_s


def test_a_cluster_file_carries_the_cost_models_rates(tmp_path: Any) -> None:
    import json

    from ralp_tf.run.tfconfig import load_cluster_config

    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "ps": ["10.0.0.3:2222"]},
                                "rates": {"bandwidth": "10gbit", "flops": {"worker": "100t", "ps": "1t"},
                                          "gpus": {"worker": 1}}}))
    config = load_cluster_config(str(path))
    cluster = config.cost_cluster()
    assert [(t.flops, t.gpus, t.bandwidth_bps) for t in cluster.workers] == [(1e14, 1, 1e10)] * 2
    assert cluster.ps[0].flops == 1e12 and config.cost_cluster(flops=5e10).ps[0].flops == 5e10
    bare = load_cluster_config(json.dumps({"worker": ["10.0.0.1:2222"], "rates": {"flops": "worker=1t,ps=2t"}}))
    assert bare.cost_cluster().workers[0].flops == 1e12 and "rates" not in bare.spec
    with pytest.raises(ClusterConfigError, match="'rates' is an object with any of bandwidth, flops and gpus"):
        load_cluster_config(json.dumps({"worker": ["10.0.0.1:2222"], "rates": {"speed": 1}}))
    with pytest.raises(ClusterConfigError, match="rates.gpus"):
        load_cluster_config(json.dumps({"worker": ["10.0.0.1:2222"], "rates": {"gpus": {"worker": -1}}}))
