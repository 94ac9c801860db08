"""The exact max-load DP reaches what the reference DP reaches: zero-latency leaf classes are
merged first (the reference's contraction), colour classes on a forward cycle are fused, and the
optimum equals exhaustive search where the merge cannot matter."""
from __future__ import annotations

import numpy as np
import pytest

from scheduler.solvers.contraction import contract, expand
from scheduler.solvers.exact import Exact, solve_maxload_dp
from scheduler.evaluation.exact_reach import ideals_before_contraction
from scheduler.core.maxload import IDEALS_LIMIT
from scheduler.workloads import dnn_partitioning as dp
from scheduler.workloads.layer_graphs import leafy_graph


def _node(i: int, lat: float, size: float = 1.0, color: int | None = None) -> dict:
    return {"id": i, "supportedOnFpga": 1, "cpuLatency": 10 * lat, "fpgaLatency": lat, "isBackwardNode": 0,
            "colorClass": i if color is None else color, "size": size}


@pytest.mark.parametrize("seed", range(4))
def test_contracted_optimum_equals_the_uncontracted_dp(seed: int) -> None:
    """Constants (no latency, no memory, one consumer) merged into their op: the contiguous DP on
    the contracted graph finds the optimum the same DP finds on the original (small enough
    here to enumerate its ideals)."""
    rng = np.random.default_rng(seed)
    ops = [_node(i + 1, float(rng.uniform(0.5, 3))) for i in range(5)]
    consts = [_node(10 + i, 0.0, size=0.0) for i in range(3)]
    edges = [{"sourceId": i + 1, "destId": i + 2, "cost": 0.2} for i in range(4)]
    edges += [{"sourceId": 10 + i, "destId": int(rng.integers(1, 6)), "cost": 0.3} for i in range(3)]
    d = {"maxSizePerFPGA": 3.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": ops + consts, "edges": edges}
    p = dp.from_dict(d, f"consts{seed}")
    c = contract(p)
    assert c.merged == 3 and c.merged_with_memory == 0 and c.problem.num_decisions == 5
    s = Exact().solve(p)
    assert s.notes["merged_classes"] == 3 and s.notes["contracted_classes"] == 5
    a, _ = solve_maxload_dp(p)
    assert s.objective == pytest.approx(p.objective(a))
    assert s.objective >= Exact(method="exhaustive").solve(p).objective - 1e-9  # contiguous: no better than any
    np.testing.assert_array_equal(expand(c, p, np.arange(5) % p.num_choices)[c.group_map == 0], 0)


def test_leafy_graphs_beyond_the_ideal_limit_are_solved() -> None:
    g = leafy_graph(blocks=10, branches=3, branch_len=3, leaves=1, seed=1)
    p = dp.from_dict(g, g["name"])
    assert 100 <= len(g["nodes"]) <= 300
    assert ideals_before_contraction(p) > IDEALS_LIMIT
    s = Exact().solve(p)
    assert s.feasible and s.notes["ideals"] < IDEALS_LIMIT
    assert s.objective == pytest.approx(12.983875)  # the reference DP's max-load on this graph


def test_colour_classes_on_a_forward_cycle_are_fused() -> None:
    """Class A holds nodes 1 and 3, class B node 2, and 1 -> 2 -> 3: A and B must share a device."""
    nodes = [_node(1, 1.0, color=7), _node(2, 2.0), _node(3, 1.5, color=7), _node(4, 2.5)]
    edges = [{"sourceId": 1, "destId": 2, "cost": 0.1}, {"sourceId": 2, "destId": 3, "cost": 0.1},
             {"sourceId": 3, "destId": 4, "cost": 0.1}]
    p = dp.from_dict({"maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 0, "nodes": nodes, "edges": edges}, "cyc")
    assert p.fused_classes == 1 and p.num_decisions == 2
    assert Exact().solve(p).objective == pytest.approx(Exact(method="exhaustive").solve(p).objective)
