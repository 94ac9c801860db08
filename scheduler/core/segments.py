r"""The segment tables of a HeterPS problem: every stage quantity, per segment and type.

A stage is a run ``[i..j]`` of consecutive layers on one type ``r``; every quantity of it
depends only on ``(i, j, r)`` (the formulas are in :mod:`scheduler.core.problem`'s docstring), so
:func:`build_segment_tables` computes them once for all ``O(L^2 T)`` segments:

* ``units[i, j, r]``: the provisioned ``k_s`` (smallest ``k <= U_r`` reaching ``X_min``, memory
  permitting; ``U_r`` when none does), 0 where the segment cannot run on ``r``;
* ``rate[i, j, r]``: the stage rate ``X_s(k_s)``; ``max_rate``: its rate at the most units;
* ``price[i, j, r]``: ``k_s p_r`` ($/h), ``inf`` where unusable;
* ``usable``: every layer allowed on ``r`` and memory fits at ``U_r`` units; ``ok``: usable
  and ``X_min`` reached.

The traffic of a segment (:func:`segment_traffic`): a layer's output crosses the segment's
boundary once per side that reads it; a gradient flows back where the producer's output has a
gradient (:func:`ralp_tf.model.gradient_flows`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ralp_tf.plan import ring_allreduce_bytes, transfer_seconds

__all__ = ["SegmentTables", "segment_traffic", "build_segment_tables"]


@dataclasses.dataclass(frozen=True)
class SegmentTables:
    """Per segment ``[i..j]`` (``i <= j``) and type ``r``, the stage quantities (module docstring)."""

    units: np.ndarray
    rate: np.ndarray
    price: np.ndarray
    max_rate: np.ndarray
    usable: np.ndarray
    ok: np.ndarray


def segment_traffic(consumers: list[list[int]], output_bytes: np.ndarray, grad: np.ndarray,
                    batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(received, sent)`` bytes per unit per batch for every segment ``[i..j]``: forward inputs
    from outside and the gradients of the segment's outputs are received; its outputs read
    outside and the gradients of its inputs are sent (each tensor once per reading side)."""
    n = len(consumers)
    recv = np.zeros((n, n))
    sent = np.zeros((n, n))
    for u in range(n):
        cons = sorted(consumers[u])
        if not cons:
            continue
        nb = batch_size * output_bytes[u]
        g = nb if grad[u] else 0.0
        last = cons[-1]
        # u inside [i..j], some consumer after j: send forward, receive its gradient.
        sent[: u + 1, u:last] += nb
        recv[: u + 1, u:last] += g
        # u before i, some consumer inside [i..j]: receive forward, send its gradient.
        for i in range(u + 1, last + 1):
            first_in = next(c for c in cons if c >= i)
            recv[i, first_in:] += nb
            sent[i, first_in:] += g
    return recv, sent


def _prefix(x: np.ndarray) -> np.ndarray:
    """``seg[i, j] = sum x[i..j]`` (along the first axis, trailing axes kept)."""
    cum = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, axis=0)])
    return cum[None, 1:] - cum[:-1, None]


def build_segment_tables(problem: Any) -> SegmentTables:
    """The tables of ``problem`` (a :class:`scheduler.core.problem.Problem`; module docstring)."""
    p = problem
    n, T, b = p.num_decisions, p.num_choices, p.batch_size
    xmin = float(p.constraints.min_throughput)
    recv, sent = segment_traffic(p.consumers, p.output_bytes, p.grad, b)
    act = np.maximum(recv, sent)
    seg_compute = _prefix(p.compute)                                     # [i, j, r] (valid for j >= i)
    seg_mem = _prefix(p.memory)
    seg_allowed = _prefix((~p.allowed).astype(np.float64)) == 0
    upper = np.triu(np.ones((n, n), dtype=bool))
    seg_cmax = np.zeros((n, n, T))
    seg_mem_max = np.zeros((n, n))
    for i in range(n):
        seg_cmax[i, i:] = np.maximum.accumulate(p.compute[i:], axis=0)
        seg_mem_max[i, i:] = np.maximum.accumulate(p.memory[i:])
    seg_dense = _prefix(np.where(p.sparse, 0.0, p.trainable_bytes))
    Umax = max(t.max_units for t in p.catalog.types)
    ks = np.arange(1, Umax + 1)
    # Embedding rows touched per sync with k units: min(P_l, k b a_l), summed over the segment.
    seg_emb = _prefix(np.where(p.sparse[:, None], np.minimum(p.trainable_bytes[:, None],
                                                             ks[None, :] * b * p.output_bytes[:, None]), 0.0))
    ring = np.array([ring_allreduce_bytes(int(k), 1.0) for k in ks])  # 2 (k-1)/k
    out = {name: np.zeros((n, n, T), dtype=dtype) for name, dtype in
           (("units", np.int64), ("rate", np.float64), ("max_rate", np.float64), ("usable", bool), ("ok", bool))}
    out["price"] = np.full((n, n, T), np.inf)
    for r, rt in enumerate(p.catalog.types):
        U = int(rt.max_units)
        kk = ks[:U]
        comp = seg_compute[:, :, r]
        if rt.role == "worker":
            sync = (seg_dense[:, :, None] + seg_emb[:, :, :U]) * ring[None, None, :U]
            t = comp[:, :, None] + transfer_seconds(act[:, :, None] + sync, rt.bandwidth_bps)
            mem_ok = np.broadcast_to((seg_mem <= rt.memory_bytes)[:, :, None], t.shape)
            per_unit_batches: Any = kk[None, None, :]
        else:
            # Layers sharded over k units: the busiest unit has >= 1/k of the work and >= its largest layer.
            t = np.maximum(comp[:, :, None] / kk[None, None, :], seg_cmax[:, :, r][:, :, None]) + \
                (transfer_seconds(act, rt.bandwidth_bps) + np.zeros_like(act))[:, :, None] / kk[None, None, :]
            mem_ok = ((seg_mem[:, :, None] / kk[None, None, :]) <= rt.memory_bytes) & \
                (seg_mem_max <= rt.memory_bytes)[:, :, None]
            per_unit_batches = np.ones((1, 1, 1))
        with np.errstate(divide="ignore"):
            rate = np.where(t > 0, per_unit_batches * b / np.maximum(t, 1e-300), np.inf)
        rate = np.where(mem_ok, rate, 0.0)
        meets = mem_ok & (rate >= xmin)
        any_meets = meets.any(axis=2)
        kmin = np.where(any_meets, np.argmax(meets, axis=2) + 1, U)
        usable = upper & seg_allowed[:, :, r] & mem_ok[:, :, -1]
        rate_at = np.take_along_axis(rate, (kmin - 1)[:, :, None], axis=2)[:, :, 0]
        out["units"][:, :, r] = np.where(usable, kmin, 0)
        out["rate"][:, :, r] = np.where(usable, rate_at, 0.0)
        out["price"][:, :, r] = np.where(usable, kmin * rt.price_per_hour, np.inf)
        out["max_rate"][:, :, r] = np.where(usable, rate.max(axis=2), 0.0)
        out["usable"][:, :, r] = usable
        out["ok"][:, :, r] = usable & any_meets
    return SegmentTables(**out)
