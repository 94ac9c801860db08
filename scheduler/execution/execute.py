r"""Execute HeterPS schedules on emulated heterogeneous hardware and measure them.

``ralp-tf execute-schedule`` takes a workload (a built-in ralp_tf model), an emulated catalog
(:mod:`scheduler.execution.emulated`: a CPU quota, a link rate and a price per type) and a throughput
constraint, and:

1. **pins the unit**: measures the model under every type's quota (:mod:`scheduler.execution.unitrate`);
   the types' FLOP rates and the per-layer compute table come from those measurements;
2. **solves** the HeterPS problem (:class:`scheduler.core.problem.Problem`, compute table measured)
   with a scheduler solver, restricted to schedules ParameterServerStrategy can run (below);
3. **provisions** the PSS cluster (workers, PS tasks) with the one cost model
   (:func:`ralp_tf.plan.costmodel.estimate`): the cheapest unit counts whose predicted throughput
   meets the constraint, or, when none does, the fastest with a warning
   ``cannot meet X samples/s; best is Y``;
4. **runs** it with real PSS training on the namespace testbed (a dedicated emulated host per
   task: its own cgroup quota and its own link rate; the coordinator gets
   ``coordinator_cores``), and reports measured samples/s and dollars per million samples next
   to both predictions (the HeterPS model's and the cost model's for the cluster run).

**Mapping a HeterPS schedule onto PSS** (docs/scheduler.md, "Executed schedules"). PSS has one
worker job whose every task runs every worker-placed layer, and PS tasks that hold variables and
compute the layers a Plan places on them. A HeterPS schedule is a pipeline of stages, each on
its own units of one type. So:

* the solver may use **one worker type and one PS type per schedule**: the problem is solved
  once per (worker type, PS type) pair with every layer allowed only on those two (PS only
  where the layer kind may run on a PS), and the cheapest result is kept;
* all worker stages become the one worker job: ``n`` tasks of the worker type, each running
  every worker stage (HeterPS gives each stage its own ``k_s``; here the stage with the most
  units sets ``n`` and the others get the same, which costs ``n - k_s`` extra units per stage);
* the PS stages' layers are computed on ``m`` PS tasks of the PS type (longest first onto the
  least-loaded task); PSS also stores every worker layer's variables there (HeterPS's worker
  stages sync by ring all-reduce instead), so ``m >= 1`` always;
* ``n`` and ``m`` are chosen by the cost model of the cluster that is run, not by the HeterPS
  model (whose ring-based sync and per-stage units PSS does not have); so is the type a
  schedule leaves open (the worker of an all-on-PS schedule, the PS of a PS-free one);
* stock PSS on the pair's two types is priced beside the solver's split and kept when the cost
  model prefers it (the HeterPS problem does not price a PS task's serving CPU).

**Cost** of a deployment: ``price = n p_w + m p_ps`` dollars per hour (the coordinator is not
priced), ``cost = price / 3600 x 10^6 / X`` dollars per million samples, with ``X`` predicted or
measured samples/s.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ralp_tf.plan import Cluster
from ralp_tf.plan import estimate
from ralp_tf.plan import Plan
from ralp_tf.model import ModelProfile
from scheduler.execution.emulated import EmulatedCatalog, emulated_type_of, fastest
from scheduler.core.errors import InfeasibleError, SchedulerError
from scheduler.core.problem import Problem
from scheduler.core.pss import restricted
from scheduler.core.resources import Constraints
from scheduler.core.schedule import _clean
from scheduler.execution.unitrate import UnitRate

__all__ = ["FASTEST", "ExecutionError", "cost_per_million", "measured_problem", "pss_pairs",
           "Deployment", "hybrid_profile", "deployment_cluster", "ps_plan", "provision",
           "deployment_of", "plan_deployment", "fastest_deployment", "run_deployment", "ExecutionReport",
           "MAX_STEPS", "steps_for", "execute_schedule", "format_rates", "save_report"]

#: The comparison rows besides the solver's own schedule.
FASTEST = "fastest"


class ExecutionError(SchedulerError):
    """Bad input to an executed schedule (constraint, steps) or a run that could not be measured."""


def cost_per_million(price_per_hour: float, samples_per_s: float | None) -> float:
    """``price / 3600 x 10^6 / X`` dollars per million samples (inf when ``X`` is 0 or unknown)."""
    if not samples_per_s or samples_per_s <= 0:
        return math.inf
    return price_per_hour / 3600.0 * 1e6 / samples_per_s


# ------------------------------------------------------------------------------- the problem


def measured_problem(rates: Mapping[str, UnitRate], catalog: EmulatedCatalog, throughput: float,
                     name: str | None = None) -> Problem:
    """The HeterPS problem with every type's compute measured under its quota:
    ``compute[l, r]`` = layer ``l``'s calibrated time under type ``r``'s quota (no FLOP-rate guess)."""
    sched_catalog = catalog.scheduler_catalog({n: r.flops_per_s for n, r in rates.items()})
    base = next(iter(rates.values())).profile
    layers = base.compute_layers
    compute = np.array([[_layer_time(rates[emulated_type_of(rt.name)].profile, l.name)
                         for rt in sched_catalog.types] for l in layers])
    shape = Problem.from_profile(base, sched_catalog, Constraints(min_throughput=throughput), name=name,
                                 check=False)
    return shape.with_types(compute=compute, check=False)


def _layer_time(prof: ModelProfile, name: str) -> float:
    t = prof.layer(name).measured_seconds
    if t is None:
        raise ExecutionError(f"profile of {prof.model_name} has no measured time for layer {name!r}")
    return float(t)


def pss_pairs(problem: Problem) -> list[tuple[int, int]]:
    """(worker type index, PS type index) pairs of the scheduler catalog; a type with one unit
    cannot be both (its worker and PS units share its ``max_units``)."""
    types = problem.catalog.types
    return [(w, p) for w, tw in enumerate(types) if tw.role == "worker"
            for p, tp in enumerate(types) if tp.role == "ps"
            and not (emulated_type_of(tw.name) == emulated_type_of(tp.name) and tw.max_units < 2)]


def _solve_best_effort(solver: Any, problem: Problem) -> Any:
    """``solver.solve(problem)``; when no placement can meet the constraint, the solve at the best
    throughput the problem can reach (its schedule then reports ``constraint_met`` False against
    the original constraint), else with no constraint."""
    try:
        return solver.solve(problem)
    except InfeasibleError as exc:
        best = exc.best_throughput or 0.0
    for x in ((best * (1 - 1e-6),) if best > 0 else ()) + (0.0,):
        try:
            relaxed = problem.with_constraints(Constraints(min_throughput=x), check=False)
            sched = solver.solve(relaxed)
        except InfeasibleError:
            continue
        ev = problem.evaluate(sched.assignment)
        sched.constraint_met = bool(ev.feasible and ev.constraint_met)
        sched.notes["best_effort"] = f"cannot meet {problem.constraints.min_throughput:.4g} samples/s; solved at {x:.4g}"
        return sched
    raise ExecutionError(f"{problem.name}: no feasible placement at all for this pair of types")


# ------------------------------------------------------------------------------- deployments


@dataclasses.dataclass
class Deployment:
    """A PSS cluster to run: ``workers`` units of ``worker_type``, ``ps`` of ``ps_type``, the
    ``ps_layers`` computed on the PS tasks (``plan``), and its predictions."""

    label: str
    worker_type: str
    ps_type: str
    workers: int
    ps: int
    ps_layers: list[str]
    plan: Plan
    price_per_hour: float
    predicted_samples_per_s: float
    predicted_cost: float
    predicted_bottleneck: str
    meets: bool
    heterps: dict[str, Any] = dataclasses.field(default_factory=dict)
    warning: str = ""
    measured: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: "schedule": the solver's PS layers; "stock": none on the PS (the cost model priced the
    #: solver's split dearer than stock PSS on the same types, :func:`plan_deployment`)
    variant: str = "schedule"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["plan"] = self.plan.to_dict()
        return d


def hybrid_profile(rates: Mapping[str, UnitRate], worker_type: str, ps_type: str,
                   ps_layers: Sequence[str]) -> ModelProfile:
    """The profile the cost model prices a deployment with: worker-placed layers timed under the
    worker type's quota, PS-placed layers under the PS type's."""
    w, p = rates[worker_type].profile, rates[ps_type].profile
    on_ps = set(ps_layers)
    return dataclasses.replace(w, layers=tuple(
        dataclasses.replace(l, measured_seconds=p.layer(l.name).measured_seconds) if l.name in on_ps else l
        for l in w.layers))


def deployment_cluster(catalog: EmulatedCatalog, rates: Mapping[str, UnitRate], worker_type: str, ps_type: str,
                       workers: int, ps: int) -> Cluster:
    """The cluster the cost model prices: a dedicated host per task (``worker<i>``, ``ps<j>``) with
    its type's link rate, measured FLOP rate (its CPU budget) and quota in cores (so that the
    CPU its tasks spend serving bytes is priced)."""
    tw, tp = catalog.type(worker_type), catalog.type(ps_type)
    jobs = {"worker": [f"127.0.0.1:{20000 + i}" for i in range(workers)],
            "ps": [f"127.0.0.1:{21000 + j}" for j in range(ps)]}
    return Cluster.from_dict(jobs, bandwidth={"worker": tw.link_bps, "ps": tp.link_bps},
                             flops={"worker": rates[worker_type].flops_per_s, "ps": rates[ps_type].flops_per_s},
                             hosts={"worker": [f"worker{i}" for i in range(workers)],
                                    "ps": [f"ps{j}" for j in range(ps)]}
                             ).with_host_cores({**{f"worker{i}": tw.cores for i in range(workers)},
                                                **{f"ps{j}": tp.cores for j in range(ps)}})


def ps_plan(prof: ModelProfile, ps_layers: Sequence[str], ps: int, label: str) -> Plan:
    """A Plan computing ``ps_layers`` on ``ps`` PS tasks, longest (measured) first onto the
    least-loaded task; every other layer on the worker."""
    load = [0.0] * ps
    placements: dict[str, str] = {}
    for name in sorted(ps_layers, key=lambda n: -(prof.layer(n).measured_seconds or 0.0)):
        k = int(np.argmin(load))
        load[k] += prof.layer(name).measured_seconds or 0.0
        placements[name] = f"/job:ps/replica:0/task:{k}/device:CPU:0"
    return Plan(placements=placements, policy=f"scheduler.execution.execute.{label}", provisioning={"worker": 1, "ps": ps},
                notes={"ps_layers": list(ps_layers)})


def provision(catalog: EmulatedCatalog, rates: Mapping[str, UnitRate], worker_type: str, ps_type: str,
              ps_layers: Sequence[str], throughput: float, label: str) -> Deployment:
    """The cheapest ``(workers, ps)`` whose cost-model throughput meets ``throughput`` (ties: the
    faster), within the types' unit caps (one type's workers and PS tasks share its cap). When
    none meets it, the fastest, with ``warning`` = "cannot meet X samples/s; best is Y"."""
    tw, tp = catalog.type(worker_type), catalog.type(ps_type)
    prof = hybrid_profile(rates, worker_type, ps_type, ps_layers)
    cands = []
    for n in range(1, tw.max_units + 1):
        for m in range(1, tp.max_units + 1):
            if worker_type == ps_type and n + m > tw.max_units:
                continue
            plan = dataclasses.replace(ps_plan(prof, ps_layers, m, label), provisioning={"worker": n, "ps": m})
            est = estimate(prof, deployment_cluster(catalog, rates, worker_type, ps_type, n, m), plan)
            price = n * tw.price_per_hour + m * tp.price_per_hour
            cands.append((n, m, plan, est, price))
    if not cands:
        raise ExecutionError(f"{worker_type} workers with {ps_type} PS tasks: the type's {tw.max_units} unit(s) "
                             "cannot hold a worker and a PS task; raise max_units")
    meeting = [c for c in cands if c[3].samples_per_s >= throughput * (1 - 1e-9)]
    warning = ""
    if meeting:
        n, m, plan, est, price = min(meeting, key=lambda c: (c[4], -c[3].samples_per_s))
    else:
        n, m, plan, est, price = max(cands, key=lambda c: (c[3].samples_per_s, -c[4]))
        warning = (f"{label}: cannot meet {throughput:.4g} samples/s with {worker_type} workers and {ps_type} PS "
                   f"tasks; best is {est.samples_per_s:.4g} samples/s ({n} workers, {m} PS)")
    return Deployment(label=label, worker_type=worker_type, ps_type=ps_type, workers=n, ps=m,
                      ps_layers=list(ps_layers), plan=plan, price_per_hour=price,
                      predicted_samples_per_s=est.samples_per_s, predicted_cost=cost_per_million(price, est.samples_per_s),
                      predicted_bottleneck=est.bottleneck, meets=not warning, warning=warning)


def deployment_of(schedule: Any, problem: Problem, catalog: EmulatedCatalog, rates: Mapping[str, UnitRate],
                  throughput: float, label: str) -> Deployment:
    """Map a (restricted) HeterPS schedule onto PSS (module docstring) and provision it."""
    types = problem.catalog.types
    used = [types[r] for r in sorted(set(schedule.assignment))]
    workers = [t for t in used if t.role == "worker"]
    ps_types = [t for t in used if t.role == "ps"]
    if len(workers) > 1 or len(ps_types) > 1:
        raise ExecutionError(f"{label}: the schedule uses {len(workers)} worker and {len(ps_types)} PS types; a PSS "
                             "cluster runs one of each (solve the restricted problem of one pair: scheduler.core.pss.restricted)")
    ps_layers = [problem.layer_names[l] for l, r in enumerate(schedule.assignment) if types[r].role == "ps"]
    w = emulated_type_of(workers[0].name) if workers else None
    p = emulated_type_of(ps_types[0].name) if ps_types else None

    def able(role: str, other: str | None) -> list[str]:
        """The types that may take ``role`` beside a unit of ``other``."""
        ok = [t.name for t in catalog.types if role in t.roles and not (t.name == other and t.max_units < 2)]
        if not ok:
            raise ExecutionError(f"{label}: no type of {catalog.name!r} can be a {role} beside {other}")
        return ok

    # Every layer on the PS type: the workers only feed inputs; no PS layer: PSS still needs a PS
    # task for the variables. Either way the schedule leaves the type open, and the cost model picks it.
    deps = [provision(catalog, rates, wt, pt, ps_layers, throughput, label)
            for wt in ([w] if w else able("worker", p)) for pt in ([p] if p else able("ps", wt))]
    dep = min(deps, key=_preference)
    dep.heterps = {"solver": schedule.solver, "throughput": schedule.throughput, "cost": schedule.cost,
                   "units": dict(schedule.units), "stages": [st.to_dict() for st in schedule.stages],
                   "constraint_met": bool(schedule.constraint_met),
                   "price_per_hour": schedule.notes.get("price_per_hour")}
    return dep


def _preference(d: Deployment) -> tuple[int, float]:
    """Sort key: meeting the constraint first, then cheaper; else faster."""
    return (0, d.predicted_cost) if d.meets else (1, -d.predicted_samples_per_s)


def plan_deployment(problem: Problem, catalog: EmulatedCatalog, rates: Mapping[str, UnitRate], solver: Any,
                    throughput: float, label: str) -> tuple[Deployment, dict[str, Any]]:
    """``solver``'s schedule per (worker type, PS type) pair, each mapped and provisioned
    (:func:`deployment_of`); returns the cheapest deployment the cost model predicts to meet
    ``throughput`` (else the fastest, with its warning) and ``{"pairs": [...], "solve_seconds"}``.

    Per pair, stock PSS on the same types (no layer on the PS) is provisioned too, and kept
    (``variant="stock"``) when the cost model prefers it: the HeterPS problem the solver solves
    does not price what a PS task spends serving the worker layers' variables, so its split can
    cost more than no split (RALP's analyzer makes the same check)."""
    t0 = time.perf_counter()
    types = problem.catalog.types
    pairs = []
    for w, p in pss_pairs(problem):
        sub = restricted(problem, w, p)
        dep = deployment_of(_solve_best_effort(solver, sub), sub, catalog, rates, throughput, label)
        if dep.ps_layers:
            stock = provision(catalog, rates, emulated_type_of(types[w].name), emulated_type_of(types[p].name), [],
                              throughput, label)
            if _preference(stock) < _preference(dep):
                stock.heterps, stock.variant = dep.heterps, "stock"
                dep = stock
        pairs.append(dep)
    seconds = time.perf_counter() - t0
    best = min(pairs, key=_preference)
    info = {"solve_seconds": seconds,
            "pairs": [{"worker": d.worker_type, "ps": d.ps_type, "workers": d.workers, "ps_units": d.ps,
                       "ps_layers": len(d.ps_layers), "variant": d.variant,
                       "predicted_samples_per_s": d.predicted_samples_per_s,
                       "predicted_cost": d.predicted_cost, "meets": d.meets,
                       "heterps_cost": d.heterps.get("cost"), "heterps_throughput": d.heterps.get("throughput")}
                      for d in pairs]}
    return best, info


def fastest_deployment(problem: Problem, catalog: EmulatedCatalog, rates: Mapping[str, UnitRate],
                       throughput: float) -> Deployment:
    """What a TF user does by default: every task (workers and PS) of the fastest type (measured),
    stock PSS (no layer computed on a PS task), provisioned to meet the constraint."""
    t = fastest(catalog, {n: r.flops_per_s for n, r in rates.items()}, roles=("worker", "ps"))
    dep = provision(catalog, rates, t.name, t.name, [], throughput, FASTEST)
    w = problem.catalog.index(t.name)
    ev = problem.evaluate(np.full(problem.num_decisions, w))
    dep.heterps = {"solver": FASTEST, "throughput": ev.throughput, "cost": ev.cost, "units": dict(ev.units),
                   "constraint_met": bool(ev.feasible and ev.constraint_met), "price_per_hour": ev.price_per_hour}
    return dep


# ------------------------------------------------------------------------------- running


def run_deployment(dep: Deployment, catalog: EmulatedCatalog, model: str, batch_size: int, *, steps: int,
                   warmup: int, out_dir: str, prefix: str = "ralpx", timeout: float = 600.0) -> dict[str, Any]:
    """Run ``dep`` with real PSS training on the namespace testbed (a host per task with its
    type's quota and link rate; the chief on a host with ``coordinator_cores``) and return the
    measurement: ``samples_per_s``, ``cost`` ($/M samples), ``valid`` and the run record."""
    from ralp_tf.testbed import Testbed
    from ralp_tf.testbed import run_ps

    tw, tp = catalog.type(dep.worker_type), catalog.type(dep.ps_type)
    workers = [f"worker{i}" for i in range(dep.workers)]
    pss = [f"ps{j}" for j in range(dep.ps)]
    tasks = ["chief"] + workers + pss
    cpu = {"chief": catalog.coordinator_cores, **{h: tw.cores for h in workers}, **{h: tp.cores for h in pss}}
    links = {"chief": max(tw.link_bps, tp.link_bps), **{h: tw.link_bps for h in workers},
             **{h: tp.link_bps for h in pss}}
    os.makedirs(out_dir, exist_ok=True)
    plan_path = os.path.join(out_dir, f"plan_{dep.label}.json")
    dep.plan.save(plan_path)
    t0 = time.monotonic()
    with Testbed(tasks, links, host_cpu=cpu, prefix=prefix) as tb:
        rec = run_ps(tb, model, plan_path, workers=dep.workers, ps=dep.ps, batch=batch_size, steps=steps,
                     warmup=warmup, measure_compute=False, timeout=timeout,
                     log_dir=os.path.join(out_dir, f"logs_{dep.label}"))
    x = rec.get("samples_per_s") if rec.get("valid") else None
    return {"samples_per_s": x, "cost": cost_per_million(dep.price_per_hour, x), "valid": bool(rec.get("valid")),
            "invalid_reason": rec.get("invalid_reason"), "wall_s": time.monotonic() - t0,
            "steps": steps, "warmup": warmup, "bytes_per_step": rec.get("bytes_per_step"),
            "final_loss": rec.get("final_loss"), "host_cpu_s_per_step": rec.get("host_cpu_s_per_step"),
            "log_tail": rec.get("log_tail")}


# ------------------------------------------------------------------------------- the command


@dataclasses.dataclass
class ExecutionReport:
    """Everything ``execute-schedule`` found: rates per type, the deployments and comparisons."""

    model: str
    batch_size: int
    catalog: dict[str, Any]
    throughput: float
    rates: dict[str, dict[str, Any]]
    deployments: list[Deployment]
    solve: dict[str, Any]
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "batch_size": self.batch_size, "catalog": self.catalog,
                "throughput": self.throughput, "rates": self.rates, "solve": self.solve, "warnings": self.warnings,
                "deployments": [d.to_dict() for d in self.deployments], "comparison": self.comparison()}

    def comparison(self) -> dict[str, Any]:
        """Each deployment's cost (measured where run, else predicted) over the fastest-type one."""
        base = next((d for d in self.deployments if d.label == FASTEST), None)
        out: dict[str, Any] = {}
        if base is None:
            return out
        for d in self.deployments:
            for kind, get in (("predicted", lambda x: x.predicted_cost),
                              ("measured", lambda x: x.measured.get("cost") if x.measured.get("valid") else None)):
                a, b = get(d), get(base)
                if a is not None and b is not None and math.isfinite(a) and math.isfinite(b) and b > 0:
                    out.setdefault(d.label, {})[f"{kind}_cost_vs_fastest"] = a / b
        return out

    def markdown(self) -> str:
        """One table row per deployment (predictions next to measurements)."""
        lines = [f"{self.model} (batch {self.batch_size}) on {self.catalog['name']}, constraint "
                 f"{self.throughput:g} samples/s", "",
                 "| schedule | workers | PS | PS layers | $/h | HeterPS X, $/M | predicted X | measured X | "
                 "measured/predicted | predicted $/M | measured $/M | meets X when run |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for d in self.deployments:
            m = d.measured
            mx = m.get("samples_per_s") if m.get("valid") else None
            hx, hc = d.heterps.get("throughput"), d.heterps.get("cost")
            lines.append(
                f"| {d.label}{' (stock PSS)' if d.variant == 'stock' else ''} | {d.workers} x {d.worker_type} | {d.ps} x {d.ps_type} | {len(d.ps_layers)} | "
                f"{d.price_per_hour:.3g} | {_num(hx)}, {_num(hc)} | {_num(d.predicted_samples_per_s)} | {_num(mx)} | "
                f"{_num(mx / d.predicted_samples_per_s if mx else None, 3)} | {_num(d.predicted_cost)} | "
                f"{_num(m.get('cost') if mx else None)} | "
                f"{'—' if mx is None else ('yes' if mx >= self.throughput else 'no')} |")
        return "\n".join(lines)


def _num(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}g}"


