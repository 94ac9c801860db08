"""Gradient codecs on the wire (``int8``, ``topk:<f>``): encode on the worker, decode on the PS.

A worker-computed layer reads each variable through :func:`pull` (called by
:func:`ralp_tf.place.wrappers.narrow_weights_call`). Its forward is the variable read (cast to
the ``weights`` codec's dtype) on the variable's PS task. Its gradient function runs where
``tf.GradientTape.gradient`` is called, on the worker that runs the step: it encodes the
gradient there, with no device scope, and decodes it under ``tf.device(<variable's device>)``,
so the tensors between the two are what crosses the network:

* ``int8``: ``q = round(g / s)`` (int8, ``n`` bytes) and ``s = max|g| / 127`` (one fp32);
  decoded ``g' = s q``. ``|g - g'| <= s / 2`` per entry;
* ``topk:f``: the ``k`` (:func:`ralp_tf.plan.compression.topk_count`) entries of largest magnitude
  of ``e = g + r`` as fp32 values and int32 flat indices (``8 k`` bytes), decoded by scattering
  them into zeros. With error feedback ``r`` is this worker's residual, what it has not sent
  yet: after the step ``r = e - sent``. So, per worker, ``sum of sent + r = sum of g`` over
  all its steps. Without feedback (``topk:f:no-feedback``) ``r`` is 0 and the rest is dropped.

**The residual is per worker.** Under ParameterServerStrategy every ``tf.Variable`` created in
the strategy's scope lives on a PS task, and a variable captured by the step function would be
one variable for all workers (and remote for all but one). The residual is therefore a
resource the step function itself opens on the device it runs on: a ``VarHandleOp`` with a
fixed ``shared_name`` and no device, inside the gradient function. The worker that runs a step
places it on itself; the resource lives in that worker process's resource manager, so it
persists across steps (created as zeros by the first step) and each worker has its own. Nothing
of it crosses the network. A worker that is restarted starts again from zeros (its unsent
residual is lost, as it would be with any worker-local state).

NaN or Inf in a gradient being encoded is an error that names the layer and the variable
(``tf.debugging.check_numerics``), not a silently corrupted update.
"""
from __future__ import annotations

import math
import uuid
from typing import Any

from ralp_tf.plan.compression import error_feedback, topk_count, topk_fraction
from ralp_tf.errors import PlanError

__all__ = ["ENCODE_SCOPE", "DECODE_SCOPE", "check_finite", "check_float", "encode_int8", "decode_int8",
           "encode_topk", "SAMPLED_TOPK_MIN", "TOPK_SAMPLE", "top_k_indices", "decode_topk", "WorkerResidual",
           "residual_name", "new_prefix", "send"]

#: Name scope of the ops that encode a gradient on the worker.
ENCODE_SCOPE = "ralp_grad_encode"
#: Name scope of the ops that decode it on the variable's PS task.
DECODE_SCOPE = "ralp_grad_decode"


def check_finite(x: Any, what: str) -> Any:
    """``x``, raising InvalidArgumentError naming ``what`` when it holds NaN or Inf (a narrow dtype
    overflowed, or the model diverged)."""
    import tensorflow as tf

    return tf.debugging.check_numerics(x, f"ralp_tf compression: layer {what} holds NaN or Inf "
                                          "(overflow of the narrow dtype, or the model diverged)")


def check_float(dtype: Any, codec: str, what: str) -> None:
    """PlanError unless ``dtype`` is floating point: ``codec`` quantizes real values."""
    import tensorflow as tf

    if not tf.as_dtype(dtype).is_floating:
        raise PlanError(f"layer {what}: {codec} compression needs a floating-point tensor, but it is "
                        f"{tf.as_dtype(dtype).name}; set gradients: none for this layer "
                        "(e.g. compression={'*': ..., '<layer>': {'gradients': 'none'}})")


def encode_int8(g: Any, what: str) -> tuple[Any, Any]:
    """``(q, s)``: ``g`` (float) as int8 ``round(g / s)`` and the fp32 scale ``s = max|g| / 127``."""
    import tensorflow as tf

    check_float(g.dtype, "int8", what)
    g = check_finite(tf.cast(g, tf.float32), what)
    scale = tf.reduce_max(tf.abs(g)) / 127.0
    safe = tf.where(scale > 0, scale, tf.ones_like(scale))
    q = tf.cast(tf.clip_by_value(tf.round(g / safe), -127.0, 127.0), tf.int8)
    return q, scale


def decode_int8(q: Any, scale: Any, dtype: Any) -> Any:
    import tensorflow as tf

    return tf.cast(tf.cast(q, tf.float32) * scale, dtype)


