r"""Training sets and evaluation of the type-slot policy (:mod:`scheduler.policy.slots`: one
placement policy for catalogs of 2 to 6 resource types).

**Training catalogs** (:func:`random_catalog`): 2-6 types derived from the ``cloud`` catalog's
three (V100 worker, c5 CPU worker, r5 PS), drawn with replacement, each perturbed within
:data:`PERTURB` (price and FLOP rate x U(0.5, 2) log-uniform, link rate log-uniform 1-25 Gbit/s,
memory x {0.5, 1, 2}, unit cap uniform 4-32), at least one worker type (a worker may run every
layer kind), seeded.

**Method.** DAgger-style imitation of the exact HeterPS optimum
(:func:`scheduler.evaluation.generalise.train_dagger`) over generated graphs
(:mod:`scheduler.workloads.generated`, at most :data:`MAX_TRAIN_LAYERS` layers: the exact
θ-sweep DP labels those in seconds on 6 types) each on its own random catalog, plus the other
built-ins on random catalogs; leave-one-out over the six built-ins (:func:`evaluate`).
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from scheduler.core.catalogs import CLOUD
from scheduler.core.errors import CatalogError, SchedulerError
from scheduler.core.resources import Catalog
from scheduler.policy.slots import MAX_TYPES, MIN_TYPES, SlotView
from scheduler.policy.rl import RL

__all__ = ["PERTURB", "MAX_TRAIN_LAYERS", "random_catalog", "BUDGET", "EVAL_TYPE_COUNTS", "training_problems",
           "evaluation_catalogs", "slot_solver", "evaluate", "latency", "save_policies", "load_policies", "markdown",
           "main"]

#: Ranges of :func:`random_catalog`'s perturbations of the ``cloud`` types.
PERTURB = {"price_factor": (0.5, 2.0), "flops_factor": (0.5, 2.0), "link_bps": (1e9, 25e9),
           "memory_factor": (0.5, 1.0, 2.0), "max_units": (4, 32)}
#: Largest generated training graph (layers): the exact labeller's comfortable range.
MAX_TRAIN_LAYERS = 40


# ----------------------------------------------------------------------------- catalogs
def random_catalog(rng: np.random.Generator, num_types: int, name: str = "random",
                   base: Catalog = CLOUD) -> Catalog:
    """A catalog of ``num_types`` (2..6) types drawn with replacement from ``base``'s types and
    perturbed within :data:`PERTURB` (module docstring); at least one worker type, so every
    layer kind has a type that may run it. Type names are ``{base name}_{i}``. Seeded by ``rng``."""
    if isinstance(num_types, bool) or int(num_types) != num_types or not MIN_TYPES <= num_types <= MAX_TYPES:
        raise CatalogError(f"a random catalog has {MIN_TYPES}..{MAX_TYPES} types (the policy's slots), "
                           f"got {num_types!r}")
    workers = [i for i, t in enumerate(base.types) if t.role == "worker"]
    if not workers:
        raise CatalogError(f"base catalog {base.name!r} has no worker type; random catalogs need one")
    picks = rng.integers(len(base.types), size=int(num_types))
    if not any(int(p) in workers for p in picks):
        picks[int(rng.integers(num_types))] = workers[int(rng.integers(len(workers)))]
    lo_p, hi_p = PERTURB["price_factor"]
    lo_f, hi_f = PERTURB["flops_factor"]
    lo_b, hi_b = PERTURB["link_bps"]
    lo_u, hi_u = PERTURB["max_units"]
    types = []
    for i, p in enumerate(picks):
        t = base.types[int(p)]
        price = t.price_per_hour * math.exp(rng.uniform(math.log(lo_p), math.log(hi_p)))
        flops = t.flops * math.exp(rng.uniform(math.log(lo_f), math.log(hi_f)))
        link = math.exp(rng.uniform(math.log(lo_b), math.log(hi_b)))
        memory = t.memory_bytes * float(rng.choice(PERTURB["memory_factor"]))
        units = int(rng.integers(lo_u, hi_u + 1))
        types.append(dataclasses.replace(
            t, name=f"{t.name}_{i}", price_per_hour=round(price, 4), flops=float(f"{flops:.4g}"),
            bandwidth_bps=float(f"{link:.4g}"), memory_bytes=memory, max_units=units,
            source=f"random_catalog: {t.name} perturbed (price x{price / t.price_per_hour:.2f}, "
                   f"FLOP/s x{flops / t.flops:.2f}, link {link / 1e9:.2f} Gbit/s, {units} units)"))
    return Catalog(name, tuple(types))


# ----------------------------------------------------------------------------- training and evaluation
#: Default work budgets (gradient steps; :func:`scheduler.evaluation.generalise.train_dagger`): a base policy
#: on the generated graphs, then per held-out built-in a copy fine-tuned on the generated graphs
#: plus the other built-ins.
BUDGET = {"generated": 60, "base_imitation_steps": 1000, "base_dagger_steps": 500,
          "fold_imitation_steps": 200, "fold_dagger_steps": 200, "builtin_catalogs": 2}
#: Type counts of the evaluation catalogs (besides ``cloud``).
EVAL_TYPE_COUNTS = (2, 3, 5, 6)
#: Offsets that keep the seeded streams of training and evaluation catalogs apart.
_TRAIN_STREAM, _EVAL_STREAM, _BUILTIN_STREAM = 1_000, 10_000, 20_000


def _random_slots(rng: np.random.Generator, num_types: int) -> list[int]:
    return [int(s) for s in rng.permutation(MAX_TYPES)[:num_types]]


def training_problems(count: int, seed: int = 0, max_layers: int = MAX_TRAIN_LAYERS
                      ) -> tuple[list[SlotView], list[np.ndarray], list[Catalog]]:
    """``count`` generated graphs (the six families of :mod:`scheduler.workloads.generated`,
    cycled), each on its own :func:`random_catalog` of 2..6 types, at a random slot injection;
    with their exact optima (as slot placements) and the catalogs. Draws the exact solver finds
    infeasible (unit caps shared by stages) are skipped, so fewer may come back."""
    from scheduler.core.errors import InfeasibleError
    from scheduler.solvers.exact import Exact
    from scheduler.workloads.generated import EXTRA_FAMILIES, FAMILIES, generated_problems

    fams = FAMILIES + EXTRA_FAMILIES
    rng = np.random.default_rng(seed + _TRAIN_STREAM)
    views, optima, catalogs = [], [], []
    for i in range(count):
        cat = random_catalog(rng, int(rng.integers(MIN_TYPES, MAX_TYPES + 1)), name=f"train{seed}_{i}")
        try:
            (p,) = generated_problems(1, seed=seed * 100_003 + i, families=[fams[i % len(fams)]], catalog=cat,
                                      max_layers=max_layers)
            opt = Exact().solve(p).assignment
        except (InfeasibleError, SchedulerError):
            continue
        view = SlotView(p, _random_slots(rng, len(cat)))
        views.append(view)
        optima.append(view.slots(opt))
        catalogs.append(cat)
    return views, optima, catalogs


def evaluation_catalogs(seed: int = 0, counts: Sequence[int] = EVAL_TYPE_COUNTS,
                        workloads: Sequence[str] = ()) -> list[Catalog]:
    """One fixed catalog per type count in ``counts`` (seeded, from a stream the training
    catalogs never draw from), redrawn until every workload in ``workloads`` is feasible on it."""
    from scheduler.workloads import builtin_problem

    rng = np.random.default_rng(seed + _EVAL_STREAM)
    out = []
    for T in counts:
        for attempt in range(50):
            cat = random_catalog(rng, T, name=f"eval{seed}_{T}types")
            try:
                for w in workloads:
                    builtin_problem(w, cat)
            except SchedulerError:
                continue
            out.append(cat)
            break
        else:
            raise CatalogError(f"no {T}-type catalog in 50 draws holds every workload {list(workloads)}")
    return out


def _builtin_views(names: Sequence[str], rng: np.random.Generator, catalogs_each: int, seed: int
                   ) -> tuple[list[SlotView], list[np.ndarray]]:
    """Built-ins ``names`` on ``cloud`` and on ``catalogs_each`` random training catalogs each,
    at random slot injections, with their exact optima (slot placements). Built-ins of more than
    :data:`MAX_TRAIN_LAYERS` layers (resnet, 72) train on ``cloud`` only: where a random catalog's
    unit caps bind, the exact solver's unit-cap DP (Pareto labels) took over 5 minutes on resnet
    with 6 types."""
    from scheduler.solvers.exact import Exact
    from scheduler.workloads import builtin_problem

    views, optima = [], []
    for name in names:
        cats = [CLOUD]
        extra = catalogs_each if builtin_problem(name).num_decisions <= MAX_TRAIN_LAYERS else 0
        while len(cats) < 1 + extra:
            cat = random_catalog(rng, int(rng.integers(MIN_TYPES, MAX_TYPES + 1)),
                                 name=f"train{seed}_{name}_{len(cats)}")
            try:
                builtin_problem(name, cat)
            except SchedulerError:
                continue
            cats.append(cat)
        for cat in cats:
            p = builtin_problem(name, cat)
            view = SlotView(p, _random_slots(rng, len(cat)))
            views.append(view)
            optima.append(view.slots(Exact().solve(p).assignment))
    return views, optima


def slot_solver(seed: int, policy: Any = None, samples: int = 64, beam: int = 64) -> RL:
    """An :class:`~scheduler.policy.rl.RL` reading type slots (``features="slots"``) that only applies
    ``policy`` (no training, no polish): greedy decode, a beam of width ``beam`` and ``samples``
    samples, the best by objective."""
    return RL(policy=policy, seed=seed, iterations=0, samples=samples, beam=beam, polish=False, features="slots")


def _ratio(objective: float, exact: float) -> float | None:
    """``objective / exact``; ``None`` when the placement is infeasible or misses the constraint."""
    return objective / exact if math.isfinite(objective) else None


def evaluate(names: Sequence[str], *, seed: int = 0, budget: dict[str, int] | None = None,
             log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Leave-one-out over the built-ins ``names``: a base policy trained on the generated graphs
    of :func:`training_problems`; per held-out built-in a copy fine-tuned on those plus the other
    built-ins (``cloud`` and random training catalogs), applied with no retraining and no polish
    to the held-out built-in on ``cloud`` and on each :func:`evaluation_catalogs` catalog. Rows
    carry the policy's objective over the exact optimum. Raises ``AssertionError`` if a held-out
    workload or an evaluation catalog was in a training set."""
    from scheduler.solvers.exact import Exact
    from scheduler.evaluation.generalise import rule_placement, train_dagger
    from scheduler.workloads import builtin_problem

    b = {**BUDGET, **(budget or {})}
    t0 = time.perf_counter()
    gen, gen_opt, gen_cats = training_problems(b["generated"], seed=seed)
    log(f"{len(gen)} generated training problems on random catalogs of "
        f"{sorted({len(c) for c in gen_cats})} types ({time.perf_counter() - t0:.0f} s with their exact optima)")
    eval_cats = [CLOUD] + evaluation_catalogs(seed, workloads=names)
    train_params = {tuple(c.types) for c in gen_cats}
    assert not any(tuple(c.types) in train_params for c in eval_cats[1:]), "an evaluation catalog was trained on"
    base = slot_solver(seed)
    base_info = train_dagger(base, gen, optima=gen_opt, imitation_steps=b["base_imitation_steps"],
                             dagger_steps=b["base_dagger_steps"])
    log(f"base policy: {base_info['train_seconds']:.0f} s, agreement {base_info['final_agreement']:.3f}")
    rng = np.random.default_rng(seed + _BUILTIN_STREAM)
    builtin_views, builtin_opt = _builtin_views(names, rng, b["builtin_catalogs"], seed)
    rows, policies = [], {}
    for held in names:
        keep = [i for i, v in enumerate(builtin_views) if v.name != held]
        solver = slot_solver(seed, policy=base.policy.clone())
        info = train_dagger(solver, gen + [builtin_views[i] for i in keep],
                            optima=gen_opt + [builtin_opt[i] for i in keep],
                            imitation_steps=b["fold_imitation_steps"], dagger_steps=b["fold_dagger_steps"])
        assert held not in info["trained_on"], f"held-out workload {held!r} is in its policy's training set"
        policies[held] = solver.policy
        for cat in eval_cats:
            p = builtin_problem(held, cat)
            exact = Exact().solve(p).objective
            a, apply_info = solver.apply(p)
            types = np.asarray(a, dtype=np.int64)
            ev = p.evaluate(types)
            ratio = _ratio(ev.objective, exact)
            rows.append({"workload": held, "catalog": cat.name, "types": len(cat), "layers": p.num_decisions,
                         "exact": exact, "policy_objective": ev.objective, "policy_ratio": ratio,
                         "greedy_ratio": _ratio(apply_info["greedy_objective"], exact),
                         "rule_ratio": _ratio(p.objective(rule_placement(p)), exact),
                         "within_10pct": ratio is not None and ratio <= 1.10,
                         "valid_types": bool(((types >= 0) & (types < len(cat))).all() and
                                             p.allowed[np.arange(len(types)), types].all()),
                         "constraint_met": bool(ev.feasible and ev.constraint_met),
                         "fold_train_seconds": info["train_seconds"]})
            log(f"held out {held:<13} on {cat.name:<16} ({len(cat)} types): policy "
                f"{'infeasible' if ratio is None else f'{ratio:.4f}'} x exact")
    return {"rows": rows, "policies": policies, "base": base_info, "generated": len(gen),
            "generated_type_counts": [len(c) for c in gen_cats],
            "evaluation_catalogs": [c.to_dict() for c in eval_cats], "budget": b,
            "seconds": time.perf_counter() - t0}


