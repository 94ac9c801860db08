"""The generalising policy (issue 14 item 2): lookahead features, the max-load expert, beam decode, DAgger."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scheduler.core.errors import ProblemError, WorkloadError
from scheduler.evaluation.generalise import expert_actions, rule_placement, split_optimum, split_tables, train_dagger
from scheduler.policy.policy_features import LookaheadHeterPSEnv, LookaheadMaxLoadEnv, exception_hint
from scheduler.policy.envs import HeterPSEnv, MaxLoadEnv
from scheduler.policy.rl import RL
from scheduler.workloads import dnn_partitioning as dp
from scheduler.workloads.layer_graphs import branchy_graph, training_layer_graphs

from sched_helpers import random_problem


def _split_assignment(p: dp.MaxLoadProblem, actions: np.ndarray) -> np.ndarray:
    env = MaxLoadEnv(p)
    env.reset(1)
    for t in range(env.n):
        env.observe(t)
        env.step(t, np.array([int(actions[t])]))
    return env.assignments()[0]


@pytest.mark.parametrize("seed,training,cpus", [(0, False, 1), (1, True, 0), (2, False, 0), (3, True, 1)])
def test_split_expert_equals_exhaustive_linear_splits(seed: int, training: bool, cpus: int) -> None:
    p = dp.from_dict(branchy_graph(blocks=2, branches=2, branch_len=2, training=training, fpgas=3, cpus=cpus,
                                   seed=seed, size_slack=2.0))
    n = p.num_decisions
    best = np.inf
    for cuts in itertools.product([0, 1], repeat=n - 1):  # every stay/next sequence the policy can take
        acts = np.r_[0, cuts]
        if acts.sum() <= p.max_fpgas - 1:
            best = min(best, p.penalized(_split_assignment(p, acts)))
    assert best < 4.0  # a feasible split exists (penalized adds 4 to infeasible ones)
    tables = split_tables(p)
    assert tables[1][0, p.max_fpgas] == pytest.approx(best, rel=1e-9)
    opt = split_optimum(p, tables)
    assert p.penalized(_split_assignment(p, opt)) == pytest.approx(best, rel=1e-9)
    # Along the optimum the expert repeats it; off it, following the expert from any state is optimal-to-go.
    np.testing.assert_array_equal(expert_actions(tables, opt[None, :], p.max_fpgas)[0], opt)
    rng = np.random.default_rng(seed)
    wander = np.r_[0, (rng.random(n - 1) < 0.3).astype(np.int64)]
    wander[np.cumsum(wander) > p.max_fpgas - 1] = 0
    labels = expert_actions(tables, wander[None, :], p.max_fpgas)[0]
    assert labels.shape == (n,) and set(labels.tolist()) <= {0, 1} and labels[0] == 0


def test_lookahead_heterps_features_are_the_cost_models_completions() -> None:
    p = random_problem(3, n=6)
    env = LookaheadHeterPSEnv(p)
    assert env.feature_dim == HeterPSEnv(p).feature_dim + 5 * env.A + 2
    env.reset(2)
    env.step(0, np.array([0, 1]))
    env.step(1, np.array([1, 1]))
    x, mask = env.observe(2)
    T = env.A
    for row, prefix in enumerate(([0, 1], [1, 1])):
        c2 = []
        for r in range(T):
            c2.append(min(p.penalized(prefix + [r] + [s] * 3) for s in range(T)))
        m = min(c2)
        f = x[row, env.base_dim:]
        np.testing.assert_allclose(f[:T], np.clip(np.log10(np.array(c2) / m), 0, 2), atol=1e-5)
        assert f[3 * T:4 * T].tolist() == [float(np.isclose(c, m)) for c in c2]
    hint = exception_hint(p)
    assert p.penalized(hint) <= min(p.penalized(np.full(6, s)) for s in range(T)) + 1e-12


def test_lookahead_maxload_features_and_rule() -> None:
    p = dp.from_dict(branchy_graph(blocks=3, branches=2, branch_len=2, fpgas=3, cpus=1, seed=5))
    env = LookaheadMaxLoadEnv(p)
    assert env.feature_dim == MaxLoadEnv(p).feature_dim + 9
    env.reset(1)
    x, mask = env.observe(0)
    assert not mask[0, 1] and x.shape == (1, env.feature_dim) and np.isfinite(x).all()
    a = rule_placement(p)
    assert p.evaluate(a).feasible


def test_beam_of_width_one_is_the_greedy_decode_and_deterministic() -> None:
    p = random_problem(2, n=7)
    solver = RL(seed=0, iterations=0, features="lookahead", beam=4, polish=False)
    train_dagger(solver, [p, random_problem(4, n=5)], imitation_steps=3, dagger_steps=2, dagger_batch=2)
    env = solver._env(p)
    greedy = solver.policy.rollout(env, 1, greedy=True)[2]
    np.testing.assert_array_equal(solver.policy.beam(env, 1), greedy)
    b1, b2 = solver.policy.beam(env, 4), solver.policy.beam(env, 4)
    np.testing.assert_array_equal(b1, b2)
    assert 1 <= len(b1) <= 4
    s1, s2 = solver.solve(p), solver.solve(p)
    assert s1.assignment == s2.assignment and s1.notes["policy_objective"] == s2.notes["policy_objective"]
    assert s1.objective <= s1.notes["greedy_decode_objective"] + 1e-12


@pytest.mark.slow  # over ~5 s: the fast tier's limit
@pytest.mark.extended  # twin: test_sched_generalise.py::test_imitation_learns_the_target
def test_dagger_on_maxload_graphs_and_bad_input() -> None:
    graphs = [dp.from_dict(g, g["name"]) for g in training_layer_graphs(2, seed=1, min_nodes=10, max_nodes=30)]
    assert all(10 <= sum(1 for m in g.groups) for g in graphs)
    solver = RL(seed=0, iterations=0, features="lookahead", polish=False)
    info = train_dagger(solver, graphs, imitation_steps=4, dagger_steps=2, dagger_batch=2)
    assert info["trained_on"] == [g.name for g in graphs] and info["dagger_steps"] == 2
    again = RL(seed=0, iterations=0, features="lookahead", polish=False)
    train_dagger(again, graphs, imitation_steps=4, dagger_steps=2, dagger_batch=2)
    for a, b in zip(solver.policy.variables, again.policy.variables):  # same seed and budget: same policy
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ProblemError, match="trains nothing"):
        train_dagger(solver, graphs, imitation_steps=0, dagger_steps=0)
    with pytest.raises(ProblemError, match="unknown feature set"):
        RL(features="fancy")
    with pytest.raises(ProblemError, match="beam must be"):
        RL(beam=-1)
    with pytest.raises(WorkloadError, match="count"):
        training_layer_graphs(-1)
    basic = RL(seed=0, iterations=0, polish=False)
    basic.imitate([random_problem(1, n=4)], [np.zeros(4, dtype=np.int64)], iterations=1)
    with pytest.raises(ProblemError, match="feature set"):
        basic.policy.rollout(LookaheadHeterPSEnv(random_problem(1, n=4)), 1, greedy=True)


@pytest.mark.slow
@pytest.mark.extended  # twin: test_sched_generalise.py::test_leave_one_out_never_trains_on_held_out
def test_leave_one_out_with_lookahead_never_trains_on_held_out() -> None:
    from scheduler.evaluation.generalise import leave_one_out

    names = ["ctr_dnn", "word2vec_nce"]
    rows = leave_one_out(names, generated=2, imitation_steps=20, dagger_steps=5, log=lambda s: None)
    assert [r["workload"] for r in rows] == names
    for r in rows:
        assert r["workload"] not in r["trained_on"] and set(r["trained_on"]) == set(names) - {r["workload"]}
        if r["policy_ratio"] is not None:
            assert r["polished_ratio"] is not None and r["polished_ratio"] <= r["policy_ratio"] + 1e-9
