r"""The paper's decision environments: the features a placement policy reads, one decision at a time.

**HeterPS problems** (:class:`HeterPSEnv`, actions: one resource type per layer): layer kind
(one-hot over :data:`ralp_tf.model.LAYER_KINDS`), log FLOPs, log parameter bytes, log activation
bytes; per resource type: units its compute alone needs at the required throughput
``c(l, r) X_min / b`` (log), the same for its parameter sync and activation traffic, the type's
relative price, whether the layer may run there, and context: the units the whole model would
need on that type (log; and relative to the type's unit cap), the units the layers from ``t`` to
the end need (log), this layer's share of the whole, the next layer's need (log), the layer's
memory relative to a unit's; position ``t / L``, model size ``log10(L) / 3``, fan-in/fan-out
(log1p) and whether a skip edge touches the layer; dynamically the previous decision (one-hot),
the current run's length, the units its compute needs so far (log, and relative to the previous
type's cap).

**Max-load problems** (:class:`MaxLoadEnv`, actions: stay on the current accelerator / open the
next one): the group's accelerator latency and communication cost relative to ``total / F``,
its size relative to the limit; dynamically the current accelerator's load, the accelerators
used, and the remaining load per remaining accelerator, all relative to ``total / F``.

Every env has ``n`` decisions, ``A`` actions, ``feature_dim`` columns, ``reset(batch)``,
``observe(t) -> (features [B, F], mask [B, A])``, ``step(t, actions)``, ``select(rows)`` (beam
search) and ``assignments()``.
"""
from __future__ import annotations

import math

import numpy as np

from ralp_tf.model import LAYER_KINDS
from ralp_tf.plan import transfer_seconds
from scheduler.core.errors import ProblemError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem

__all__ = ["HeterPSEnv", "MaxLoadEnv", "make_env", "actions_of"]


def _log(x: np.ndarray | float, scale: float = 3.0) -> np.ndarray:
    return np.log10(np.asarray(x, dtype=np.float64) + 1e-3) / scale


