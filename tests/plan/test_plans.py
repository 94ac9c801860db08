"""The Plan format: JSON round trips of every format, validation, the errors users see. Profiles are
cached or written as data: no TensorFlow."""
from __future__ import annotations

import json

import pytest

from plan_helpers import builtin, cnn_with_head, mlp, ps
from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import LayerProfile
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate
from ralp_tf.plan.plans import PLAN_FORMAT, PLAN_FORMAT_V1, PLAN_FORMAT_V2, PLAN_FORMAT_V3, Plan, parse_device
from ralp_tf.plan.shards import LayerSplit, Sharded, VariableStorage


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
    prof = builtin("small_cnn").with_batch_size(4)
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


# ----------------------------------------------------------------------- formats /1 and /2
def test_plan_without_storage_stays_format_1_and_round_trips() -> None:
    plan = Plan({"fc": "/job:ps/replica:0/task:0/device:CPU:0"}, policy="ralp")
    assert plan.to_dict()["format"] == PLAN_FORMAT_V1 and "storage" not in plan.to_dict()
    assert Plan.from_json(plan.to_json()) == plan
    old = json.dumps({"format": "ralp_tf.plan/1", "policy": "ralp",
                      "placements": {"fc": "/job:ps/replica:0/task:0/device:CPU:0"}})
    assert Plan.from_json(old) == plan


def test_plan_with_storage_is_format_2_sorted_and_diffable() -> None:
    plan = Plan({"fc": "/job:ps/replica:0/task:0/device:CPU:0"},
                storage={"c4": "/job:ps/replica:0/task:1/device:CPU:0",
                         "c3": ["/job:ps/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"]})
    d = json.loads(plan.to_json())
    assert d["format"] == PLAN_FORMAT and d["storage"]["c3"] == ["/job:ps/replica:0/task:0/device:CPU:0",
                                                                "/job:ps/replica:0/task:1/device:CPU:0"]
    text = plan.to_json()
    assert text.index('"format"') < text.index('"placements"') < text.index('"storage"')
    assert text.index('"c3"') < text.index('"c4"')
    assert Plan.from_json(text) == plan and plan.stored_on() == {"c4": (1,), "c3": (0, 1)}


