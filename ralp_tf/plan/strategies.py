"""Which distributed strategy trains a model fastest on a cluster: the cost model's ranking.

The same model can train four ways on the same hosts; :func:`rank_strategies` prices each with the
one cost model (:mod:`ralp_tf.plan.costmodel`) and orders them by predicted samples/s:

* ``ps``: stock ``ParameterServerStrategy``, nothing placed (:func:`~ralp_tf.plan.costmodel.estimate`
  with no plan);
* ``pss``: ``ParameterServerStrategy`` with a placement plan (the analyzer's, or any policy's),
  priced with :func:`~ralp_tf.plan.costmodel.estimate`; it is left out when it places nothing (then
  it is ``ps``);
* ``mwms``: ``MultiWorkerMirroredStrategy`` with the RING implementation over the worker hosts
  (:func:`~ralp_tf.plan.costmodel.estimate_allreduce`, ``implementation="mwms"``); the PS tasks
  take no part;
* ``horovod``: Horovod's ring all-reduce over the same worker hosts (``implementation="horovod"``),
  where it is installed.

A PSS strategy needs at least one PS task; a strategy that cannot run (no PS task, Horovod not
installed, not supported by the command) stays in the ranking with ``available=False`` and the
reason, so a report says why it was not taken.

Steps are counted alike for every strategy: a *worker step* is one batch of ``batch_size``
samples on one worker. A synchronous ring step of N workers is N worker steps; samples/s is the
figure the strategies are compared by.

:meth:`StrategyRanking.probe_order` gives the strategies a measured probe should run (the top
``count`` available ones); :meth:`StrategyRanking.decide` takes the probe's measured samples/s
and returns the strategy to train with: the measured fastest of the probed ones. Pure: no
TensorFlow, no cluster.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import StepEstimate, estimate, estimate_allreduce
from ralp_tf.plan.plans import Plan

__all__ = ["STRATEGIES", "PSS_STRATEGIES", "RING_STRATEGIES", "STRATEGY_LABELS", "TIE", "StrategyChoice",
           "StrategyRanking", "rank_strategies", "canonical_strategy", "is_stock_plan"]

#: Every strategy a ranking may hold, in the order a tie keeps them (the PSS plan first).
STRATEGIES = ("pss", "ps", "mwms", "horovod")
PSS_STRATEGIES = ("pss", "ps")
RING_STRATEGIES = ("mwms", "horovod")
STRATEGY_LABELS = {"pss": "ParameterServerStrategy with the plan", "ps": "stock ParameterServerStrategy",
                   "mwms": "MultiWorkerMirroredStrategy (ring)", "horovod": "Horovod (ring)"}
_ALIASES = {"ring": "mwms", "allreduce": "mwms", "multiworkermirrored": "mwms", "stock": "ps", "none": "ps",
            "plan": "pss", "ralp": "pss"}
#: Predicted samples/s within this factor of each other are a tie: the cost model cannot order them.
TIE = 1.05


def canonical_strategy(name: str) -> str:
    """``name`` or its alias (``ring``/``allreduce`` -> ``mwms``, ``stock``/``none`` -> ``ps``,
    ``ralp``/``plan`` -> ``pss``) as one of :data:`STRATEGIES`; PlanError naming them otherwise."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        raise PlanError(f"unknown strategy {name!r}; use one of {', '.join(STRATEGIES)} (ring = mwms) or auto")
    return key


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    """One strategy priced on the cluster: its estimate, the plan it trains with (PSS strategies),
    and whether it can run here (``reason`` says why not)."""

    name: str
    estimate: StepEstimate
    plan: Plan | None = None
    available: bool = True
    reason: str = ""

    @property
    def samples_per_s(self) -> float:
        return self.estimate.samples_per_s

    @property
    def label(self) -> str:
        return STRATEGY_LABELS[self.name]

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {"strategy": self.name, "label": self.label, "available": self.available, "reason": self.reason,
                "predicted_samples_per_s": e.samples_per_s, "predicted_step_s": e.step_s,
                "predicted_bytes_per_worker_step": e.bytes_per_step / max(e.num_workers, 1)
                if e.mode == "allreduce" else e.bytes_per_step,
                "max_link_bytes": e.max_link_bytes, "bottleneck": e.bottleneck,
                "plan": self.plan.to_dict() if self.plan is not None else None}


