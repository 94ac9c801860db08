"""Row lookups: what one worker step looks up in a table, how many of those rows are distinct, and
where the rows' gradient arrives. Pure functions of a profile, for :mod:`ralp_tf.plan.traffic`
(which states the formulas they serve, *embedding table*)."""
from __future__ import annotations

import math
from typing import Mapping

from ralp_tf.model.profiles import LayerProfile, ModelProfile
from ralp_tf.plan.cluster import TaskRef

__all__ = ["INDEX_BYTES", "embedding_ids", "distinct_rows", "gathered_rows", "rows_gradient_on_worker"]

#: Bytes per id of a profile that does not record its ids' dtype (int32).
INDEX_BYTES = 4
_WORKER = TaskRef.worker()


def embedding_ids(layer: LayerProfile, batch_size: int, share: float) -> tuple[float, float]:
    """(row bytes, ids) one worker step looks up in the ``share`` of ``layer``'s table."""
    rows = batch_size * layer.output_bytes * layer.calls * share
    return rows, rows / (4 * (layer.output_shape[-1] if layer.output_shape else 1))


def distinct_rows(draws: float, rows: float) -> float:
    """Distinct rows among ``draws`` ids drawn uniformly from a table of ``rows`` rows:
    ``rows (1 - (1 - 1/rows)^draws)`` (the optimizer sums a gradient's repeated ids into one row
    each before it pushes them)."""
    if rows <= 1 or draws <= 0:
        return min(draws, max(rows, 0.0))
    return rows * -math.expm1(draws * math.log1p(-1.0 / rows))


def gathered_rows(layer: LayerProfile, index: int, batch_size: int, share: float) -> tuple[float, float, float] | None:
    """``(ids, distinct ids, bytes per row)`` one worker step looks up in the ``share`` of variable
    ``index`` of ``layer`` (its profile's ``gathered``: ids per sample from the data, ids per batch
    computed in the call, e.g. positions, all distinct), or None when the layer reads it whole or
    the profile has no shapes."""
    if not layer.gathered or not layer.var_shapes or index >= len(layer.gathered):
        return None
    per_sample, per_batch = layer.gathered[index]
    shape = layer.var_shapes[index]
    if not (per_sample or per_batch) or not shape or not shape[0]:
        return None
    rows = shape[0] * share
    ids = (batch_size * per_sample + per_batch) * share
    distinct = distinct_rows(batch_size * per_sample * share, rows) + min(per_batch * share, rows)
    return ids, min(distinct, rows), layer.var_bytes[index] / shape[0]


def rows_gradient_on_worker(profile: ModelProfile, where: Mapping[str, TaskRef], name: str) -> bool:
    """Whether the gradient of layer ``name``'s output arrives on the worker: no consumer of it is
    computed on a PS task (a model output's gradient starts on the worker)."""
    return not any(where.get(c, _WORKER) != _WORKER for t in profile.activation_tensors() if t.producer == name
               for c in t.consumers)
