"""Executed schedules (issue 14 item 5): the emulated catalog's validation, the PSS mapping and
provisioning, and bad input. Fast: rates are synthetic (no TensorFlow, no testbed)."""
from __future__ import annotations

import json
import math

import pytest

from ralp_tf.model.profiles import ModelProfile
from scheduler import Exact, Greedy
from scheduler.execution.emulated import builtin_catalogs, catalog_from_dict, load_catalog
from scheduler.core.errors import CatalogError
from scheduler.execution.execute import FASTEST, ExecutionError, execute_schedule, measured_problem
from scheduler.core.pss import pss_sync_seconds, restricted
from scheduler.execution.unitrate import UnitRate, calibrate


def _layer(name, kind, params, flops, out, inbound, seconds):
    return {"name": name, "kind": kind, "class_name": kind, "param_bytes": params, "trainable_param_bytes": params,
            "var_bytes": [params] if params else [], "flops": flops, "flops_source": "analytic",
            "output_bytes": out, "inbound": inbound, "measured_seconds": seconds}


def _profile(scale: float) -> ModelProfile:
    """A ctr_head-like model: embedding, flatten, two big dense layers; times at one core x ``scale``."""
    return ModelProfile.from_dict({"model_name": "toy", "batch_size": 32, "outputs": ["logits"], "layers": [
        _layer("ids", "input", 0, 0.0, 32, [], None),
        _layer("embedding", "embedding", 12_800_000, 512.0, 2048, ["ids"], 0.0005 * scale),
        _layer("flatten", "reshape", 0, 0.0, 2048, ["embedding"], 0.0002 * scale),
        _layer("fc1", "dense", 4_200_000, 2.1e6, 8192, ["flatten"], 0.006 * scale),
        _layer("fc2", "dense", 16_800_000, 8.4e6, 8192, ["fc1"], 0.02 * scale),
        _layer("logits", "dense", 16_000, 8.2e3, 8, ["fc2"], 0.0003 * scale)]})


def fake_measure(model, batch_size, cores, **_):
    """Synthetic rates: time ~ 1 / cores (what a quota does to a single-threaded step)."""
    raw = _profile(1.0 / cores)
    step = sum(l.measured_seconds or 0 for l in raw.compute_layers) * 1.3  # medians are biased low
    prof, layer_sum, flops = calibrate(raw, step)
    return UnitRate(model=model, batch_size=batch_size, cores=cores, step_s=step, layer_sum_s=layer_sum,
                    flops_per_s=flops, profile=prof)


CAT = {"name": "t", "coordinator_cores": 0.2, "types": [
    {"name": "big", "cores": 0.6, "link": "1gbit", "price_per_hour": 0.48, "max_units": 2},
    {"name": "small", "cores": 0.25, "link": "1gbit", "price_per_hour": 0.17, "max_units": 2}]}


def test_builtin_catalogs_load_and_fit_two_cores():
    assert {"emu_a", "emu_b"} <= set(builtin_catalogs())
    for name in ("emu_a", "emu_b"):
        cat = load_catalog(name, cores=2)
        assert sum(t.max_units * t.cores for t in cat.types) + cat.coordinator_cores <= 2 + 1e-9


@pytest.mark.parametrize("change, match", [
    ({"types": [{**CAT["types"][0], "max_units": 4}, CAT["types"][1]]}, r"= 3\.1 cores, but this machine has 2"),
    ({"types": [{**CAT["types"][0], "price_per_hour": 0}, CAT["types"][1]]}, "price_per_hour must be a finite number > 0"),
    ({"types": [{**CAT["types"][0], "price_per_hour": -1}, CAT["types"][1]]}, "price_per_hour"),
    ({"types": [{**CAT["types"][0], "link": 0}, CAT["types"][1]]}, "link"),
    ({"types": [{**CAT["types"][0], "link": "-5mbit"}, CAT["types"][1]]}, "link"),
    ({"types": [{**CAT["types"][0], "cores": 0}, CAT["types"][1]]}, "cores must be a finite number > 0"),
    ({"types": [{**CAT["types"][0], "cores": -0.5}, CAT["types"][1]]}, "cores"),
    ({"types": [{**CAT["types"][0], "roles": ["gpu"]}, CAT["types"][1]]}, "roles"),
    ({"types": [{**CAT["types"][0], "speed": 3}, CAT["types"][1]]}, "unknown field"),
    ({"types": [{k: v for k, v in CAT["types"][0].items() if k != "price_per_hour"}]}, "lacks field"),
    ({"types": [{**t, "roles": ["worker"]} for t in CAT["types"]]}, "no type that may serve as a PS"),
    ({"coordinator_cores": 0}, "coordinator_cores"),
])
def test_bad_catalogs_are_refused(change, match):
    with pytest.raises(CatalogError, match=match):
        catalog_from_dict({**CAT, **change}, cores=2)


