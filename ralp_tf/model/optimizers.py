"""How a training step's optimizer updates an embedding table's sparse gradient (``IndexedSlices``).

Two facts of tf_keras 2.21's optimizers decide what a sparse update costs on ParameterServerStrategy:

* **Where repeated ids are summed.** The ``tf_keras.optimizers`` classes deduplicate a sparse
  gradient in ``apply_gradients`` (``Unique`` and ``UnsortedSegmentSum``), before the per-variable
  update that runs on the variable's device: the gradient's rows go to the stepping worker and
  back to the table's task. The ``tf_keras.optimizers.legacy`` classes deduplicate inside the
  update (``_resource_apply_sparse_duplicate_indices``, colocated with the variable), so the rows
  go straight from where they are computed to the table.
* **Whole-table passes.** Some updates touch every row of a table (and of its slots) whatever the
  batch: ``SGD`` writes ``m.assign(m * momentum)`` then ``variable.assign_add(m)``, momentum 0
  included (2 passes, measured on ctr_dnn: ``python benchmarks/optimizer_ab.py ops``); ``Adam``
  and ``AdamW`` scale ``m`` and ``v`` and write the variable (3); ``RMSprop`` scales its velocity
  and writes the variable (2); ``Adagrad``, ``legacy.SGD`` and ``legacy.Adagrad`` only scatter
  the batch's rows (0); ``legacy.Adam`` scales ``m`` and ``v`` whole (2). Read from the
  optimizers' ``update_step`` / ``_resource_apply_sparse``.

:data:`SPARSE_UPDATES` holds both per optimizer name; a profile carries the name its step is
priced with (:attr:`ralp_tf.model.profiles.ModelProfile.optimizer`, default ``"sgd"``, what
``tf_keras.optimizers.SGD`` and ralp_tf's own loop use by default). :func:`optimizer_name` names a
live optimizer; a class not in the table is priced like its family's SGD.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ralp_tf.errors import ValidationError

__all__ = ["SparseUpdate", "SPARSE_UPDATES", "DEFAULT_OPTIMIZER", "sparse_update", "optimizer_name"]


@dataclasses.dataclass(frozen=True)
class SparseUpdate:
    """``dedup_on_worker``: repeated ids are summed on the stepping worker (the rows cross to it
    and back); ``dense_passes``: whole-table passes per update (the table and its slots)."""

    dedup_on_worker: bool
    dense_passes: int


SPARSE_UPDATES: dict[str, SparseUpdate] = {
    "sgd": SparseUpdate(True, 2),
    "adam": SparseUpdate(True, 3),
    "adamw": SparseUpdate(True, 3),
    "rmsprop": SparseUpdate(True, 2),
    "adagrad": SparseUpdate(True, 0),
    "legacy-sgd": SparseUpdate(False, 0),
    "legacy-adagrad": SparseUpdate(False, 0),
    "legacy-adam": SparseUpdate(False, 2),
}
DEFAULT_OPTIMIZER = "sgd"


def sparse_update(name: str) -> SparseUpdate:
    """The sparse update of optimizer ``name`` (a key of :data:`SPARSE_UPDATES`)."""
    try:
        return SPARSE_UPDATES[name]
    except (KeyError, TypeError):
        raise ValidationError(f"optimizer {name!r} is not one the cost model prices; use one of "
                              f"{', '.join(SPARSE_UPDATES)}") from None


def optimizer_name(optimizer: Any) -> str:
    """The :data:`SPARSE_UPDATES` name of a tf_keras optimizer instance: its class name in lower
    case, ``legacy-`` first for ``tf_keras.optimizers.legacy`` classes; a class the table does not
    hold is named after its family's SGD (``sgd`` or ``legacy-sgd``)."""
    cls = type(optimizer)
    legacy = any(".legacy" in c.__module__ or c.__name__ == "OptimizerV2" for c in cls.__mro__)
    name = ("legacy-" if legacy else "") + cls.__name__.lower()
    return name if name in SPARSE_UPDATES else ("legacy-sgd" if legacy else "sgd")
