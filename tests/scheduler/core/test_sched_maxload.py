"""The dnn-partitioning importer, the max-load objective and its exact DP."""
from __future__ import annotations

import copy
import json

import pytest

from scheduler.core.errors import WorkloadError
from scheduler.solvers.exact import Exact
from scheduler.workloads import dnn_partitioning as dp


def chain3() -> dict:
    """a -> b -> c; accelerator latencies 1, 2, 3; CPU 10x; out costs a 0.5, b 0.25; 2 accelerators.

    Hand-checked: {a,b} | {c} -> both accelerators load 3 + 0.25 = 3.25 (b's output cost charged to
    its own device and to the receiver); {a} | {b,c} -> 1.5 and 5.5; all on one -> 6. Optimum 3.25.
    """
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10.0 * lat, "fpgaLatency": lat, "isBackwardNode": 0,
              "colorClass": i, "size": 1.0} for i, lat in ((1, 1.0), (2, 2.0), (3, 3.0))]
    edges = [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 2, "destId": 3, "cost": 0.25}]
    return {"maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def test_max_load_by_hand() -> None:
    p = dp.from_dict(chain3(), "chain3")
    assert p.evaluate(p.from_cuts([2])).max_load == pytest.approx(3.25)
    assert p.evaluate(p.from_cuts([1])).max_load == pytest.approx(5.5)
    assert p.evaluate(p.from_cuts([])).max_load == pytest.approx(6.0)
    s = Exact().solve(p)
    assert s.max_load == pytest.approx(3.25)
    assert s.result == {"cpus": [], "fpgas": [{"nodes": [1, 2]}, {"nodes": [3]}]}
    assert Exact(method="exhaustive").solve(p).max_load == pytest.approx(3.25)


def test_colour_classes_and_size_limit() -> None:
    d = chain3()
    d["nodes"].append({"id": 4, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 0.5, "isBackwardNode": 1,
                       "colorClass": 1, "size": 1.0})  # gradient of node 1: same device as node 1
    d["maxSizePerFPGA"] = 3.0
    p = dp.from_dict(d, "c")
    s = Exact().solve(p)
    dev = {int(k): v for k, v in s.placement.items()}
    assert dev[1] == dev[4]
    sizes = [sum(1 for _ in f["nodes"]) for f in s.result["fpgas"]]
    assert max(sizes) <= 3


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.pop("maxFPGAs"), "lacks field"),
    (lambda d: d["nodes"][0].pop("fpgaLatency"), "lacks field"),
    (lambda d: d["edges"][0].pop("cost"), "lacks field"),
    (lambda d: d["edges"].append({"sourceId": 3, "destId": 99, "cost": 0.1}), "not the id of any node"),
    (lambda d: d["edges"].append({"sourceId": 3, "destId": 1, "cost": 0.1}), "cycle"),
    (lambda d: d["nodes"][1].update(cpuLatency=float("nan")), "finite"),
    (lambda d: d["nodes"][1].update(fpgaLatency=-1.0), "finite number >= 0"),
    (lambda d: d["edges"].append({"sourceId": 1, "destId": 3, "cost": 0.7}), "two different outgoing"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "appears twice"),
])
def test_bad_workload_json(mutate, match) -> None:
    d = copy.deepcopy(chain3())
    mutate(d)
    with pytest.raises(WorkloadError, match=match):
        dp.from_dict(d, "bad")


def test_load_file_errors(tmp_path) -> None:
    f = tmp_path / "w.json"
    f.write_text("{not json")
    with pytest.raises(WorkloadError, match="not valid JSON"):
        dp.load(f)
    with pytest.raises(WorkloadError, match="cannot read"):
        dp.load(tmp_path / "missing.json")
    f.write_text(json.dumps(chain3()))
    assert dp.load(f).name == "w"


def test_shared_workloads_match_published_optimum(shared_data) -> None:
    for name, published in dp.PUBLISHED_OPTIMUM.items():
        p = dp.load(shared_data / f"{name}.json")
        s = Exact().solve(p)
        assert s.max_load == pytest.approx(published, rel=1e-5), name
        # The result shape lists every node exactly once and re-evaluates to the same max-load.
        ids = [i for part in s.result["cpus"] + s.result["fpgas"] for i in part["nodes"]]
        assert sorted(ids) == sorted(p.node_ids)
        assert len(s.result["fpgas"]) <= p.max_fpgas
