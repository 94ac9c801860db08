"""The calibration file (ralp_tf/plan/calibration.py): format, refusals, and what it changes in the
cost model's inputs. Pure: hand-written calibrations, no TensorFlow."""
from __future__ import annotations

import copy
import json
import math

import pytest

from ralp_tf.errors import CalibrationError, ValidationError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.calibration import CALIBRATION_FORMAT, Calibration, calibrated_cluster, calibrated_profile, load_calibration
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate, layer_seconds, serving_core_seconds
from ralp_tf.plan.profiles import cached_profile
from calibration_docs import TF_VERSION, calibration_doc, layer_times


def cal_of(**kw):
    return Calibration.from_dict(calibration_doc(**kw))


def test_round_trip_and_file(tmp_path):
    doc = calibration_doc(2, 2, layout="colocated", models={"worker:0": {"small_cnn": layer_times("small_cnn", 2e-11)}})
    cal = Calibration.from_dict(doc)
    again = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert again == cal
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal.to_dict()))
    assert load_calibration(str(path)) == cal
    assert cal.to_dict()["format"] == CALIBRATION_FORMAT and math.isnan(again.floor.message_cpu_ps_s)


def test_cluster_takes_links_rates_serving_floor_and_budgets():
    doc = calibration_doc(2, 2, layout="colocated", bandwidth_bps=9.7e7, flops={"worker:0": 2e10, "ps:0": 4e10},
                          host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    cal = Calibration.from_dict(doc)
    cl = cal.cluster()
    assert [h.name for h in cl.hosts] == ["10.0.0.1", "10.0.0.2"]
    assert all(t.bandwidth_bps == 9.7e7 for t in cl.tasks)
    # a task's own rate, else its job's first measured one
    assert {t.key: t.flops for t in cl.tasks} == {"worker:0": 2e10, "worker:1": 2e10, "ps:0": 4e10, "ps:1": 4e10}
    assert cl.serving == cal.serving and cl.floor == cal.floor and {h.cores for h in cl.hosts} == {0.3}
    # onto a cluster shape with other host names, through the tasks (the bench's Cluster.local)
    shape = calibrated_cluster(cal, Cluster.local(2, 2, layout="colocated"), match_hosts=False)
    assert [(h.name, h.cores, h.bandwidth_bps) for h in shape.hosts] == [("host0", 0.3, 9.7e7), ("host1", 0.3, 9.7e7)]


def test_host_rate_is_the_best_peer_median():
    doc = calibration_doc(2, 1)  # dedicated: hosts .1 .2 (workers) .3 (ps)
    for l in doc["links"]:
        if "ps:0" in (l["src"], l["dst"]) and "worker:1" in (l["src"], l["dst"]):
            l["bandwidth_bps"] = 1e7  # worker1 <-> ps0 is slow
    rates = Calibration.from_dict(doc).host_rates()
    assert rates == {"10.0.0.1": 1e8, "10.0.0.2": 1e8, "10.0.0.3": 1e8}


def test_profile_gets_per_task_seconds_and_loses_the_chiefs():
    prof = cached_profile("small_cnn")
    measured = ModelProfile.from_dict({**prof.to_dict(), "layers": [dict(l.to_dict(), measured_seconds=0.5)
                                                                      for l in prof.layers]})
    times = layer_times("small_cnn", 1e-11)
    cal = cal_of(models={"worker:0": {"small_cnn": times}, "ps:0": {"small_cnn": {k: 2 * v for k, v in times.items()}}})
    out = calibrated_profile(cal, measured)
    cl = cal.cluster()
    w1, ps = cl.task("worker", 1), cl.task("ps", 0)
    for l in out.layers:
        assert l.measured_seconds is None
        if l.name in times:
            assert layer_seconds(l, w1, 32) == pytest.approx(times[l.name])  # worker:1 takes worker:0's
            assert layer_seconds(l, ps, 32) == pytest.approx(2 * times[l.name])
    assert json.loads(out.to_json())["layers"][1]["device_seconds"]["worker"] > 0
    half = calibrated_profile(cal, measured.with_batch_size(16))
    assert layer_seconds(half.layers[1], w1, 16) == pytest.approx(times[half.layers[1].name] / 2)
    # a model it did not time: the chief's times go, the calibrated FLOP rates price it
    other = calibrated_profile(cal, cached_profile("alexnet_cifar"))
    assert all(l.measured_seconds is None and not l.device_seconds for l in other.layers)


def test_serving_measured_replaces_the_constants():
    cal = cal_of(layout="dedicated")
    cl = cal.cluster()
    traffic = {("worker", "ps:0"): 1000.0, ("ps:0", "worker"): 3000.0}
    s = cal.serving
    got = serving_core_seconds(cl, traffic, sent={"ps:0": 4.0})
    assert got["ps:0"] == pytest.approx(4000 * s.ps_s_per_byte + 4 * s.ps_message_s + s.ps_step_s)
    assert got["worker:1"] == pytest.approx(4000 * s.worker_s_per_byte + 4 * s.worker_message_s + s.worker_step_s)
    budgeted = calibrated_cluster(cal, cl.with_host_cores(0.5), match_hosts=False)
    assert estimate(cached_profile("small_cnn"), budgeted).task_cpu_s


def test_chained_messages_cost_their_measured_cpu_at_both_ends_between_ps_tasks_too():
    """A split head's activations and gradients (``fwd:``/``bwd:``) and the gradients pushed as the
    backward computes them arrive one at a time while the receiver waits: where calibrate measured
    that CPU, each costs it instead of a tensor message's, at the worker and at both PS tasks of a
    hop between them; a file without it prices them as before (tensor messages with the worker,
    hops between PS tasks nothing)."""
    import dataclasses

    from ralp_tf.plan.costmodel import chained_message_ends, step_messages_by_ps
    from ralp_tf.plan.plans import Plan
    from ralp_tf.plan.traffic import resolve_placements, resolve_splits, resolve_storage, step_traffic

    doc = calibration_doc(2, 2, layout="colocated", host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    cal = Calibration.from_dict(doc)
    assert cal.serving.ps_chained_message_s is None and not cal.serving.chained  # files without it still read
    doc["serving"].update(ps_chained_message_s=4e-4, worker_chained_message_s=3e-4)
    chained = Calibration.from_dict(doc)
    assert chained.serving.chained and Calibration.from_dict(json.loads(json.dumps(chained.to_dict()))) == chained
    prof = cached_profile("alexnet_cifar")
    cut = analyze(prof, chained.cluster()).plan.to_dict()
    shards = ["/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"]
    plan = Plan.from_dict({**cut, "format": "ralp_tf.plan/3", "splits": {"fc1": {"by": "columns", "shards": shards}}})
    where, splits = resolve_placements(prof, plan), resolve_splits(plan)
    step = step_traffic(prof, where, 2, resolve_storage(plan), plan.compression, splits)
    ends = chained_message_ends(step)
    assert ends["ps:0"][1] > 0 and ends["ps:0"][1] == pytest.approx(ends["ps:1"][1])  # hops between the PS tasks
    assert ends["worker"][0] > 0 and ends["worker"][0] == pytest.approx(ends["ps:0"][0] + ends["ps:1"][0])
    traffic: dict = {}
    for (src, dst, _), nbytes in step.bytes.items():
        traffic[(src, dst)] = traffic.get((src, dst), 0.0) + nbytes
    sent = step_messages_by_ps(step)
    before = serving_core_seconds(cal.cluster(), traffic, step.messages, sent, ends)
    after = serving_core_seconds(chained.cluster(), traffic, step.messages, sent, ends)
    s = chained.serving
    for k in ("ps:0", "ps:1"):
        w, p = ends[k]
        assert after[k] - before[k] == pytest.approx(s.ps_chained_message_s * (w + p) - s.ps_message_s * w)
    assert after["worker:0"] - before["worker:0"] == pytest.approx(
        (s.worker_chained_message_s - s.worker_message_s) * ends["worker"][0])
    assert before == serving_core_seconds(cal.cluster(), traffic, step.messages, sent)  # unmeasured: as before
    for k in ("ps:0", "ps:1", "worker:0"):  # the predicted CPU of each task, per synchronous step
        assert estimate(prof, chained.cluster(), plan).task_cpu_s[k] > estimate(prof, cal.cluster(), plan).task_cpu_s[k]
    with pytest.raises(CalibrationError, match="serving.ps_chained_message_s"):
        Calibration.from_dict({**doc, "serving": {**doc["serving"], "ps_chained_message_s": -1.0}})
    # stock PSS: its pushes arrive as the backward computes them (chained), its pulls together (not)
    stock = step_traffic(prof, resolve_placements(prof, None), 2)
    pushes = {k: v for k, v in chained_message_ends(stock).items()}
    trainable = sum(len(l.var_bytes) - l.untrainable_variables for l in prof.layers)
    assert pushes["worker"] == (trainable, 0.0) and pushes["ps:0"][0] + pushes["ps:1"][0] == trainable
    assert dataclasses.replace(s, ps_chained_message_s=None).chained is False


def test_the_chiefs_cpu_is_priced_on_the_host_it_shares_and_nowhere_else():
    """The chief schedules every closure: where it runs on a budgeted host of the job (the colocated
    layout's host0, a TF_CONFIG chief beside a worker) and calibrate measured its CPU per closure,
    that host pays ``N c / K`` per synchronous step; a chief on a machine of its own pays nothing."""
    import dataclasses

    from ralp_tf.errors import ClusterConfigError
    from ralp_tf.plan.serving import CHIEF, serving_seconds

    doc = calibration_doc(2, 2, layout="colocated", host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    doc["serving"]["chief_closure_s"] = 3e-3
    doc["testbed"] = {"layout": "colocated", "bandwidth_bps": 1e9, "host_cpu": 0.3, "prefix": "p"}
    cal = Calibration.from_dict(doc)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    assert cal.cluster().chief_host == "10.0.0.1"  # the testbed's chief runs on worker 0's host
    spec = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "ps": ["10.0.0.1:2223", "10.0.0.2:2223"]}
    assert calibrated_cluster(cal, Cluster.from_dict(spec)).chief_host == "10.0.0.1"  # a coordinator's TF_CONFIG
    colocated = calibrated_cluster(cal, Cluster.local(2, 2, layout="colocated").with_host_cores(0.3), match_hosts=False)
    assert colocated.chief_host == "host0"
    prof = cached_profile("resnet_cifar")
    with_chief = estimate(prof, colocated)
    without = estimate(prof, dataclasses.replace(colocated, serving=dataclasses.replace(cal.serving, chief_closure_s=None)))
    assert with_chief.task_cpu_s[CHIEF] == pytest.approx(2 * 3e-3) and CHIEF not in without.task_cpu_s
    assert with_chief.host_cpu_s["host0"] - without.host_cpu_s["host0"] == pytest.approx(2 * 3e-3 / 0.3)
    assert with_chief.host_cpu_s["host1"] == pytest.approx(without.host_cpu_s["host1"])
    eight = estimate(prof, colocated.with_closures(8, colocated.floor))  # a closure of 8 steps: an eighth a step
    assert eight.task_cpu_s[CHIEF] == pytest.approx(2 * 3e-3 / 8)
    assert serving_seconds(colocated, {CHIEF: 1e-3}) == {"host0": pytest.approx(2 * 1e-3 / 0.3), "host1": 0.0}
    assert Cluster.local(2, 2).chief_host is None  # dedicated: the chief is a machine of its own
    assert CHIEF not in estimate(prof, dataclasses.replace(colocated, chief_host=None)).task_cpu_s
    beside = Cluster.from_dict({"chief": ["10.0.0.1:1"], "worker": ["10.0.0.1:2", "10.0.0.2:2"], "ps": ["10.0.0.2:3"]})
    assert beside.chief_host == "10.0.0.1"
    alone = Cluster.from_dict({"chief": ["10.0.0.9:1"], "worker": ["10.0.0.1:2"], "ps": ["10.0.0.2:3"]})
    assert alone.chief_host is None
    with pytest.raises(ClusterConfigError, match="chief_host 'nowhere' is not the host of a worker or PS task"):
        dataclasses.replace(alone, chief_host="nowhere")


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(tensorflow_version="2.20.0"), "TensorFlow 2.20.0"),
    (lambda d: d.update(format="ralp_tf.calibration/0"), "not 'ralp_tf.calibration/1'"),
])
def test_stale_files_are_refused(change, words):
    doc = calibration_doc()
    change(doc)
    with pytest.raises(CalibrationError, match="rerun `ralp-tf calibrate`") as err:
        Calibration.from_dict(doc).check(Cluster.from_dict({"worker": ["10.0.0.1:2222", "10.0.0.2:2223"],
                                                            "ps": ["10.0.0.3:2224"]}), tensorflow_version=TF_VERSION)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_other_clusters_are_refused():
    cal = cal_of()
    same = Cluster.from_dict({"worker": ["10.0.0.1:3000", "10.0.0.2:3000"], "ps": ["10.0.0.3:3000"]})
    cal.check(same, tensorflow_version=TF_VERSION)  # other ports, same hosts: fine
    cases = {
        "this cluster has 3 worker(s)": Cluster.from_dict({"worker": ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.4:1"],
                                                          "ps": ["10.0.0.3:1"]}),
        "measured hosts": Cluster.from_dict({"worker": ["10.0.0.1:1", "10.0.0.1:2"], "ps": ["10.0.0.3:1"]}),
        "is of host 10.0.0.1 for worker:0, this cluster has 10.9.9.1": Cluster.from_dict(
            {"worker": ["10.9.9.1:1", "10.0.0.2:1"], "ps": ["10.0.0.3:1"]}),
        "on a CPU": None,
    }
    gpu = Cluster.from_dict({"worker": ["10.0.0.1:1", "10.0.0.2:1"], "ps": ["10.0.0.3:1"]}, gpus={"worker": 1})
    cases["on a CPU"] = gpu
    for words, cluster in cases.items():
        with pytest.raises(CalibrationError, match="rerun") as err:
            cal.check(cluster)
        assert words in str(err.value), str(err.value)
    with pytest.raises(CalibrationError, match="measured worker:0 on a CPU .* runs it on a GPU"):
        cal.check(same, device_kinds={"worker:0": "GPU", "worker:1": "CPU", "ps:0": "CPU"})
    local = cal_of(address_base="127.0.0.")
    loop = Cluster.local(2, 1)
    with pytest.raises(CalibrationError, match="measured on machine 'chief-host', this is 'other'"):
        local.check(loop, machine="other")
    local.check(loop, machine="chief-host")  # loopback: the machine, not the ports, tells it
    with pytest.raises(CalibrationError, match="at 127.0.0.1:2222, this cluster has it at 10.0.0.1:3000"):
        local.check(same)
    assert isinstance(CalibrationError("x"), ValidationError)


