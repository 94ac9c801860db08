"""`schedule` and `compare-schedulers` handlers (called through ralp_tf.cli.schedule.main)."""
from __future__ import annotations

import argparse
import json

import pytest

from ralp_tf.cli import schedule as cli


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_register_adds_subcommands() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd")
    cli.register(sub)
    args = ap.parse_args(["schedule", "--workload", "ctr_dnn", "--solver", "exact", "--json"])
    assert args.func is cli.cmd_schedule
    args = ap.parse_args(["compare-schedulers", "--quick"])
    assert args.func is cli.cmd_compare


def test_schedule_json(capsys) -> None:
    rc, out, _ = run(capsys, "schedule", "--workload", "ctr_dnn", "--solver", "exact", "--throughput", "200000",
                     "--json")
    assert rc == 0
    d = json.loads(out)
    for key in ("solver", "objective", "cost", "throughput", "constraint_met", "solve_seconds", "placement", "units"):
        assert key in d
    assert d["solver"] == "exact" and d["constraint_met"] and d["throughput"] >= 200000
    assert d["objective"] == d["cost"]
    assert set(d["tf_config"]["cluster"]) <= {"worker", "ps"}


def test_schedule_maxload_json(capsys, tmp_path) -> None:
    from test_sched_maxload import chain3

    f = tmp_path / "chain3.json"
    f.write_text(json.dumps(chain3()))
    rc, out, _ = run(capsys, "schedule", "--workload", str(f), "--solver", "exact", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["max_load"] == pytest.approx(3.25) and d["objective"] == pytest.approx(3.25)
    assert d["fpgas"] == [{"nodes": [1, 2]}, {"nodes": [3]}] and d["cpus"] == []


def test_schedule_bad_input(capsys) -> None:
    """Errors go through the one error path of every ralp_tf command: one ``<prog>: error:`` line,
    exit 2 for bad input and 3 for a valid request no schedule can meet."""
    rc, _, err = run(capsys, "schedule", "--workload", "no_such_model", "--solver", "exact", "--json")
    assert rc == 2 and "unknown workload" in err
    assert err.startswith("python -m ralp_tf.cli.schedule: error: ") and len(err.strip().splitlines()) == 1
    rc, _, err = run(capsys, "schedule", "--workload", "ctr_dnn", "--solver", "exact", "--throughput", "1e12")
    assert rc == 3 and "best achievable throughput" in err
    assert err.startswith("python -m ralp_tf.cli.schedule: error: ")


def test_ralp_tf_schedule_prints_errors_like_every_command(capsys, monkeypatch) -> None:
    from ralp_tf.cli.main import main

    assert main(["schedule", "--workload", "ctr_dnn", "--solver", "exact", "--throughput", "1e12"]) == 3
    assert capsys.readouterr().err.startswith("ralp-tf: error: ")


def test_compare_quick_subset(tmp_path) -> None:
    from scheduler.evaluation.compare import run_comparison

    doc = run_comparison(tmp_path, workloads=["word2vec_nce"], solvers=["exact", "greedy", "random"], quick=True,
                         log=lambda s: None)
    assert (tmp_path / "schedulers.md").read_text().startswith("# Scheduler comparison")
    assert (tmp_path / "schedulers.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "results" / "schedulers.json").read_text())
    assert [r["solver"] for r in saved["rows"]] == ["exact", "greedy", "random"]
    assert saved["rows"][0]["ratio_to_exact"] == 1.0