@pytest.mark.parametrize("doc, match", [
    ({"format": "ralp_tf.plan/1", "placements": {}, "storage": {"c1": "/job:ps/replica:0/task:0/device:CPU:0"}},
     r"format 'ralp_tf.plan/1' has field\(s\) \['storage'\], which that format does not have; set \"format\": "
     r"\"ralp_tf.plan/2\""),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": "/job:worker/device:CPU:0"}}, "not a PS task"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": ["/job:ps/replica:0/task:0/device:CPU:0"]}},
     "two or more"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": ["/job:ps/replica:0/task:0/device:CPU:0",
                                                                      "/job:ps/task:0/device:CPU:0"]}}, "twice"),
    ({"format": "ralp_tf.plan/2", "placements": {"fc": "/job:ps/replica:0/task:0/device:CPU:0"},
      "storage": {"fc": "/job:ps/replica:0/task:1/device:CPU:0"}}, "compute on a PS task"),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": ["c1"]}, "'storage' must"),
])
def test_malformed_storage(doc: dict, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        Plan.from_dict(doc)


def test_storage_on_a_missing_ps_task_names_it_and_the_ps_count() -> None:
    p = cnn_with_head()
    plan = Plan({}, storage={"c1": "/job:ps/replica:0/task:3/device:CPU:0"})
    with pytest.raises(PlanError, match=r"stores layer 'c1' on PS task 3 .* the cluster has 2 PS task\(s\) "
                                        r"\(tasks 0..1\)"):
        plan.validate(p, Cluster.local(2, 2))
    with pytest.raises(PlanError, match="ps task 3 but the cluster has 2 PS task"):
        estimate(p, Cluster.local(2, 2), plan)
    with pytest.raises(PlanError, match="not in the model: 'c9'"):
        Plan({}, storage={"c9": "/job:ps/replica:0/task:0/device:CPU:0"}).validate(p)


# ------------------------------------------------------------------------------ format /3
def _split_plan() -> Plan:
    return Plan({"fc1": ps(0), "fc2": ps(0), "fc3": ps(1)},
                splits={"fc1": {"by": "columns", "shards": [ps(0), ps(1)]},
                        "fc2": {"by": "rows", "shards": [ps(0), "/job:ps/task:1/device:CPU:0"]}})


def test_splits_and_per_variable_storage_are_format_3_and_round_trip() -> None:
    plan = _split_plan()
    assert plan.format == PLAN_FORMAT_V3 and plan.splits["fc2"] == LayerSplit("rows", (ps(0), ps(1)))
    assert plan.split_tasks() == {"fc1": ("columns", (0, 1)), "fc2": ("rows", (0, 1))}
    d = json.loads(plan.to_json())
    assert d["format"] == "ralp_tf.plan/3" and d["splits"]["fc2"] == {"by": "rows", "shards": [ps(0), ps(1)]}
    assert Plan.from_json(plan.to_json()) == plan
    stored = Plan({}, storage={"c4": {"variables": [{"axis": 3, "shards": [ps(0), ps(1)]}]},
                               "c3": {"variables": [ps(2)]}, "c2": ps(1)})
    assert stored.format == PLAN_FORMAT_V3
    assert stored.storage["c4"] == VariableStorage((Sharded((ps(0), ps(1)), 3),))
    assert stored.stored_on() == {"c4": (0, 1), "c3": (2,), "c2": (1,)}
    doc = json.loads(stored.to_json())
    assert doc["storage"]["c4"] == {"variables": [{"axis": 3, "shards": [ps(0), ps(1)]}]} and doc["storage"]["c2"] == ps(1)
    assert Plan.from_json(stored.to_json()) == stored
    no_format = {k: v for k, v in doc.items() if k != "format"}
    assert Plan.from_dict(no_format) == stored  # the format a document without one needs
    assert Plan({}, storage={"c1": ps(0)}).format == PLAN_FORMAT_V2  # nothing of /3: still /2


@pytest.mark.parametrize("doc, match", [
    ({"format": "ralp_tf.plan/2", "placements": {"fc1": ps(0)}, "splits": {}},
     r"has field\(s\) \['splits'\], which that format does not have; set \"format\": \"ralp_tf.plan/3\""),
    ({"format": "ralp_tf.plan/2", "placements": {}, "storage": {"c1": {"variables": [ps(0)]}}},
     r"stores layer\(s\) \['c1'\] per variable, a form of ralp_tf.plan/3; set \"format\": \"ralp_tf.plan/3\""),
    ({"format": "ralp_tf.plan/3", "placements": {"fc1": ps(0)}, "splits": {"fc1": {"by": "diagonal", "shards": [ps(0), ps(1)]}}},
     "'by' is 'diagonal'; use one of columns, rows"),
    ({"format": "ralp_tf.plan/3", "placements": {"fc1": ps(0)}, "splits": {"fc1": {"by": "rows", "shards": [ps(0)]}}},
     "must list two or more distinct PS device strings"),
    ({"format": "ralp_tf.plan/3", "placements": {"fc1": ps(2)}, "splits": {"fc1": {"by": "rows", "shards": [ps(0), ps(1)]}}},
     "split over .* but placed on .*task:2.*; place it on one of its shards"),
    ({"format": "ralp_tf.plan/3", "placements": {}, "splits": {"fc1": {"by": "rows", "shards": [ps(0), ps(1)]}}},
     "but placed on None"),
    ({"format": "ralp_tf.plan/3", "placements": {}, "storage": {"c1": {"variables": [{"axis": -1, "shards": [ps(0), ps(1)]}]}}},
     "'axis' must be an integer >= 0"),
    ({"format": "ralp_tf.plan/3", "placements": {}, "storage": {"c1": {"variables": [{"shards": "x"}]}}},
     "variable 0 shards must list two or more"),
    ({"format": "ralp_tf.plan/3", "placements": {}, "storage": {"c1": {"parts": []}}}, "one entry per variable"),
])
def test_malformed_format_3(doc: dict, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        Plan.from_dict(doc)


def test_splits_and_shards_are_checked_against_the_profile() -> None:
    prof = mlp((1024, 4096, 4096, 10))
    _split_plan().validate(prof, Cluster.local(2, 2))
    on_one = Plan({"fc1": ps(0)}, splits={"fc1": {"by": "columns", "shards": [ps(0), ps(1)]}})
    with pytest.raises(PlanError, match=r"splits layer 'fc1' over PS task\(s\) \[1\], but the cluster has 1 PS task"):
        on_one.validate(prof, Cluster.local(2, 1))
    too_many = Plan({"fc3": ps(0)}, splits={"fc3": {"by": "columns", "shards": [ps(k) for k in range(11)]}})
    with pytest.raises(PlanError, match=r"layer 'fc3' \(Dense\) has 10 output units \(columns\), fewer than the 11 shards "
                                        r"planned; split it over at most 10 PS tasks"):
        too_many.validate(prof)
    cnn = builtin("alexnet_cifar")
    with pytest.raises(PlanError, match=r"layer 'conv1' \(Conv2D\) cannot be split: only Dense layers \(by columns or "
                                        r"rows\) and Embedding tables \(by rows\) can; remove it from 'splits'"):
        Plan({"conv1": ps(0)}, splits={"conv1": {"by": "rows", "shards": [ps(0), ps(1)]}}).validate(cnn)
    ctr = builtin("ctr_dnn")
    with pytest.raises(PlanError, match="embedding table: it splits by rows only, not columns"):
        Plan({"emb0": ps(0)}, splits={"emb0": {"by": "columns", "shards": [ps(0), ps(1)]}}).validate(ctr)
    Plan({"emb0": ps(0)}, splits={"emb0": {"by": "rows", "shards": [ps(0), ps(1)]}}).validate(ctr)
    unshaped = cnn_with_head()
    with pytest.raises(PlanError, match=r"layer 'fc' \(dense\) cannot be split"):
        Plan({"fc": ps(0)}, splits={"fc": {"by": "rows", "shards": [ps(0), ps(1)]}}).validate(unshaped)


def test_a_column_split_needs_an_elementwise_activation_and_no_regulariser() -> None:
    """What the profile records of a Dense layer decides what it splits into, and the analyzer
    leaves a softmax head whole where a column split would be refused."""
    import dataclasses

    from ralp_tf.plan.analyzer import analyze
    from ralp_tf.plan.projection import projection_cluster

    prof = mlp((1024, 4096, 4096, 10))
    layers = {l.name: l for l in prof.layers}
    softmax = dataclasses.replace(prof, layers=tuple(dataclasses.replace(l, activation="softmax") if l.name == "fc3"
                                                     else l for l in prof.layers))
    columns = {"fc3": {"by": "columns", "shards": [ps(0), ps(1)]}}
    Plan({"fc3": ps(0)}, splits=columns).validate(prof)
    with pytest.raises(PlanError, match=r"'fc3' \(Dense\) has activation 'softmax'.*split it by rows"):
        Plan({"fc3": ps(0)}, splits=columns).validate(softmax)
    Plan({"fc3": ps(0)}, splits={"fc3": {"by": "rows", "shards": [ps(0), ps(1)]}}).validate(softmax)
    regularised = dataclasses.replace(prof, layers=tuple(
        dataclasses.replace(l, regularised=(True, False)) if l.name == "fc2" else l for l in prof.layers))
    with pytest.raises(PlanError, match=r"'fc2' \(Dense\) has a weight regulariser"):
        Plan({"fc2": ps(0)}, splits={"fc2": {"by": "rows", "shards": [ps(0), ps(1)]}}).validate(regularised)
    assert layers["fc3"].activation == "" and LayerProfile.from_dict(softmax.layer("fc3").to_dict()).activation == "softmax"
    plan = analyze(softmax, projection_cluster(16, 100e9)).plan
    assert plan.splits and all(s.by == "rows" for n, s in plan.splits.items() if n == "fc3"), plan.splits


def test_per_variable_storage_is_checked_against_the_shapes() -> None:
    cnn = builtin("alexnet_cifar")  # conv1: kernel [3, 3, 3, 64], bias [64]
    ok = {"variables": [{"axis": 3, "shards": [ps(0), ps(1)]}, ps(1)]}
    Plan({}, storage={"conv1": ok}).validate(cnn)
    cases = [({"variables": [ps(0)]}, r"lists 1 variable\(s\) but the layer has 2"),
             ({"variables": [{"axis": 0, "shards": [ps(k) for k in range(4)]}, ps(0)]},
              r"variable 0 of shape \[3, 3, 3, 64\] has 3 entries along axis 0, fewer than its 4 shards; use at most 3 "
              "shards or another axis"),
             ({"variables": [{"axis": 4, "shards": [ps(0), ps(1)]}, ps(0)]}, "has no axis 4")]
    for entry, match in cases:
        with pytest.raises(PlanError, match=match):
            Plan({}, storage={"conv1": entry}).validate(cnn)
