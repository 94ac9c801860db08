"""TensorBoard summaries: event files written by ralp_tf are read back with summary_iterator.

`ralp-tf run --tensorboard-dir --tensorboard-trace` end to end is checked by the multi-host
integration test (tests/run/test_multihost.py), which reads its events with :func:`events`."""
from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ralp_tf.run.training import RunResult


def events(folder: str | Path) -> dict[str, list[tuple[int, object]]]:
    """tag -> [(step, value)] from every event file under ``folder`` (scalars as float, text as str)."""
    import tensorflow as tf

    out: dict[str, list[tuple[int, object]]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "**", "events.out.tfevents.*"), recursive=True)):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                t = tf.make_ndarray(v.tensor)
                value = t.item().decode() if t.dtype == object else float(t)
                out.setdefault(v.tag, []).append((event.step, value))
    return out


def test_run_summaries_read_back(tmp_path: Path) -> None:
    from ralp_tf import Cluster, Plan, analyze, models, profile
    from ralp_tf.run.summaries import write_run_summaries  # imports tf_keras: not at collection time

    analysis = analyze(profile(models.small_cnn(), 8), Cluster.local(2, 1))
    result = RunResult(policy="ralp", steps=3, batch_size=32, steps_per_s=2.0, samples_per_s=128.0, final_loss=1.5,
                       losses=[2.5, 2.0, 1.8, 1.6, 1.5], bytes_per_step=1000.0,
                       bytes_between={"worker0->ps0": 400.0, "ps0->worker0": 600.0}, predicted_bytes_per_step=990.0,
                       predicted_step_s=0.1, measured_step_s=0.5, plan=Plan({}, policy="ralp"),
                       analysis=analysis, total_steps=15, resumed_from_step=10)
    path = write_run_summaries(tmp_path, result, "ralp")
    ev = events(path)
    assert ev["loss"] == [(10, 2.5), (11, 2.0), (12, pytest.approx(1.8)), (13, pytest.approx(1.6)), (14, 1.5)]
    assert ev["samples_per_s"] == [(14, 128.0)] and ev["bytes_per_step"] == [(14, 1000.0)]
    assert ev["bytes_per_step/worker0->ps0"] == [(14, 400.0)] and ev["predicted/bytes_per_step"] == [(14, 990.0)]
    assert json.loads(ev["plan"][0][1].strip("`\n"))["format"] == "ralp_tf.plan/1"
    assert "Decision:" in ev["analysis"][0][1] and ev["analysis"][0][1].strip("`\n") == analysis.report()


class _Meter:
    """A TrafficMeter stand-in: 300 bytes worker0->ps0 per interval."""

    def start(self) -> None:
        pass

    def stop(self) -> dict[tuple[str, str], int]:
        return {("worker0", "ps0"): 300}


def test_keras_callback_writes_loss_speed_and_bytes(tmp_path: Path) -> None:
    import tf_keras as keras

    from ralp_tf.run.summaries import SummaryCallback

    model = keras.Sequential([keras.layers.Dense(4, input_shape=(3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.random.rand(24, 3).astype("float32"), np.random.rand(24, 1).astype("float32")
    cb = SummaryCallback(tmp_path, batch_size=8, plan={"placements": {"dense": "/job:ps/task:0"}}, meter=_Meter())
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
    ev = events(tmp_path)
    assert [s for s, _ in ev["loss"]] == list(range(1, 7))
    assert all(v > 0 for _, v in ev["samples_per_s"])
    assert ev["bytes_per_step/worker0->ps0"][0] == (1, 300.0)
    assert "/job:ps/task:0" in ev["plan"][0][1]

