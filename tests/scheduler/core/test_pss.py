"""Placement for the PSS cluster that runs: the PSS problem priced by ralp_tf's cost model, and the
contract of ``Solver.plan``: never predicted slower than the analyzer's plan, every figure named
by its model."""
from __future__ import annotations

import numpy as np
import pytest

import scheduler
from ralp_tf.plan import Cluster, analyze, estimate
from scheduler.core.errors import ProblemError
from scheduler.core.pss import WORKER_CHOICE, PSSProblem, heterps_view
from scheduler.workloads import load_profile


@pytest.fixture(scope="module")
def alexnet():  # type: ignore[no-untyped-def]
    return load_profile("alexnet")


def test_the_pss_problem_is_the_cost_model(alexnet) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster.local(2, 2, bandwidth="100mbit")
    p = PSSProblem(alexnet, cluster)
    assert p.num_choices == 3 and p.num_decisions == len(alexnet.compute_layers)
    a = p.analyzer_assignment()
    assert p.penalized(a) == pytest.approx(1.0)  # the analyzer's plan is the scale
    stock = np.zeros(p.num_decisions, dtype=np.int64)  # the faster of round-robin and balanced storage
    assert p.objective(stock) == pytest.approx(estimate(alexnet, cluster, p.plan_of(stock)).step_s)
    assert p.objective(stock) <= estimate(alexnet, cluster, None).step_s
    ev = p.evaluate(a)
    assert ev.storage in ("round-robin", "balanced") and p.evaluate(a) is ev  # memoised
    plan = p.plan_of(a)
    assert estimate(alexnet, cluster, plan).step_s == pytest.approx(ev.step_s)
    np.testing.assert_array_equal(p.assignment_of(plan), a)


def test_ps_refusal_decides_which_layers_may_go_to_a_ps(alexnet) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    refused = dataclasses.replace(alexnet, layers=tuple(
        dataclasses.replace(l, ps_refusal="no CPU kernel") if l.name == "fc1" else l for l in alexnet.layers))
    p = PSSProblem(refused, Cluster.local(2, 1))
    i = p.index["fc1"]
    assert p.allowed[i].tolist() == [True, False] and p.allowed[p.index["fc2"]].tolist() == [True, True]
    bad = np.zeros(p.num_decisions, dtype=np.int64)
    bad[i] = 1
    with pytest.raises(ProblemError, match="'fc1' cannot compute on a PS task \\(no CPU kernel\\)"):
        p.objective(bad)
    assert p.from_types(np.ones(p.num_decisions, bool))[i] == WORKER_CHOICE
    view = heterps_view(p)
    assert not view.allowed[i, [t.role for t in view.catalog.types].index("ps")]


def test_from_types_spreads_weights_longest_first(alexnet) -> None:  # type: ignore[no-untyped-def]
    p = PSSProblem(alexnet, Cluster.local(2, 2))
    heads = [p.index[n] for n in ("fc1", "fc2", "logits")]
    on = np.zeros(p.num_decisions, bool)
    on[heads] = True
    a = p.from_types(on)
    assert a[p.index["fc1"]] != a[p.index["fc2"]]  # the two largest layers on different PS tasks
    assert (a[~on] == WORKER_CHOICE).all()


@pytest.mark.parametrize("ps", [1, 2])
@pytest.mark.parametrize("make", [
    lambda: scheduler.Greedy(), lambda: scheduler.RandomSearch(samples=40), lambda: scheduler.RALP(),
    lambda: scheduler.METF(), lambda: scheduler.RL(),
    lambda: scheduler.RL(polish=True, polish_evaluations=60),
])
def test_every_policy_is_never_predicted_slower_than_the_analyzer(alexnet, ps: int, make) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster.local(2, ps, bandwidth="100mbit")
    solver = make()
    plan = solver.plan(alexnet, cluster)
    analyzer = estimate(alexnet, cluster, analyze(alexnet, cluster).plan).step_s
    step = estimate(alexnet, cluster, plan).step_s
    assert step <= analyzer * (1 + 1e-12)
    n = plan.notes
    assert n["pss_predicted_step_s"] == pytest.approx(step) and n["analyzer_predicted_step_s"] == pytest.approx(analyzer)
    assert n["chosen"] in ("analyzer", "solver") and "ralp_tf.plan.estimate" in n["cost_model"]
    assert plan.policy == f"scheduler.{solver.name}" and plan.provisioning == {"worker": 2, "ps": ps}
    if solver.name == "rl":
        assert "heterps_predicted_throughput" in n and n["solver_policy"] == "shipped:heterps"
    plan.validate(alexnet, cluster)


def test_exact_enumerates_small_pss_problems_and_refuses_large_ones(alexnet) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from scheduler.core.errors import SolverNotApplicableError

    small = dataclasses.replace(alexnet, layers=tuple(
        dataclasses.replace(l, ps_refusal="" if l.name in ("fc1", "fc2", "logits") else (l.ps_refusal or "kept"))
        for l in alexnet.layers))
    p = PSSProblem(small, Cluster.local(2, 1, bandwidth="100mbit"))
    s = scheduler.Exact().solve(p)  # 2^3 placements
    assert s.notes["assignments"] == 8
    assert s.objective <= p.objective(p.analyzer_assignment()) + 1e-12
    with pytest.raises(SolverNotApplicableError, match="would enumerate"):
        scheduler.Exact().solve(PSSProblem(alexnet, Cluster.local(2, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alexnet", "vgg16", "resnet", "ctr_dnn", "matchnet", "word2vec_nce"])
def test_the_analyzer_is_predicted_within_its_threshold_of_the_best_solver(name: str) -> None:
    """The menu holds every cut a solver finds worth its compute: on each built-in workload, 100 Mbit/s
    and 1 Gbit/s, one and two PS tasks, the analyzer's plan is predicted within ``min_speedup`` of
    the fastest of the RL policy (polished) and greedy."""
    p = load_profile(name)
    for bw in ("100mbit", "1gbit"):
        for ps in (1, 2):
            cluster = Cluster.local(2, ps, bandwidth=bw)
            a = analyze(p, cluster)
            best = min(solver.plan(p, cluster).notes["pss_predicted_step_s"]
                       for solver in (scheduler.RL(polish=True, polish_evaluations=200), scheduler.Greedy()))
            assert a.chosen.estimate.step_s <= best * a.min_speedup, (bw, ps, a.chosen.label)
