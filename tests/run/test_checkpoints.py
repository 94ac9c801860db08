"""Checkpoints written under a temporary name and renamed whole (ralp_tf/run/checkpoints.py): what a
kill can leave at each point of a write, and what the next start does with it. In-process, a few
variables, no cluster (the kills of real `ralp-tf run` processes: tests/faults/test_checkpoint_kills.py)."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ralp_tf.run.checkpoints import (CheckpointStore, checkpoint_model_digest, latest_complete_step, model_digest,
                                     scan)


def _job(seed: float = 0.0) -> tuple[Any, Any]:
    """A tf.train.Checkpoint of a two-layer model and a step counter, weights set from ``seed``."""
    import tensorflow as tf
    import tf_keras

    model = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,)), tf_keras.layers.Dense(2)])
    for i, w in enumerate(model.weights):
        w.assign(np.full(w.shape, seed + i, dtype=np.float32))
    step = tf.Variable(0, dtype=tf.int64, name="ralp_step")
    return tf.train.Checkpoint(model=model, step=step), model


def _saved(directory: Path, steps: list[int]) -> CheckpointStore:
    ckpt, _ = _job()
    store = CheckpointStore(ckpt, str(directory))
    store.restore()
    for s in steps:
        ckpt.step.assign(s)
        for w in ckpt.model.weights:
            w.assign(np.full(w.shape, float(s), dtype=np.float32))
        store.save(s)
    return store


def _restore(directory: Path, caplog: Any) -> tuple[Any, Any, list[str]]:
    ckpt, model = _job(seed=-1.0)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ralp_tf.run.checkpoints"):
        found = CheckpointStore(ckpt, str(directory)).restore()
    return found, ckpt, [r.getMessage() for r in caplog.records]


def test_saves_keep_three_whole_folders_named_by_the_state_file(tmp_path: Path) -> None:
    import tensorflow as tf

    _saved(tmp_path, [5, 10, 15, 20])
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-10", "ckpt-15", "ckpt-20"]
    assert sorted(os.listdir(tmp_path / "ckpt-20")) == ["ckpt-20.data-00000-of-00001", "ckpt-20.index",
                                                         "manifest.json"]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-20" / "ckpt-20")
    assert int(tf.train.load_checkpoint(str(tmp_path)).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 20
    assert latest_complete_step(str(tmp_path)) == 20 and latest_complete_step(str(tmp_path / "none")) == 0


def test_restored_model_digest_equals_the_checkpoints(tmp_path: Path, caplog: Any) -> None:
    _saved(tmp_path, [5, 10])
    found, ckpt, warnings = _restore(tmp_path, caplog)
    assert found.step == 10 and int(ckpt.step.numpy()) == 10 and not warnings
    assert model_digest(ckpt.model) == checkpoint_model_digest(found.prefix)
    assert model_digest(ckpt.model) != checkpoint_model_digest(str(tmp_path / "ckpt-5" / "ckpt-5"))


@pytest.mark.parametrize("tear, why", [
    ("no manifest", "it has no manifest"),
    ("truncated data", "ckpt-15.data-00000-of-00001 is"),
    ("other index", "its index differs"),
])
def test_a_torn_newest_checkpoint_is_skipped_with_one_line_and_removed(tmp_path: Path, caplog: Any, tear: str,
                                                                       why: str) -> None:
    _saved(tmp_path, [5, 10, 15])
    folder = tmp_path / "ckpt-15"
    if tear == "no manifest":
        (folder / "manifest.json").unlink()
    elif tear == "truncated data":
        data = folder / "ckpt-15.data-00000-of-00001"
        data.write_bytes(data.read_bytes()[:7])
    else:
        (folder / "ckpt-15.index").write_bytes((tmp_path / "ckpt-10" / "ckpt-10.index").read_bytes())
    found, ckpt, warnings = _restore(tmp_path, caplog)
    assert found.step == 10 and int(ckpt.step.numpy()) == 10
    (line,) = warnings
    assert "\n" not in line and str(folder) in line and why in line and "resuming from ckpt-10 (step 10)" in line
    assert not folder.exists()


def test_a_checkpoint_tensorflow_cannot_read_is_skipped(tmp_path: Path, caplog: Any) -> None:
    """Same sizes, flipped bytes: the manifest passes, TensorFlow's CRC32C check does not."""
    _saved(tmp_path, [5, 10])
    data = tmp_path / "ckpt-10" / "ckpt-10.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[:8] = bytes(b ^ 0xFF for b in raw[:8])
    data.write_bytes(bytes(raw))
    found, ckpt, warnings = _restore(tmp_path, caplog)
    assert found.step == 5 and int(ckpt.step.numpy()) == 5
    assert model_digest(ckpt.model) == checkpoint_model_digest(found.prefix)
    (line,) = warnings
    assert "ckpt-10" in line and "TensorFlow cannot read it (DataLossError" in line and "ckpt-5 (step 5)" in line


def test_leftovers_of_an_interrupted_write_are_removed_and_the_previous_one_restored(tmp_path: Path,
                                                                                    caplog: Any) -> None:
    """Each thing a kill can leave, ours (a temporary folder, a folder being removed) and those of
    tf.train.CheckpointManager's flat layout (TF's shard folder, a state-file temp, data without index)."""
    _saved(tmp_path, [5])
    (tmp_path / ".ckpt-10.tmp-123-abcd").mkdir()
    (tmp_path / ".ckpt-10.tmp-123-abcd" / "ckpt-10.index").write_bytes(b"partial")
    (tmp_path / ".ckpt-1.old-beef").mkdir()
    (tmp_path / "ckpt-10_temp").mkdir()
    (tmp_path / "checkpoint.tmp0123abcd").write_text("partial")
    (tmp_path / "ckpt-10.data-00000-of-00001").write_bytes(b"data")
    found, _, warnings = _restore(tmp_path, caplog)
    assert found.step == 5
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-5"]
    assert len(warnings) == 5 and all("\n" not in w for w in warnings)
    assert any("ckpt-10.* (its data files have no index)" in w for w in warnings)


def test_flat_layout_of_tf_checkpoint_manager_is_restored_then_replaced(tmp_path: Path, caplog: Any) -> None:
    import tensorflow as tf

    ckpt, _ = _job(seed=3.0)
    ckpt.step.assign(7)
    tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=3).save(checkpoint_number=7)
    found, restored, warnings = _restore(tmp_path, caplog)
    assert found.step == 7 and not found.verified and int(restored.step.numpy()) == 7 and not warnings
    store = CheckpointStore(restored, str(tmp_path))
    store.restore()
    store.save(7)  # the same step: the folder replaces the flat files
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-7"]


def test_a_save_of_the_step_restored_keeps_that_checkpoint(tmp_path: Path) -> None:
    _saved(tmp_path, [5])
    before = json.loads((tmp_path / "ckpt-5" / "manifest.json").read_text())
    ckpt, _ = _job()
    store = CheckpointStore(ckpt, str(tmp_path))
    assert store.restore().step == 5
    store.save(5)
    assert json.loads((tmp_path / "ckpt-5" / "manifest.json").read_text()) == before
    assert [f.step for f in scan(str(tmp_path)).complete] == [5]
