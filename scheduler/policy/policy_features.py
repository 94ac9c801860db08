r"""Lookahead features for a placement policy that generalises.

The paper's features (:class:`scheduler.policy.rl.HeterPSEnv`, :class:`scheduler.policy.rl.MaxLoadEnv`)
describe a layer and, scale-free, the whole model; they say little about what the *partial
assignment* already decided implies. A placement whose cost is "everything on one type except
one or two layers" turns on facts such as "putting this layer on the PS now, and the rest back
on the GPU, makes the whole feasible", which per-layer features do not carry. The envs here add,
at every decision, the cost model's own verdict on a few cheap **completions** of the current
prefix, per candidate action, in scale-free form. The LSTM + ``tfp`` Categorical policy of
:mod:`scheduler.policy.rl` reads them unchanged (only the input width grows).

**HeterPS** (:class:`LookaheadHeterPSEnv`). Prefix ``a_0..a_{t-1}``, candidate type ``r`` for
layer ``t``, completions "the rest on one type ``s``":
``c(r, s) = penalized(a_0..a_{t-1}, r, s, ..., s)`` (:meth:`scheduler.core.problem.Problem.penalized`:
cost over the reference cost, ``>= 4`` when infeasible or short of the constraint), and "the
rest as in the hint" ``c(r, H)`` (:func:`exception_hint`: the best placement of the form "one
type except up to two blocks", found once per problem by a small enumeration). With
``c2(r) = min(min_s c(r, s), c(r, H))``, ``c1(r) = c(r, r)`` and ``m = min_{r allowed} c2(r)``,
per type: ``log10(c2(r) / m)``, ``log10(c1(r) / m)`` and ``log10(c(r, H) / m)`` (clipped to
``[0, 2]``), ``[c2(r) = m]``, ``[c2(r) < 4]`` (a completion meets every constraint); globally
``log10(m)`` and ``[m < 4]``. Cost: the ``T^2 + T`` completion scores of a decision are one
vectorised fold over at most three stages per completion (:class:`scheduler.policy.completions.CompletionPricer`,
equal bit for bit to :meth:`~scheduler.core.problem.Problem.penalized`), memoised by prefix.

**Max-load** (:class:`LookaheadMaxLoadEnv`, actions stay / next accelerator). Completion of
the prefix after each action: the remaining groups split over the remaining accelerators
``k0..F-1`` by a linear greedy rule, group ``g`` to accelerator
``k0 + floor(frac_g (F - k0))`` with ``frac_g`` the share of the remaining latency up to the
middle of ``g`` (``(cum_g - w_g / 2) / total``), or the larger of that and the same share of
memory; the better of the two completions counts; both move on early where memory would
overflow. When both still break memory, a third completion fills each accelerator up to its
memory in order (feasible whenever any split of the rest is). Features, relative to the ideal balance ``total / F``: the max-load of the
stay and the next completion (``+4`` when infeasible), their difference, the max-load of the
closed accelerators so far, whether each completion is feasible and whether next is cheaper;
and the memory of the current accelerator (with group ``t``) and of the remaining groups over
the remaining accelerators, relative to ``maxSizePerFPGA``.

Both envs keep the paper's features (the first columns) so the baseline policy's inputs are a
prefix of these.
"""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import PENALTY, Problem
from scheduler.policy.completions import CompletionPricer, StageFold, Tail
from scheduler.policy.envs import HeterPSEnv, MaxLoadEnv

__all__ = ["FEATURE_SETS", "FEATURE_VERSIONS", "MEMO_LIMIT", "LookaheadHeterPSEnv", "LookaheadMaxLoadEnv", "HINT_STARTS",
           "exception_hint"]

#: Feature sets a policy may read: the paper's (``basic``, :mod:`scheduler.policy.envs`), this module's
#: (``lookahead``) and the type-slot view of the lookahead features (``slots``,
#: :mod:`scheduler.evaluation.type_slots`: HeterPS catalogs of 2-6 types; on max-load problems, ``lookahead``).
FEATURE_SETS = ("basic", "lookahead", "slots")
#: Version of each feature set's code: a saved policy records it, and one whose version (or
#: :data:`ralp_tf.model.LAYER_KINDS`) differs from the running code's is refused
#: (:mod:`scheduler.policy.shipped`). Bump a number whenever what its envs compute changes.
FEATURE_VERSIONS = {"basic": 2, "lookahead": 2, "slots": 2}


