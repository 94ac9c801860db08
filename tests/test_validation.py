"""Every input kind is validated in one place and fails with the documented error type and a
readable message: a table of malformed inputs, and property-based mutation of valid JSON."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ralp_tf.plan.cluster import Cluster
from ralp_tf.errors import ClusterConfigError, PlanError, ValidationError, parse_json
from ralp_tf.model.builtin import resolve_model
from ralp_tf.plan.plans import Plan
from ralp_tf.model.profiles import ModelProfile

RALP_TF = str(Path(sys.executable).with_name("ralp-tf"))

VALID_PLAN = {"format": "ralp_tf.plan/1", "policy": "ralp",
              "placements": {"conv1": "/job:worker/device:CPU:0", "fc1": "/job:ps/replica:0/task:0/device:CPU:0"},
              "provisioning": {"worker": 2, "ps": 1}, "notes": {"cut": "fc1"}}
VALID_TF_CONFIG = {"cluster": {"worker": ["h1:2222", "h2:2222"], "ps": ["h3:2222"]},
                   "task": {"type": "worker", "index": 0}}
VALID_PROFILE = {"model_name": "m", "batch_size": 8, "outputs": ["fc"], "layers": [
    {"name": "x", "kind": "input", "param_bytes": 0, "flops": 0, "output_bytes": 64, "inbound": []},
    {"name": "fc", "kind": "dense", "param_bytes": 640, "flops": 320, "output_bytes": 40, "inbound": ["x"],
     "var_bytes": [600, 40], "output_shape": [10]}]}


VALID_DNN_WORKLOAD = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [
    {"id": 1, "supportedOnFpga": 1, "cpuLatency": 2.0, "fpgaLatency": 0.5, "isBackwardNode": 0, "colorClass": 1,
     "size": 10, "name": "a"},
    {"id": 2, "supportedOnFpga": 1, "cpuLatency": 3.0, "fpgaLatency": 1.0, "isBackwardNode": 0, "colorClass": 2,
     "size": 20, "name": "b"}], "edges": [{"sourceId": 1, "destId": 2, "cost": 0.1}]}
VALID_CATALOG = {"name": "mine", "types": [
    {"name": "cpu", "device_template": "/job:worker/device:CPU:0", "flops": 1e11, "memory_bytes": 3.2e10,
     "price_per_hour": 0.68, "max_units": 8, "bandwidth_bps": 1e10},
    {"name": "ps", "device_template": "/job:ps/replica:0/task:{k}/device:CPU:0", "flops": 5e10,
     "memory_bytes": 6.4e10, "price_per_hour": 0.5, "max_units": 4, "bandwidth_bps": 1e10}]}


def _dnn(**changes: Any) -> str:
    doc = copy.deepcopy(VALID_DNN_WORKLOAD)
    doc.update(changes)
    return json.dumps(doc)


def _dnn_from_dict(doc: Any) -> Any:
    from scheduler.workloads import dnn_partitioning

    return dnn_partitioning.from_dict(doc, "w")


def _read_dnn(text: str) -> Any:
    from scheduler.core.errors import WorkloadError

    return _dnn_from_dict(parse_json(text, WorkloadError, "workload"))


def _catalog_from_dict(doc: Any) -> Any:
    from scheduler.core.catalogs import catalog_from_dict

    return catalog_from_dict(doc)


def _read_catalog(text: str) -> Any:
    from scheduler.core.errors import CatalogError

    return _catalog_from_dict(parse_json(text, CatalogError, "catalog"))


def _read_workload_file(text: str) -> Any:
    import tempfile

    from scheduler.workloads import load_workload

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    return load_workload(f.name)


def _catalog_with(**type_changes: Any) -> str:
    doc = copy.deepcopy(VALID_CATALOG)
    doc["types"][0].update(type_changes)
    return json.dumps(doc)


def _profile_with(**layer_changes: Any) -> str:
    doc = copy.deepcopy(VALID_PROFILE)
    doc["layers"][1].update(layer_changes)
    return json.dumps(doc)


# (kind, reader, input, error type, message fragment)
MALFORMED: list[tuple[str, Callable[[Any], Any], Any, type, str]] = [
    ("plan", Plan.from_json, "{", PlanError, "not valid JSON"),
    ("plan", Plan.from_json, "[]", PlanError, "JSON object"),
    ("plan", Plan.from_json, '{"policy": "ralp"}', PlanError, "lacks 'placements'"),
    ("plan", Plan.from_json, '{"placements": []}', PlanError, "must be an object"),
    ("plan", Plan.from_json, '{"placements": {"fc": 3}}', PlanError, "not a full TF device string"),
    ("plan", Plan.from_json, '{"placements": {"fc": "/job:ps/device:CPU:0"}}', PlanError, "names no PS task"),
    ("plan", Plan.from_json, '{"placements": {"fc": "/job:worker/device:TPU:0"}}', PlanError, "device string"),
    ("plan", Plan.from_json, '{"placements": {"": "/job:worker/device:CPU:0"}}', PlanError, "non-empty string"),
    ("plan", Plan.from_json, '{"placements": {}, "provisioning": {"ps": 1.5}}', PlanError, "provisioning"),
    ("plan", Plan.from_json, '{"placements": {}, "policy": 7}', PlanError, "'policy' must be a string"),
    ("plan", Plan.from_json, '{"placements": {}, "notes": []}', PlanError, "'notes' must be an object"),
    ("plan", Plan.from_json, '{"placements": {}, "format": "ralp_tf.plan/0"}', PlanError, "not supported"),
    ("plan", Plan.from_json, '{"placements": {}, "pickle": "x"}', PlanError, "unknown field"),
    ("tf_config", Cluster.from_tf_config, "not json", ClusterConfigError, "not valid JSON"),
    ("tf_config", Cluster.from_tf_config, "[1]", ClusterConfigError, "'cluster' object"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {}}', ClusterConfigError, "mapping of job name"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"worker": "h:1"}}', ClusterConfigError, "must list"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"worker": ["h:port"]}}', ClusterConfigError, "host:port"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"worker": [5]}}', ClusterConfigError, "host:port"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"boss": ["h:1"]}}', ClusterConfigError, "unknown job"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"worker": ["h:1"]}, "task": "w"}', ClusterConfigError,
     "'task' must be an object"),
    ("tf_config", Cluster.from_tf_config, '{"cluster": {"worker": ["h:1"]}, "task": {"type": "ps"}}',
     ClusterConfigError, "not a job of its cluster"),
    ("profile", ModelProfile.from_json, "{}", ValidationError, "'layers' list"),
    ("profile", ModelProfile.from_json, _profile_with(kind="lstm"), ValidationError, "kind 'lstm'"),
    ("profile", ModelProfile.from_json, _profile_with(param_bytes=-4), ValidationError, "non-negative"),
    ("profile", ModelProfile.from_json, _profile_with(flops="many"), ValidationError, "'flops'"),
    ("profile", ModelProfile.from_json, _profile_with(inbound=["y"]), ValidationError, "do not come before"),
    ("profile", ModelProfile.from_json, _profile_with(var_bytes="640"), ValidationError, "var_bytes"),
    ("profile", ModelProfile.from_json, _profile_with(name="x"), ValidationError, "duplicate"),
    ("model_ref", resolve_model, "", ValidationError, "built-in name"),
    ("model_ref", resolve_model, "alexnet", ValidationError, "unknown model"),
    ("model_ref", resolve_model, "os:system; rm", ValidationError, "malformed"),
    ("model_ref", resolve_model, "no_such_pkg_xyz:build", ValidationError, "cannot import"),
    ("model_ref", resolve_model, "json:no_such_function", ValidationError, "has no function"),
    ("workload", _read_dnn, _dnn(nodes="x"), ValidationError, "must be lists"),
    ("workload", _read_dnn, json.dumps({"nodes": [], "edges": []}), ValidationError, "lacks field(s)"),
    ("workload", _read_dnn, _dnn(edges=[{"sourceId": 1, "destId": 9, "cost": 0.1}]), ValidationError,
     "is not the id of any node"),
    ("workload", _read_dnn, _dnn(edges=[{"sourceId": 1, "destId": 2, "cost": 0.1},
                                        {"sourceId": 2, "destId": 1, "cost": 0.2}]), ValidationError, "cycle"),
    ("workload", _read_dnn, _dnn(maxFPGAs="two"), ValidationError, "maxFPGAs"),
    ("workload", _read_dnn, _dnn(nodes=[{"id": 1}]), ValidationError, "lacks field(s)"),
    ("workload", _read_dnn, _dnn(edges=[{"sourceId": 1, "destId": 2, "cost": float("nan")}]), ValidationError,
     "NaN, which is not a JSON number"),
    ("workload", _dnn_from_dict, {**VALID_DNN_WORKLOAD, "edges": [{"sourceId": 1, "destId": 2, "cost": math.nan}]},
     ValidationError, "cost"),
    ("workload", _dnn_from_dict, {**VALID_DNN_WORKLOAD, "maxFPGAs": math.inf}, ValidationError,
     "maxFPGAs"),
    ("workload", _read_workload_file, "{not json", ValidationError, "not valid JSON"),
    ("workload", _read_workload_file, _profile_with(flops=-1.0), ValidationError, "non-negative"),
    ("catalog", _read_catalog, '{"name": "c", "types": []}', ValidationError, "is empty"),
    ("catalog", _read_catalog, "[]", ValidationError, "JSON object"),
    ("catalog", _read_catalog, _catalog_with(price_per_hour=-1.0), ValidationError, "price_per_hour"),
    ("catalog", _read_catalog, _catalog_with(flops=float("nan")), ValidationError, "NaN"),
    ("catalog", _catalog_from_dict, {**VALID_CATALOG, "types": [{**VALID_CATALOG["types"][0], "flops": math.nan}]},
     ValidationError, "flops"),
    ("catalog", _read_catalog, _catalog_with(device_template="gpu"), ValidationError, "TF device string"),
    ("catalog", _read_catalog, _catalog_with(max_units=0), ValidationError, "max_units"),
    ("catalog", _read_catalog, _catalog_with(speed=3), ValidationError, "unknown field"),
    ("catalog", _read_catalog, json.dumps({"types": [{"name": "x"}]}), ValidationError, "lacks field(s)"),
    ("bandwidth", lambda s: Cluster.local(2, 1, bandwidth=s), "10 gigs", ClusterConfigError, "cannot parse"),
    ("bandwidth", lambda s: Cluster.local(2, 1, bandwidth=s), "-5mbit", ClusterConfigError, "bandwidth"),
]


@pytest.mark.parametrize("kind, reader, text, error, message", MALFORMED,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_input_gets_the_documented_error(kind: str, reader: Callable[[Any], Any], text: Any,
                                                   error: type, message: str) -> None:
    with pytest.raises(error) as info:
        reader(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValidationError)
    tb = info.traceback
    assert tb and all("/tensorflow/" not in str(entry.path) and "/numpy/" not in str(entry.path) for entry in tb)


CLI_MALFORMED = [
    (["plan", "--model", "alexnet_cifar", "--ps", "-1"], "must be >= 0"),
    (["plan", "--model", "alexnet_cifar", "--bandwidth", "1 gigabit"], "cannot parse bandwidth"),
    (["run", "--inject-fault", "ps:zero:3"], "JOB:INDEX:STEP"),
    (["run", "--checkpoint-every", "0"], "must be >= 1"),
    (["plan", "--model", "ralp_tf.model.builtin:missing_fn"], "has no function"),
]


@pytest.mark.parametrize("argv, message", CLI_MALFORMED)
def test_malformed_cli_arguments(argv: list[str], message: str) -> None:
    proc = subprocess.run([RALP_TF, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_the_table_is_large_enough() -> None:
    assert len(MALFORMED) + len(CLI_MALFORMED) >= 25


# ---------------------------------------------------------------------------------- property-based
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**12) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutations(draw: Any, valid: Any) -> Any:
    doc = copy.deepcopy(valid)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            doc = draw(JSON_VALUES) if draw(st.booleans()) else doc
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "delete", "insert"]))
        if op == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(JSON_VALUES)
        else:
            parent.insert(path[-1], draw(JSON_VALUES))
    return doc


def _accepts_or_documented_error(reader: Callable[[str], Any], doc: Any) -> None:
    try:
        reader(json.dumps(doc))
    except ValidationError as exc:
        assert str(exc)
    # anything else (TypeError, KeyError, AttributeError...) fails the test


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True)


@SETTINGS
@given(mutations(VALID_PLAN))
def test_plan_reader_accepts_or_raises_plan_error(doc: Any) -> None:
    _accepts_or_documented_error(Plan.from_json, doc)


@SETTINGS
@given(mutations(VALID_TF_CONFIG))
def test_tf_config_reader_accepts_or_raises_cluster_config_error(doc: Any) -> None:
    _accepts_or_documented_error(Cluster.from_tf_config, doc)


@SETTINGS
@given(mutations(VALID_PROFILE))
def test_profile_reader_accepts_or_raises_validation_error(doc: Any) -> None:
    _accepts_or_documented_error(ModelProfile.from_json, doc)


@SETTINGS
@given(mutations(VALID_DNN_WORKLOAD))
def test_dnn_partitioning_reader_accepts_or_raises_workload_error(doc: Any) -> None:
    _accepts_or_documented_error(_read_dnn, doc)


@SETTINGS
@given(mutations(VALID_CATALOG))
def test_catalog_reader_accepts_or_raises_catalog_error(doc: Any) -> None:
    _accepts_or_documented_error(_read_catalog, doc)


def test_no_unsafe_deserialisers_in_the_code() -> None:
    root = Path(__file__).resolve().parents[1]
    for folder in ("ralp_tf", "scheduler"):
        paths = list((root / folder).rglob("*.py"))
        assert paths, f"no Python files under {root / folder}"
        for path in paths:
            text = path.read_text()
            for banned in ("pickle.load", "yaml.load(", "eval(", "exec(", "marshal.load"):
                assert banned not in text, f"{path} uses {banned}"


# ------------------------------------------------------------------- pathological input, every reader
def _via_file(load: Callable[[str], Any], suffix: str = ".json") -> Callable[[str], Any]:
    """A text reader that writes the text to a temporary file and reads it back with ``load``."""
    def read(text: str) -> Any:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"input{suffix}"
            path.write_text(text)
            return load(str(path))
    return read


def _catalog_file(path: str) -> Any:
    from scheduler.core.catalogs import get_catalog

    return get_catalog(path)


def _dnn_file(path: str) -> Any:
    from scheduler.workloads import dnn_partitioning

    return dnn_partitioning.load(path)


def _error(name: str) -> type:
    from scheduler.core.errors import CatalogError, WorkloadError

    return {"plan": PlanError, "tf_config": ClusterConfigError, "profile": ValidationError,
            "workload": WorkloadError, "catalog": CatalogError}[name]


# (kind, valid document, reader of JSON text, documented error kind): every JSON reader of user input
READERS: list[tuple[str, Any, Callable[[str], Any], str]] = [
    ("plan", VALID_PLAN, Plan.from_json, "plan"),
    ("plan-file", VALID_PLAN, _via_file(Plan.load), "plan"),
    ("profile", VALID_PROFILE, ModelProfile.from_json, "profile"),
    ("profile-file", VALID_PROFILE, _read_workload_file, "workload"),
    ("tf_config", VALID_TF_CONFIG, Cluster.from_tf_config, "tf_config"),
    ("workload-file", VALID_DNN_WORKLOAD, _read_workload_file, "workload"),
    ("dnn-file", VALID_DNN_WORKLOAD, _via_file(_dnn_file), "workload"),
    ("catalog-file", VALID_CATALOG, _via_file(_catalog_file), "catalog"),
]
READER_IDS = [r[0] for r in READERS]
SENTINEL = "__ralp_tf_sentinel__"
PATHOLOGICAL = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                        derandomize=True)


@st.composite
def with_sentinel(draw: Any, valid: Any) -> str:
    """``valid`` as JSON text with one value (or the whole document) replaced by :data:`SENTINEL`."""
    doc = copy.deepcopy(valid)
    path = draw(st.sampled_from(_paths(doc)))
    if not path:
        return json.dumps(SENTINEL)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = SENTINEL
    return json.dumps(doc)


def _refused(reader: Callable[[str], Any], kind: str, text: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        reader(text)
    assert isinstance(info.value, _error(kind)), f"{type(info.value).__name__}: {info.value}"
    assert fragment in str(info.value)


def _nested(depth: int, brackets: tuple[str, str]) -> str:
    return brackets[0] * depth + "0" + brackets[1] * depth


# pathology: (strategy of JSON text put in place of one value, fragment of the refusal)
PATHOLOGIES: dict[str, tuple[Any, str]] = {
    "deep-nesting": (st.builds(_nested, st.sampled_from([65, 66, 1000, 100_000]) | st.integers(65, 5000),
                               st.sampled_from([("[", "]"), ('{"a": ', "}")])), "deeper than 64 levels"),
    "non-finite": (st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-2.5e400"]), "finite number"),
}


@pytest.mark.parametrize("pathology", PATHOLOGIES)
@pytest.mark.parametrize("name, valid, reader, kind", READERS, ids=READER_IDS)
@PATHOLOGICAL
@given(data=st.data())
def test_pathological_value_is_refused(name: str, valid: Any, reader: Callable[[str], Any], kind: str,
                                       pathology: str, data: Any) -> None:
    strategy, fragment = PATHOLOGIES[pathology]
    text = data.draw(with_sentinel(valid)).replace(f'"{SENTINEL}"', data.draw(strategy))
    _refused(reader, kind, text, fragment)


@pytest.mark.parametrize("name, valid, reader, kind", READERS, ids=READER_IDS)
@PATHOLOGICAL
@given(data=st.data())
def test_input_over_the_size_cap_is_refused(name: str, valid: Any, reader: Callable[[str], Any], kind: str,
                                            data: Any) -> None:
    text = json.dumps(valid) + " " * data.draw(st.integers(0, 2000))
    cap = data.draw(st.integers(1, len(text) - 1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RALP_TF_MAX_JSON_BYTES", str(cap))
        _refused(reader, kind, text, f"over the {cap}-byte limit")
        mp.setenv("RALP_TF_MAX_JSON_BYTES", str(len(text)))
        reader(text)  # at the cap exactly: accepted


def test_default_size_cap_is_checked_before_reading(tmp_path: Path) -> None:
    from ralp_tf.errors import DEFAULT_MAX_JSON_BYTES

    huge = tmp_path / "plan.json"
    with open(huge, "wb") as f:  # sparse: 64 MiB + 1 of apparent size, no disk used, never read
        f.truncate(DEFAULT_MAX_JSON_BYTES + 1)
    with pytest.raises(PlanError, match="67108864-byte limit.*RALP_TF_MAX_JSON_BYTES"):
        Plan.load(str(huge))


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1.5"])
def test_malformed_size_override_is_a_clear_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RALP_TF_MAX_JSON_BYTES", value)
    with pytest.raises(ValidationError, match="RALP_TF_MAX_JSON_BYTES.*positive whole number"):
        Plan.from_json(json.dumps(VALID_PLAN))


def test_nesting_limit_is_64_levels_exactly() -> None:
    assert parse_json("[" * 64 + "]" * 64, PlanError, "x") is not None
    with pytest.raises(PlanError, match="deeper than 64 levels"):
        parse_json("[" * 65 + "]" * 65, PlanError, "x")


def test_huge_integer_literal_is_refused() -> None:
    with pytest.raises(PlanError, match="integer of 5000 digits"):
        parse_json("[" + "9" * 5000 + "]", PlanError, "plan")


def test_deeply_nested_plan_file_on_the_command_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("[" * 100_000 + "]" * 100_000)
    proc = subprocess.run([RALP_TF, "run", "--model", "small_cnn", "--policy", str(plan)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "deeper than 64 levels" in proc.stderr and "Traceback" not in proc.stderr