#: Most measured global steps :func:`steps_for` asks for.
MAX_STEPS = 2000


def steps_for(dep: Deployment, batch_size: int, min_steps: int, window_s: float) -> int:
    """Measured global steps of a run: at least ``min_steps``, and enough that the *predicted*
    measured window lasts ``window_s`` (``ceil(window_s x X_pred / (workers x batch))``), at most
    :data:`MAX_STEPS`. A count of work fixed before the run, so a slow run is not cut short."""
    per_step = dep.workers * batch_size
    want = math.ceil(window_s * dep.predicted_samples_per_s / per_step) if window_s > 0 else 0
    return int(min(MAX_STEPS, max(min_steps, want)))


def execute_schedule(model: str, catalog: EmulatedCatalog, throughput: float, *, solver: Any,
                     compare: Sequence[tuple[str, Any]] = (), batch_size: int = 32, steps: int = 20,
                     warmup: int = 3, window_s: float = 0.0, run: bool = True, out_dir: str = "/tmp/ralp_tf_execute",
                     cache_dir: str | None = None, measure: Callable[..., UnitRate] | None = None,
                     log: Callable[[str], None] = lambda s: None) -> ExecutionReport:
    """The whole pipeline (module docstring). ``solver`` is the scheduler solver whose schedule is
    executed; ``compare`` more ``(label, solver)`` rows (e.g. greedy); the fastest-type row is
    always added. ``run=False`` stops after the predictions (no testbed)."""
    from scheduler.execution.unitrate import DEFAULT_CACHE_DIR, measure_under_quota

    if isinstance(throughput, bool) or not isinstance(throughput, (int, float)) or not math.isfinite(throughput) \
            or throughput <= 0:
        raise ExecutionError(f"throughput constraint must be a positive number of samples/s, got {throughput!r}")
    for value, what in ((steps, "steps"), (batch_size, "batch size"), (warmup, "warm-up steps")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ExecutionError(f"{what} must be an integer >= 1, got {value!r}")
    measure = measure or measure_under_quota
    rates: dict[str, UnitRate] = {}
    for t in catalog.types:
        log(f"measuring {model} (batch {batch_size}) under {t.name}'s quota of {t.cores:g} cores")
        rates[t.name] = measure(model, batch_size, t.cores, cache_dir=cache_dir or DEFAULT_CACHE_DIR)
        log(f"  {t.name}: step {rates[t.name].step_s * 1e3:.1f} ms, {rates[t.name].flops_per_s / 1e9:.3g} GFLOP/s")
    problem = measured_problem(rates, catalog, throughput, name=model)
    warns: list[str] = []
    deployments: list[Deployment] = []
    solve_info: dict[str, Any] = {}
    for label, s in [(solver.name, solver), *compare]:
        dep, solve_info[label] = plan_deployment(problem, catalog, rates, s, throughput, label)
        deployments.append(dep)
    deployments.append(fastest_deployment(problem, catalog, rates, throughput))
    for d in deployments:
        if d.warning:
            warns.append(d.warning)
            warnings.warn(d.warning, RuntimeWarning, stacklevel=2)
    report = ExecutionReport(model=model, batch_size=batch_size, catalog=catalog.to_dict(), throughput=throughput,
                             rates={n: {k: v for k, v in r.to_dict().items() if k != "profile"}
                                    for n, r in rates.items()},
                             deployments=deployments, solve=solve_info, warnings=warns)
    if run:
        done: dict[tuple[Any, ...], dict[str, Any]] = {}
        for d in deployments:
            key = (d.worker_type, d.ps_type, d.workers, d.ps, tuple(sorted(d.ps_layers)))
            if key in done:  # the same cluster and plan as an earlier row: one run serves both
                d.measured = {**done[key], "same_run_as": done[key]["label"]}
                continue
            log(f"running {d.label}: {d.workers} x {d.worker_type} workers, {d.ps} x {d.ps_type} PS, "
                f"{len(d.ps_layers)} layer(s) on PS")
            n = steps_for(d, batch_size, steps, window_s)
            d.measured = run_deployment(d, catalog, model, batch_size, steps=n, warmup=warmup, out_dir=out_dir)
            done[key] = {**d.measured, "label": d.label}
            log(f"  measured {d.measured.get('samples_per_s')} samples/s (predicted "
                f"{d.predicted_samples_per_s:.4g}), {d.measured.get('wall_s', 0):.0f} s")
    return report


def format_rates(report: ExecutionReport) -> str:
    """The measured rate of each type (pin the unit) as a Markdown table."""
    lines = ["| type | cores | link | $/h | step s (batch) | GFLOP/s measured | unthrottled layers / step |",
             "|---|---|---|---|---|---|---|"]
    for t in report.catalog["types"]:
        r = report.rates[t["name"]]
        lines.append(f"| {t['name']} | {t['cores']:g} | {t['link']} | {t['price_per_hour']:g} | "
                     f"{r['step_s']:.4g} ({r['batch_size']}) | {r['flops_per_s'] / 1e9:.3g} | "
                     f"{1 / r['calibration']:.3g} |")
    return "\n".join(lines)


def save_report(report: ExecutionReport, path: str) -> None:
    with open(path, "w") as f:
        json.dump(_clean(report.to_dict()), f, indent=2)