def latency(policies: dict[str, Any], catalogs: Sequence[Catalog], *, seed: int = 0, repeats: int = 15
            ) -> list[dict[str, Any]]:
    """Decision latency (ms per layer) of each held-out policy on its workload and each catalog:
    :meth:`scheduler.policy.rl.RL.decision_ms` (median over ``repeats`` greedy decodes, features
    computed, lookahead memo cleared; the one-off hint per problem excluded)."""
    from scheduler.policy.policy_features import exception_hint
    from scheduler.workloads import builtin_problem

    out = []
    for held, policy in policies.items():
        solver = slot_solver(seed, policy=policy)
        for cat in catalogs:
            p = builtin_problem(held, cat)
            t0 = time.perf_counter()
            exception_hint(p)
            hint_ms = (time.perf_counter() - t0) * 1e3
            out.append({"workload": held, "catalog": cat.name, "types": len(cat),
                        "decision_ms": solver.decision_ms(p, repeats=repeats), "hint_ms": hint_ms})
    return out


def save_policies(policies: dict[str, Any], path: Any) -> None:
    """The held-out policies' weights (``numpy`` ``.npz``, one array per variable, keyed
    ``{workload}/{i}``) with their shapes, so that :func:`load_policies` can rebuild them."""
    arrays = {f"{k}/{i}": v.numpy() for k, pol in policies.items() for i, v in enumerate(pol.variables)}
    meta = {k: [pol.feature_dim, pol.num_actions, pol.hidden] for k, pol in policies.items()}
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


