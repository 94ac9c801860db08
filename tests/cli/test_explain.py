"""`ralp-tf explain`: the picture's data from the one cost model, the PNG/SVG, and bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralp_tf.cli.main import main
from ralp_tf.errors import ValidationError
from ralp_tf.cli.explain import draw, explain_data, measured_links, step_resources

RUN = {"baseline": {"bytes_between": {"worker0->ps0": 10.0, "worker1->ps0": 12.0, "ps0->worker0": 5.0,
                                      "ps0->worker1": 7.0, "chief0->ps0": 99.0}},
       "ralp": {"bytes_between": {"worker0->ps0": 1.0, "worker1->ps0": 2.0, "ps0->worker0": 3.0, "ps0->worker1": 4.0}}}


def test_measured_links_sum_workers_per_pair() -> None:
    assert measured_links(RUN["baseline"]) == {"worker->ps:0": 22.0, "ps:0->worker": 12.0}
    with pytest.raises(ValidationError, match="no measured bytes_between"):
        measured_links({"bytes_between": {}})


@pytest.mark.slow
def test_data_follows_the_plan_and_the_cost_model(tmp_path: Path) -> None:
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.plan.costmodel import estimate
    from ralp_tf.model.builtin import small_cnn
    from ralp_tf.plan.plans import Plan
    from ralp_tf.model.profiler import profile

    data = explain_data("small_cnn", 2, 1, run_json=RUN, bandwidth="100mbit")
    names = [l["name"] for l in data["layers"]]
    assert names[:2] == ["conv1", "pool1"] or names[1:3] == ["conv1", "pool1"]  # in model order
    plan = Plan.from_dict(data["plan"])
    on_ps = {l["name"] for l in data["layers"] if l["compute"] == "ps:0"}
    assert on_ps == set(plan.ps_layers()) and "fc1" in on_ps
    assert all(l["storage"] == ["ps:0"] for l in data["layers"] if l["param_bytes"])
    prof = profile(small_cnn(), batch_size=32)
    cluster = Cluster.local(2, 1, bandwidth="100mbit")
    stock, chosen = estimate(prof, cluster, None), estimate(prof, cluster, plan)
    assert data["links"]["stock PSS"]["worker->ps:0"] == stock.bytes_between[("worker", "ps:0")]
    assert data["step"]["plan"]["step_s"] == chosen.step_s and data["step"]["stock PSS"]["step_s"] == stock.step_s
    assert data["links"]["plan (measured)"] == {"worker->ps:0": 3.0, "ps:0->worker": 7.0}
    assert set(data["step"]) == {"stock PSS", "plan", "ring all-reduce"}
    for entry in data["step"].values():  # the resources work in parallel: the step is the busiest, not the sum
        busiest = max(s for _, s in step_resources(entry))
        assert busiest <= entry["step_s"] * (1 + 1e-9)
    files = draw(data, tmp_path / "small.png")
    assert [f.suffix for f in files] == [".png", ".svg"]
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and files[1].stat().st_size > 1000


def test_cli_json_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(RUN))
    assert main(["explain", "--model", "small_cnn", "--json", "--run-json", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "plan (measured)" in out["links"] and out["policy"] == "ralp"
    assert main(["explain", "--model", "small_cnn"]) == 2
    assert "--png PATH" in capsys.readouterr().err
    assert main(["explain", "--model", "ralp_tf.model.builtin:no_such_builder", "--json"]) == 2
    assert "ralp-tf: error:" in capsys.readouterr().err
