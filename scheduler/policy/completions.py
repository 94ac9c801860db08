r"""Pricing many completions of one prefix at once: the HeterPS cost model, vectorised.

A lookahead feature (:mod:`scheduler.policy.policy_features`) needs, at decision ``t`` of a prefix
``a_0..a_{t-1}``, the penalised score (:meth:`scheduler.core.problem.Problem.penalized`) of
``prefix, r, tail`` for every candidate type ``r`` and a few tails (the rest on one type ``s``,
or as in a hint placement). Every stage quantity depends only on its segment and type
(:mod:`scheduler.core.segments`), so a placement's score is a fold over its stages:

* units per type ``n_r = sum_s k_s [r_s = r]``; price ``sum_s k_s p_{r_s}``, added stage by stage
  in order; throughput ``min_s X_s``; feasible when every stage is usable (allowed, memory fits),
  ``n_r <= U_r`` and the price is within the budget; met when every usable stage reaches
  ``X_min`` and the throughput does; an unusable stage counts ``U_r`` units at rate 0.

A prefix's *closed* runs (all but its last) fold into a :class:`StageFold`, kept incrementally
by the env as runs close. Then ``prefix, r, tail`` adds at most three stages: the prefix's last
run when ``r`` differs from its type, the run through ``t`` (merged with the prefix's last run
when ``r`` equals its type, and with the tail's first run when that has type ``r``), the tail's
first run otherwise, plus the tail's later runs (a fixed fold). :meth:`CompletionPricer.scores`
computes all ``T x K`` scores in numpy with the same operations, in the same order, as
:meth:`~scheduler.core.problem.Problem.evaluate` then ``penalized``, so they are equal bit for bit
(tested).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from scheduler.core.problem import PENALTY, Problem

__all__ = ["StageFold", "Tail", "CompletionPricer"]


@dataclasses.dataclass
class StageFold:
    """The fold of some stages, in order: units per type, price, least rate, usable, met."""

    units: np.ndarray
    price: float = 0.0
    rate: float = math.inf
    feasible: bool = True
    met: bool = True

    @classmethod
    def empty(cls, num_types: int) -> "StageFold":
        return cls(np.zeros(num_types, dtype=np.int64))


@dataclasses.dataclass(frozen=True)
class Tail:
    """A completion of layers ``t+1..n-1``: its first run ends at ``first_end`` with type
    ``first_type``; ``rest`` are its later runs ``(i, j, r)``, in order."""

    first_end: int
    first_type: int
    rest: tuple[tuple[int, int, int], ...] = ()


class CompletionPricer:
    """Stage lookups of one HeterPS problem (module docstring)."""

    def __init__(self, problem: Problem) -> None:
        p = problem
        self.problem = p
        self.n, self.T = p.num_decisions, p.num_choices
        self.caps = np.array([t.max_units for t in p.catalog.types], dtype=np.int64)
        self.unit_price = np.array([t.price_per_hour for t in p.catalog.types])
        self.units = np.where(p.seg_usable, p.seg_units, self.caps[None, None, :])
        self.rate = np.where(p.seg_usable, p.seg_rate, 0.0)
        self.met = np.where(p.seg_usable, p.seg_ok, True)
        self.usable = p.seg_usable
        self.xmin = float(p.constraints.min_throughput)
        self.budget = p.constraints.budget_per_hour
        self.scale = p.reference_cost()

    def stage(self, i: int, j: int, r: int) -> tuple[int, float, float, bool, bool]:
        """``(units, price, rate, usable, met)`` of the stage ``[i..j]`` on type ``r``."""
        k = int(self.units[i, j, r])
        return k, k * float(self.unit_price[r]), float(self.rate[i, j, r]), bool(self.usable[i, j, r]), \
            bool(self.met[i, j, r])

    def add(self, fold: StageFold, i: int, j: int, r: int) -> None:
        """Fold the stage ``[i..j]`` on ``r`` into ``fold`` (after its stages)."""
        k, price, rate, usable, met = self.stage(i, j, r)
        fold.units[r] += k
        fold.price = fold.price + price
        fold.rate = min(fold.rate, rate)
        fold.feasible = fold.feasible and usable
        fold.met = fold.met and met

    def scores(self, closed: StageFold, last: tuple[int, int] | None, t: int, candidates: np.ndarray,
               tails: Sequence[Tail]) -> np.ndarray:
        """``penalized(prefix, r, tail)`` for every type ``r`` (rows; ``inf`` where not in
        ``candidates``) and tail (columns; one column of the prefix and ``r`` alone when ``t`` is
        the last layer). ``closed``: the fold of the prefix's closed runs; ``last``: its last run
        ``(start, type)`` (``None`` at ``t = 0``)."""
        T = self.T
        rs = np.arange(T)
        K = len(tails) if t < self.n - 1 else 1
        out = np.full((T, K), np.inf)
        ok = np.flatnonzero(candidates)
        if not ok.size:
            return out
        r = rs[ok][:, None]                                               # [R, 1]
        units = np.broadcast_to(closed.units, (len(ok), K, T)).copy()
        price = np.full((len(ok), K), closed.price)
        rate = np.full((len(ok), K), closed.rate)
        feas = np.full((len(ok), K), closed.feasible)
        met = np.full((len(ok), K), closed.met)
        if last is not None:
            start, rk = last
            k_a, p_a, x_a, u_a, m_a = self.stage(start, t - 1, rk)
            close = r != rk                                               # the prefix's last run closes
            price = np.where(close, price + p_a, price)
            units[:, :, rk] += np.where(close, k_a, 0)
            rate = np.where(close, np.minimum(rate, x_a), rate)
            feas = np.where(close, feas & u_a, feas)
            met = np.where(close, met & m_a, met)
            i0 = np.where(close, t, start)
        else:
            i0 = np.full_like(r, t)
        if t < self.n - 1:
            s1 = np.array([tl.first_type for tl in tails])[None, :]
            e1 = np.array([tl.first_end for tl in tails])[None, :]
            merge = s1 == r
            end_b = np.where(merge, e1, t)
        else:
            merge = np.zeros((len(ok), 1), dtype=bool)
            end_b = np.full((len(ok), 1), t)
        i0 = np.broadcast_to(i0, end_b.shape)
        rb = np.broadcast_to(r, end_b.shape)
        k_b = self.units[i0, end_b, rb]
        price = price + k_b * self.unit_price[rb]
        np.add.at(units, (np.arange(len(ok))[:, None], np.arange(K)[None, :], rb), k_b)
        rate = np.minimum(rate, self.rate[i0, end_b, rb])
        feas = feas & self.usable[i0, end_b, rb]
        met = met & self.met[i0, end_b, rb]
        if t < self.n - 1:
            for k, tl in enumerate(tails):
                kc, pc, xc, uc, mc = self.stage(t + 1, tl.first_end, tl.first_type)
                c = ~merge[:, k]
                price[:, k] = np.where(c, price[:, k] + pc, price[:, k])
                units[:, k, tl.first_type] += np.where(c, kc, 0)
                rate[:, k] = np.where(c, np.minimum(rate[:, k], xc), rate[:, k])
                feas[:, k] = np.where(c, feas[:, k] & uc, feas[:, k])
                met[:, k] = np.where(c, met[:, k] & mc, met[:, k])
                for i, j, rr in tl.rest:
                    kr, pr, xr, ur, mr = self.stage(i, j, rr)
                    price[:, k] = price[:, k] + pr
                    units[:, k, rr] += kr
                    rate[:, k] = np.minimum(rate[:, k], xr)
                    feas[:, k] &= ur
                    met[:, k] &= mr
        out[ok] = self._penalty(units, price, rate, feas, met)
        return out

    def _penalty(self, units: np.ndarray, price: np.ndarray, rate: np.ndarray, feas: np.ndarray,
                 met: np.ndarray) -> np.ndarray:
        """:meth:`scheduler.core.problem.Problem.penalized` of folded placements (elementwise)."""
        feas = feas & (units <= self.caps).all(axis=-1)
        if self.budget is not None:
            feas = feas & ~(price > self.budget * (1 + 1e-12))
        met = met & ~(rate < self.xmin * (1 - 1e-12))
        with np.errstate(divide="ignore", invalid="ignore"):
            cost = np.where(rate > 0, price / 3600.0 * 1e6 / rate, np.inf)
        good = cost / self.scale
        short = np.maximum(0.0, 1.0 - rate / self.xmin) if self.xmin > 0 else np.zeros_like(rate)
        cost_term = np.where(np.isfinite(cost), np.minimum(cost / self.scale, 10.0), 10.0)
        over = np.zeros_like(price)
        for r in range(self.T):
            over = over + np.maximum(0, units[..., r] - self.caps[r]) / self.caps[r]
        infeasible = np.where(feas, 0.0, np.minimum(over, 5.0) + np.where(over == 0, 1.0, 0.5))
        return np.where(feas & met, good, PENALTY * (1.0 + short + infeasible) + cost_term)
