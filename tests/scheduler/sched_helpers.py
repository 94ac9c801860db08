"""Helpers of the scheduler tests: tiny hand-checked problems and the shared data folder."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from scheduler.core.problem import Problem
from scheduler.core.resources import Catalog, Constraints, ResourceType

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "dnn-partitioning"


def tiny_catalog(max_units: int = 4, bandwidth: float = math.inf) -> Catalog:
    """fast: $2/h worker GPU; slow: $0.8/h worker CPU; ps: $0.5/h PS CPU."""
    return Catalog("tiny", (
        ResourceType("fast", "/job:worker/device:GPU:0", flops=1e12, memory_bytes=1e9, price_per_hour=2.0,
                     max_units=max_units, bandwidth_bps=bandwidth),
        ResourceType("slow", "/job:worker/device:CPU:0", flops=1e11, memory_bytes=1e9, price_per_hour=0.8,
                     max_units=max_units, bandwidth_bps=bandwidth),
    ))


def tiny_problem(min_throughput: float = 100.0, **kw: object) -> Problem:
    """Two layers in a chain, batch 10, no parameters or traffic.

    compute (s/batch): layer a: fast 0.1, slow 0.2; layer b: fast 0.1, slow 0.5.
    Hand-checked at >= 100 samples/s: [slow, fast] = 2 x slow (rate 2*10/0.2 = 100) + 1 x fast
    (rate 10/0.1 = 100), $3.6/h, cost 3.6/3600*1e6/100 = $10 per million samples (optimum);
    [fast, fast] = 2 x fast (rate 2*10/0.2 = 100), $4/h, $11.11; the others miss the constraint.
    """
    return Problem("tiny", ["a", "b"], ["dense", "dense"], tiny_catalog(**kw), Constraints(min_throughput),
                   batch_size=10, compute=[[0.1, 0.2], [0.1, 0.5]], edges=[(0, 1)])


def random_problem(seed: int, n: int = 5, T: int = 3, dag: bool = True, caps: int = 6) -> Problem:
    """A random small problem with parameters, traffic, a PS type and (optionally) skip edges."""
    rng = np.random.default_rng(seed)
    types = [
        ResourceType("gpu", "/job:worker/device:GPU:0", flops=1e12, memory_bytes=4e8, price_per_hour=3.0,
                     max_units=caps, bandwidth_bps=1e9),
        ResourceType("cpu", "/job:worker/device:CPU:0", flops=1e11, memory_bytes=8e8, price_per_hour=0.7,
                     max_units=caps, bandwidth_bps=1e9),
        ResourceType("ps", "/job:ps/replica:0/task:{k}/device:CPU:0", flops=5e10, memory_bytes=2e9,
                     price_per_hour=0.5, max_units=caps, bandwidth_bps=1e9),
    ][:T]
    edges = [(i, i + 1) for i in range(n - 1)]
    if dag:
        edges += [(i, j) for i in range(n) for j in range(i + 2, n) if rng.random() < 0.2]
    kinds = list(rng.choice(["conv", "dense", "embedding", "activation"], size=n))
    prob = Problem(f"rand{seed}", [f"l{i}" for i in range(n)], kinds, Catalog("r", tuple(types)),
                   Constraints(0.0), batch_size=32, flops=rng.uniform(1e5, 5e7, n),
                   param_bytes=rng.choice([0, 1e5, 4e6, 3e7], size=n), output_bytes=rng.uniform(1e2, 5e4, n),
                   edges=edges)
    return prob.with_constraints(Constraints(0.3 * prob.best_throughput()))
