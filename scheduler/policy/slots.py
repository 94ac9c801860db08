r"""One HeterPS placement policy for catalogs of 2 to 6 resource types.

The paper's features (:class:`scheduler.policy.rl.HeterPSEnv`) and the lookahead ones
(:class:`scheduler.policy.policy_features.LookaheadHeterPSEnv`) have one block per resource type, and
one action per type, so their width depends on the catalog. Here the policy reads **type
slots** instead: :data:`MAX_TYPES` = 6 slots, each holding one type of the catalog or nothing.

**Slots.** A :class:`SlotView` of a problem puts type ``r`` of its catalog in slot
``slot_of_type[r]`` (injective into ``0..5``; the catalog's order, ``r -> r``, unless given, and
a random injection during training). Actions are slots; :meth:`SlotView.types` maps them back.

**Features** (:class:`SlotEnv`, per decision, width independent of the catalog): the inner
env's per-layer and global columns (layer kind, log FLOPs/parameters/activations, position,
size, fan-in/out, skip; "no previous decision", run length, run need; lookahead ``log10(m)`` and
``[m < 4]``), then per slot ``s``: ``[present, is_ps, the 11 paper features of its type, previous
decision == s, the 5 lookahead features of its type]``, all zero for an absent slot (the
"present" flag tells an absent slot from a present one whose features happen to be 0). The
mask allows only present slots that the layer may use, and :class:`scheduler.policy.rl.LSTMPolicy`
sets masked logits to ``-1e9``, so an absent slot is never chosen (greedy, sampled or beam).

**Permutation.** A placement's cost does not depend on the order of the catalog's types, so
the exact optimum of a permuted catalog is the same cost (:func:`permuted_problem`, tested).
Training draws a fresh random slot injection per training problem, so the policy cannot tie a
decision to a slot index and must read the slot's features; applying it uses the catalog order.

The training catalogs and the evaluation of such a policy: :mod:`scheduler.evaluation.type_slots`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ralp_tf.model import LAYER_KINDS
from scheduler.core.errors import ProblemError
from scheduler.core.problem import Problem
from scheduler.core.resources import Catalog
from scheduler.policy.envs import HeterPSEnv
from scheduler.policy.policy_features import FEATURE_SETS, LookaheadHeterPSEnv

__all__ = ["MAX_TYPES", "MIN_TYPES", "PAPER_PER_TYPE", "LOOKAHEAD_PER_TYPE", "permuted_problem", "SlotView",
           "slot_feature_dim", "SlotEnv"]

#: Type slots a policy reads: catalogs of 2..MAX_TYPES types.
MAX_TYPES = 6
MIN_TYPES = 2
#: Per-type columns of :class:`scheduler.policy.rl.HeterPSEnv` (its docstring lists them).
PAPER_PER_TYPE = 11
#: Per-type columns of :class:`scheduler.policy.policy_features.LookaheadHeterPSEnv` (``5 T + 2`` in all).
LOOKAHEAD_PER_TYPE = 5


def permuted_problem(problem: Problem, order: Sequence[int]) -> Problem:
    """``problem`` with its catalog's types in the order ``order`` (type ``order[i]`` becomes
    type ``i``): compute and allowed columns permuted likewise. The same layers, so every
    placement ``a`` of the original costs what ``inverse(a)`` costs here."""
    order = [int(x) for x in order]
    if sorted(order) != list(range(problem.num_choices)):
        raise ProblemError(f"order must be a permutation of 0..{problem.num_choices - 1}, got {order}")
    cat = Catalog(problem.catalog.name, tuple(problem.catalog.types[i] for i in order))
    return problem.with_types(catalog=cat, compute=problem.compute[:, order], allowed=problem.allowed[:, order])


# ----------------------------------------------------------------------------- slots
class SlotView:
    """A HeterPS problem whose choices are :data:`MAX_TYPES` slots (module docstring).

    ``slot_of_type[r]``: the slot of catalog type ``r`` (default: ``r``). A slot placement ``a``
    (one slot per layer) is the type placement :meth:`types` ``(a)``; :meth:`objective`,
    :meth:`penalized` and :meth:`evaluate` price it on the problem."""

    def __init__(self, problem: Problem, slot_of_type: Sequence[int] | None = None) -> None:
        if not isinstance(problem, Problem):
            raise ProblemError(f"type slots read HeterPS problems, got {type(problem).__name__}")
        T = problem.num_choices
        if not MIN_TYPES <= T <= MAX_TYPES:
            raise ProblemError(f"problem {problem.name!r} has {T} resource types; the type-slot policy reads "
                               f"catalogs of {MIN_TYPES}..{MAX_TYPES} types")
        slots = list(range(T)) if slot_of_type is None else [int(s) for s in slot_of_type]
        if len(slots) != T or len(set(slots)) != T or min(slots) < 0 or max(slots) >= MAX_TYPES:
            raise ProblemError(f"slot_of_type must give {T} distinct slots in 0..{MAX_TYPES - 1}, got {slots}")
        self.problem = problem
        self.name = problem.name
        self.slot_of_type = np.asarray(slots, dtype=np.int64)
        self.type_of_slot = np.full(MAX_TYPES, -1, dtype=np.int64)
        self.type_of_slot[self.slot_of_type] = np.arange(T)
        self.present = self.type_of_slot >= 0
        self.allowed = np.zeros((problem.num_decisions, MAX_TYPES), dtype=bool)
        self.allowed[:, self.slot_of_type] = problem.allowed

    @property
    def num_decisions(self) -> int:
        return self.problem.num_decisions

    @property
    def num_choices(self) -> int:
        return MAX_TYPES

    def types(self, slots: Any) -> np.ndarray:
        """The type placement of the slot placement ``slots``; an absent slot is an error."""
        a = np.asarray(slots, dtype=np.int64)
        if ((a < 0) | (a >= MAX_TYPES)).any() or not self.present[a].all():
            raise ProblemError(f"slot placement of {self.name!r} uses an empty slot; present slots: "
                               f"{np.flatnonzero(self.present).tolist()}")
        return self.type_of_slot[a]

    def slots(self, types: Any) -> np.ndarray:
        """The slot placement of the type placement ``types``."""
        return self.slot_of_type[np.asarray(types, dtype=np.int64)]

    def evaluate(self, slots: Any) -> Any:
        return self.problem.evaluate(self.types(slots))

    def objective(self, slots: Any) -> float:
        return self.problem.objective(self.types(slots))

    def penalized(self, slots: Any) -> float:
        return self.problem.penalized(self.types(slots))

    def scores(self, slots: Any) -> tuple[float, float]:
        return self.problem.scores(self.types(slots))


def _inner_layout(T: int, lookahead: bool) -> tuple[list[int], list[list[int]], int, int]:
    """Column indices of an inner env's observation with ``T`` types: the per-layer/global
    columns, the per-type columns (one list per type, without the previous-decision one-hot),
    the one-hot's first column and the total width (see :class:`scheduler.policy.rl.HeterPSEnv`)."""
    K = len(LAYER_KINDS)
    head = K + 3
    static = head + PAPER_PER_TYPE * T + 5
    glob = list(range(head)) + list(range(head + PAPER_PER_TYPE * T, static))
    onehot = static
    glob += [onehot + T] + list(range(onehot + T + 1, onehot + T + 4))  # "no previous decision", dyn
    per_type = [list(range(head + PAPER_PER_TYPE * r, head + PAPER_PER_TYPE * (r + 1))) for r in range(T)]
    width = static + T + 4
    if lookahead:
        la = width
        for r in range(T):
            per_type[r] += [la + j * T + r for j in range(LOOKAHEAD_PER_TYPE)]
        glob += [la + LOOKAHEAD_PER_TYPE * T, la + LOOKAHEAD_PER_TYPE * T + 1]
        width += LOOKAHEAD_PER_TYPE * T + 2
    return glob, per_type, onehot, width


