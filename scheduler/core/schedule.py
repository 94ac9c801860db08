"""Schedule: what a solver returns. A device string per layer, units per type, predictions.

``Schedule.to_plan()`` turns it into a :class:`ralp_tf.Plan` (the core's applier takes it);
``Schedule.tf_config_cluster()`` prints the provisioning as the cluster section of a
``TF_CONFIG`` (tasks per job, placeholder addresses to fill in).
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Mapping

from ralp_tf.plan import Plan

__all__ = ["ScheduleStage", "Schedule"]


def _clean(x: Any) -> Any:
    """JSON-safe: non-finite floats become None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return _clean(x.item())
    return x


@dataclasses.dataclass(frozen=True)
class ScheduleStage:
    """One stage of a HeterPS schedule: layers ``first..last`` (``num_layers`` of them) on ``units``
    units of ``type`` at ``rate`` samples/s."""

    first: str
    last: str
    num_layers: int
    type: str
    units: int
    rate: float

    def to_dict(self) -> dict[str, Any]:
        """The ``schedule --json`` shape: ``{"layers": [first, last], "num_layers", "type", "units", "rate"}``."""
        return {"layers": [self.first, self.last], "num_layers": self.num_layers, "type": self.type,
                "units": self.units, "rate": self.rate}


@dataclasses.dataclass
class Schedule:
    """A solved placement.

    * ``objective_name``: ``"cost"`` ($ per million samples, HeterPS problems) or ``"max_load"``
      (time per sample of the slowest device, dnn-partitioning problems); ``objective`` its
      value (``inf`` when the schedule is infeasible or misses the constraint).
    * ``placement``: layer name (or node id) -> full TF device string.
    * ``units``: units per resource type (provisioning).
    * ``assignment``: the choice index per decision, in the problem's order.
    * ``notes``: solver details (e.g. RL's per-decision inference time, iterations).
    * ``result``: for max-load problems, the dnn-partitioning result shape
      ``{"cpus": [{"nodes": [...]}], "fpgas": [...]}``.
    """

    solver: str
    problem: str
    objective_name: str
    objective: float
    cost: float | None
    throughput: float | None
    constraint_met: bool
    feasible: bool
    solve_seconds: float
    placement: dict[str, str]
    units: dict[str, int]
    assignment: list[int]
    stages: list[ScheduleStage] = dataclasses.field(default_factory=list)
    provisioning: dict[str, int] = dataclasses.field(default_factory=dict)
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_load: float | None = None
    result: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``ralp-tf schedule --json`` object: ``objective`` is the value minimised (``cost`` in
        $ per million samples, or ``max_load``), ``objective_name`` says which; non-finite numbers
        (an infeasible schedule) are ``null``."""
        d: dict[str, Any] = {
            "solver": self.solver, "workload": self.problem, "objective": self.objective,
            "objective_name": self.objective_name, "cost": self.cost, "throughput": self.throughput,
            "constraint_met": self.constraint_met, "feasible": self.feasible, "solve_seconds": self.solve_seconds,
            "placement": dict(self.placement), "units": dict(self.units),
            "stages": [st.to_dict() for st in self.stages],
            "provisioning": dict(self.provisioning), "notes": dict(self.notes),
        }
        if self.notes.get("policy_assignment") is not None:
            # RL: the policy's own result (no polish) next to the schedule returned.
            d["policy"] = {"objective": self.notes.get("policy_objective"),
                           "assignment": list(self.notes["policy_assignment"]),
                           "polished": bool(self.notes.get("polished", False))}
        if self.max_load is not None or self.result is not None:
            d["max_load"] = self.max_load
            if self.result is not None:
                d.update(self.result)
        else:
            d["tf_config"] = self.tf_config_cluster()
        return _clean(d)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_plan(self) -> Plan:
        """A ralp_tf Plan: the placement, the provisioning (tasks per job) and the predictions."""
        notes = {"solver": self.solver, "objective": self.objective_name, "objective_value": self.objective,
                 "predicted_throughput": self.throughput, "predicted_cost_per_million": self.cost,
                 "constraint_met": self.constraint_met, "units": dict(self.units)}
        return Plan(placements=dict(self.placement), policy=f"scheduler.{self.solver}",
                    provisioning=dict(self.provisioning) or None, notes=_clean(notes))

    def tf_config_cluster(self, base_port: int = 2222) -> dict[str, Any]:
        """``{"cluster": {job: ["host:port", ...]}}`` for the provisioned tasks per job (placeholder
        host names ``{job}{i}`` to replace with real addresses)."""
        return {"cluster": {job: [f"{job}{i}:{base_port}" for i in range(n)]
                            for job, n in self.provisioning.items() if n > 0}}

    def summary(self) -> str:
        val = "infeasible" if not math.isfinite(self.objective) else f"{self.objective:.6g}"
        extra = f", throughput {self.throughput:.4g}/s" if self.throughput is not None else ""
        return (f"{self.solver} on {self.problem}: {self.objective_name} {val}{extra}, units {self.units}, "
                f"constraint {'met' if self.constraint_met else 'MISSED'}, {self.solve_seconds:.3f} s")
