r"""Placement for the system that runs: a ParameterServerStrategy cluster, priced by ralp_tf's cost model.

A :class:`PSSProblem` is the placement problem of one ``(profile, cluster)``: every non-input
layer ``l`` is a decision with choice ``0`` (computed on the workers) or ``1 + k`` (computed on
PS task ``k``, its variables stored there); a choice ``1 + k`` is allowed only where the layer's
profile says it may compute on a PS (``ps_refusal == ""``). The objective is the predicted
synchronous step time of :func:`ralp_tf.plan.estimate` (seconds, lower is better):

``step_s(a) = min_{storage in S} estimate(profile, cluster, plan(a, storage)).step_s``

with ``S = {round-robin}`` on one PS task and ``{round-robin, balanced}`` on several
(:func:`ralp_tf.plan.with_balanced_storage` of the worker-computed layers, unpartitioned, as the
analyzer prices it). Every placement is feasible (the cost model has no memory limit), so
``penalized(a) = step_s(a) / step_s(analyzer)``, the analyzer's plan
(:func:`ralp_tf.plan.analyze`) scoring 1. Evaluations are memoised per assignment (bounded).

The same small surface as the HeterPS and max-load problems (``num_decisions``, ``num_choices``,
``allowed``, ``evaluate``, ``objective``, ``penalized``, ``scores``, ``random_assignments``,
``encode_dim``/``decode``/``encode``, ``make_schedule``), so the generic solvers (greedy, random
search, BO, the polish, exhaustive search) optimise the PSS cost model directly.

:func:`heterps_view` is the HeterPS problem of the same cluster (its worker type and its PS type,
:func:`scheduler.core.catalogs.catalog_from_cluster`) with each worker-placed layer's variable
traffic (pull and push) added to its compute (:func:`restricted`): the problem a HeterPS
policy reads; :meth:`PSSProblem.from_types` maps its placement back (PS-type layers onto PS
tasks by longest-processing-time on parameter bytes, weightless layers after a producer, as
the analyzer spreads a head).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from ralp_tf.model import ModelProfile
from ralp_tf.plan import Analysis, Cluster, Plan, analyze, estimate, transfer_seconds, with_balanced_storage
from scheduler.core.encoding import decode_choices, encode_choices
from scheduler.core.errors import ProblemError
from scheduler.core.problem import Problem, default_throughput
from scheduler.core.resources import Catalog, Constraints

__all__ = ["WORKER_CHOICE", "MEMO_LIMIT", "PSSEvaluation", "PSSProblem", "pss_sync_seconds", "restricted",
           "heterps_view"]

#: The choice index of "computed on the workers".
WORKER_CHOICE = 0
#: Evaluations memoised per problem (the memo is emptied when it grows past this).
MEMO_LIMIT = 20_000


@dataclasses.dataclass(frozen=True)
class PSSEvaluation:
    """The cost model's prediction of one placement: the faster storage variant's."""

    step_s: float
    samples_per_s: float
    bytes_per_step: float
    bottleneck: str
    storage: str
    plan: Plan

    @property
    def objective(self) -> float:
        return self.step_s


class PSSProblem:
    """The PSS placement problem of ``profile`` on ``cluster`` (module docstring)."""

    objective_name = "step_s"

    def __init__(self, profile: ModelProfile, cluster: Cluster, *, name: str | None = None,
                 analysis: Analysis | None = None) -> None:
        if not isinstance(profile, ModelProfile):
            raise ProblemError(f"expected a ralp_tf.ModelProfile, got {type(profile).__name__}")
        if not isinstance(cluster, Cluster):
            raise ProblemError(f"expected a ralp_tf.Cluster, got {type(cluster).__name__}")
        if cluster.num_workers == 0:
            raise ProblemError("the cluster has no workers; a PSS job needs at least one worker task")
        self.profile, self.cluster = profile, cluster
        self.name = name or profile.model_name
        self.layers = profile.compute_layers
        if not self.layers:
            raise ProblemError(f"model {profile.model_name!r} has no layers besides its inputs")
        self.layer_names = [l.name for l in self.layers]
        self.index = {n: i for i, n in enumerate(self.layer_names)}
        M = cluster.num_ps
        self.allowed = np.zeros((len(self.layers), 1 + M), dtype=bool)
        self.allowed[:, WORKER_CHOICE] = True
        self.allowed[:, 1:] = np.array([not l.ps_refusal for l in self.layers])[:, None]
        self._analysis = analysis
        self._memo: dict[bytes, PSSEvaluation] = {}
        self._ref_step: float | None = None

    # ----------------------------------------------------------------- shape
    @property
    def num_decisions(self) -> int:
        return len(self.layers)

    @property
    def num_choices(self) -> int:
        return 1 + self.cluster.num_ps

    @property
    def decision_names(self) -> list[str]:
        return list(self.layer_names)

    @property
    def analysis(self) -> Analysis:
        """The RALP analyzer's decision on this profile and cluster (computed once)."""
        if self._analysis is None:
            self._analysis = analyze(self.profile, self.cluster)
        return self._analysis

    def describe(self) -> str:
        return (f"{self.name}: {self.num_decisions} layers on {self.cluster.describe()} "
                f"(PSS, objective: predicted step seconds)")

    # ----------------------------------------------------------------- plans and assignments
    def _as_assignment(self, assignment: Any) -> np.ndarray:
        a = np.asarray(assignment, dtype=np.int64).reshape(-1)
        if a.shape != (self.num_decisions,):
            raise ProblemError(f"a PSS assignment gives one choice per layer ({self.num_decisions}), got {a.size}")
        if (a < 0).any() or (a >= self.num_choices).any():
            raise ProblemError(f"PSS choices are 0 (worker) .. {self.num_choices - 1} (PS task {self.num_choices - 2})")
        if not self.allowed[np.arange(len(a)), a].all():
            bad = self.layers[int(np.argmin(self.allowed[np.arange(len(a)), a]))]
            raise ProblemError(f"layer {bad.name!r} cannot compute on a PS task ({bad.ps_refusal}); place it on the "
                               "workers (choice 0)")
        return a

    def placements(self, assignment: Any) -> dict[str, str]:
        """Layer -> device string of ``assignment`` (every non-input layer named)."""
        a = self._as_assignment(assignment)
        c = self.cluster
        return {n: c.worker_device if int(x) == WORKER_CHOICE else c.ps_device(int(x) - 1)
                for n, x in zip(self.layer_names, a)}

    def assignment_of(self, plan: Plan | Mapping[str, str]) -> np.ndarray:
        """The assignment of a plan's placements (layers it does not name: the workers)."""
        placements = plan.placements if isinstance(plan, Plan) else plan
        ps = Plan(placements=dict(placements)).ps_layers()
        return np.array([1 + ps[n] if n in ps else WORKER_CHOICE for n in self.layer_names], dtype=np.int64)

    def analyzer_assignment(self) -> np.ndarray:
        """The assignment of the analyzer's plan."""
        return self.assignment_of(self.analysis.plan)

    def from_types(self, on_ps: Sequence[bool]) -> np.ndarray:
        """An assignment computing the layers flagged ``on_ps`` (where allowed) on PS tasks: layers
        with weights by longest-processing-time on parameter bytes (largest first onto the least
        loaded task, ties to the lowest index), weightless ones on a PS producer's task, else the
        least loaded; every other layer on the workers."""
        flags = np.asarray(on_ps, dtype=bool) & self.allowed[:, 1 if self.num_choices > 1 else 0]
        a = np.full(self.num_decisions, WORKER_CHOICE, dtype=np.int64)
        M = self.cluster.num_ps
        if M == 0 or not flags.any():
            return a
        load = [0] * M
        weighted = sorted((i for i in np.flatnonzero(flags) if self.layers[i].param_bytes),
                          key=lambda i: (-self.layers[i].param_bytes, i))
        for i in weighted:
            k = min(range(M), key=lambda j: (load[j], j))
            a[i] = 1 + k
            load[k] += self.layers[i].param_bytes
        for i in np.flatnonzero(flags):
            if a[i] != WORKER_CHOICE:
                continue
            producers = [self.index[u] for u in self.layers[i].inbound if u in self.index
                         and a[self.index[u]] != WORKER_CHOICE]
            a[i] = a[producers[0]] if producers else 1 + min(range(M), key=lambda j: (load[j], j))
        return a

    # ----------------------------------------------------------------- evaluation
    def evaluate(self, assignment: Any) -> PSSEvaluation:
        """The cost model's prediction (module docstring), memoised per assignment."""
        a = self._as_assignment(assignment)
        key = a.tobytes()
        got = self._memo.get(key)
        if got is not None:
            return got
        plan = Plan(placements=self.placements(a), policy="scheduler.pss")
        variants = [("round-robin", plan)]
        if self.cluster.num_ps > 1:
            variants.append(("balanced", with_balanced_storage(plan, self.profile, self.cluster, partition=False)))
        best = None
        for label, p in variants:
            e = estimate(self.profile, self.cluster, p)
            if best is None or e.step_s < best[0].step_s:
                best = (e, label, p)
        e, label, p = best  # type: ignore[misc]
        ev = PSSEvaluation(step_s=float(e.step_s), samples_per_s=float(e.samples_per_s),
                           bytes_per_step=float(e.bytes_per_step), bottleneck=e.bottleneck, storage=label, plan=p)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = ev
        return ev

    def objective(self, assignment: Any) -> float:
        return self.evaluate(assignment).step_s

    def reference_step(self) -> float:
        """The analyzer's plan's predicted step seconds (the scale of :meth:`penalized`; computed once)."""
        if self._ref_step is None:
            self._ref_step = float(estimate(self.profile, self.cluster, self.analysis.plan).step_s)
        return self._ref_step

    def penalized(self, assignment: Any) -> float:
        """``step_s / reference_step`` (every PSS placement is feasible)."""
        return self.scores(assignment)[1]

    def scores(self, assignment: Any) -> tuple[float, float]:
        """``(objective, penalized)`` from one (memoised) evaluation."""
        step = self.evaluate(assignment).step_s
        return step, step / max(self.reference_step(), 1e-300)

    # ----------------------------------------------------------------- solver helpers
    def random_assignments(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` random placements: a random suffix of the layer order (cut point uniform) on
        the PS tasks (by :meth:`from_types`), then each layer flipped to a random allowed choice
        with probability 0.1."""
        n, C = self.num_decisions, self.num_choices
        out = np.zeros((count, n), dtype=np.int64)
        for c in range(count):
            cut = int(rng.integers(0, n + 1))
            a = self.from_types(np.arange(n) >= cut)
            flip = rng.random(n) < 0.1
            for l in np.flatnonzero(flip):
                a[l] = int(rng.choice(np.flatnonzero(self.allowed[l])))
            out[c] = a
        return out

    def encode_dim(self) -> int:
        return self.num_decisions

    def decode(self, x: np.ndarray) -> np.ndarray:
        """``x`` in ``[0,1]^L`` -> one allowed choice per layer (:func:`scheduler.core.encoding.decode_choices`)."""
        return decode_choices(self.allowed, x)

    def encode(self, assignment: np.ndarray) -> np.ndarray:
        """The centre of ``assignment``'s cell in :meth:`decode`'s encoding."""
        return encode_choices(self.allowed, assignment)

    # ----------------------------------------------------------------- schedules
    def plan_of(self, assignment: Any, policy: str = "scheduler.pss") -> Plan:
        """The Plan of ``assignment`` with its faster storage variant (validated)."""
        ev = self.evaluate(assignment)
        return dataclasses.replace(ev.plan, policy=policy).validate(self.profile, self.cluster)

    def make_schedule(self, assignment: np.ndarray, solver: str, seconds: float,
                      notes: Mapping[str, Any] | None = None) -> "Schedule":
        from scheduler.core.schedule import Schedule

        a = self._as_assignment(assignment)
        ev = self.evaluate(a)
        n = dict(notes or {})
        n.setdefault("cost_model", "pss")
        n.update(pss_step_s=ev.step_s, pss_samples_per_s=ev.samples_per_s, pss_bytes_per_step=ev.bytes_per_step,
                 pss_bottleneck=ev.bottleneck, storage=ev.storage)
        units = {"worker": self.cluster.num_workers, "ps": self.cluster.num_ps}
        return Schedule(solver=solver, problem=self.name, objective_name="step_s", objective=ev.step_s, cost=None,
                        throughput=ev.samples_per_s, constraint_met=True, feasible=True,
                        solve_seconds=float(seconds), placement=self.placements(a), units=units,
                        assignment=[int(x) for x in a], provisioning=dict(units), notes=n)


# ----------------------------------------------------------------------------- the HeterPS view
def pss_sync_seconds(problem: Problem, w: int, p: int) -> np.ndarray:
    """Per layer, the seconds a worker step spends moving the layer's variables to and from the PS
    when the layer runs on worker type ``w`` with PS type ``p``: ``8 x s_l / min(B_w, B_p)`` with
    ``s_l = 2 P^t_l`` (weights pulled, gradients pushed) or, for an embedding (looked up on the
    PS), ``2 min(P^t_l, b a_l)`` (its rows and their gradient)."""
    types = problem.catalog.types
    rate = min(types[w].bandwidth_bps, types[p].bandwidth_bps)
    b = problem.batch_size
    moved = np.where(problem.sparse, 2.0 * np.minimum(problem.trainable_bytes, b * problem.output_bytes),
                     2.0 * problem.trainable_bytes)
    return np.array([transfer_seconds(x, rate) for x in moved])


def restricted(problem: Problem, w: int, p: int) -> Problem:
    """``problem`` as one PSS cluster runs it: every layer allowed only on worker type ``w``, or on
    PS type ``p`` where it may compute on a PS; and a worker-placed layer's compute time on ``w``
    includes its variables' PSS traffic (:func:`pss_sync_seconds`), which HeterPS's worker stages
    (ring all-reduce, none at one unit) do not have."""
    allowed = np.zeros_like(problem.allowed)
    allowed[:, w] = True
    allowed[:, p] = problem.allowed[:, p]
    compute = problem.compute.copy()
    compute[:, w] += pss_sync_seconds(problem, w, p)
    return problem.with_types(compute=compute, allowed=allowed, check=False)


def heterps_view(problem: PSSProblem, catalog: Catalog | None = None, throughput: float | None = None,
                 budget: float | None = None, *, pss_traffic: bool = True) -> Problem:
    """The HeterPS problem of ``problem``'s cluster (module docstring): the cluster's worker type and
    PS type (``catalog`` overrides), with ``pss_traffic`` the PSS variable traffic in the worker
    compute (:func:`restricted`; when the catalog has one worker and one PS type), under
    ``throughput`` (default: :func:`~scheduler.core.problem.default_throughput`)."""
    from scheduler.core.catalogs import catalog_from_cluster

    cat = catalog or catalog_from_cluster(problem.cluster)
    free = Problem.from_profile(problem.profile, cat, Constraints(0.0, None), name=problem.name, check=False)
    roles = [t.role for t in cat.types]
    if pss_traffic and roles.count("worker") == 1 and roles.count("ps") == 1:
        free = restricted(free, roles.index("worker"), roles.index("ps"))
    x = default_throughput(free) if throughput is None else float(throughput)
    return free.with_constraints(Constraints(x, budget), check=False)
