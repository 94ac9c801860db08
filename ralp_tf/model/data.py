"""What ralp_tf's training jobs feed a model and how they score it: synthetic batches, the loss
that matches the model's outputs, and weight checksums.

* :func:`synthetic_batch`: a deterministic ``(inputs, labels)`` batch in the structure the model
  takes (one array, a list, a dict) and returns (one label array per output). Integer inputs get
  ids below the smallest ``input_dim`` of the embeddings they feed; dimensions of variable length
  get the signature's ``sequence_length``.
* :func:`per_sample_loss`: per output, binary cross-entropy when it has one unit, sparse
  categorical cross-entropy otherwise, ``from_logits=False`` where the output is already a
  probability (its last op is a softmax or a sigmoid) and ``from_logits=True`` otherwise; summed
  over the outputs, averaged over every non-batch dimension, one value per sample.
  :func:`output_losses` gives the same per output, for ``Model.compile``.
* :func:`weights_checksum`: a SHA-256 and a float sum of a model's weights.

Regularisation and ``add_loss`` terms (``model.losses``) are not part of these losses: the
training loop adds them (:mod:`ralp_tf.run.training`), as ``Model.fit`` does.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Callable

from ralp_tf.model.graph import walk
from ralp_tf.model.trace import TRANSPARENT_OPS, InputSignature, Trace, input_signature, trace_calls

__all__ = ["OutputSpec", "TrainingSpec", "training_spec", "synthetic_batch", "dataset_batch", "per_sample_loss", "output_losses",
           "output_units", "weights_checksum"]

#: Ops after which a model's output is a probability (``from_logits=False``).
PROBABILITY_OPS = frozenset({"Softmax", "Sigmoid"})
#: Ops looked through when finding an output's last op (dtype casts of mixed precision included).
_PASS_THROUGH_OPS = TRANSPARENT_OPS
#: Ids of an integer input that feeds no embedding are drawn below this.
DEFAULT_ID_RANGE = 1000


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """One model output: its shape without the batch dimension, and whether it is a probability."""

    shape: tuple[int | None, ...]
    probabilities: bool

    @property
    def units(self) -> int:
        return int(self.shape[-1]) if self.shape and self.shape[-1] is not None else 1


@dataclasses.dataclass(frozen=True)
class TrainingSpec:
    """The inputs a model takes (its signature and, per integer input, the id range) and the
    outputs it returns (one :class:`OutputSpec` each, and their nesting)."""

    signature: InputSignature
    id_ranges: tuple[int, ...]
    outputs: tuple[OutputSpec, ...]
    output_structure: Any


_SPECS: "weakref.WeakKeyDictionary[Any, TrainingSpec]" = weakref.WeakKeyDictionary()


def training_spec(model: Any, input_shape: Any = None, sequence_length: int | None = None,
                  trace: Trace | None = None) -> TrainingSpec:
    """The :class:`TrainingSpec` of ``model`` (one trace of it, kept per model while it lives)."""
    cached = _SPECS.get(model)
    if cached is not None and trace is None and (sequence_length is None or
                                                 cached.signature.sequence_length in (None, sequence_length)):
        return cached
    graph = walk(model)
    signature = input_signature(model, input_shape, sequence_length, graph)
    trace = trace or trace_calls(model, signature, graph)
    spec = TrainingSpec(signature=signature, id_ranges=_id_ranges(trace, len(signature.names)),
                        outputs=tuple(OutputSpec(tuple(_dims(t)[1:]), _is_probability(t)) for t in trace.outputs),
                        output_structure=trace.output_structure)
    _SPECS[model] = spec
    return spec


def _dims(t: Any) -> list[int | None]:
    return [None if d is None else int(d) for d in t.shape]


def _is_probability(t: Any) -> bool:
    op = t.op
    while op.type in _PASS_THROUGH_OPS and op.inputs:
        op = op.inputs[0].op
    return op.type in PROBABILITY_OPS


def _id_ranges(trace: Trace, count: int) -> tuple[int, ...]:
    """Per input: the rows of the smallest table its ids are looked up in (the traced row lookups
    of :class:`~ralp_tf.model.trace.Gather`), else the smallest ``input_dim`` of the layers its ids
    reach, else :data:`DEFAULT_ID_RANGE`."""
    rows: dict[int, list[int]] = {}
    for call in trace.calls:
        for g in call.gathers:
            if g.source is not None:
                rows.setdefault(g.source, []).append(int(call.layer.weights[g.variable].shape[0]))
    consumers: dict[Any, list[Any]] = {}
    for call in trace.calls:
        for key in call.in_keys:
            consumers.setdefault(key, []).append(call)
    out = []
    for i in range(count):
        if rows.get(i):
            out.append(min(rows[i]))
            continue
        dims: list[int] = []
        frontier, seen = [("input", i)], set()
        while frontier:
            key = frontier.pop()
            for call in consumers.get(key, []):
                if call.out_key in seen:
                    continue
                seen.add(call.out_key)
                found = _input_dims(call.layer)
                if found:
                    dims.extend(found)
                else:
                    frontier.append(call.out_key)
        out.append(min(dims) if dims else DEFAULT_ID_RANGE)
    return tuple(out)


def _input_dims(layer: Any) -> list[int]:
    """``input_dim`` of ``layer``, or of the embeddings inside it (a composite unit)."""
    if layer is None:
        return []
    if getattr(layer, "input_dim", None):
        return [int(layer.input_dim)]
    return [int(m.input_dim) for m in getattr(layer, "submodules", ()) if getattr(m, "input_dim", None)]


def _spec_of(model_or_spec: Any) -> TrainingSpec:
    return model_or_spec if isinstance(model_or_spec, TrainingSpec) else training_spec(model_or_spec)


def synthetic_batch(model: Any, batch_size: int, seed: int = 0, sequence_length: int | None = None) -> tuple[Any, Any]:
    """A deterministic synthetic ``(inputs, labels)`` batch for ``model`` (a model or its
    :class:`TrainingSpec`; module docstring): inputs in the structure its ``call`` takes, labels in
    the structure of its outputs (an array for a single output)."""
    import numpy as np
    import tensorflow as tf

    spec = training_spec(model, sequence_length=sequence_length) if not isinstance(model, TrainingSpec) else model
    rng = np.random.default_rng(seed)
    xs = []
    for s, high in zip(spec.signature.flat, spec.id_ranges):
        shape = [batch_size, *[int(d) for d in s.shape[1:]]]
        if s.dtype.is_integer:
            xs.append(rng.integers(0, max(high, 1), size=shape).astype(s.dtype.as_numpy_dtype))
        elif s.dtype.is_bool:
            xs.append(np.ones(shape, dtype=bool))
        elif s.dtype == tf.string:  # categorical tokens (a Hashing or StringLookup input): ids as text
            xs.append(rng.integers(0, max(high, 1), size=shape).astype(str).astype(object))
        else:
            xs.append(rng.standard_normal(shape).astype(s.dtype.as_numpy_dtype))
    labels = [_labels(o, batch_size, rng) for o in spec.outputs]
    outputs = tf.nest.pack_sequence_as(spec.output_structure, labels) if len(labels) > 1 else labels[0]
    return spec.signature.pack(xs) if len(xs) > 1 or isinstance(spec.signature.structure, (list, tuple, dict)) \
        else xs[0], outputs


def dataset_batch(model: Any, batch_size: int, seed: int = 0, sequence_length: int | None = None) -> tuple[Any, Any]:
    """:func:`synthetic_batch` with its lists as tuples: one nested structure for
    ``tf.data.Dataset.from_tensors`` (a list of differently shaped inputs, ctr_dnn's, is read as one
    non-rectangular tensor)."""
    x, y = synthetic_batch(model, batch_size, seed=seed, sequence_length=sequence_length)
    return (tuple(x) if isinstance(x, list) else x), (tuple(y) if isinstance(y, list) else y)


def _labels(out: OutputSpec, batch_size: int, rng: Any) -> Any:
    import numpy as np

    dims = [batch_size, *[int(d or 1) for d in out.shape]]
    if out.units == 1:
        return rng.integers(0, 2, size=dims).astype("float32")
    return rng.integers(0, out.units, size=dims[:-1]).astype("int32")


def output_losses(model: Any) -> Any:
    """One loss function ``loss(labels, output) -> per-sample values`` per output of ``model`` (a
    model or its :class:`TrainingSpec`), in the structure of its outputs: what ``Model.compile``
    takes (module docstring)."""
    import tensorflow as tf

    spec = _spec_of(model)
    losses = [_output_loss(o) for o in spec.outputs]
    return tf.nest.pack_sequence_as(spec.output_structure, losses) if len(losses) > 1 else losses[0]


def per_sample_loss(model: Any) -> Callable[[Any, Any], Any]:
    """``loss(labels, outputs)``: the per-sample sum of :func:`output_losses` over every output of
    ``model`` (a model or its :class:`TrainingSpec`); one value per sample, no reduction."""
    import tensorflow as tf

    spec = _spec_of(model)
    losses = [_output_loss(o) for o in spec.outputs]

    def loss(labels: Any, outputs: Any) -> Any:
        flat_y, flat_out = tf.nest.flatten(labels), tf.nest.flatten(outputs)
        return tf.add_n([fn(y, o) for fn, y, o in zip(losses, flat_y, flat_out)])

    return loss


def _output_loss(out: OutputSpec) -> Callable[[Any, Any], Any]:
    import tensorflow as tf
    import tf_keras

    from_logits = not out.probabilities

    def per_sample(values: Any) -> Any:
        values = tf.cast(values, tf.float32)
        return tf.reduce_mean(values, axis=list(range(1, values.shape.rank))) if values.shape.rank > 1 else values

    if out.units == 1:
        def binary_crossentropy(labels: Any, output: Any) -> Any:
            return per_sample(tf_keras.losses.binary_crossentropy(labels, tf.cast(output, tf.float32),
                                                                  from_logits=from_logits))

        return binary_crossentropy

    def sparse_categorical_crossentropy(labels: Any, output: Any) -> Any:
        return per_sample(tf_keras.losses.sparse_categorical_crossentropy(labels, tf.cast(output, tf.float32),
                                                                          from_logits=from_logits))

    return sparse_categorical_crossentropy


def output_units(model: Any) -> int:
    """Size of the last dimension of the model's (first) output."""
    return _spec_of(model).outputs[0].units


def weights_checksum(model: Any, trainable_only: bool = False) -> tuple[str, float]:
    """``(sha256, total)`` of ``model.get_weights()`` in order (``trainable_only``: of its
    trainable weights): the SHA-256 of every weight's float32 bytes (equal hashes: identical
    weights) and the float64 sum of all weights (a cheap fingerprint that survives a checkpoint
    round trip and can be compared with a tolerance)."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256()
    total = 0.0
    weights = [w.numpy() for w in model.trainable_weights] if trainable_only else model.get_weights()
    for weight in weights:
        values = np.ascontiguousarray(weight, dtype=np.float32)
        digest.update(values.tobytes())
        total += float(values.sum(dtype=np.float64))
    return digest.hexdigest(), total
