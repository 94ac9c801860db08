"""Helpers shared by the example scripts (not an example itself).

The examples run as ``python examples/NAME.py`` (this folder is then first on ``sys.path``), so
they import this module as ``_common``. It holds the cluster flags every example takes, the
synthetic input pipeline the image examples feed to ``Model.fit``, and the printout of a placed
model's plan and variable devices.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from absl import flags

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the output

FLAGS = flags.FLAGS


def define_cluster_flags(*, steps: int = 5, batch_size: int = 16) -> None:
    """Define ``--workers``, ``--ps``, ``--steps``, ``--batch_size`` and ``--bandwidth`` (call once, at import)."""
    flags.DEFINE_integer("workers", 2, "Worker tasks of the local cluster.", lower_bound=1)
    flags.DEFINE_integer("ps", 1, "Parameter-server tasks of the local cluster.", lower_bound=1)
    flags.DEFINE_integer("steps", steps, "Training steps.", lower_bound=1)
    flags.DEFINE_integer("batch_size", batch_size, "Batch per worker step.", lower_bound=1)
    flags.DEFINE_string("bandwidth", "1gbit", "Link rate the planner assumes, e.g. 100mbit, 1gbit.")


def quiet_logs() -> None:
    """Keep TensorFlow's Python INFO logging (one line per variable reduce) out of the output."""
    import tensorflow as tf

    tf.get_logger().setLevel("WARNING")


def print_placement(model: Any) -> None:
    """Print the model's plan (``model.ralp_plan``): for each layer, in model order, where it
    computes and the devices its variables were actually created on."""
    from ralp_tf.model import walk

    plan = model.ralp_plan
    ps_layers = plan.ps_layers()
    print(f"plan ({plan.policy}): {len(ps_layers)} layer(s) computed on a PS task: {', '.join(ps_layers) or 'none'}")
    for unit in walk(model):
        path, layer = unit.path, unit.layer
        device = plan.placements.get(path, "/job:worker (default)")
        homes = sorted({v.device for v in layer.weights}) or ["(no variables)"]
        print(f"  {path:<22} computes on {device:<40} variables on {', '.join(homes)}")


def synthetic_dataset_fn(model: Any, batch_size: int) -> Callable[[Any], Any]:
    """A ``dataset_fn(input_context)`` for ``DatasetCreator`` or ``create_per_worker_dataset``:
    one fixed synthetic batch that fits ``model`` (``ralp_tf.model.data.synthetic_batch``), repeated,
    made on the worker that runs it, so no input crosses the network."""
    import tensorflow as tf

    from ralp_tf.model.data import synthetic_batch

    x, y = synthetic_batch(model, batch_size)
    if isinstance(x, list):  # several inputs: a tuple is one nested structure for tf.data, a list is not
        x = tuple(x)

    def dataset_fn(input_context: Any = None) -> Any:
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    return dataset_fn


def compile_for_fit(model: Any, strategy: Any, learning_rate: float = 0.01) -> None:
    """Compile ``model`` under ``strategy`` with SGD and the loss that matches its output
    (``ralp_tf.model.data.per_sample_loss``: cross-entropy from logits)."""
    import tf_keras

    from ralp_tf.model.data import per_sample_loss

    with strategy.scope():
        model.compile(tf_keras.optimizers.SGD(learning_rate), per_sample_loss(model))


def fit_on_synthetic(model: Any, strategy: Any, *, batch_size: int, steps: int, epochs: int = 1) -> list[float]:
    """Compile ``model`` (:func:`compile_for_fit`) and ``Model.fit`` it for ``epochs`` x ``steps``
    steps on :func:`synthetic_dataset_fn` through a ``DatasetCreator``; return the loss per epoch."""
    import tf_keras

    compile_for_fit(model, strategy)
    data = tf_keras.utils.experimental.DatasetCreator(synthetic_dataset_fn(model, batch_size))
    return model.fit(data, epochs=epochs, steps_per_epoch=steps, verbose=0).history["loss"]
