r"""HeterPS placement problem: layers x resource types, constraints, cost and provisioning.

A :class:`Problem` holds a layer graph (from :func:`ralp_tf.profile` or built by hand), a
:class:`~scheduler.core.resources.Catalog` of :class:`~scheduler.core.resources.ResourceType` s and
:class:`~scheduler.core.resources.Constraints`. A placement (an
*assignment*) gives every layer one resource type. Solvers search assignments; this module
evaluates them. Every formula below is what :meth:`Problem.evaluate` computes.

Notation. Layers ``l = 0..L-1`` in the profile's topological order (model inputs are not
decisions: reading input data is free on every type). ``b`` is the per-unit batch size.
For layer ``l``: ``f_l`` forward FLOPs per sample, ``a_l`` output bytes per sample,
``P_l`` parameter bytes (trainable part ``P^t_l``). For type ``r``: sustained FLOP rate
``F_r``, per-layer overhead ``o_r`` (seconds per layer per batch: kernel launches, op
dispatch), link rate ``B_r`` (bits/s, full duplex), memory per unit ``M_r``, price ``p_r``
($/hour per unit), at most ``U_r`` units, role ``worker`` or ``ps`` (from the device template).

**Compute.** ``c(l, r) = layer_seconds(l, r) + o_r`` with ralp_tf's cost model
(``3 f_l b / F_r``: forward + backward ~ 3x forward; a measured time where the profile has one
and ``r`` is a CPU type).

**Stages.** Consecutive layers (in the fixed layer order) on the same type form a stage
``s = [i..j]`` of type ``r``. Each stage runs on its own ``k_s`` units of its type.

**Stage traffic per unit per batch.** A tensor (a layer's output) crosses a stage boundary
when it is produced inside the stage and consumed outside, or the reverse; each tensor is
sent once per stage that consumes it. With ``g_u = 1`` when a gradient flows back into
tensor ``u`` (``u`` has trainable parameters at or before it):

* received: ``R_s = sum_{u outside, consumed inside} b a_u + sum_{u inside, consumed outside} g_u b a_u``
  (forward inputs, and the gradients of the stage's outputs);
* sent: ``S_s = sum_{u inside, consumed outside} b a_u + sum_{u outside, consumed inside} g_u b a_u``;
* the link time is ``transfer_seconds(max(received, sent) + sync, B_r)`` (full duplex).

**Worker stages** run data-parallel over ``k`` units, each on its own batch of ``b``, and
synchronise parameters by ring all-reduce:
``sync(k) = ring_allreduce_bytes(k, P^t_dense + sum_emb min(P_l, k b a_l))`` (an embedding only
syncs the rows its ``k`` batches touched; no sync at ``k = 1``).
``T_s(k) = sum_l c(l, r) + transfer_seconds(max(R_s, S_s) + sync(k), B_r)`` and the stage rate is
``X_s(k) = k b / T_s(k)`` samples/s.

**PS stages** keep their variables where they compute (RALP): the stage's layers are sharded,
whole, over its ``k`` units (no replicas, no sync) and every batch visits all of them, so the
busiest unit bounds the rate:
``T_s(k) = max(sum_l c(l, r) / k, max_l c(l, r)) + transfer_seconds(max(R_s, S_s), B_r) / k`` and
``X_s(k) = b / T_s(k)`` (an ideal balance of layers over units, never below the largest layer).

**Memory per unit.** ``m_l = 4 P_l`` (weights, gradient, two optimizer slots) ``+ 2 b a_l``
(activation kept for backward, and its gradient). Worker: ``sum_{l in s} m_l <= M_r``. PS:
``sum m_l / k <= M_r`` and ``max m_l <= M_r``.

**Provisioning.** ``k_s`` is the smallest ``k`` (memory permitting) with
``X_s(k) >= X_min``; when no ``k <= U_r`` reaches it the stage gets ``U_r`` units and the
constraint is missed. Units per type ``n_r = sum_{s of type r} k_s`` must be ``<= U_r``.

**Throughput** ``X = min_s X_s(k_s)`` (a pipeline runs at its slowest stage).

**Cost** per million samples: ``cost = (sum_s k_s p_{r_s} / 3600) * 10^6 / X`` dollars, i.e.
``sum_i k_i x price_i x time`` with ``time = 10^6 / X`` seconds.
**Budget** (optional): ``sum_s k_s p_{r_s} <= budget`` dollars per hour.

A schedule is *feasible* when memory, unit caps and budget hold; it *meets the constraint*
when also ``X >= X_min``. The objective solvers minimise is ``cost`` over feasible schedules
that meet the constraint; :meth:`Problem.penalized` adds a penalty to the others so that
search methods (random, BO, RL) get a finite score for every assignment.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ralp_tf.model import LAYER_KINDS, ModelProfile, gradient_flows
from ralp_tf.plan import layer_seconds
from scheduler.core.encoding import decode_choices, encode_choices
from scheduler.core.errors import CatalogError, InfeasibleError, MemoryLimitError, ProblemError
from scheduler.core.resources import Catalog, Constraints
from scheduler.core.segments import build_segment_tables

__all__ = ["PARAM_MEMORY_FACTOR", "ACTIVATION_MEMORY_FACTOR", "PENALTY", "Stage", "Evaluation", "Problem",
           "DEFAULT_THROUGHPUT_FRACTION", "round_down_2sig", "default_throughput"]

#: Bytes of memory per parameter byte: weights, gradient and two optimizer slots (Adam).
PARAM_MEMORY_FACTOR = 4.0
#: Bytes of memory per activation byte: the activation kept for backward and its gradient.
ACTIVATION_MEMORY_FACTOR = 2.0
#: Penalty scale of :meth:`Problem.penalized` for schedules that miss a constraint.
PENALTY = 4.0


@dataclasses.dataclass(frozen=True)
class Stage:
    """A run of consecutive layers ``first..last`` on one type, provisioned with ``units``."""

    first: int
    last: int
    type_index: int
    units: int
    rate: float
    memory_ok: bool


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What a placement costs. ``objective`` is ``cost`` when feasible and met, else ``inf``."""

    cost: float
    throughput: float
    price_per_hour: float
    units: dict[str, int]
    stages: tuple[Stage, ...]
    feasible: bool
    constraint_met: bool
    reason: str

    @property
    def objective(self) -> float:
        return self.cost if (self.feasible and self.constraint_met) else math.inf


