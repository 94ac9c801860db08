"""Harder workloads: where random search and greedy fall well short of the optimum.

The built-in problems are easy (random search reaches the optimum on 4 of 6), so these add
many layers, more resource types and tight memory. Each is generated, seeded and defined by
its recipe below (never picked by its result):

* ``inception_tight`` (max-load): :func:`~scheduler.workloads.layer_graphs.branchy_graph` with 20
  blocks of 3 branches of up to 4 nodes (175 nodes), 6 accelerators, memory per accelerator
  1.4x the even share (``size_slack=1.4``), seed 2.
* ``inception_training_tight`` (max-load): 12 blocks of 4 branches of up to 3 nodes, training
  (forward and backward nodes, 190 in all), 8 accelerators, ``size_slack=1.4``, seed 2.
* ``ctr_cloud5`` (HeterPS): the first ``ctr``-family profile of
  :func:`~scheduler.workloads.generated.random_profile` (``default_rng(14)``) with at least 25
  decisions, on the five-type catalog :data:`scheduler.core.catalogs.CLOUD5`, at 25% of its best
  achievable throughput.

The exact references: the contiguous DP and the MILP's proven bound (max-load), the θ-sweep DP
(HeterPS).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from scheduler.core.maxload import MaxLoadProblem
from scheduler.core.problem import Problem

__all__ = ["MAXLOAD_RECIPES", "HARD_WORKLOADS", "hard_workload"]

#: Recipes of the max-load workloads (arguments of ``branchy_graph``).
MAXLOAD_RECIPES: dict[str, dict[str, Any]] = {
    "inception_tight": dict(blocks=20, branches=3, branch_len=4, size_slack=1.4, seed=2),
    "inception_training_tight": dict(blocks=12, branches=4, branch_len=3, training=True, size_slack=1.4, fpgas=8,
                                     seed=2),
}


def _maxload(name: str) -> Callable[[], MaxLoadProblem]:
    def make() -> MaxLoadProblem:
        from scheduler.workloads.dnn_partitioning import from_dict
        from scheduler.workloads.layer_graphs import branchy_graph

        return from_dict(branchy_graph(name=name, **MAXLOAD_RECIPES[name]), name)

    return make


def _generated_heterps(name: str, family: str, min_decisions: int, seed: int) -> Callable[[], Problem]:
    def make() -> Problem:
        from scheduler.core.catalogs import CLOUD5
        from scheduler.core.resources import Constraints
        from scheduler.core.problem import default_throughput
        from scheduler.workloads.generated import random_profile

        rng = np.random.default_rng(seed)
        while True:
            prof = random_profile(rng, family, name=name)
            if len(prof.compute_layers) >= min_decisions:
                break
        free = Problem.from_profile(prof, CLOUD5, Constraints(0.0, None), name=name, check=True)
        return free.with_constraints(Constraints(default_throughput(free), None))

    return make


#: Name -> builder of every harder workload.
HARD_WORKLOADS: dict[str, Callable[[], Any]] = {
    "inception_tight": _maxload("inception_tight"),
    "inception_training_tight": _maxload("inception_training_tight"),
    "ctr_cloud5": _generated_heterps("ctr_cloud5", "ctr", 25, 14),
}


def hard_workload(name: str) -> Any:
    """The problem of a harder workload by name (:data:`HARD_WORKLOADS`)."""
    return HARD_WORKLOADS[name]()
