"""The continuous encoding of a per-decision categorical placement (Bayesian optimisation's space).

Decision ``l`` with allowed choices ``o_0 < ... < o_{m-1}`` owns coordinate ``x_l`` of ``[0, 1]``,
cut into ``m`` equal slices: ``decode`` takes ``o_{floor(x_l m)}`` and ``encode`` the centre of a
choice's slice (``0.5`` for a choice not allowed).
"""
from __future__ import annotations

import numpy as np

__all__ = ["decode_choices", "encode_choices"]


def decode_choices(allowed: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``x`` in ``[0,1]^L`` -> one allowed choice per decision (``allowed``: ``[L, C]``)."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0 - 1e-9)
    out = np.zeros(allowed.shape[0], dtype=np.int64)
    for l in range(allowed.shape[0]):
        opts = np.flatnonzero(allowed[l])
        out[l] = opts[int(x[l] * len(opts))]
    return out


def encode_choices(allowed: np.ndarray, assignment: np.ndarray) -> np.ndarray:
    """The centre of ``assignment``'s cell in :func:`decode_choices`'s encoding."""
    x = np.zeros(allowed.shape[0])
    for l, r in enumerate(assignment):
        opts = list(np.flatnonzero(allowed[l]))
        x[l] = (opts.index(int(r)) + 0.5) / len(opts) if r in opts else 0.5
    return x
