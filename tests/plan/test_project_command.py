"""``ralp-tf project`` and ``ralp-tf provision`` (ralp_tf/cli/project.py), in process."""
from __future__ import annotations

import json

import pytest

from ralp_tf.cli.main import main


def test_project_prints_json_rows_and_markdown(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    assert main(["project", "--json", "--models", "resnet50_size", "--hosts", "2", "--bandwidths", "10gbit",
                 "--ps-host-ratio", "0.5"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 10 and {r["ps_hosts"] for r in rows} == {0, 1}  # 5 strategies x 2 row sets
    for extra in (0, 1):  # auto trains with the fastest predicted: never slower than the ring or the plan
        point = {r["strategy"]: r for r in rows if r["ps_hosts"] == extra}
        ranked = ("stock PSS", "colocated RALP", "ring all-reduce")
        assert point["auto"]["samples_per_s"] == max(point[s]["samples_per_s"] for s in ranked)
        assert point["auto"]["vs_ring"] >= 1.0
    assert {"model", "hosts", "link_bps", "strategy", "samples_per_s", "max_link_bytes", "plan"} <= set(rows[0])
    out = f"{tmp_path}/p.md"
    assert main(["project", "--markdown", "--models", "resnet50_size", "--hosts", "2", "--bandwidths", "10gbit",
                 "--ps-host-ratio", "0", "--out", out]) == 0
    text = open(out).read()
    assert text.startswith("# Scale on paper: predicted, not measured") and "ralp-tf project --markdown" in text
    assert "CPU-only PS hosts (predicted)" not in text


def test_provision_recommends_and_refuses_bad_prices(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["provision", "--model", "vgg16_cifar", "--workers", "2", "--bandwidth", "10gbit", "--worker-price", "4",
            "--ps-host-price", "0.5"]
    assert main([*args, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["best"]["ps_hosts"] in (0, 1, 2) and [o["ps_hosts"] for o in rec["options"]] == [0, 1, 2]
    assert main([*args, "--throughput", "1e12"]) == 3
    assert "no count of CPU-only PS hosts up to 2 reaches" in capsys.readouterr().err
    bad = list(args)
    bad[bad.index("--ps-host-price") + 1] = "0"
    assert main(bad) == 2
    assert "--ps-host-price must be a positive number" in capsys.readouterr().err
    assert main(["project", "--models", "gpt"]) == 2
    assert "unknown projection model 'gpt'" in capsys.readouterr().err