def slot_feature_dim(features: str = "lookahead") -> int:
    """The observation width of :class:`SlotEnv` (the same for every catalog of 2..6 types)."""
    lookahead = features == "lookahead"
    glob, per_type, _, _ = _inner_layout(MIN_TYPES, lookahead)
    return len(glob) + MAX_TYPES * (2 + len(per_type[0]) + 1)


class SlotEnv:
    """The decision env of a :class:`SlotView` (module docstring): an inner
    :class:`~scheduler.policy.rl.HeterPSEnv` (``basic``) or
    :class:`~scheduler.policy.policy_features.LookaheadHeterPSEnv` (``lookahead``) on the problem's own
    types, its observation regathered into :data:`MAX_TYPES` slots; actions are slots."""

    def __init__(self, view: SlotView, features: str = "lookahead") -> None:
        if features not in FEATURE_SETS:
            raise ProblemError(f"unknown feature set {features!r}; use one of {', '.join(FEATURE_SETS)}")
        self.view = view
        self.problem = view
        p = view.problem
        self.inner = LookaheadHeterPSEnv(p) if features == "lookahead" else HeterPSEnv(p)
        T = p.num_choices
        glob, per_type, onehot, width = _inner_layout(T, features == "lookahead")
        if width != self.inner.feature_dim:
            raise AssertionError(f"inner env width {self.inner.feature_dim} != layout {width}: "
                                 "update scheduler.policy.slots._inner_layout")
        one, zero = width, width + 1  # two constant columns appended to the inner observation
        slot_w = 2 + len(per_type[0]) + 1
        src = list(glob)
        for s in range(MAX_TYPES):
            r = int(view.type_of_slot[s])
            if r < 0:
                src += [zero] * slot_w
                continue
            is_ps = one if p.catalog.types[r].role == "ps" else zero
            src += [one, is_ps, *per_type[r][:PAPER_PER_TYPE], onehot + r, *per_type[r][PAPER_PER_TYPE:]]
        self.src = np.asarray(src, dtype=np.int64)
        self.n, self.A = self.inner.n, MAX_TYPES
        self.feature_dim = len(src)
        self.initial_bias = np.zeros(MAX_TYPES)

    def reset(self, batch: int) -> None:
        self.inner.reset(batch)

    def select(self, rows: np.ndarray) -> None:
        self.inner.select(rows)

    def clear_memo(self) -> None:
        clear = getattr(self.inner, "clear_memo", None)
        if clear is not None:
            clear()

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        x, m = self.inner.observe(t)
        B = len(x)
        ext = np.hstack([x, np.ones((B, 1), np.float32), np.zeros((B, 1), np.float32)])
        mask = np.zeros((B, MAX_TYPES), dtype=bool)
        mask[:, self.view.slot_of_type] = m
        return ext[:, self.src], mask

    def step(self, t: int, a: np.ndarray) -> None:
        self.inner.step(t, self.view.types(a))

    def assignments(self) -> np.ndarray:
        return self.view.slots(self.inner.assignments())