class HeterPSEnv:
    """Sequential decisions over a HeterPS problem's layers (one resource type each).

    Every feature is scale-free (logs of unit counts at the required throughput, ratios to the
    whole model, to the type's unit cap or memory), so one policy reads problems of any size;
    the width depends only on the number of resource types (module docstring).
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        p = problem
        n, T, b = p.num_decisions, p.num_choices, p.batch_size
        xmin = p.constraints.min_throughput or 0.25 * p.best_throughput()
        self.need = p.compute * xmin / b                                   # units needed by compute
        kinds = np.zeros((n, len(LAYER_KINDS)))
        for l, k in enumerate(p.kinds):
            kinds[l, LAYER_KINDS.index(k) if k in LAYER_KINDS else -1] = 1.0
        price = np.array([t.price_per_hour for t in p.catalog.types])
        caps = np.array([t.max_units for t in p.catalog.types], dtype=np.float64)
        fan_in, fan_out, skip = np.zeros(n), np.zeros(n), np.zeros(n)
        for u, v in p.edges:
            fan_out[u] += 1
            fan_in[v] += 1
            if v > u + 1:
                skip[u] = skip[v] = 1.0
        total = self.need.sum(axis=0)                                       # whole model on one type
        suffix = np.cumsum(self.need[::-1], axis=0)[::-1]                   # layers t..n-1
        nxt = np.vstack([self.need[1:], np.zeros((1, T))])
        per_type = []
        for r, t in enumerate(p.catalog.types):
            sync = np.array([transfer_seconds(2.0 * p.trainable_bytes[l], t.bandwidth_bps) for l in range(n)])
            act = np.array([transfer_seconds(b * p.output_bytes[l], t.bandwidth_bps) for l in range(n)])
            per_type.append(np.stack([
                _log(self.need[:, r]), _log(sync * xmin / b), _log(act * xmin / b),
                np.full(n, price[r] / price.max()), p.allowed[:, r].astype(float),
                np.full(n, _log(total[r])), _log(suffix[:, r]), self.need[:, r] / (total[r] + 1e-12),
                _log(nxt[:, r]), _log(p.memory / t.memory_bytes), np.full(n, _log(total[r] / caps[r])),
            ], axis=1))
        self.static = np.hstack([kinds, _log(p.flops, 10.0)[:, None], _log(p.param_bytes, 10.0)[:, None],
                                 _log(p.output_bytes, 8.0)[:, None], *per_type,
                                 (np.arange(n) / n)[:, None], np.full((n, 1), math.log10(n) / 3.0),
                                 np.log1p(fan_in)[:, None], np.log1p(fan_out)[:, None], skip[:, None]]
                                ).astype(np.float32)
        self.caps = caps
        self.n, self.A = n, T
        self.feature_dim = self.static.shape[1] + (T + 1) + 3
        self.initial_bias = np.zeros(T)

    #: Per-rollout state (first axis: the batch), reordered by :meth:`select` in a beam search.
    BATCH_STATE = ("actions", "prev", "run_len", "run_need")

    def select(self, rows: np.ndarray) -> None:
        """Keep the rollouts ``rows`` (indices, repeats allowed) of the batch, in that order."""
        for name in self.BATCH_STATE:
            setattr(self, name, getattr(self, name)[rows].copy())

    def reset(self, batch: int) -> None:
        self.actions = np.zeros((batch, self.n), dtype=np.int64)
        self.prev = np.full(batch, -1)
        self.run_len = np.zeros(batch)
        self.run_need = np.zeros(batch)

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        B = len(self.prev)
        onehot = np.zeros((B, self.A + 1), dtype=np.float32)
        onehot[np.arange(B), np.where(self.prev < 0, self.A, self.prev)] = 1.0
        cap = np.where(self.prev < 0, 1.0, self.caps[np.maximum(self.prev, 0)])
        dyn = np.stack([self.run_len / 10.0, _log(self.run_need), np.minimum(self.run_need / cap, 4.0)],
                       axis=1).astype(np.float32)
        x = np.hstack([np.repeat(self.static[t][None], B, 0), onehot, dyn])
        mask = np.repeat(self.problem.allowed[t][None], B, 0)
        return x, mask

    def step(self, t: int, a: np.ndarray) -> None:
        self.actions[:, t] = a
        same = a == self.prev
        self.run_len = np.where(same, self.run_len + 1, 1)
        self.run_need = np.where(same, self.run_need, 0.0) + self.need[t, a]
        self.prev = a

    def assignments(self) -> np.ndarray:
        return self.actions.copy()


class MaxLoadEnv:
    """Sequential stay/next decisions over a max-load problem's groups (contiguous splits)."""

    def __init__(self, problem: MaxLoadProblem) -> None:
        if problem.max_fpgas == 0:
            raise ProblemError(f"{problem.name!r} has no accelerators; the RL policy splits work over accelerators")
        self.problem = p = problem
        self.target = p.reference_load()
        n = p.num_decisions
        comm = np.array([p.cost[g].sum() for g in p.groups])
        rem = np.cumsum(p.group_fpga[::-1])[::-1]
        self.static = np.stack([p.group_fpga / self.target, comm / self.target, p.group_size / p.max_size,
                                np.arange(n) / n, rem / (p.group_fpga.sum() + 1e-12)], axis=1).astype(np.float32)
        self.rem_after = rem - p.group_fpga
        self.n, self.A, self.F = n, 2, p.max_fpgas
        self.feature_dim = self.static.shape[1] + 3 + 4
        # Start near F - 1 cuts per rollout: P(next) ~ (F - 1) / n.
        self.initial_bias = np.array([0.0, math.log(max(self.F - 1, 1) / max(n, 1))])

    BATCH_STATE = ("acc", "load", "dev", "last")
    select = HeterPSEnv.select

    def reset(self, batch: int) -> None:
        self.acc = np.zeros(batch, dtype=np.int64)
        self.load = np.zeros(batch)
        self.dev = np.zeros((batch, self.n), dtype=np.int64)
        self.last = np.zeros((batch, 3), dtype=np.float32)
        self.last[:, 2] = 1.0

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        B = len(self.acc)
        left = self.F - self.acc - 1  # accelerators after the current one
        rem_per = np.where(left > 0, self.rem_after[t] / (np.maximum(left, 1) * self.target), 10.0)
        dyn = np.stack([self.load / self.target, (self.load + self.problem.group_fpga[t]) / self.target,
                        self.acc / self.F, np.minimum(rem_per, 10.0)], axis=1)
        x = np.hstack([np.repeat(self.static[t][None], B, 0), self.last, dyn.astype(np.float32)]).astype(np.float32)
        mask = np.ones((B, 2), dtype=bool)
        mask[:, 1] = (t > 0) & (self.acc < self.F - 1)
        return x, mask

    def step(self, t: int, a: np.ndarray) -> None:
        nxt = a == 1
        self.acc = self.acc + nxt
        self.load = np.where(nxt, 0.0, self.load) + self.problem.group_fpga[t]
        self.dev[:, t] = self.acc
        self.last[:] = 0.0
        self.last[np.arange(len(a)), a] = 1.0

    def assignments(self) -> np.ndarray:
        p = self.problem
        out = self.dev + p.max_cpus
        if p.max_cpus:
            bad = ~p.allowed[np.arange(self.n)[None, :], out]
            out[bad] = 0
        return out


def make_env(problem: Any) -> HeterPSEnv | MaxLoadEnv:
    if isinstance(problem, MaxLoadProblem):
        return MaxLoadEnv(problem)
    if isinstance(problem, Problem):
        return HeterPSEnv(problem)
    raise ProblemError(f"RL cannot handle {type(problem).__name__}")


def actions_of(env: Any, assignment: np.ndarray) -> np.ndarray:
    """The per-step actions that produced ``assignment`` (identity for HeterPS envs)."""
    if isinstance(env, MaxLoadEnv):
        acc = assignment - env.problem.max_cpus
        return np.r_[0, (np.diff(acc, axis=-1) > 0).astype(np.int64)] if acc.ndim == 1 else \
            np.hstack([np.zeros((len(acc), 1), np.int64), (np.diff(acc, axis=1) > 0).astype(np.int64)])
    return assignment