def load_policies(path: Any, seed: int = 0) -> dict[str, Any]:
    """Policies saved by :func:`save_policies` (weights restored; fresh optimizer state)."""
    from scheduler.policy.rl import LSTMPolicy

    data = np.load(path)
    meta = json.loads(str(data["__meta__"]))
    out = {}
    for k, (fdim, acts, hidden) in meta.items():
        pol = LSTMPolicy(int(fdim), int(acts), hidden=int(hidden), seed=seed)
        for i, v in enumerate(pol.variables):
            v.assign(data[f"{k}/{i}"])
        out[k] = pol
    return out


def markdown(doc: dict[str, Any]) -> str:
    """The result table: policy alone / exact optimum per held-out built-in and catalog, the
    count within 10%, and the decision latency where measured."""
    rows = doc.get("rows", [])
    cats: list[str] = []
    for r in rows:
        if r["catalog"] not in cats:
            cats.append(r["catalog"])
    types = {r["catalog"]: r["types"] for r in rows}
    lines = ["### Policy alone (greedy, beam 64, 64 samples; no polish) / exact optimum, held out", "",
             "| held out | " + " | ".join(f"{c} ({types[c]} types)" for c in cats) + " |",
             "|---|" + "---|" * len(cats)]
    by = {(r["workload"], r["catalog"]): r for r in rows}
    names = list(dict.fromkeys(r["workload"] for r in rows))
    for w in names:
        cells = []
        for c in cats:
            r = by.get((w, c))
            v = None if r is None else r["policy_ratio"]
            cells.append("—" if r is None else ("infeasible" if v is None else f"{v:.3f}"))
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    within = [sum(by[(w, c)]["within_10pct"] for w in names if (w, c) in by) for c in cats]
    lines.append("| **within 10%** | " + " | ".join(f"**{k} of {sum((w, c) in by for w in names)}**"
                                                    for k, c in zip(within, cats)) + " |")
    total = sum(r["within_10pct"] for r in rows)
    lines += ["", f"Within 10% of the exact optimum: **{total} of {len(rows)}**; every placement on valid "
              f"types: {all(r['valid_types'] for r in rows)}."]

    def counted(key: str) -> str:
        vals = [r.get(key) for r in rows]
        ok = [v for v in vals if v is not None]
        return (f"{sum(v <= 1.10 for v in ok)} of {len(vals)} within 10% (worst "
                f"{'infeasible' if len(ok) < len(vals) else f'{max(ok):.3f}'})")

    lines += ["", f"Ablations: greedy decode only {counted('greedy_ratio')}; the untrained rule "
              f"\"cheapest completion\" (`generalise.rule_placement`, no learning) {counted('rule_ratio')}."]
    lat = doc.get("latency")
    if lat:
        ms = [r["decision_ms"] for r in lat]
        lines += ["", "### Decision latency (ms per layer, greedy decode, features included)", "",
                  "| types | median | max |", "|---|---|---|"]
        for T in sorted({r["types"] for r in lat}):
            v = [r["decision_ms"] for r in lat if r["types"] == T]
            lines.append(f"| {T} | {np.median(v):.2f} | {max(v):.2f} |")
        lines.append(f"| all | {np.median(ms):.2f} | {max(ms):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scheduler.type_slots --out DIR [--seed N]``: train, evaluate, and write
    ``DIR/type_slots.json``, ``DIR/type_slots.md`` and the policies (``DIR/type_slots_policies.npz``).
    ``--latency-only``: load those policies and add the decision latency (run it alone, e.g.
    under a benchmark lock)."""
    import argparse
    import os
    from pathlib import Path

    from scheduler.core.catalogs import catalog_from_dict
    from scheduler.core.schedule import _clean
    from scheduler.workloads import BUILTIN_WORKLOADS

    ap = argparse.ArgumentParser(prog="python -m scheduler.type_slots", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for type_slots.json and type_slots.md")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny budgets (a smoke test, not a measurement)")
    ap.add_argument("--latency-only", action="store_true",
                    help="measure the decision latency of the policies an earlier run saved in --out")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency measurement")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    js = out / "type_slots.json"
    if args.latency_only:
        if not js.exists() or not (out / "type_slots_policies.npz").exists():
            raise SystemExit(f"--latency-only needs {js} and type_slots_policies.npz from a run with --out {out}")
        doc = json.loads(js.read_text())
        policies = load_policies(out / "type_slots_policies.npz", seed=doc["seed"])
        cats = [catalog_from_dict(c) for c in doc["evaluation_catalogs"]]
        doc["latency"] = latency(policies, cats, seed=doc["seed"])
    else:
        budget = dict(BUDGET)
        if args.quick:
            budget.update(generated=6, base_imitation_steps=20, base_dagger_steps=10, fold_imitation_steps=5,
                          fold_dagger_steps=5, builtin_catalogs=1)
        res = evaluate(list(BUILTIN_WORKLOADS), seed=args.seed, budget=budget)
        policies = res.pop("policies")
        save_policies(policies, out / "type_slots_policies.npz")
        doc = {"generated_by": "python -m scheduler.type_slots", "seed": args.seed, "max_types": MAX_TYPES,
               "perturb": PERTURB, "max_train_layers": MAX_TRAIN_LAYERS, "machine": f"{os.cpu_count()} CPUs", **res}
        if not args.no_latency:
            cats = [catalog_from_dict(c) for c in res["evaluation_catalogs"]]
            doc["latency"] = latency(policies, cats, seed=args.seed)
    js.write_text(json.dumps(_clean(doc), indent=1))
    (out / "type_slots.md").write_text(markdown(doc))
    print(f"wrote {js} and {out / 'type_slots.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