@pytest.mark.parametrize("path, value", [
    (("tasks",), []), (("tasks", 0, "key"), "chief:0"), (("tasks", 0, "device_kind"), "TPU"),
    (("tasks", 0, "address"), "nowhere"), (("links", 0, "bandwidth_bps"), 0), (("links", 0, "dst"), "ps:7"),
    (("links", 0, "samples", 0, "bytes"), -1), (("serving", "ps_s_per_byte"), "fast"), (("floor", "closure_s"), None),
    (("compute", 0, "models", 0, "batch_size"), 0), (("compute", 0, "flops_per_s"), -1.0), (("machine",), ""),
    (("host_cores",), {"nohost": 1}), (("shared_cores",), 0),
])
def test_malformed_fields_name_themselves(path, value):
    doc = calibration_doc(models={"worker:0": {"small_cnn": layer_times("small_cnn", 1e-11)}})
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(CalibrationError) as err:
        Calibration.from_dict(copy.deepcopy(doc), path="calibration file c.json")
    assert str(err.value).startswith("calibration file c.json") and "rerun" in str(err.value)


def test_a_gpu_worker_keeps_its_conv_layers():
    """With equal CPU rates everywhere the analyzer computes small_cnn whole on the PS at 1 Gbit/s;
    calibrated with GPU workers (their layers timed on the GPU, the PS's on its CPU) it keeps the
    conv layers on the workers and moves only the dense head."""
    prof = cached_profile("small_cnn")
    conv = {l.name for l in prof.layers if l.kind == "conv"}
    cpu = layer_times("small_cnn", 1 / 5e10)
    for kind, worker_times, on_ps in (("CPU", cpu, conv), ("GPU", layer_times("small_cnn", 1 / 1e13), set())):
        cal = cal_of(bandwidth_bps=1e9, worker_kind=kind, models={"worker:0": {"small_cnn": worker_times},
                                                                 "ps:0": {"small_cnn": cpu}})
        cluster = cal.cluster()
        assert cluster.task("worker", 0).device() .endswith(f"device:{kind}:0")
        a = analyze(calibrated_profile(cal, prof), cluster)
        assert conv & set(a.plan.ps_layers()) == on_ps, (kind, a.chosen.label)
        assert a.plan.ps_layers(), "the dense head goes to the PS either way"


