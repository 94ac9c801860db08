"""Baechi's m-ETF and m-SCT: against exhaustive search on small graphs, memory limits, the LP's
favourite children, and the solver interface."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scheduler.solvers.baechi import METF, MSCT, TaskGraph, favourite_children, graph_of, list_schedule
from scheduler.core.errors import SolverNotApplicableError
from scheduler.solvers.exact import Exact
from scheduler.workloads import dnn_partitioning as dp

from sched_helpers import random_problem


def _graph(latencies: list[float], edges: list[tuple[int, int, float]], fpgas: int, cpus: int = 0,
           size: float = 1.0, max_size: float = 1e9) -> dict:
    nodes = [{"id": i + 1, "supportedOnFpga": 1, "cpuLatency": 10.0 * lat, "fpgaLatency": lat, "isBackwardNode": 0,
              "colorClass": i + 1, "size": size} for i, lat in enumerate(latencies)]
    return {"maxSizePerFPGA": max_size, "maxFPGAs": fpgas, "maxCPUs": cpus, "nodes": nodes,
            "edges": [{"sourceId": u + 1, "destId": v + 1, "cost": c} for u, v, c in edges]}


@pytest.mark.parametrize("seed", range(6))
def test_independent_tasks_within_the_lpt_bound_of_the_exhaustive_optimum(seed: int) -> None:
    """No edges and identical accelerators: max-load is the makespan, and m-ETF (bottom level =
    the task's own time: largest first onto the first free device) is Graham's LPT, within
    4/3 - 1/(3m) of the optimum found by exhaustive search; m-SCT has no favourites and agrees."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 4))
    p = dp.from_dict(_graph(list(np.round(rng.uniform(0.5, 5.0, size=7), 3)), [], fpgas=m), f"indep{seed}")
    best = Exact(method="exhaustive").solve(p).objective
    etf, sct = METF().solve(p), MSCT().solve(p)
    assert etf.objective <= (4 / 3 - 1 / (3 * m)) * best + 1e-9
    assert sct.assignment == etf.assignment and sct.notes["favourite_children"] == 0
    assert etf.notes["makespan"] == pytest.approx(etf.objective)


def _chain_makespan(g: TaskGraph, devices: tuple[int, ...]) -> float:
    total = sum(g.time[v, d] for v, d in enumerate(devices))
    return total + sum(c for u, v, c in g.edges if devices[u] != devices[v])


@pytest.mark.parametrize("comm", [0.0, 0.7])
def test_chain_makespan_equals_the_exhaustive_optimum(comm: float) -> None:
    """On a chain of identical accelerators, the least makespan over every placement
    (exhaustive) is all on one device; m-ETF finds it."""
    p = dp.from_dict(_graph([1.0, 2.0, 0.5, 3.0, 1.5], [(i, i + 1, comm) for i in range(4)], fpgas=3), "chain")
    g = graph_of(p)
    best = min(_chain_makespan(g, d) for d in itertools.product(range(g.devices), repeat=g.n))
    device, makespan, fits = list_schedule(g)
    assert fits and makespan == pytest.approx(best) == pytest.approx(_chain_makespan(g, tuple(device)))


def test_heterps_chain_with_free_links_takes_each_layers_fastest_type() -> None:
    """With no communication the least chain makespan (exhaustive) puts each layer on its fastest
    allowed type; m-ETF's list schedule does the same."""
    p = random_problem(3, n=5, dag=False)
    g = graph_of(p)
    free = TaskGraph(g.time, tuple((u, v, 0.0) for u, v, _ in g.edges), g.memory, np.full(g.devices, np.inf),
                     g.allowed)
    best = min(_chain_makespan(free, d) for d in itertools.product(range(g.devices), repeat=g.n)
               if all(free.allowed[v, x] for v, x in enumerate(d)))
    device, makespan, _ = list_schedule(free)
    assert makespan == pytest.approx(best)


@pytest.mark.parametrize("seed", range(5))
def test_memory_limits_hold_and_are_never_beaten_by_exhaustive(seed: int) -> None:
    """Random small DAGs with tight accelerator memory and one CPU (always feasible): both placers
    return feasible placements, no better than the exhaustive optimum."""
    rng = np.random.default_rng(100 + seed)
    n = 6
    out = rng.uniform(0, 0.5, size=n)  # the format charges one cost per source node
    pairs = [(i, i + 1) for i in range(n - 1)] + [tuple(sorted(int(x) for x in rng.choice(n, 2, replace=False)))]
    edges = [(u, v, float(out[u])) for u, v in sorted(set(pairs)) if u < v]
    p = dp.from_dict(_graph(list(rng.uniform(0.5, 3.0, size=n)), edges, fpgas=2, cpus=1, size=1.0, max_size=2.0),
                     f"mem{seed}")
    best = Exact(method="exhaustive").solve(p).objective
    for solver in (METF(), MSCT()):
        s = solver.solve(p)
        assert s.feasible and s.notes["fits_memory"], s.notes
        sizes = np.bincount(np.asarray(s.assignment)[p.group_of], weights=p.size, minlength=p.num_choices)
        assert (sizes[p.max_cpus:] <= p.max_size + 1e-9).all()
        assert s.objective >= best - 1e-9


def test_favourites_are_at_most_one_per_parent_and_child() -> None:
    edges = [(0, 1, 0.1), (0, 2, 0.1), (1, 3, 0.2), (2, 3, 0.05), (3, 4, 0.3)]
    g = TaskGraph(np.array([[1.0, 1.0]] * 5), tuple(edges), np.zeros(5), np.full(2, np.inf), np.ones((5, 2), bool))
    fav = favourite_children(g)
    parents = [int(u) for u in fav if u >= 0]
    assert len(parents) == len(set(parents))            # a parent has at most one favourite child
    assert all(any(u == fav[v] and w == v for u, w, _ in edges) for v in range(5) if fav[v] >= 0)
    assert (fav >= 0).sum() >= 2                          # small communication: chains are favoured


def test_placers_apply_to_heterps_but_not_to_pss() -> None:
    from ralp_tf.plan import Cluster
    from scheduler.core.pss import PSSProblem
    from scheduler.workloads import load_profile

    p = random_problem(1, n=6)
    for solver in (METF(), MSCT()):
        s = solver.solve(p)
        assert all(p.allowed[l, r] for l, r in enumerate(s.assignment))
    pss = PSSProblem(load_profile("alexnet"), Cluster.local(2, 1))
    with pytest.raises(SolverNotApplicableError, match="task graph"):
        METF().solve(pss)
    plan = METF().plan(load_profile("alexnet"), Cluster.local(2, 1))  # falls back on the analyzer's plan
    assert plan.notes["chosen"] == "analyzer" and "solver_not_applicable" in plan.notes
