"""Ring probes: tf_keras models whose training step is almost nothing but gradient exchange.

One builder per shape of :data:`PROBES`, referenced as
``ralp_tf.model.ring_probe:few_large`` (``module:function``, as any user model), so that the ring's
own jobs (``ralp_tf.testbed.mwms_job``) train them unchanged. The model holds ``tensors`` float32
weights; its forward pass sums each (one read of the weights) and scales the input by the total, so
each gradient is a dense tensor of the weight's size and the step's work is the all-reduce and the
optimizer's update. A probe with ``tables`` also looks up one row per sample of each of that many
small tables (``table_rows`` x ``TABLE_WIDTH``): their gradients are IndexedSlices, which the ring
all-gathers one by one instead of packing them into its all-reduce, and which every worker applies to
its own replica of the table (the optimizer's whole-table passes, :mod:`ralp_tf.model.optimizers`).
``ralp-tf calibrate`` fits the ring's CPU on them (:func:`ralp_tf.plan.ring_cpu.fit_ring_cpu`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ProbeShape", "PROBES", "TABLE_ROWS", "TABLE_WIDTH", "build_probe", "few_large", "few_small", "many_small",
           "sparse_tables", "large_table"]


_MB = 1 << 20
#: Rows and float32 columns of each small table (64 KB: its whole-table passes and its all-gathered
#: rows cost little, so what it adds is per sparse gradient).
TABLE_ROWS, TABLE_WIDTH = 1024, 16


@dataclasses.dataclass(frozen=True)
class ProbeShape:
    """A probe model's gradients: ``tensors`` float32 weights of ``param_bytes`` bytes in all, ``tables``
    looked-up tables of ``table_rows`` x ``TABLE_WIDTH`` float32 (sparse gradients), and the
    synchronous steps it is timed for (a small probe's step is short: more of them)."""

    name: str
    tensors: int
    param_bytes: int
    steps: int
    tables: int = 0
    table_rows: int = TABLE_ROWS

    @property
    def table_bytes(self) -> int:
        """Bytes of all its tables (what each whole-table pass reads or writes)."""
        return self.tables * self.table_rows * TABLE_WIDTH * 4

    @property
    def elements_per_tensor(self) -> int:
        return self.param_bytes // (4 * self.tensors)


#: The probes ``calibrate`` runs: bytes at 2 tensors (32 MB against 1 MB), tensors at 1 MB (64 against
#: 2), 16 sparse gradients beside ``few_small``'s, and one 32 MB table beside it (whole-table passes).
PROBES: dict[str, ProbeShape] = {p.name: p for p in (
    ProbeShape("few_large", tensors=2, param_bytes=32 * _MB, steps=10),
    ProbeShape("few_small", tensors=2, param_bytes=1 * _MB, steps=40),
    ProbeShape("many_small", tensors=64, param_bytes=1 * _MB, steps=40),
    ProbeShape("sparse_tables", tensors=2, param_bytes=1 * _MB, steps=40, tables=16),
    ProbeShape("large_table", tensors=2, param_bytes=1 * _MB, steps=20, tables=1, table_rows=32 * _MB // (4 * TABLE_WIDTH)),
)}


def build_probe(shape: ProbeShape) -> Any:
    """A built tf_keras model of ``shape``: input ``(1,)``, one logit out (module docstring)."""
    import tensorflow as tf
    import tf_keras

    class GradientBlock(tf_keras.layers.Layer):
        def build(self, input_shape: Any) -> None:
            self.blocks = [self.add_weight(name=f"w{i}", shape=(shape.elements_per_tensor,), initializer="zeros")
                           for i in range(shape.tensors)]
            self.tables = [self.add_weight(name=f"t{i}", shape=(shape.table_rows, TABLE_WIDTH), initializer="zeros")
                           for i in range(shape.tables)]

        def call(self, x: Any) -> Any:
            total = tf.add_n([tf.reduce_sum(w) for w in self.blocks])
            if self.tables:  # one row per sample of each table, picked by the input: an IndexedSlices gradient each
                ids = tf.math.floormod(tf.cast(tf.abs(x[:, 0]) * shape.table_rows, tf.int32), shape.table_rows)
                total += tf.add_n([tf.reduce_sum(tf.gather(t, ids)) for t in self.tables])
            return x * (1.0 + 1e-6 * total)

    inputs = tf_keras.Input(shape=(1,), name="x")
    model = tf_keras.Model(inputs, GradientBlock(name=f"probe_{shape.name}")(inputs), name=f"ring_probe_{shape.name}")
    return model


def few_large() -> Any:
    return build_probe(PROBES["few_large"])


def few_small() -> Any:
    return build_probe(PROBES["few_small"])


def many_small() -> Any:
    return build_probe(PROBES["many_small"])


def sparse_tables() -> Any:
    return build_probe(PROBES["sparse_tables"])


def large_table() -> Any:
    return build_probe(PROBES["large_table"])
