"""Executed schedules on the namespace testbed (root): per-host link rates
(``Testbed(bandwidth={host: rate})``, each resource type its own link rate) and one tiny
deployment trained with real PSS under emulated types."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from ralp_tf.testbed import Testbed, TestbedConfigError, netns_support

_ok, _why = netns_support()
needs_netns = pytest.mark.skipif(not _ok, reason=f"namespace testbed unavailable: {_why}")


def test_per_host_rates_must_name_every_host():
    with pytest.raises(TestbedConfigError, match=r"missing \['ps0'\]"):
        Testbed(["worker0", "ps0"], {"worker0": "100mbit"}, prefix="tbtxr")
    with pytest.raises(TestbedConfigError, match="unknown"):
        Testbed(["worker0"], {"worker0": "100mbit", "ps9": "1gbit"}, prefix="tbtxr")


@needs_netns
@pytest.mark.needs_root
def test_each_host_link_gets_its_own_rate():
    rates = {"worker0": "100mbit", "ps0": "10mbit"}
    with Testbed(["worker0", "ps0"], rates, prefix="tbtxr") as tb:
        assert tb.host_bandwidth_bps == {"worker0": 100e6, "ps0": 10e6} and tb.bandwidth_bps == 10e6
        seen = {}
        for host in rates:
            out = subprocess.run(["tc", "-n", tb.netns(host), "-j", "qdisc", "show", "dev", "eth0"],
                                 capture_output=True, text=True, check=True).stdout
            tbf = [q for q in json.loads(out) if q.get("kind") == "tbf"]
            seen[host] = tbf[0]["options"]["rate"]
    assert seen["worker0"] == 100e6 / 8 and seen["ps0"] == 10e6 / 8, seen
    assert not any(n.startswith("tbtxr") for n in os.listdir("/run/netns")) if os.path.isdir("/run/netns") else True


@needs_netns
@pytest.mark.needs_root
@pytest.mark.integration
@pytest.mark.slow
def test_a_tiny_schedule_runs_on_emulated_types(tmp_path):
    """One deployment of small_cnn (its dense head computed on a PS task) trained with real PSS on
    the testbed: worker and PS each in their own quota and link rate; a measured rate comes back."""
    from ralp_tf.testbed import _cgroups
    from scheduler.execution.emulated import catalog_from_dict
    from scheduler.execution.execute import Deployment, ps_plan, run_deployment
    from scheduler.execution.unitrate import calibrate
    from test_execute import _profile

    cat = catalog_from_dict({"name": "it", "coordinator_cores": 0.4, "types": [
        {"name": "w", "cores": 0.7, "link": "1gbit", "price_per_hour": 0.5, "max_units": 1, "roles": ["worker"]},
        {"name": "p", "cores": 0.5, "link": "100mbit", "price_per_hour": 0.2, "max_units": 1, "roles": ["ps"]}]},
        cores=2)
    prof, _, _ = calibrate(_profile(1.0), 0.05)  # only the plan's layer order uses it
    plan = ps_plan(prof, ["fc2", "logits"], 1, "it")
    dep = Deployment(label="it", worker_type="w", ps_type="p", workers=1, ps=1, ps_layers=["fc2", "logits"],
                     plan=plan, price_per_hour=0.7, predicted_samples_per_s=100.0, predicted_cost=1.0,
                     predicted_bottleneck="workers", meets=True)
    m = run_deployment(dep, cat, "small_cnn", 16, steps=4, warmup=1, out_dir=str(tmp_path), prefix="tbtxe",
                       timeout=120)
    assert m["valid"], m.get("log_tail")
    assert m["samples_per_s"] > 0 and m["cost"] == pytest.approx(0.7 / 3600 * 1e6 / m["samples_per_s"])
    saved = json.loads((tmp_path / "plan_it.json").read_text())
    assert set(saved["placements"]) == {"fc2", "logits"}
    assert not [g for g in _cgroups.stale_groups("tbtxe")]