def test_a_ps_tasks_table_passes_are_priced_at_its_measured_rate():
    """ctr_dnn with tf_keras.optimizers.SGD passes over its tables twice a step on their PS task:
    priced at DENSE_PASS_S_PER_BYTE, or at the rate calibrate timed on the PS task."""
    from ralp_tf.plan.costmodel import DENSE_PASS_S_PER_BYTE

    prof = cached_profile("ctr_dnn").with_optimizer("sgd")
    doc = calibration_doc(flops={"worker:0": 5e10, "ps:0": 5e10})
    plain = Calibration.from_dict(doc).cluster()
    doc["compute"][-1]["table_pass_s_per_byte"] = 3 * DENSE_PASS_S_PER_BYTE
    slow = Calibration.from_dict(doc).cluster()
    assert plain.table_pass_s_per_byte is None and slow.table_pass_s_per_byte == 3 * DENSE_PASS_S_PER_BYTE
    before, after = estimate(prof, plain).ps_compute_s["ps:0"], estimate(prof, slow).ps_compute_s["ps:0"]
    tables = sum(v for l in prof.layers if l.kind == "embedding" for v in l.var_bytes)
    assert after - before == pytest.approx(2 * 2 * DENSE_PASS_S_PER_BYTE * tables, rel=1e-6)


