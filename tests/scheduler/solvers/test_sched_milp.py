"""The non-contiguous max-load MILP (HiGHS) and the generated branchy layer graphs."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from scheduler.core.errors import ProblemError, SolverNotApplicableError, WorkloadError
from scheduler.solvers.exact import Exact
from scheduler.solvers.milp import MILP
from scheduler.workloads import dnn_partitioning as dp
from scheduler.workloads.layer_graphs import branchy_graph


def _brute(p: dp.MaxLoadProblem) -> float:
    best = np.inf
    for combo in itertools.product(range(p.num_choices), repeat=p.num_decisions):
        a = np.array(combo)
        if p.allowed[np.arange(p.num_decisions), a].all():
            best = min(best, p.objective(a))
    return best


@pytest.mark.parametrize("seed,training", [(0, False), (1, True), (2, False), (3, True)])
def test_milp_equals_exhaustive_over_all_placements(seed: int, training: bool) -> None:
    d = branchy_graph(blocks=1, branches=2, branch_len=2, training=training, fpgas=2, cpus=1, seed=seed,
                      size_slack=1.2)
    p = dp.from_dict(d)
    assert p.num_choices ** p.num_decisions <= 3 ** 6
    s = MILP().solve(p)
    brute = _brute(p)
    assert s.objective == pytest.approx(brute, rel=1e-6)
    assert s.objective <= Exact().solve(p).objective + 1e-9  # never worse than the contiguous optimum
    assert s.notes["proven_optimal"] and s.notes["gap"] == pytest.approx(0.0, abs=1e-6)
    assert s.notes["dual_bound"] <= s.objective + 1e-9


def test_milp_bad_input_and_not_applicable(tiny) -> None:
    with pytest.raises(SolverNotApplicableError, match="max-load"):
        MILP().solve(tiny)
    with pytest.raises(ProblemError, match="node_limit"):
        MILP(node_limit=0)
    with pytest.raises(ProblemError, match="time_limit"):
        MILP(time_limit=0)


def test_branchy_graph_shape_and_format() -> None:
    d = branchy_graph(blocks=3, branches=4, branch_len=3, training=True, seed=5)
    again = branchy_graph(blocks=3, branches=4, branch_len=3, training=True, seed=5)
    assert json.dumps(d) == json.dumps(again)  # seeded
    p = dp.from_dict(json.loads(json.dumps(d)))  # the importer's validation accepts it
    fwd = [n for n in d["nodes"] if not n["isBackwardNode"]]
    assert len(d["nodes"]) == 2 * len(fwd) and p.num_decisions == len(fwd)
    masks, _ = p.ideals()
    assert len(masks) > 3 * 2 ** 4  # parallel branches: many more ideals than a chain
    with pytest.raises(WorkloadError, match="branches"):
        branchy_graph(blocks=1, branches=0, branch_len=1)


def test_dp_pruning_by_bound_is_exact(monkeypatch) -> None:
    import scheduler.solvers.exact as exact

    p = dp.from_dict(branchy_graph(blocks=3, branches=3, branch_len=2, training=True, seed=4))
    a, notes = exact.solve_maxload(p)
    assert notes["pairs_pruned_by_bound"] > 0 and notes["upper_bound"] >= p.objective(a)
    monkeypatch.setattr(exact, "_contiguous_upper_bound", lambda problem: float("inf"))
    b, plain = exact.solve_maxload(p)
    assert plain["pairs_pruned_by_bound"] == 0
    assert p.objective(a) == pytest.approx(p.objective(b), rel=1e-12)