def test_catalog_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({**CAT, "types": [{**CAT["types"][0], "max_units": 9}]}))
    with pytest.raises(CatalogError, match="cores"):
        load_catalog(str(bad), cores=2)
    with pytest.raises(CatalogError, match="unknown emulated catalog"):
        load_catalog("no_such_catalog")


def test_problem_compute_is_measured_under_each_quota():
    cat = catalog_from_dict(CAT, cores=2)
    rates = {t.name: fake_measure("toy", 32, t.cores) for t in cat.types}
    p = measured_problem(rates, cat, 50.0)
    assert p.catalog.names == ["big", "big_ps", "small", "small_ps"]
    fc2 = p.layer_names.index("fc2")
    assert p.compute[fc2, p.catalog.index("big")] == pytest.approx(rates["big"].profile.layer("fc2").measured_seconds)
    assert p.compute[fc2, p.catalog.index("small")] == pytest.approx(0.02 / 0.25 * 1.3)
    assert rates["big"].flops_per_s > rates["small"].flops_per_s  # the unit is the measured rate
    # The PSS view: worker-placed layers carry their variables' pull + push over the PS link.
    w, ps = p.catalog.index("big"), p.catalog.index("small_ps")
    sync = pss_sync_seconds(p, w, ps)
    assert sync[fc2] == pytest.approx(8 * 2 * 16_800_000 / 1e9)
    emb = p.layer_names.index("embedding")
    assert sync[emb] == pytest.approx(8 * 2 * 32 * 2048 / 1e9)  # rows, not the table
    sub = restricted(p, w, ps)
    assert sub.allowed[:, [w, ps]].all() and not sub.allowed[:, [p.catalog.index("small"),
                                                                 p.catalog.index("big_ps")]].any()


def test_schedule_is_provisioned_and_cheaper_than_all_on_the_fastest_type():
    cat = catalog_from_dict(CAT, cores=2)
    report = execute_schedule("toy", cat, 60.0, solver=Exact(), compare=[("greedy", Greedy())], run=False,
                              measure=fake_measure)
    rows = {d.label: d for d in report.deployments}
    assert set(rows) == {"exact", "greedy", FASTEST}
    fast = rows[FASTEST]
    assert (fast.worker_type, fast.ps_type, fast.ps_layers) == ("big", "big", [])
    ex = rows["exact"]
    assert ex.meets and ex.predicted_samples_per_s >= 60
    assert ex.price_per_hour == pytest.approx(ex.workers * cat.type(ex.worker_type).price_per_hour
                                              + ex.ps * cat.type(ex.ps_type).price_per_hour)
    assert ex.predicted_cost == pytest.approx(ex.price_per_hour / 3600 * 1e6 / ex.predicted_samples_per_s)
    assert ex.predicted_cost < fast.predicted_cost
    # the Plan names the PS-placed layers on PS task devices, and provisions the workers and PS tasks
    assert set(ex.plan.placements) == set(ex.ps_layers)
    assert all(d.startswith("/job:ps/replica:0/task:") for d in ex.plan.placements.values())
    assert ex.plan.provisioning == {"worker": ex.workers, "ps": ex.ps}
    assert report.comparison()["exact"]["predicted_cost_vs_fastest"] < 1
    json.dumps(report.to_dict(), allow_nan=True)


