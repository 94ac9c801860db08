"""``--strategy auto|mwms`` with ``--calibration``: the ranking, the probes and the ring's prediction
price the calibrated cluster and profile (ralp_tf/run/auto.py, ralp_tf/run/fit.py). No cluster
starts: the training entry points are replaced by recorders."""
from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from calibration_docs import calibration_doc, layer_times
from ralp_tf.plan.calibration import calibrated_cluster, calibrated_profile, load_calibration
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate_allreduce


class _Stop(Exception):
    """The job got to where it would probe or train."""


def _calibration(tmp_path: Path, bandwidth_bps: float) -> Any:
    """A calibration of this machine's local cluster of 2 workers and 1 PS task (loopback hosts) whose
    links run at ``bandwidth_bps`` and whose tasks timed small_cnn at 1 ns per FLOP."""
    import tensorflow as tf

    times = layer_times("small_cnn", 1e-9)
    doc = calibration_doc(2, 1, address_base="127.0.0.1", bandwidth_bps=bandwidth_bps, machine=socket.gethostname(),
                          tensorflow_version=tf.__version__,
                          models={"worker:0": {"small_cnn": times}, "ps:0": {"small_cnn": times}})
    path = tmp_path / f"cal-{bandwidth_bps:g}.json"
    path.write_text(json.dumps(doc))
    return load_calibration(str(path))


def _ranked(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> dict[str, Any]:
    import ralp_tf.run.auto as auto

    seen: dict[str, Any] = {}

    def record(model: str, ranking: Any, prepared: Any, job: Any, **_: Any) -> Any:
        seen.update(ranking=ranking, prepared=prepared, job=job)
        raise _Stop

    monkeypatch.setattr(auto, "_decide_and_train", record)
    with pytest.raises(_Stop):
        auto.train_auto("small_cnn", workers=2, ps=1, **kwargs)
    return seen


def test_auto_ranks_the_ring_on_the_calibrated_links_and_hands_the_calibration_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ralp_tf.run.auto as auto

    slow, fast = _calibration(tmp_path, 1e7), _calibration(tmp_path, 1e10)
    on_slow, on_fast = _ranked(monkeypatch, calibration=slow), _ranked(monkeypatch, calibration=fast)
    ring_slow, ring_fast = on_slow["ranking"].choice("mwms").estimate, on_fast["ranking"].choice("mwms").estimate
    assert ring_slow.step_s > ring_fast.step_s * 5  # small_cnn's 1.6 MB per step at 10 Mbit/s against 10 Gbit/s
    profile = on_slow["prepared"].profile
    assert all("worker:0" in dict(l.device_seconds) for l in profile.layers if l.kind != "input")
    cluster = calibrated_cluster(slow, Cluster.local(2, 1), match_hosts=False)
    expected = estimate_allreduce(calibrated_profile(slow, profile), cluster, implementation="mwms")
    assert ring_slow.step_s == pytest.approx(expected.step_s)
    assert on_slow["job"]["calibration"] is slow and on_slow["job"]["cluster"].hosts == cluster.hosts

    calls: dict[str, Any] = {}
    monkeypatch.setattr(auto, "train_ring", lambda model, **kw: calls.setdefault("ring", kw) and None)
    monkeypatch.setattr(auto, "compare", lambda model, **kw: calls.setdefault("pss", kw) and {"ps": None})
    for name in ("mwms", "ps"):
        auto._run_one(name, "small_cnn", on_slow["ranking"], on_slow["prepared"], on_slow["job"], steps=3,
                      checkpoint_dir=None, step_callback=None, warmup_steps=1)
    assert calls["ring"]["cluster"] is on_slow["job"]["cluster"]  # the ring's prediction: the calibrated cluster
    assert calls["pss"]["calibration"] is slow  # a PSS run prices its plan and prediction with the file


def test_run_strategy_auto_and_mwms_take_a_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ralp_tf.run.auto as auto
    import ralp_tf.run.ring as ring
    from ralp_tf.cli.main import main

    monkeypatch.setenv("RALP_TF_NO_REEXEC", "1")  # `run` would re-exec this process with the loopback shim
    cal = _calibration(tmp_path, 1e8)
    given: dict[str, Any] = {}

    def record(name: str) -> Any:
        def stop(*_: Any, **kw: Any) -> Any:
            given[name] = kw
            raise _Stop
        return stop

    monkeypatch.setattr(auto, "train_auto", record("auto"))
    monkeypatch.setattr(ring, "train_ring", record("mwms"))  # fit imports it when called
    for strategy in ("auto", "mwms"):
        with pytest.raises(_Stop):
            main(["run", "--model", "small_cnn", "--strategy", strategy, "--calibration", str(tmp_path / "cal-1e+08.json"),
                  "--json"])
    assert given["auto"]["calibration"].path == cal.path
    assert given["mwms"]["cluster"].workers[0].bandwidth_bps == pytest.approx(1e8)  # the calibrated cluster


def test_fit_mwms_predicts_the_ring_on_the_calibrated_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ralp_tf.run.fit as fit
    import ralp_tf.run.ring as ring

    cal = _calibration(tmp_path, 1e7)
    seen: dict[str, Any] = {}

    def record(model: str, **kw: Any) -> Any:
        seen.update(kw)
        raise _Stop

    monkeypatch.setattr(ring, "train_ring", record)
    with pytest.raises(_Stop):
        fit.fit("small_cnn", strategy="mwms", workers=2, ps=1, calibration=cal)
    assert seen["cluster"].workers[0].bandwidth_bps == pytest.approx(1e7)
    assert all("worker" in dict(l.device_seconds) for l in seen["profile"].layers if l.kind != "input")