#: Prefixes memoised per env; the memo is emptied when it grows past this (bounded memory).
MEMO_LIMIT = 50_000


class _Memo:
    """Memoised completion features per prefix (rollouts of one problem share prefixes)."""

    _memo: dict[Any, np.ndarray]

    def clear_memo(self) -> None:
        """Forget every memoised prefix (e.g. so that a latency measurement computes them)."""
        self._memo.clear()


def _remember(memo: dict[tuple[int, ...], np.ndarray], key: tuple[int, ...], value: np.ndarray) -> None:
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[key] = value


class LookaheadHeterPSEnv(_Memo, HeterPSEnv):
    """:class:`~scheduler.policy.envs.HeterPSEnv` plus completion costs per candidate type (module
    docstring), priced by :class:`scheduler.policy.completions.CompletionPricer` from each rollout's fold
    of its closed runs (kept as runs close)."""

    BATCH_STATE = HeterPSEnv.BATCH_STATE + ("fold_units", "fold_price", "fold_rate", "fold_feasible", "fold_met")

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.base_dim = self.feature_dim
        self.feature_dim += 5 * self.A + 2
        self.hint = exception_hint(problem)
        self.pricer = CompletionPricer(problem)
        self.tails = [self._tails(t) for t in range(self.n)]
        self._memo: dict[bytes, np.ndarray] = {}

    def _tails(self, t: int) -> list[Tail]:
        """The completions of layers ``t+1..`` : the rest on each type, then as in the hint."""
        n = self.n
        out = [Tail(n - 1, s) for s in range(self.A)]
        if t + 1 < n:
            runs = [run for run in Problem.runs(self.hint[t + 1:])]
            (i, j, r), rest = runs[0], runs[1:]
            out.append(Tail(t + 1 + j, r, tuple((t + 1 + a, t + 1 + b, rr) for a, b, rr in rest)))
        return out

    def reset(self, batch: int) -> None:
        super().reset(batch)
        self.fold_units = np.zeros((batch, self.A), dtype=np.int64)
        self.fold_price = np.zeros(batch)
        self.fold_rate = np.full(batch, np.inf)
        self.fold_feasible = np.ones(batch, dtype=bool)
        self.fold_met = np.ones(batch, dtype=bool)

    def step(self, t: int, a: np.ndarray) -> None:
        for b in np.flatnonzero((self.prev >= 0) & (a != self.prev)):  # the run of row b closes at t - 1
            fold = StageFold(self.fold_units[b], float(self.fold_price[b]), float(self.fold_rate[b]),
                             bool(self.fold_feasible[b]), bool(self.fold_met[b]))
            self.pricer.add(fold, t - int(self.run_len[b]), t - 1, int(self.prev[b]))
            self.fold_price[b], self.fold_rate[b] = fold.price, fold.rate
            self.fold_feasible[b], self.fold_met[b] = fold.feasible, fold.met
        super().step(t, a)

    def completion_features(self, b: int, t: int) -> np.ndarray:
        """The ``5 T + 2`` lookahead features of rollout ``b`` at decision ``t`` (memoised by prefix)."""
        key = self.actions[b, :t].tobytes()
        got = self._memo.get(key)
        if got is not None:
            return got
        T = self.A
        closed = StageFold(self.fold_units[b].copy(), float(self.fold_price[b]), float(self.fold_rate[b]),
                           bool(self.fold_feasible[b]), bool(self.fold_met[b]))
        last = (t - int(self.run_len[b]), int(self.prev[b])) if t else None
        c = self.pricer.scores(closed, last, t, self.problem.allowed[t], self.tails[t])
        if c.shape[1] == 1:
            c = np.repeat(c, T + 1, axis=1)
        f = _lookahead_columns(c, T)
        _remember(self._memo, key, f)
        return f

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        x, mask = super().observe(t)
        extra = np.stack([self.completion_features(b, t) for b in range(len(self.prev))])
        return np.hstack([x, extra]).astype(np.float32), mask