def test_every_ps_tasks_table_pass_counts_in_the_one_rate_priced():
    """Two PS tasks timed at 1 and 2 ns a byte: the cost model's one rate is their mean, not the
    first task's."""
    doc = calibration_doc(workers=2, ps=2, flops={"worker:0": 5e10, "ps:0": 5e10, "ps:1": 5e10})
    rates = iter([1e-9, 2e-9])
    for c in doc["compute"]:
        if c["task"].startswith("ps:"):
            c["table_pass_s_per_byte"] = next(rates)
    assert Calibration.from_dict(doc).cluster().table_pass_s_per_byte == pytest.approx(1.5e-9)


def test_the_pass_rate_read_as_served_wins_over_the_timed_loops_where_the_hosts_cores_are_known():
    """The PS CPU per byte read while the workers' closures made the passes, over a PS host's cores
    (0.3: 3e-10 core-seconds is 1e-9 seconds there), wins over the loops timed together and alone;
    without known cores it cannot be turned into seconds, and the loops' rate is priced."""
    doc = calibration_doc(workers=2, ps=2, layout="colocated", flops={"worker:0": 5e10, "ps:0": 5e10, "ps:1": 5e10},
                          host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    for c in doc["compute"]:
        if c["task"].startswith("ps:"):
            c["table_pass_s_per_byte"] = 6e-10
    assert Calibration.from_dict(doc).table_pass_s_per_byte() == pytest.approx(6e-10)
    doc["table_pass_together_s_per_byte"] = 8e-10
    assert Calibration.from_dict(doc).table_pass_s_per_byte() == pytest.approx(8e-10)
    doc["table_pass_served_cpu_s_per_byte"] = 3e-10
    cal = Calibration.from_dict(doc)
    assert cal.table_pass_s_per_byte() == pytest.approx(1e-9) and cal.cluster().table_pass_s_per_byte == pytest.approx(1e-9)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    doc["host_cores"] = {}
    assert Calibration.from_dict(doc).table_pass_s_per_byte() == pytest.approx(8e-10)
    doc["table_pass_served_cpu_s_per_byte"] = -1.0
    with pytest.raises(CalibrationError, match="table_pass_served_cpu_s_per_byte"):
        Calibration.from_dict(doc)


def _dense_trainable_bytes(prof, sparse: bool = False) -> float:
    from ralp_tf.plan.costmodel import updated_sparsely

    return sum(v for l in prof.layers for i, v in enumerate(l.var_bytes[:len(l.var_bytes) - l.untrainable_variables])
               if updated_sparsely(l, i) == sparse)


def test_a_ps_tasks_dense_updates_are_priced_at_the_measured_rate_of_the_profiles_optimizer():
    """Stock PS with one PS task: every dense trainable variable is updated there each worker step,
    ``u * p_v``; the tables' sparse updates are not counted again; another optimizer's rate is not
    used, and a file without the field prices no update."""
    prof = cached_profile("ctr_dnn").with_optimizer("sgd")
    doc = calibration_doc(flops={"worker:0": 5e10, "ps:0": 5e10})
    plain = Calibration.from_dict(doc)
    assert plain.dense_update_s_per_byte == {} and plain.cluster().dense_update_s_per_byte == {}
    doc["dense_update_s_per_byte"] = {"sgd": 2e-9, "legacy-sgd": 5e-10}
    cal = Calibration.from_dict(json.loads(json.dumps(Calibration.from_dict(doc).to_dict())))
    assert cal.dense_update_s_per_byte == {"sgd": 2e-9, "legacy-sgd": 5e-10}
    before, after = estimate(prof, plain.cluster()).ps_compute_s["ps:0"], estimate(prof, cal.cluster()).ps_compute_s["ps:0"]
    assert after - before == pytest.approx(2e-9 * _dense_trainable_bytes(prof), rel=1e-6)
    assert _dense_trainable_bytes(prof) < 0.1 * _dense_trainable_bytes(prof, sparse=True)  # the tables are not in it
    legacy = prof.with_optimizer("legacy-sgd")
    assert (estimate(legacy, cal.cluster()).ps_compute_s["ps:0"] - estimate(legacy, plain.cluster()).ps_compute_s.get("ps:0", 0)
            == pytest.approx(5e-10 * _dense_trainable_bytes(legacy), rel=1e-6))
    adam = prof.with_optimizer("adam")
    assert estimate(adam, cal.cluster()).ps_compute_s == estimate(adam, plain.cluster()).ps_compute_s


def test_dense_updates_follow_the_variables_to_their_ps_tasks_and_raise_the_step():
    """alexnet_cifar's plan with its head split over two PS tasks: each task pays the update of its
    shares of the variables it holds, their sum is every dense trainable byte's, and a host-budgeted
    cluster's predicted step grows with the rate."""
    from ralp_tf.plan.costmodel import dense_update_seconds
    from ralp_tf.plan.traffic import resolve_placements, resolve_splits, resolve_storage, variable_shards

    prof = cached_profile("alexnet_cifar")
    doc = calibration_doc(2, 2, layout="colocated", flops={"worker:0": 5e10, "ps:0": 5e10, "ps:1": 5e10},
                          host_cores={"10.0.0.1": 0.3, "10.0.0.2": 0.3})
    plain = Calibration.from_dict(doc).cluster()
    plan = analyze(prof, plain).plan
    where, splits = resolve_placements(prof, plan), resolve_splits(plan)
    homes = variable_shards(prof, where, 2, resolve_storage(plan), splits)
    per_task = dense_update_seconds(prof, homes, 1e-9)
    assert set(map(str, per_task)) == {"ps:0", "ps:1"}
    assert sum(per_task.values()) == pytest.approx(1e-9 * _dense_trainable_bytes(prof), rel=1e-6)
    doc["dense_update_s_per_byte"] = {"sgd": 1e-9}
    priced = Calibration.from_dict(doc).cluster()
    assert estimate(prof, priced, plan).step_s > estimate(prof, plain, plan).step_s
    for t, s in per_task.items():
        assert estimate(prof, priced, plan).ps_compute_s[str(t)] - estimate(prof, plain, plan).ps_compute_s.get(str(t), 0) \
            == pytest.approx(s, rel=1e-6)


@pytest.mark.parametrize("bad", [{"nadam-x": 1e-9}, {"sgd": -1.0}, {"sgd": "fast"}, [1e-9]])
def test_a_malformed_dense_update_rate_names_itself(bad):
    doc = calibration_doc()
    doc["dense_update_s_per_byte"] = bad
    with pytest.raises(CalibrationError, match="dense_update_s_per_byte"):
        Calibration.from_dict(doc)