def encode_topk(g: Any, k: int, what: str, residual: WorkerResidual | None = None) -> tuple[Any, Any]:
    """``(values, indices)``: the ``k`` entries of largest magnitude of ``g`` (+ the residual),
    flattened; with ``residual``, what is not sent is stored in it for the next step."""
    import tensorflow as tf

    check_float(g.dtype, "top-k", what)
    flat = tf.reshape(tf.cast(g, tf.float32), [-1])
    if residual is not None:
        flat = flat + residual.read()
    flat = check_finite(flat, what)
    indices = top_k_indices(tf.abs(flat), k)
    values = tf.gather(flat, indices)
    if residual is not None:
        residual.write(tf.tensor_scatter_nd_update(flat, indices[:, None], tf.zeros_like(values)))
    return values, indices


#: Tensors at least this large select their top k through a sampled threshold (see top_k_indices).
SAMPLED_TOPK_MIN = 65536
#: Entries sampled (a fixed stride) to estimate the threshold.
TOPK_SAMPLE = 16384


def top_k_indices(magnitude: Any, k: int) -> Any:
    """Flat int32 indices of the ``k`` largest entries of the 1-D ``magnitude`` (ties in any order).

    ``tf.math.top_k`` over all ``n`` entries costs about 0.12 s for ``n = 2.4 M``, ``k = 1%`` on one
    core here; a large tensor is cut down first: a threshold ``t`` is the ``2 k s / n``-th largest of
    ``s`` entries sampled at a fixed stride, the candidates are the entries ``>= t`` (about ``2 k``),
    and top_k runs on them only (3x faster). Every entry left out is below ``t``, at most the least
    candidate, so when there are at least ``k`` candidates the result is the exact top k; when there
    are fewer (a sample far from the whole), the full ``top_k`` runs instead."""
    import tensorflow as tf

    n = int(magnitude.shape[0])
    if n < SAMPLED_TOPK_MIN or 4 * k > n:
        return tf.math.top_k(magnitude, k=k, sorted=False).indices
    stride = max(1, n // TOPK_SAMPLE)
    sample = magnitude[::stride]
    in_sample = min(int(sample.shape[0]), max(1, math.ceil(2 * k * int(sample.shape[0]) / n)))
    threshold = tf.reduce_min(tf.math.top_k(sample, k=in_sample, sorted=False).values)
    candidates = tf.cast(tf.reshape(tf.where(magnitude >= threshold), [-1]), tf.int32)

    def among_candidates() -> Any:
        return tf.gather(candidates, tf.math.top_k(tf.gather(magnitude, candidates), k=k, sorted=False).indices)

    return tf.cond(tf.size(candidates) >= k, among_candidates,
                   lambda: tf.math.top_k(magnitude, k=k, sorted=False).indices)


def decode_topk(values: Any, indices: Any, shape: Any, dtype: Any) -> Any:
    import tensorflow as tf

    n = int(shape.num_elements())
    return tf.cast(tf.reshape(tf.scatter_nd(indices[:, None], values, [n]), shape), dtype)


class WorkerResidual:
    """An fp32 vector of ``n`` entries kept on whichever worker runs the step (see the module
    docstring): opened in the traced step by ``VarHandleOp(shared_name=name)``, zeros until the
    first :meth:`write`."""

    def __init__(self, name: str, n: int) -> None:
        import tensorflow as tf

        self.name, self.n = name, n
        self.handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[n], shared_name=name, container="",
                                             name="ralp_residual")

    def read(self) -> Any:
        import tensorflow as tf

        handle, n = self.handle, self.n

        def create() -> Any:
            tf.raw_ops.AssignVariableOp(resource=handle, value=tf.zeros([n], tf.float32))
            return tf.constant(True)

        ready = tf.cond(tf.raw_ops.VarIsInitializedOp(resource=handle), lambda: tf.constant(True), create)
        with tf.control_dependencies([ready]):
            return tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)

    def write(self, value: Any) -> Any:
        import tensorflow as tf

        return tf.raw_ops.AssignVariableOp(resource=self.handle, value=value)


def residual_name(prefix: str, var: Any) -> str:
    """The ``shared_name`` of ``var``'s residual: unique per wrapped model (``prefix``) and variable."""
    return f"ralp_residual/{prefix}/{var.name}"


def new_prefix() -> str:
    return uuid.uuid4().hex[:12]


def send(g: Any, codec: str, var: Any, what: str, prefix: str) -> Any:
    """``g`` (the gradient of ``var`` on the worker) encoded here with ``codec`` and decoded on
    ``var.device`` (see the module docstring): the fp32 gradient, on the PS."""
    import tensorflow as tf

    dtype, shape = var.dtype, var.shape
    with tf.name_scope(ENCODE_SCOPE):
        if codec == "int8":
            wire = encode_int8(g, what)
        else:
            residual = WorkerResidual(residual_name(prefix, var), int(shape.num_elements())) \
                if error_feedback(codec) else None
            wire = encode_topk(g, topk_count(int(shape.num_elements()), topk_fraction(codec)), what, residual)
    with tf.device(var.device), tf.name_scope(DECODE_SCOPE):
        if codec == "int8":
            return decode_int8(*wire, dtype)
        return decode_topk(*wire, shape, dtype)