def test_unreachable_throughput_gets_best_effort_and_a_clear_warning():
    cat = catalog_from_dict(CAT, cores=2)
    with pytest.warns(RuntimeWarning, match=r"cannot meet 1e\+05 samples/s .*; best is [0-9.]+ samples/s"):
        report = execute_schedule("toy", cat, 1e5, solver=Exact(), run=False, measure=fake_measure)
    ex = report.deployments[0]
    assert not ex.meets and ex.predicted_samples_per_s > 0 and report.warnings
    assert "cannot meet" in ex.warning


@pytest.mark.parametrize("kw, match", [({"throughput": 0.0}, "positive"), ({"throughput": -3.0}, "positive"),
                                       ({"throughput": math.nan}, "positive"), ({"steps": 0}, "steps")])
def test_bad_run_settings_are_refused(kw, match):
    cat = catalog_from_dict(CAT, cores=2)
    args = {"throughput": 60.0, **kw}
    with pytest.raises(ExecutionError, match=match):
        execute_schedule("toy", cat, args.pop("throughput"), solver=Exact(), run=False, measure=fake_measure, **args)


def test_cli_refuses_zero_budgets(capsys):
    from ralp_tf.cli.schedule import main

    for argv in (["--rl-iterations", "0"], ["--steps", "0"]):
        with pytest.raises(SystemExit) as e:
            main(["execute-schedule", "--workload", "ctr_head", "--catalog", "emu_a", "--throughput", "50",
                  "--solver", "rl", *argv])
        assert e.value.code == 2
        assert "must be >= 1, got 0" in capsys.readouterr().err


def test_a_one_unit_type_is_not_both_worker_and_ps():
    cat = catalog_from_dict({**CAT, "types": [CAT["types"][0], {**CAT["types"][1], "max_units": 1}]}, cores=2)
    report = execute_schedule("toy", cat, 30.0, solver=Exact(), run=False, measure=fake_measure)
    pairs = {(x["worker"], x["ps"]) for x in report.solve["exact"]["pairs"]}
    assert ("small", "small") not in pairs and ("big", "small") in pairs


def test_steps_are_work_sized_from_the_prediction():
    from scheduler.execution.execute import MAX_STEPS, steps_for

    cat = catalog_from_dict(CAT, cores=2)
    report = execute_schedule("toy", cat, 60.0, solver=Exact(), run=False, measure=fake_measure)
    d = report.deployments[0]
    assert steps_for(d, 32, 20, 0.0) == 20
    assert steps_for(d, 32, 20, 15.0) == max(20, math.ceil(15 * d.predicted_samples_per_s / (d.workers * 32)))
    assert steps_for(d, 32, 20, 1e9) == MAX_STEPS


def test_stock_pss_on_the_same_types_replaces_a_split_the_cost_model_prices_worse(monkeypatch):
    """The HeterPS problem does not price a PS task's serving CPU; where the cost model finds the
    solver's split worse than no split on the same two types, the deployment is stock PSS."""
    import dataclasses

    import scheduler.execution.execute as ex

    cat = catalog_from_dict(CAT, cores=2)
    rates = {t.name: fake_measure("toy", 32, t.cores) for t in cat.types}
    problem = measured_problem(rates, cat, 60.0)
    real_provision = ex.provision

    def provision(catalog, rates, w, p, ps_layers, throughput, label):
        d = real_provision(catalog, rates, w, p, ps_layers, throughput, label)
        return dataclasses.replace(d, predicted_samples_per_s=1e-3, meets=False) if ps_layers else d

    monkeypatch.setattr(ex, "provision", provision)
    best, info = ex.plan_deployment(problem, cat, rates, Exact(), 60.0, "exact")
    assert best.variant == "stock" and best.ps_layers == [] and not best.plan.placements
    assert best.heterps["solver"] == "exact"  # still says whose schedule it replaced
    assert all(p["variant"] == "stock" or p["ps_layers"] == 0 for p in info["pairs"])
    # stock PSS on the pair's own two types, even where the schedule's deployment changed its worker type
    stock_types = {(p["worker"], p["ps"]) for p in info["pairs"] if p["variant"] == "stock"}
    assert ("big", "big") in stock_types, info["pairs"]
