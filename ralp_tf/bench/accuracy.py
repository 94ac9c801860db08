"""Accuracy under compression: the same model trained the same steps with each setting.

The task is learnable and generated, so nothing is downloaded: inputs are standard-normal
16x16x3 images and each label is the argmax of a fixed random *teacher* (a seeded
``small_cnn`` with its own weights) on that image, each class's mean logit subtracted first. The student is ``small_cnn`` placed with its
FC head on the PS (the RALP cut), trained with SGD on a LocalCluster of 1 worker and 1 PS (so
updates are in a fixed order), the same seed, data and steps for every setting. Reported per
setting: the final training loss (mean of the last 10 steps) and the accuracy on a held-out
generated set, both next to ``none``. Only what crosses the network is compressed: with the head
on the PS, int8 and top-k apply to the two conv layers' gradients (top-k keeps at least one entry
per tensor: 1% of conv1's 216-entry kernel is 3 entries).

``python -m ralp_tf.cli.accuracy --steps 1500 --learning-rate 0.1 --out benchmarks/results/compression-accuracy.json``
"""
from __future__ import annotations

import dataclasses
import gc
from typing import Any, Sequence

__all__ = ["SETTINGS", "HEAD", "AccuracyRow", "teacher_dataset", "run"]


#: Settings compared (``none`` is the reference), as ``--compression`` text: fp16/bf16 narrow the
#: activations at the cut and the conv weights (and their gradients); int8 and top-k compress the
#: conv layers' gradients pushed to the PS (top-k with and without error feedback).
SETTINGS = ("none", "fp16", "bf16", "int8", "topk:0.01", "topk:0.01:no-feedback")
HEAD = ("flatten", "fc1", "fc2", "logits")


@dataclasses.dataclass
class AccuracyRow:
    """One setting's result after ``steps`` SGD steps."""

    setting: str
    steps: int
    final_loss: float
    accuracy: float
    loss_vs_none: float | None = None
    accuracy_points_vs_none: float | None = None


def _class_means(logits: Any) -> Any:
    """Per-class mean of the teacher's logits over a data set."""
    return logits.mean(axis=0, keepdims=True)


def teacher_dataset(n: int, seed: int) -> tuple[Any, Any]:
    """``n`` generated images and the fixed teacher's labels for them: the argmax of the teacher's
    logits after each class's mean logit is subtracted (so no class dominates)."""
    import numpy as np
    import tf_keras

    from ralp_tf.model.builtin import small_cnn

    tf_keras.utils.set_random_seed(1000)  # the teacher is the same network for every seed
    teacher = small_cnn(fc=64)
    x = np.random.default_rng(seed).standard_normal((n, 16, 16, 3)).astype("float32")
    logits = teacher(x, training=False).numpy()
    del teacher
    gc.collect()  # drop the teacher's functions before a cluster connects
    return x, np.argmax(logits - _class_means(logits), axis=1).astype("int32")


def run(steps: int = 300, batch_size: int = 32, learning_rate: float = 0.05, seed: int = 0,
        settings: Sequence[str] = SETTINGS) -> list[AccuracyRow]:
    """Train the student once per setting (see the module docstring) and return the rows."""
    import numpy as np
    import tensorflow as tf
    import tf_keras

    from ralp_tf.place.applier import place
    from ralp_tf.run.launch import LocalCluster
    from ralp_tf.model.builtin import small_cnn
    from ralp_tf.plan.plans import Plan
    from ralp_tf.run.training import sgd_losses

    x_train, y_train = teacher_dataset(steps * batch_size, seed)
    x_test, y_test = teacher_dataset(2048, seed + 1)
    rows: list[AccuracyRow] = []
    with LocalCluster(workers=1, ps=1) as lc:
        strategy = lc.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        ps0 = "/job:ps/replica:0/task:0/device:CPU:0"
        for setting in settings:
            tf_keras.utils.set_random_seed(seed)
            plan = Plan({name: ps0 for name in HEAD}, policy=f"head+{setting}",
                        compression={} if setting == "none" else {"*": setting})
            model = place(small_cnn(fc=64), plan, strategy)
            batches = [(x_train[i * batch_size:(i + 1) * batch_size], y_train[i * batch_size:(i + 1) * batch_size])
                       for i in range(steps)]
            values = sgd_losses(strategy, coordinator, model, batches, learning_rate)
            accuracy = float(np.mean(np.argmax(_local_logits(model, x_test), axis=1) == y_test))
            rows.append(AccuracyRow(setting, steps, float(np.mean(values[-10:])), accuracy))
    reference = next((r for r in rows if r.setting == "none"), None)
    for r in rows:
        if reference is not None:
            r.loss_vs_none = r.final_loss - reference.final_loss
            r.accuracy_points_vs_none = 100.0 * (r.accuracy - reference.accuracy)
    return rows


def _local_logits(model: Any, x: Any) -> Any:
    """The trained model's logits on ``x``, computed on this machine by an unplaced copy."""
    from ralp_tf.place.applier import unplace

    local = unplace(model)
    out = local(x, training=False).numpy()
    del local
    gc.collect()
    return out
