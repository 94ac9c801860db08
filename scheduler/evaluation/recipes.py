r"""The training recipes of the shipped placement policies (:mod:`scheduler.policy.shipped`) and the one
command that makes them.

``python -m scheduler.shipped --out scheduler/weights [--kind all|heterps|maxload] [--seed 0]``

One policy per problem kind, both DAgger-trained (:func:`scheduler.evaluation.generalise.train_dagger`)
with exact experts, never on an evaluated workload:

* ``heterps`` (features ``"slots"``, :mod:`scheduler.evaluation.type_slots`): HeterPS problems of 2-6
  resource types. Training set: :data:`RECIPES` ``["heterps"]["generated"]`` generated layer
  graphs (:mod:`scheduler.workloads.generated`, all six families, at most ``max_layers``
  layers), each on its own random catalog of 2-6 types
  (:func:`scheduler.evaluation.type_slots.training_problems`), plus ``cluster_views`` generated graphs on
  the HeterPS view of a random small PSS cluster (:func:`scheduler.core.pss.heterps_view`: one
  worker and one PS type, 1-4 workers, 1-3 PS tasks, 0.1-10 Gbit/s), the problem the policy
  reads when it plans for a cluster, plus ``large`` (0 in the shipped recipe: 16 made the
  policy worse on the HeterPS-scale tables, docs/scheduler.md) generated graphs of 60-230 layers (deep
  ``transformer``, ``resnet`` and ``ctr`` draws on random catalogs, constrained to 30-70% of their
  best single-type throughput; those whose optimum the threshold-interval search,
  :func:`scheduler.solvers.bounds.heterps_bound`, does not prove are skipped); all labelled by the exact optimum.
  No built-in or HeterPS-scale workload of the tables is in it (their seeds and names differ),
  so each is held out.
* ``maxload`` (features ``"lookahead"``, :mod:`scheduler.policy.policy_features`): max-load problems.
  Training set: generated branchy layer graphs
  (:func:`scheduler.workloads.layer_graphs.training_layer_graphs`), labelled by the exact
  optimum-to-go of the linear-order split. No shared dnn-partitioning workload is in it.

Budgets are gradient steps (:data:`RECIPES`); TensorFlow's op determinism is switched on while
training, so the same seed and recipe give the same weights bit for bit
(``tests/scheduler/policy/test_shipped.py`` trains a small recipe twice and compares the bytes).

The files it writes and their format: :mod:`scheduler.policy.shipped`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from scheduler.core.errors import ProblemError
from scheduler.policy.shipped import FILES, KIND_FEATURES, save_policy

__all__ = ["RECIPES", "QUICK_RECIPES", "train_policy", "main"]

#: The training recipe of each kind (work budgets; the command's defaults).
RECIPES: dict[str, dict[str, int]] = {
    "heterps": {"generated": 80, "cluster_views": 24, "large": 0, "max_layers": 40, "imitation_steps": 1500,
                "dagger_steps": 1000, "dagger_batch": 8},
    "maxload": {"graphs": 24, "min_nodes": 20, "max_nodes": 200, "imitation_steps": 600, "dagger_steps": 300,
                "dagger_batch": 8},
}
#: Tiny recipes (a smoke run and the reproducibility test; not a policy to ship).
QUICK_RECIPES: dict[str, dict[str, int]] = {
    "heterps": {"generated": 3, "cluster_views": 1, "large": 0, "max_layers": 12, "imitation_steps": 6,
                "dagger_steps": 3, "dagger_batch": 2},
    "maxload": {"graphs": 2, "min_nodes": 10, "max_nodes": 30, "imitation_steps": 6, "dagger_steps": 3,
                "dagger_batch": 2},
}


def _training_set(kind: str, recipe: dict[str, int], seed: int) -> tuple[list[Any], list[Any]]:
    """The training problems and their expert optima (``None``: the expert derives it)."""
    if kind == "heterps":
        from scheduler.evaluation.type_slots import training_problems

        views, optima, _ = training_problems(recipe["generated"], seed=seed, max_layers=recipe["max_layers"])
        more, more_optima = _cluster_views(recipe["cluster_views"], seed, recipe["max_layers"])
        big, big_optima = _large_views(recipe.get("large", 0), seed)
        return views + more + big, optima + more_optima + big_optima
    from scheduler.workloads.dnn_partitioning import from_dict
    from scheduler.workloads.layer_graphs import training_layer_graphs

    graphs = training_layer_graphs(recipe["graphs"], seed=seed + 2000, min_nodes=recipe["min_nodes"],
                                   max_nodes=recipe["max_nodes"])
    return [from_dict(g, g["name"]) for g in graphs], [None] * len(graphs)


def _cluster_views(count: int, seed: int, max_layers: int) -> tuple[list[Any], list[Any]]:
    """``count`` generated graphs on the HeterPS views of random small PSS clusters (module
    docstring), at random slot injections, with their exact optima as slot placements."""
    from ralp_tf.plan import Cluster
    from scheduler.core.errors import SchedulerError
    from scheduler.solvers.exact import Exact
    from scheduler.core.pss import PSSProblem, heterps_view
    from scheduler.policy.slots import MAX_TYPES, SlotView
    from scheduler.workloads.generated import EXTRA_FAMILIES, FAMILIES, random_profile

    rng = np.random.default_rng(seed + 30_000)
    fams = FAMILIES + EXTRA_FAMILIES
    views, optima = [], []
    attempts = 0
    while len(views) < count and attempts < 20 * max(count, 1):
        attempts += 1
        prof = random_profile(rng, fams[attempts % len(fams)], name=f"cluster_view{seed}_{attempts}")
        cluster = Cluster.local(int(rng.integers(1, 5)), int(rng.integers(1, 4)),
                                bandwidth=float(rng.choice([1e8, 1e9, 1e10])))
        if len(prof.compute_layers) > max_layers:
            continue
        try:
            problem = heterps_view(PSSProblem(prof, cluster))
            problem.check_feasible()
            optimum = Exact().solve(problem).assignment
        except SchedulerError:
            continue
        view = SlotView(problem, [int(x) for x in rng.permutation(MAX_TYPES)[:problem.num_choices]])
        views.append(view)
        optima.append(view.slots(optimum))
    return views, optima


def _large_views(count: int, seed: int) -> tuple[list[Any], list[Any]]:
    """``count`` deep generated graphs (module docstring) on random catalogs of 2-6 types, at
    random slot injections, with their exact optima as slot placements."""
    from scheduler.solvers.bounds import heterps_bound
    from scheduler.core.errors import SchedulerError
    from scheduler.core.problem import Problem
    from scheduler.core.resources import Constraints
    from scheduler.evaluation.type_slots import random_catalog
    from scheduler.policy.slots import MAX_TYPES, MIN_TYPES, SlotView
    from scheduler.workloads.generated import random_profile

    rng = np.random.default_rng(seed + 40_000)
    views, optima = [], []
    attempts = 0
    while len(views) < count and attempts < 10 * max(count, 1):
        attempts += 1
        family = ("transformer", "resnet", "ctr")[attempts % 3]
        size = {"transformer": {"blocks": int(rng.integers(6, 23))},
                "resnet": {"blocks": [int(x) for x in rng.integers(1, 10, size=4)]},
                "ctr": {"fields": int(rng.integers(30, 111))}}[family]
        prof = random_profile(rng, family, name=f"large{seed}_{attempts}_{family}", **size)
        cat = random_catalog(rng, int(rng.integers(MIN_TYPES, MAX_TYPES + 1)), name=f"large{seed}_{attempts}")
        try:
            free = Problem.from_profile(prof, cat, Constraints(0.0, None))
            n = free.num_decisions
            single = max(float(free.seg_max_rate[0, n - 1, r]) for r in range(free.num_choices))
            problem = free.with_constraints(Constraints(float(rng.uniform(0.3, 0.7)) * single, None))
            bound = heterps_bound(problem)
        except SchedulerError:
            continue
        if not bound.exact:  # the optimum is not known within the bound's budget: not a labelled example
            continue
        optimum = bound.assignment
        view = SlotView(problem, [int(x) for x in rng.permutation(MAX_TYPES)[:problem.num_choices]])
        views.append(view)
        optima.append(view.slots(optimum))
    return views, optima


def train_policy(kind: str, *, seed: int = 0, recipe: dict[str, int] | None = None,
                 log: Callable[[str], Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """Train the policy of ``kind`` by ``recipe`` (default :data:`RECIPES`), deterministic ops on;
    returns the policy and the training record (work counts, seconds, training set names)."""
    import tensorflow as tf

    from scheduler.evaluation.generalise import train_dagger
    from scheduler.policy.rl import RL

    if kind not in RECIPES:
        raise ProblemError(f"unknown policy kind {kind!r}; use one of {', '.join(RECIPES)}")
    r = {**RECIPES[kind], **(recipe or {})}
    tf.config.experimental.enable_op_determinism()
    t0 = time.perf_counter()
    problems, optima = _training_set(kind, r, seed)
    if not problems:
        raise ProblemError(f"the {kind} recipe {r} produced no training problem")
    set_s = time.perf_counter() - t0
    solver = RL(seed=seed, iterations=0, polish=False, features=KIND_FEATURES[kind])
    info = train_dagger(solver, problems, optima=optima, imitation_steps=r["imitation_steps"],
                        dagger_steps=r["dagger_steps"], dagger_batch=r["dagger_batch"], log=log)
    info.update(training_set_seconds=set_s, problems=len(problems))
    return solver.policy, info


def main(argv: list[str] | None = None) -> int:
    """The training command (module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m scheduler.shipped", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the .npz files (the package's: scheduler/weights)")
    ap.add_argument("--kind", choices=("all", *RECIPES), default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="the tiny recipes (a smoke run, not a policy to ship)")
    args = ap.parse_args(argv)
    for kind in (RECIPES if args.kind == "all" else [args.kind]):
        recipe = (QUICK_RECIPES if args.quick else RECIPES)[kind]
        policy, info = train_policy(kind, seed=args.seed, recipe=recipe, log=print)
        meta = save_policy(policy, Path(args.out) / FILES[kind], kind=kind, features=KIND_FEATURES[kind],
                           seed=args.seed, recipe=recipe, training=info)
        print(f"{kind}: {info['problems']} training problems, {info['train_seconds']:.0f} s; wrote "
              f"{Path(args.out) / FILES[kind]} (sha256 {meta['sha256'][:16]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