def _lookahead_columns(c: np.ndarray, T: int) -> np.ndarray:
    """The ``5 T + 2`` columns of the completion scores ``c[r, s]`` (``s = T``: the hint's), per the
    module docstring."""
    c2, c1, ch = c.min(axis=1), np.diag(c[:, :T]), c[:, T]
    m = float(c2.min())
    m = m if math.isfinite(m) and m > 0 else 1.0
    f = np.zeros(5 * T + 2, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.log10(np.stack((c2, c1, ch)) / m)
    ratios = np.where(np.isnan(ratios) | (ratios == np.inf), 2.0, ratios)  # unknown or infinitely worse: the cap
    f[:3 * T] = np.clip(ratios, 0.0, 2.0).reshape(-1)
    f[3 * T:4 * T] = np.abs(c2 - m) <= 1e-9 * abs(m)  # c2 == m up to rounding
    f[4 * T:5 * T] = c2 < PENALTY
    f[5 * T] = np.clip(math.log10(m), -2.0, 2.0)
    f[5 * T + 1] = m < PENALTY
    return f


class LookaheadMaxLoadEnv(_Memo, MaxLoadEnv):
    """:class:`~scheduler.policy.rl.MaxLoadEnv` plus greedy-completion max-loads per action (module docstring)."""

    def __init__(self, problem: MaxLoadProblem) -> None:
        super().__init__(problem)
        p = problem
        self.base_dim = self.feature_dim
        self.feature_dim += 9
        # Bytes a group puts on an accelerator (groups no accelerator may hold go to a CPU).
        self.acc_size = p.group_size * (p.allowed[:, p.max_cpus] if p.max_cpus else 1.0)
        self._memo: dict[tuple[int, ...], np.ndarray] = {}

    def _devices_to_assignment(self, dev: np.ndarray) -> np.ndarray:
        p = self.problem
        out = dev + p.max_cpus
        if p.max_cpus:
            out[~p.allowed[np.arange(self.n), out]] = 0
        return out

    def _complete(self, prefix: np.ndarray, t: int, k0: int, load0: float, mem0: float) -> float:
        """Penalised max-load (relative to ``total / F``) of ``prefix`` (devices of groups < t),
        group ``t`` on accelerator ``k0`` already holding ``load0`` latency and ``mem0`` bytes
        (group ``t`` included), and the rest split over accelerators ``k0..F-1`` by the better of
        two greedy rules (module docstring): by cumulative latency, and by whichever of
        cumulative latency and cumulative memory is further ahead (so memory is spread too);
        either moves on early where an accelerator's memory would overflow."""
        p, n, F = self.problem, self.n, self.F
        dev = np.empty(n, dtype=np.int64)
        dev[:t] = prefix
        dev[t] = k0
        if t + 1 >= n:
            return float(p.penalized(self._devices_to_assignment(dev)))
        w, sz = p.group_fpga[t + 1:], self.acc_size[t + 1:]
        left = F - k0
        lat = (load0 + np.cumsum(w) - w / 2.0) / max(load0 + float(w.sum()), 1e-12)
        mem = (mem0 + np.cumsum(sz) - sz / 2.0) / max(mem0 + float(sz.sum()), 1e-12)
        best = np.inf
        for frac in (lat, np.maximum(lat, mem)):
            rest = k0 + np.minimum(left - 1, np.floor(frac * left).astype(np.int64))
            used = np.bincount(rest - k0, weights=sz, minlength=left)
            used[0] += mem0
            if (used > p.max_size * (1 + 1e-12)).any():  # redo it group by group, memory first
                cur, m = k0, mem0
                for j, (target, size) in enumerate(zip(rest.tolist(), sz.tolist())):
                    nxt = max(cur, target)
                    if nxt == cur and cur < F - 1 and m + size > p.max_size:
                        nxt = cur + 1
                    if nxt != cur:
                        cur, m = nxt, 0.0
                    m += size
                    rest[j] = cur
            dev[t + 1:] = rest
            best = min(best, float(p.penalized(self._devices_to_assignment(dev))))
        if best >= PENALTY:  # both break memory: fill each accelerator to its memory, in order
            cur, m = k0, mem0
            for j, size in enumerate(sz.tolist()):
                if cur < F - 1 and m + size > p.max_size:
                    cur, m = cur + 1, 0.0
                m += size
                dev[t + 1 + j] = cur
            best = min(best, float(p.penalized(self._devices_to_assignment(dev))))
        return best

    def completion_features(self, prefix: tuple[int, ...], t: int) -> np.ndarray:
        """The 9 lookahead features after the devices ``prefix`` of groups ``0..t-1`` (memoised)."""
        got = self._memo.get(prefix)
        if got is not None:
            return got
        p = self.problem
        pre = np.asarray(prefix, dtype=np.int64)
        k = int(pre[-1]) if t else 0
        mine = pre == k
        load = float(p.group_fpga[:t][mine].sum()) if t else 0.0
        mem = float(self.acc_size[:t][mine].sum()) if t else 0.0
        g, size = float(p.group_fpga[t]), float(self.acc_size[t])
        stay = self._complete(pre, t, k, load + g, mem + size)
        nxt = self._complete(pre, t, k + 1, g, size) if (t > 0 and k < self.F - 1) else stay + 4.0
        closed = 0.0
        if t:
            ev = p.evaluate(self._devices_to_assignment(np.r_[pre, np.full(self.n - t, k)]))
            loads = ev.loads[p.max_cpus:]
            closed = float(loads[:k].max()) / self.target if k else 0.0
        remaining = float(self.acc_size[t:].sum()) / (max(self.F - k, 1) * p.max_size)
        f = np.array([min(stay, 10.0), min(nxt, 10.0), np.clip(nxt - stay, -4.0, 4.0), min(closed, 10.0),
                      stay < PENALTY, nxt < PENALTY, float(nxt < stay), min((mem + size) / p.max_size, 4.0),
                      min(remaining, 4.0)], dtype=np.float32)
        _remember(self._memo, prefix, f)
        return f

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        x, mask = super().observe(t)
        extra = np.stack([self.completion_features(tuple(int(v) for v in row[:t]), t) for row in self.dev])
        return np.hstack([x, extra]).astype(np.float32), mask


#: One-exception placements a hint extends with a second exception block.
HINT_STARTS = 10

_HINTS: "weakref.WeakKeyDictionary[Problem, np.ndarray]" = weakref.WeakKeyDictionary()


def exception_hint(problem: Problem, max_block: int = 3, starts: int = HINT_STARTS) -> np.ndarray:
    """A cheap whole-model hint the completions can follow: the best (penalised score)
    placement of the form "every layer on type ``s`` except up to two blocks of
    ``1..max_block`` consecutive layers": all one-exception placements
    (``T^2 n max_block`` evaluations), then the best second block added to each of the
    ``starts`` best of them (``starts T n max_block`` more). Once per problem (cached)."""
    got = _HINTS.get(problem)
    if got is not None:
        return got
    n, T = problem.num_decisions, problem.num_choices

    def blocks() -> Any:
        for i in range(n):
            for w in range(1, max_block + 1):
                if i + w > n:
                    break
                yield i, w

    scored: dict[tuple[int, ...], float] = {}
    for s in range(T):
        base = np.full(n, s, dtype=np.int64)
        scored[tuple(base.tolist())] = problem.penalized(base)
        for u in range(T):
            if u == s:
                continue
            for i, w in blocks():
                cand = base.copy()
                cand[i:i + w] = u
                scored.setdefault(tuple(cand.tolist()), problem.penalized(cand))
    ranked = sorted(scored.items(), key=lambda kv: (kv[1], kv[0]))
    best_key, best_score = ranked[0]
    for start, _ in ranked[:starts]:
        base = np.asarray(start, dtype=np.int64)
        for u in range(T):
            for i, w in blocks():
                if (base[i:i + w] == u).all():
                    continue
                cand = base.copy()
                cand[i:i + w] = u
                score = problem.penalized(cand)
                if score < best_score:
                    best_key, best_score = tuple(cand.tolist()), score
    hint = np.asarray(best_key, dtype=np.int64)
    _HINTS[problem] = hint
    return hint
