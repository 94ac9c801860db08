"""Fitting a ring all-reduce's own CPU from probe runs (``ralp-tf calibrate``). Pure.

The cost model prices the ring's CPU on a worker host with a known budget as
(:mod:`ralp_tf.plan.costmodel`, *Ring all-reduce*)::

    r_h = s_per_byte (out_h + in_h) + step_s + tensor_hop_s G 2 (N-1) + sparse_gradient_s S
          + table_pass_s_per_byte U

A **probe** is a model whose step is almost nothing but that exchange: ``tensors`` dense weights of
``param_bytes`` in all, a forward pass that only sums them, and ``tables`` tables it looks rows up
in (``S``: sparse gradients, each all-gathered on its own; ``U``: the bytes of the optimizer's
whole-table passes over each worker's replicas of them, ``dense_passes x`` their bytes)
(:mod:`ralp_tf.model.ring_probe`).
Trained with the ring on N workers, each worker host sends and receives ``2 (N-1)/N P`` bytes a
synchronous step and spends ``r_h`` core-seconds on it (read from its CPU group). The probes
(``ralp_tf.model.ring_probe.PROBES``) vary the bytes at a few tensors, the tensors at a few
bytes, the sparse gradients at both, and the tables' bytes at one sparse gradient, so the five
terms separate;
:func:`fit_ring_cpu` is the least-squares fit over every probe's hosts with no negative term
(a term the probes cannot see is 0, not a negative number that would price a saving).

What the terms absorb is what the constants they replace absorbed: the optimizer's dense update of
the all-reduced gradients (a pass over ``P``, per byte), and the training loop's own per-step work.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Mapping, Sequence

from ralp_tf.errors import ValidationError
from ralp_tf.plan.costmodel import ring_allreduce_bytes
from ralp_tf.plan.rates import RingCpu

__all__ = ["RingProbeSample", "ring_moved_bytes", "ring_tensor_hops", "fit_ring_cpu"]


def ring_moved_bytes(workers: int, param_bytes: float) -> float:
    """Bytes a worker host sends plus receives per synchronous step of a dense ring all-reduce of
    ``param_bytes`` over ``workers`` workers on hosts of their own: ``2 x 2 (N-1)/N x P``, twice the
    cost model's :func:`~ralp_tf.plan.costmodel.ring_allreduce_bytes`."""
    return 2.0 * ring_allreduce_bytes(workers, param_bytes)


def ring_tensor_hops(workers: int, tensors: int) -> int:
    """Gradient tensors times the ring's hops per synchronous step: ``G 2 (N-1)``."""
    return tensors * 2 * (workers - 1)


@dataclasses.dataclass(frozen=True)
class RingProbeSample:
    """One probe run: its shape (``tables``: its sparse gradients; ``table_pass_bytes``: the bytes of
    the whole-table passes each worker's optimizer makes over its replicas of them a step), the
    ring's workers, and each worker host's CPU core-seconds per synchronous step over the timed
    window (its CPU group), with the measured step."""

    probe: str
    tensors: int
    param_bytes: int
    workers: int
    host_cpu_s: Mapping[str, float]
    step_s: float
    tables: int = 0
    table_pass_bytes: float = 0.0

    def __post_init__(self) -> None:
        if (self.workers < 2 or self.tensors < 1 or self.param_bytes < 1 or self.tables < 0
                or not 0 <= self.table_pass_bytes < math.inf):
            raise ValidationError(f"a ring probe needs 2 or more workers and some gradients, got {self.workers} "
                                  f"workers, {self.tensors} tensors, {self.param_bytes} bytes")
        if not self.host_cpu_s or any(not (0 <= v < math.inf) for v in self.host_cpu_s.values()):
            raise ValidationError(f"ring probe {self.probe!r} needs each worker host's CPU seconds per step (>= 0), "
                                  f"got {dict(self.host_cpu_s)!r}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "host_cpu_s": dict(self.host_cpu_s)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RingProbeSample":
        return cls(probe=str(d["probe"]), tensors=int(d["tensors"]), param_bytes=int(d["param_bytes"]),
                   workers=int(d["workers"]), host_cpu_s={str(k): float(v) for k, v in d["host_cpu_s"].items()},
                   step_s=float(d["step_s"]), tables=int(d.get("tables", 0)),
                   table_pass_bytes=float(d.get("table_pass_bytes", 0.0)))


def fit_ring_cpu(samples: Sequence[RingProbeSample], implementation: str = "mwms") -> RingCpu:
    """The :class:`RingCpu` that best fits ``samples`` (module docstring): least squares of each host's
    CPU per step on ``[moved bytes, 1, tensor hops, sparse gradients, table pass bytes]``, every term
    >= 0 (the best of the fits over each subset of the terms whose coefficients are all >= 0). Needs
    probes that vary both the bytes and the tensors (``ralp_tf.model.ring_probe.PROBES``); without a
    probe with tables ``sparse_gradient_s`` is 0 (not measured, not priced). The passes are a term
    only where the probes' pass bytes per table differ (a large table beside small ones); otherwise
    the sparse term absorbs them and ``table_pass_s_per_byte`` is None (not measured)."""
    import numpy as np

    rows, ys = [], []
    for s in samples:
        for cpu in s.host_cpu_s.values():
            rows.append((ring_moved_bytes(s.workers, s.param_bytes), 1.0, float(ring_tensor_hops(s.workers, s.tensors)),
                         float(s.tables), s.table_pass_bytes))
            ys.append(cpu)
    passes = len({s.table_pass_bytes / s.tables for s in samples if s.tables}) > 1
    if len({(r[0], r[2]) for r in rows}) < 3:
        raise ValidationError(f"fitting the ring's CPU needs probes of 3 shapes (bytes and tensors varied), got "
                              f"{sorted({s.probe for s in samples})}")
    a, y = np.array(rows), np.array(ys)
    if not passes:
        a[:, 4] = 0.0
    scale = a.max(axis=0)  # bytes are ~1e7 and the intercept 1: fit on comparable columns
    scale[scale == 0] = 1.0  # no probe had tables: that column is all 0, and so is its term
    best: tuple[float, np.ndarray] | None = None
    for k in range(5, 0, -1):
        for cols in itertools.combinations(range(5), k):
            coef, *_ = np.linalg.lstsq(a[:, cols] / scale[list(cols)], y, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(5)
            full[list(cols)] = coef / scale[list(cols)]
            ssr = float(((a @ full - y) ** 2).sum())
            if best is None or ssr < best[0] - 1e-18:
                best = (ssr, full)
    terms = best[1] if best is not None else np.zeros(5)
    return RingCpu(implementation=implementation, s_per_byte=float(terms[0]), step_s=float(terms[1]),
                   tensor_hop_s=float(terms[2]), sparse_gradient_s=float(terms[3]),
                   table_pass_s_per_byte=float(terms[4]) if passes else None)