@dataclasses.dataclass(frozen=True)
class StrategyRanking:
    """The strategies of a cluster, fastest predicted first (ties keep :data:`STRATEGIES` order)."""

    model: str
    cluster: str
    choices: tuple[StrategyChoice, ...]

    @property
    def available(self) -> tuple[StrategyChoice, ...]:
        return tuple(c for c in self.choices if c.available)

    @property
    def best(self) -> StrategyChoice:
        """The fastest predicted strategy that can run; PlanError when none can."""
        if not self.available:
            raise PlanError("no strategy can run on this cluster: " + "; ".join(
                f"{c.name}: {c.reason}" for c in self.choices))
        return self.available[0]

    def choice(self, name: str) -> StrategyChoice:
        for c in self.choices:
            if c.name == name:
                return c
        raise PlanError(f"strategy {name!r} is not in this ranking ({', '.join(c.name for c in self.choices)})")

    def probe_order(self, count: int = 2) -> tuple[str, ...]:
        """The top ``count`` available strategies, the ones a measured probe runs."""
        return tuple(c.name for c in self.available[:max(count, 0)])

    def decide(self, measured: Mapping[str, float]) -> str:
        """The strategy to train with, from a probe's measured samples/s by strategy: the fastest
        measured; with nothing measured, the fastest predicted. A strategy measured at 0 (it
        failed) never wins while another was measured above 0."""
        runs = {n: float(v) for n, v in measured.items() if n in {c.name for c in self.available}}
        if not runs or max(runs.values()) <= 0:
            return self.best.name
        return max(runs, key=lambda n: (runs[n], -STRATEGIES.index(n)))

    def report(self, measured: Mapping[str, float] | None = None) -> str:
        """A table of the strategies, fastest predicted first, with the probe's figures when given."""
        lines = [f"Strategies for {self.model} on {self.cluster} (predicted by the cost model):"]
        best = self.available[0].samples_per_s if self.available else 0.0
        for i, c in enumerate(self.choices, 1):
            rel = f"{c.samples_per_s / best:.2f}x" if best and c.available else "-"
            probe = ""
            if measured and c.name in measured:
                probe = f"; probe measured {measured[c.name]:.1f} samples/s"
            state = "" if c.available else f" (not available: {c.reason})"
            lines.append(f"  {i}. {c.name:<8} {c.samples_per_s:10.1f} samples/s {rel:>6}  {c.label}, bottleneck "
                         f"{c.estimate.bottleneck}{probe}{state}")
        if len(self.available) >= 2:
            a, b = self.available[0], self.available[1]
            if a.samples_per_s < TIE * b.samples_per_s:
                lines.append(f"  {a.name} and {b.name} are within {TIE - 1:.0%} of each other: a tie the cost model "
                             "cannot order; a measured probe decides.")
        return "\n".join(lines)

    def to_dict(self, measured: Mapping[str, float] | None = None) -> dict[str, Any]:
        return {"model": self.model, "cluster": self.cluster, "ranking": [c.to_dict() for c in self.choices],
                "best_predicted": self.best.name if self.available else None,
                "probe_samples_per_s": dict(measured or {})}


def is_stock_plan(plan: Plan) -> bool:
    """Whether ``plan`` leaves the model as stock PSS would: nothing computed on, stored on or split
    over chosen PS tasks, nothing compressed."""
    return not (plan.ps_layers() or plan.storage or plan.splits or plan.compression)


def rank_strategies(profile: ModelProfile, cluster: Cluster, plan: Plan | None = None, *,
                    horovod: bool | str = False, unavailable: Mapping[str, str] | None = None,
                    ring_implementations: Sequence[str] = RING_STRATEGIES) -> StrategyRanking:
    """Price every strategy of :data:`STRATEGIES` for ``profile`` on ``cluster`` and rank them.

    ``plan`` is the PSS plan (e.g. the analyzer's); None or a plan that places nothing leaves out
    ``pss`` (it would be ``ps``). ``horovod`` True when Horovod can run here, else False or the
    reason it cannot. ``unavailable`` marks further strategies the caller cannot run, with why.
    Raises PlanError for a cluster without workers.
    """
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers; every strategy trains on worker tasks")
    blocked = dict(unavailable or {})
    if not (horovod is True):
        blocked.setdefault("horovod", horovod if isinstance(horovod, str) and horovod else
                           "Horovod is not installed (make horovod)")
    if cluster.num_ps == 0:
        for name in PSS_STRATEGIES:
            blocked.setdefault(name, "the cluster has no PS task")
    choices: list[StrategyChoice] = []
    if cluster.num_ps:
        choices.append(StrategyChoice("ps", estimate(profile, cluster, None), None, "ps" not in blocked,
                                      blocked.get("ps", "")))
        if plan is not None and not is_stock_plan(plan):
            choices.append(StrategyChoice("pss", estimate(profile, cluster, plan), plan, "pss" not in blocked,
                                          blocked.get("pss", "")))
    for name in ring_implementations:
        ring = estimate_allreduce(profile, cluster, implementation=name)
        choices.append(StrategyChoice(name, ring, None, name not in blocked, blocked.get(name, "")))
    choices.sort(key=lambda c: (not c.available, -c.samples_per_s, STRATEGIES.index(c.name)))
    return StrategyRanking(profile.model_name, cluster.describe(), tuple(choices))
