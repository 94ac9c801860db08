r"""``Solver.plan(profile, cluster)``: a scheduler solver planning for a ParameterServerStrategy cluster.

The contract (:func:`plan_for_cluster`): the returned Plan is the fastest, by ralp_tf's cost
model (:func:`ralp_tf.plan.estimate`, the model every other ralp_tf planner and report uses), of

1. **the analyzer's plan** (:func:`ralp_tf.plan.analyze`), so a scheduler policy is never
   predicted slower than ``--policy ralp``;
2. **the solver's own plan of the PSS problem** (:class:`scheduler.core.pss.PSSProblem`: the cost
   model optimised directly, or, for the RL policy, its placement of the cluster's HeterPS view
   mapped back), when the solver applies to it;
3. **the HeterPS schedule** of the cluster's types (or of ``catalog``) under the solver's
   ``throughput`` / ``budget``, priced by the HeterPS model alone, mapped onto the cluster, only
   when one of those three is given: the heterogeneous provisioning question the HeterPS
   problem was made for.

Ties go to the earlier entry (the analyzer first). ``Plan.notes`` says which model each figure
comes from: keys ``pss_*`` are the cost model's predictions of the returned plan,
``analyzer_*`` of the analyzer's, ``solver_pss_*`` of the solver's own plan, and ``heterps_*``
the HeterPS model's figures of the schedule the solver solved (``cost_model`` spells it out).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ralp_tf.model import ModelProfile
from ralp_tf.plan import Cluster, Plan
from scheduler.core.errors import InfeasibleError, SolverNotApplicableError
from scheduler.core.pss import PSSProblem, heterps_view

__all__ = ["COST_MODEL_NOTE", "PlanCandidate", "plan_for_cluster"]

#: ``Plan.notes["cost_model"]`` of every plan a scheduler solver returns for a cluster.
COST_MODEL_NOTE = ("pss_*, analyzer_* and solver_pss_*: ralp_tf.plan.estimate (ParameterServerStrategy); "
                   "heterps_*: the HeterPS model (scheduler.core.problem) of the schedule the solver solved")


@dataclasses.dataclass(frozen=True)
class PlanCandidate:
    """One plan the contract compares: where it came from, its assignment and its prediction."""

    source: str
    assignment: np.ndarray
    step_s: float


def _heterps_figures(notes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in notes.items() if k.startswith("heterps_")}


def _heterps_candidate(solver: Any, pss: PSSProblem, notes: dict[str, Any]) -> np.ndarray | None:
    """The solver's HeterPS schedule of the cluster (or ``solver.catalog``), mapped onto it."""
    try:
        view = heterps_view(pss, solver.catalog, solver.throughput, solver.budget, pss_traffic=False)
        schedule = solver.solve(view)
    except (InfeasibleError, SolverNotApplicableError) as exc:
        notes["heterps_error"] = str(exc).split(";")[0]
        return None
    notes.update(heterps_predicted_throughput=schedule.throughput, heterps_predicted_cost_per_million=schedule.cost,
                 heterps_constraint_met=schedule.constraint_met, heterps_catalog=view.catalog.name)
    roles = [view.catalog.types[r].role == "ps" for r in schedule.assignment]
    return pss.from_types(roles)


def plan_for_cluster(solver: Any, profile: ModelProfile, cluster: Cluster) -> Plan:
    """The contract of the module docstring; runs inside the caller's isolation (``Solver.plan``)."""
    pss = PSSProblem(profile, cluster)
    analysis = pss.analysis
    notes: dict[str, Any] = {"solver": solver.name, "cost_model": COST_MODEL_NOTE,
                             "analyzer_choice": analysis.chosen.label}
    cands = [PlanCandidate("analyzer", pss.analyzer_assignment(), pss.reference_step())]
    try:
        schedule = solver.solve(pss)
    except SolverNotApplicableError as exc:
        notes["solver_not_applicable"] = str(exc)
    else:
        own = np.asarray(schedule.assignment, dtype=np.int64)
        cands.append(PlanCandidate("solver", own, pss.objective(own)))
        notes["solver_pss_step_s"] = cands[-1].step_s
        notes.update(_heterps_figures(schedule.notes))
        for key in ("method", "decision_ms", "evaluations", "polished", "policy", "time_cap_cut"):
            if key in schedule.notes:
                notes[f"solver_{key}"] = schedule.notes[key]
    if solver.catalog is not None or solver.throughput is not None or solver.budget is not None:
        mapped = _heterps_candidate(solver, pss, notes)
        if mapped is not None:
            cands.append(PlanCandidate("heterps", mapped, pss.objective(mapped)))
    best = min(cands, key=lambda c: c.step_s)  # the first on ties: the analyzer's plan
    ev = pss.evaluate(best.assignment)
    analyzer = cands[0]
    notes.update(chosen=best.source, pss_predicted_step_s=ev.step_s, pss_predicted_samples_per_s=ev.samples_per_s,
                 pss_predicted_bytes_per_step=ev.bytes_per_step, pss_bottleneck=ev.bottleneck,
                 analyzer_predicted_step_s=analyzer.step_s,
                 speedup_over_analyzer=analyzer.step_s / ev.step_s if ev.step_s > 0 else math.inf)
    policy = f"scheduler.{solver.name}"
    if best.source == "analyzer":  # the analyzer's own plan, its storage and compression included
        plan = dataclasses.replace(analysis.plan, policy=policy)
    else:
        plan = pss.plan_of(best.assignment, policy=policy)
    from scheduler.core.schedule import _clean

    return dataclasses.replace(plan, provisioning={"worker": cluster.num_workers, "ps": cluster.num_ps},
                               notes=_clean(notes)).validate(profile, cluster)