def _check_array(name: str, arr: np.ndarray, fix: str) -> None:
    if np.isnan(arr).any():
        raise ProblemError(f"{name} contains NaN; {fix}")
    if (arr < 0).any():
        raise ProblemError(f"{name} contains negative values (first at index {np.argwhere(arr < 0)[0].tolist()}); "
                           f"{fix}")


def _per_layer(x: Any, what: str, n: int) -> np.ndarray:
    """``x`` as ``n`` finite numbers >= 0 (zeros when ``None``)."""
    if x is None:
        return np.zeros(n, dtype=np.float64)
    try:
        a = np.asarray(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ProblemError(f"{what} must be numbers, one per layer") from None
    if a.shape != (n,):
        raise ProblemError(f"{what} has {a.size} entries for {n} layers")
    _check_array(what, a, f"give a finite value >= 0 per layer for {what}")
    if np.isinf(a).any():
        raise ProblemError(f"{what} contains infinity; give a finite value per layer")
    return a


def _checked_edges(edges: Iterable[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Distinct ``(producer, consumer)`` pairs inside ``0..n-1`` with producer < consumer, sorted."""
    out = set()
    for e in edges:
        u, v = int(e[0]), int(e[1])
        if not (0 <= u < n and 0 <= v < n):
            raise ProblemError(f"edge {e!r} names a layer index outside 0..{n - 1}")
        if u >= v:
            raise ProblemError(f"edge {e!r} goes backwards; layers must be in topological order "
                               "(producer index < consumer index)")
        out.add((u, v))
    return sorted(out)


class Problem:
    """A HeterPS placement problem (see the module docstring for every formula).

    Build it with :meth:`from_profile`, or directly from per-layer arrays (``compute[l, r]``
    seconds per batch per unit, ``None`` to derive it from ``flops``). ``edges`` are
    ``(producer, consumer)`` layer indices with producer < consumer. Which layers may run on a
    PS-role type: ``allowed`` when given, else ``ps_refusal`` (one string per layer, ``""`` when
    the layer may compute on a PS, as in :class:`ralp_tf.model.LayerProfile`), else every layer
    but model inputs. The constructor validates; :func:`scheduler.core.segments.build_segment_tables`
    builds the stage tables.
    """

    objective_name = "cost"

    def __init__(self, name: str, layer_names: Sequence[str], kinds: Sequence[str], catalog: Catalog,
                 constraints: Constraints | None = None, *, batch_size: int = 32,
                 flops: Sequence[float] | None = None, compute: Any = None,
                 param_bytes: Sequence[float] | None = None, trainable_bytes: Sequence[float] | None = None,
                 output_bytes: Sequence[float] | None = None, edges: Iterable[tuple[int, int]] = (),
                 allowed: Any = None, ps_refusal: Sequence[str] | None = None, check: bool = True) -> None:
        if not isinstance(catalog, Catalog):
            raise CatalogError(f"expected a scheduler Catalog, got {type(catalog).__name__}")
        self.name = str(name)
        self.catalog = catalog
        self.constraints = constraints or Constraints()
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ProblemError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = int(batch_size)
        self.layer_names = [str(n) for n in layer_names]
        n = len(self.layer_names)
        if n == 0:
            raise ProblemError(f"problem {name!r} has no layers to place; give a model with at least one layer")
        if len(set(self.layer_names)) != n:
            raise ProblemError(f"problem {name!r} has duplicate layer names")
        self.kinds = [str(k) for k in kinds]
        if len(self.kinds) != n:
            raise ProblemError(f"kinds has {len(self.kinds)} entries for {n} layers")
        self.flops = _per_layer(flops, "flops", n)
        self.param_bytes = _per_layer(param_bytes, "param_bytes", n)
        self.trainable_bytes = _per_layer(trainable_bytes, "trainable_bytes", n) if trainable_bytes is not None \
            else self.param_bytes.copy()
        self.output_bytes = _per_layer(output_bytes, "output_bytes", n)
        self.compute = self._compute_table(compute)
        self.allowed = self._allowed_matrix(allowed, ps_refusal)
        self.edges = _checked_edges(edges, n)
        self._derive()
        if check:
            self.check_feasible()

    def _compute_table(self, compute: Any) -> np.ndarray:
        """``compute[l, r]`` as given (validated), or ``3 f_l b / F_r + o_r``."""
        n, T = len(self.layer_names), len(self.catalog)
        if compute is None:
            tasks = [t.task() for t in self.catalog.types]
            table = np.array([[3.0 * self.flops[l] * self.batch_size / tk.flops + rt.overhead_s
                               for tk, rt in zip(tasks, self.catalog.types)] for l in range(n)])
        else:
            try:
                table = np.asarray(compute, dtype=np.float64)
            except (TypeError, ValueError):
                raise ProblemError("compute must be a numeric [layers x types] table of seconds") from None
            if table.shape != (n, T):
                raise ProblemError(f"compute must have shape (layers, types) = ({n}, {T}), got {table.shape}")
        _check_array("compute times", table, "give finite seconds >= 0 for every layer and type")
        if np.isinf(table).any():
            raise ProblemError("compute times contain infinity; mark impossible (layer, type) pairs with "
                               "'allowed' instead")
        return table

    def _allowed_matrix(self, allowed: Any, ps_refusal: Sequence[str] | None) -> np.ndarray:
        """``allowed[l, r]`` (class docstring); every layer must be allowed somewhere."""
        n, T = len(self.layer_names), len(self.catalog)
        if allowed is None:
            if ps_refusal is None:
                may_ps = [k != "input" for k in self.kinds]
            else:
                refusal = [str(x) for x in ps_refusal]
                if len(refusal) != n:
                    raise ProblemError(f"ps_refusal has {len(refusal)} entries for {n} layers")
                may_ps = [not x for x in refusal]
            matrix = np.array([[rt.role == "worker" or ok for rt in self.catalog.types] for ok in may_ps], dtype=bool)
        else:
            matrix = np.asarray(allowed, dtype=bool)
            if matrix.shape != (n, T):
                raise ProblemError(f"allowed must have shape ({n}, {T}), got {matrix.shape}")
        bad = np.where(~matrix.any(axis=1))[0]
        if bad.size:
            raise ProblemError(f"layer {self.layer_names[bad[0]]!r} is allowed on no resource type; add a worker "
                               "type to the catalog")
        return matrix

    def _derive(self) -> None:
        """Graph views, the gradient-flow flags (:func:`ralp_tf.model.gradient_flows`, the rule the
        PSS cost model uses), memory per layer and the segment tables."""
        n = len(self.layer_names)
        self.consumers: list[list[int]] = [[] for _ in range(n)]
        preds: list[list[int]] = [[] for _ in range(n)]
        for u, v in self.edges:
            self.consumers[u].append(v)
            preds[v].append(u)
        self.grad = np.array(gradient_flows([bool(x > 0) for x in self.trainable_bytes], preds), dtype=bool)
        self.sparse = np.array([k == "embedding" for k in self.kinds])
        self.memory = PARAM_MEMORY_FACTOR * self.param_bytes + ACTIVATION_MEMORY_FACTOR * self.batch_size * \
            self.output_bytes
        tables = build_segment_tables(self)
        self.seg_units, self.seg_rate, self.seg_price = tables.units, tables.rate, tables.price
        self.seg_max_rate, self.seg_usable, self.seg_ok = tables.max_rate, tables.usable, tables.ok
        self.seg_memory_ok = tables.usable
        self._ref: float | None = None

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_profile(cls, profile: ModelProfile, catalog: Catalog, constraints: Constraints | None = None,
                     *, name: str | None = None, check: bool = True) -> "Problem":
        """A problem over ``profile``'s non-input layers; compute from ralp_tf's ``layer_seconds``;
        a layer may use a PS-role type when its profile's ``ps_refusal`` is empty."""
        if not isinstance(profile, ModelProfile):
            raise ProblemError(f"expected a ralp_tf.ModelProfile, got {type(profile).__name__}")
        layers = profile.compute_layers
        if not layers:
            raise ProblemError(f"model {profile.model_name!r} has no layers besides its inputs")
        index = {l.name: i for i, l in enumerate(layers)}
        tasks = [t.task() for t in catalog.types]
        compute = [[layer_seconds(l, tk, profile.batch_size) + rt.overhead_s for tk, rt in zip(tasks, catalog.types)]
                   for l in layers]
        edges = [(index[u], index[l.name]) for l in layers for u in l.inbound if u in index]
        for l in layers:
            if l.kind not in LAYER_KINDS:
                raise ProblemError(f"layer {l.name!r} has unknown kind {l.kind!r}")
        return cls(name or profile.model_name, [l.name for l in layers], [l.kind for l in layers], catalog,
                   constraints, batch_size=profile.batch_size, flops=[l.flops for l in layers], compute=compute,
                   param_bytes=[l.param_bytes for l in layers],
                   trainable_bytes=[l.trainable_param_bytes for l in layers],
                   output_bytes=[l.output_bytes for l in layers], edges=edges,
                   ps_refusal=[l.ps_refusal for l in layers], check=check)

    def with_constraints(self, constraints: Constraints, *, check: bool = True) -> "Problem":
        """The same layers and catalog under other constraints."""
        return self._with(constraints=constraints, check=check)

    def with_types(self, *, catalog: Catalog | None = None, compute: Any = None, allowed: Any = None,
                   check: bool = True) -> "Problem":
        """The same layers and constraints with another catalog, compute table (seconds per layer
        and type) and/or allowed matrix, each defaulting to this problem's; their columns are the
        catalog's types."""
        return self._with(catalog=catalog, compute=compute, allowed=allowed, check=check)

    def _with(self, *, catalog: Catalog | None = None, constraints: Constraints | None = None, compute: Any = None,
              allowed: Any = None, check: bool = True) -> "Problem":
        return Problem(self.name, self.layer_names, self.kinds, self.catalog if catalog is None else catalog,
                       self.constraints if constraints is None else constraints, batch_size=self.batch_size,
                       flops=self.flops,
                       compute=self.compute if compute is None else compute, param_bytes=self.param_bytes,
                       trainable_bytes=self.trainable_bytes, output_bytes=self.output_bytes, edges=self.edges,
                       allowed=self.allowed if allowed is None else allowed, check=check)

    # ----------------------------------------------------------------- shape
    @property
    def num_decisions(self) -> int:
        return len(self.layer_names)

    @property
    def num_choices(self) -> int:
        return len(self.catalog)

    @property
    def decision_names(self) -> list[str]:
        return list(self.layer_names)

    # ----------------------------------------------------------------- evaluation
    @staticmethod
    def runs(assignment: Sequence[int]) -> list[tuple[int, int, int]]:
        """Maximal runs ``(first, last, type)`` of equal consecutive entries."""
        out = []
        a = list(assignment)
        start = 0
        for l in range(1, len(a) + 1):
            if l == len(a) or a[l] != a[start]:
                out.append((start, l - 1, int(a[start])))
                start = l
        return out

    def _as_assignment(self, assignment: Any) -> np.ndarray:
        a = np.asarray(assignment, dtype=np.int64).reshape(-1)
        if a.shape != (self.num_decisions,):
            raise ProblemError(f"an assignment gives one type index per layer ({self.num_decisions}), got {a.size}")
        if (a < 0).any() or (a >= self.num_choices).any():
            raise ProblemError(f"assignment type indices must be in 0..{self.num_choices - 1}")
        return a

    def evaluate(self, assignment: Any) -> Evaluation:
        """Provision and price ``assignment`` (type index per layer), per the module docstring."""
        a = self._as_assignment(assignment)
        stages = []
        units = np.zeros(self.num_choices, dtype=np.int64)
        reasons = []
        feasible, met = True, True
        for i, j, r in self.runs(a):
            if not self.allowed[i:j + 1, r].all():
                bad = i + int(np.argmin(self.allowed[i:j + 1, r]))
                feasible = False
                reasons.append(f"layer {self.layer_names[bad]!r} cannot run on {self.catalog.types[r].name}")
                stages.append(Stage(i, j, r, self.catalog.types[r].max_units, 0.0, False))
                units[r] += self.catalog.types[r].max_units
                continue
            mem_ok = bool(self.seg_memory_ok[i, j, r])
            if not mem_ok:
                feasible = False
                reasons.append(f"layers {self.layer_names[i]}..{self.layer_names[j]} exceed the memory of "
                               f"{self.catalog.types[r].name}")
                k, rate = self.catalog.types[r].max_units, 0.0
            else:
                k, rate = int(self.seg_units[i, j, r]), float(self.seg_rate[i, j, r])
                if not self.seg_ok[i, j, r]:
                    met = False
            stages.append(Stage(i, j, r, k, rate, mem_ok))
            units[r] += k
        for r, rt in enumerate(self.catalog.types):
            if units[r] > rt.max_units:
                feasible = False
                reasons.append(f"needs {units[r]} units of {rt.name}, the catalog has {rt.max_units}")
        price = float(sum(s.units * self.catalog.types[s.type_index].price_per_hour for s in stages))
        throughput = min(s.rate for s in stages)
        if self.constraints.budget_per_hour is not None and price > self.constraints.budget_per_hour * (1 + 1e-12):
            feasible = False
            reasons.append(f"costs ${price:.2f}/h, over the budget ${self.constraints.budget_per_hour:.2f}/h")
        if throughput < self.constraints.min_throughput * (1 - 1e-12):
            met = False
            reasons.append(f"throughput {throughput:.4g} samples/s < {self.constraints.min_throughput:.4g}")
        cost = price / 3600.0 * 1e6 / throughput if throughput > 0 else math.inf
        return Evaluation(cost=cost, throughput=throughput, price_per_hour=price,
                          units={rt.name: int(units[r]) for r, rt in enumerate(self.catalog.types) if units[r]},
                          stages=tuple(stages), feasible=feasible, constraint_met=met, reason="; ".join(reasons))

    def objective(self, assignment: Any) -> float:
        return self.evaluate(assignment).objective

    def penalized(self, assignment: Any) -> float:
        """A finite score, lower is better: ``cost / scale`` when feasible and met, else
        ``PENALTY * (1 + shortfall + infeasibility) + min(cost / scale, 10)``, where shortfall is
        the relative throughput miss and infeasibility grows with the units over the per-type caps
        (``sum_r max(0, n_r - U_r) / U_r``, at most 5, plus 0.5; 1 for memory or budget violations).
        ``scale`` is :meth:`reference_cost`, so good schedules score near 1."""
        return self._penalty(self.evaluate(assignment))

    def scores(self, assignment: Any) -> tuple[float, float]:
        """``(objective, penalized)`` of ``assignment`` from one evaluation: the key every search
        ranks placements by."""
        ev = self.evaluate(assignment)
        return ev.objective, self._penalty(ev)

    def _penalty(self, ev: Evaluation) -> float:
        scale = self.reference_cost()
        if ev.feasible and ev.constraint_met:
            return ev.cost / scale
        xmin = self.constraints.min_throughput
        short = max(0.0, 1.0 - ev.throughput / xmin) if xmin > 0 else 0.0
        cost_term = min(ev.cost / scale, 10.0) if math.isfinite(ev.cost) else 10.0
        over = sum(max(0, ev.units.get(t.name, 0) - t.max_units) / t.max_units for t in self.catalog.types)
        infeasible = 0.0 if ev.feasible else (min(over, 5.0) + (1.0 if over == 0 else 0.5))
        return PENALTY * (1.0 + short + infeasible) + cost_term

    def reference_cost(self) -> float:
        """A scale for costs: the cheapest single-type schedule that is feasible, else the cheapest
        cost of any single segment-wide provisioning (always finite and positive)."""
        if self._ref is None:
            best = math.inf
            n = self.num_decisions
            for r in range(self.num_choices):
                if self.seg_usable[0, n - 1, r]:
                    ev = self.evaluate(np.full(n, r))
                    if math.isfinite(ev.cost) and ev.cost > 0:
                        best = min(best, ev.cost)
            if not math.isfinite(best):
                fastest = int(np.argmax([t.flops for t in self.catalog.types]))
                ev = self.evaluate(np.where(self.allowed[:, fastest], fastest, np.argmax(self.allowed, axis=1)))
                best = ev.cost if math.isfinite(ev.cost) and ev.cost > 0 else 1.0
            self._ref = best
        return self._ref

    # ----------------------------------------------------------------- feasibility
    def best_throughput(self) -> float:
        """Upper bound on the throughput of any placement: the bottleneck DP over segments with
        every stage at its most units (ignores units shared between stages of one type)."""
        return self.bottleneck(self.seg_max_rate)

    def bottleneck(self, rate: np.ndarray) -> float:
        """``max`` over segmentations (adjacent types different) of ``min`` stage ``rate[i, j, r]``."""
        n, T = self.num_decisions, self.num_choices
        f = np.zeros((n + 1, T))  # f[j, r]: best min-rate over layers [0..j-1], last stage type r
        g = np.full((n + 1, T), np.inf)  # g[i, r]: best over prefixes [0..i-1] ending in type != r
        for j in range(n):
            vals = np.minimum(g[: j + 1, :], rate[: j + 1, j, :])
            f[j + 1] = vals.max(axis=0)
            for r in range(T):
                g[j + 1, r] = np.max(np.delete(f[j + 1], r)) if T > 1 else 0.0
        return float(f[n].max())

    def check_feasible(self) -> None:
        """Raise :class:`MemoryLimitError` or :class:`InfeasibleError` when no placement can
        satisfy the memory limits or the throughput constraint."""
        n = self.num_decisions
        for l in range(n):
            if not self.seg_usable[l, l, :].any():
                fits = max(t.memory_bytes * (t.max_units if t.role == "ps" else 1) for r, t in
                           enumerate(self.catalog.types) if self.allowed[l, r])
                raise MemoryLimitError(
                    f"layer {self.layer_names[l]!r} needs {self.memory[l] / 1e9:.3g} GB (4x its {self.param_bytes[l] / 1e9:.3g} "
                    f"GB of parameters plus activations for batch {self.batch_size}) but the largest unit it may use "
                    f"holds {fits / 1e9:.3g} GB: no placement satisfies the memory limit; add a type with more memory, "
                    "allow more PS units, or reduce the batch size")
        best = self.best_throughput()
        if best <= 0:
            raise MemoryLimitError("no placement fits the memory limits of the catalog (every split of the "
                                   "layers overflows some type); add memory or units", best_throughput=0.0)
        if self.constraints.min_throughput > best * (1 + 1e-9):
            raise InfeasibleError(
                f"throughput constraint {self.constraints.min_throughput:.4g} samples/s is infeasible for "
                f"{self.name!r}: the best achievable throughput is {best:.4g} samples/s (every stage at its "
                "maximum units); lower --throughput or add units/faster types to the catalog",
                best_throughput=best)

    # ----------------------------------------------------------------- solver helpers
    def random_assignments(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` random segmentations: 1..8 stages at random cut points, a random allowed type
        per stage (a layer that type cannot run takes a random allowed type)."""
        n, T = self.num_decisions, self.num_choices
        out = np.zeros((count, n), dtype=np.int64)
        for c in range(count):
            s = int(rng.integers(1, min(n, 8) + 1))
            cuts = np.sort(rng.choice(np.arange(1, n), size=s - 1, replace=False)) if s > 1 else np.array([], int)
            bounds = [0, *cuts.tolist(), n]
            for a, z in zip(bounds[:-1], bounds[1:]):
                out[c, a:z] = rng.integers(0, T)
            for l in range(n):
                if not self.allowed[l, out[c, l]]:
                    out[c, l] = rng.choice(np.flatnonzero(self.allowed[l]))
        return out

    def encode_dim(self) -> int:
        """Dimension of the continuous encoding used by Bayesian optimisation."""
        return self.num_decisions

    def decode(self, x: np.ndarray) -> np.ndarray:
        """``x`` in ``[0,1]^L`` -> one allowed choice per layer (:func:`scheduler.core.encoding.decode_choices`)."""
        return decode_choices(self.allowed, x)

    def encode(self, assignment: np.ndarray) -> np.ndarray:
        """The centre of ``assignment``'s cell in :meth:`decode`'s encoding."""
        return encode_choices(self.allowed, assignment)

    def describe(self) -> str:
        return (f"{self.name}: {self.num_decisions} layers, {self.num_choices} types "
                f"({', '.join(self.catalog.names)}), batch {self.batch_size}, "
                f"min throughput {self.constraints.min_throughput:g} samples/s")

    # ----------------------------------------------------------------- schedules
    def device_placement(self, ev: Evaluation) -> dict[str, str]:
        """Layer -> device string. Worker stages use their type's template; each PS stage gets its
        own ``k`` PS task indices (numbered across all PS stages), its layers spread over them
        longest-first onto the least-loaded unit (by compute time, then memory)."""
        placement: dict[str, str] = {}
        next_ps = 0
        for s in ev.stages:
            rt = self.catalog.types[s.type_index]
            if rt.role != "ps":
                for l in range(s.first, s.last + 1):
                    placement[self.layer_names[l]] = rt.device(0)
                continue
            k = max(1, s.units)
            load = np.zeros(k)
            r = s.type_index
            for l in sorted(range(s.first, s.last + 1), key=lambda x: (-self.compute[x, r], -self.memory[x])):
                u = int(np.argmin(load))
                load[u] += self.compute[l, r] + 1e-12 * self.memory[l]
                placement[self.layer_names[l]] = rt.device(next_ps + u)
            next_ps += k
        return placement

    def provisioning(self, ev: Evaluation) -> dict[str, int]:
        """Tasks per job: workers = the most units any worker stage uses (every ParameterServerStrategy
        worker runs all worker-placed layers); ps = the PS units (at least 1: PSS needs a PS task)."""
        workers = max([s.units for s in ev.stages if self.catalog.types[s.type_index].role == "worker"] or [1])
        ps = sum(s.units for s in ev.stages if self.catalog.types[s.type_index].role == "ps")
        return {"worker": int(workers), "ps": int(max(ps, 1))}

    def make_schedule(self, assignment: np.ndarray, solver: str, seconds: float,
                      notes: Mapping[str, Any] | None = None) -> "Schedule":
        from scheduler.core.schedule import Schedule, ScheduleStage

        ev = self.evaluate(assignment)
        stages = [ScheduleStage(self.layer_names[s.first], self.layer_names[s.last], s.last - s.first + 1,
                                self.catalog.types[s.type_index].name, s.units, s.rate) for s in ev.stages]
        n = dict(notes or {})
        if ev.reason:
            n.setdefault("violations", ev.reason)
        n.setdefault("price_per_hour", ev.price_per_hour)
        n.setdefault("min_throughput", self.constraints.min_throughput)
        return Schedule(solver=solver, problem=self.name, objective_name="cost", objective=ev.objective,
                        cost=ev.cost, throughput=ev.throughput, constraint_met=bool(ev.feasible and ev.constraint_met),
                        feasible=ev.feasible, solve_seconds=float(seconds), placement=self.device_placement(ev),
                        units=dict(ev.units), assignment=[int(x) for x in assignment], stages=stages,
                        provisioning=self.provisioning(ev), notes=n)


#: The default throughput constraint of a HeterPS workload, as a fraction of its best achievable throughput.
DEFAULT_THROUGHPUT_FRACTION = 0.25


def round_down_2sig(x: float) -> float:
    """``x`` rounded down to two significant digits (0 for a non-positive or non-finite ``x``)."""
    if x <= 0 or not math.isfinite(x):
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return math.floor(x / 10 ** e) * 10 ** e


def default_throughput(problem: Problem) -> float:
    """:data:`DEFAULT_THROUGHPUT_FRACTION` of the best achievable throughput, 2 significant digits."""
    return round_down_2sig(DEFAULT_THROUGHPUT_FRACTION * problem.best_throughput())
