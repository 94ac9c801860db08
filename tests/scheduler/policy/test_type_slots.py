"""Type slots: one HeterPS policy over catalogs of 2-6 types (scheduler/evaluation/type_slots.py)."""
from __future__ import annotations

import numpy as np
import pytest

from ralp_tf.model.kinds import LAYER_KINDS
from scheduler.core.catalogs import CLOUD
from scheduler.core.errors import CatalogError, ProblemError
from scheduler.solvers.exact import Exact
from scheduler.core.problem import Problem
from scheduler.core.resources import Catalog, Constraints
from scheduler.policy.envs import HeterPSEnv
from scheduler.policy.lstm_policy import LSTMPolicy
from scheduler.evaluation.type_slots import PERTURB, random_catalog, slot_solver
from scheduler.policy.slots import MAX_TYPES, PAPER_PER_TYPE, SlotEnv, SlotView, permuted_problem, slot_feature_dim


def small_problem(catalog: Catalog, seed: int = 0, n: int = 6) -> Problem:
    """A chain of ``n`` layers (conv, dense, embedding, activation) on ``catalog`` at 30% of its
    best throughput."""
    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(["conv", "dense", "embedding", "activation"], size=n))
    p = Problem(f"small{seed}", [f"l{i}" for i in range(n)], kinds, catalog, Constraints(0.0), batch_size=32,
                flops=rng.uniform(1e6, 5e8, n), param_bytes=rng.choice([0, 1e5, 4e6, 3e7], size=n),
                output_bytes=rng.uniform(1e2, 5e4, n), edges=[(i, i + 1) for i in range(n - 1)])
    return p.with_constraints(Constraints(0.3 * p.best_throughput()))


# ----------------------------------------------------------------------------- catalogs
def test_random_catalog_valid_and_seeded() -> None:
    for T in range(2, MAX_TYPES + 1):
        for s in range(5):
            a = random_catalog(np.random.default_rng(s), T)
            b = random_catalog(np.random.default_rng(s), T)
            assert a == b  # seeded: same draw
            assert len(a) == T and len(set(a.names)) == T
            assert any(t.role == "worker" for t in a.types)  # every layer kind has a type that may run it
            for t in a.types:
                base = next(c for c in CLOUD.types if t.name.startswith(c.name + "_"))
                assert t.device_template == base.device_template
                assert PERTURB["price_factor"][0] - 1e-3 <= t.price_per_hour / base.price_per_hour \
                    <= PERTURB["price_factor"][1] + 1e-3
                assert PERTURB["flops_factor"][0] - 1e-3 <= t.flops / base.flops <= PERTURB["flops_factor"][1] + 1e-3
                assert PERTURB["link_bps"][0] * 0.999 <= t.bandwidth_bps <= PERTURB["link_bps"][1] * 1.001
                assert PERTURB["max_units"][0] <= t.max_units <= PERTURB["max_units"][1]
    assert random_catalog(np.random.default_rng(0), 4) != random_catalog(np.random.default_rng(1), 4)
    for bad in (1, 7, 2.5, True):
        with pytest.raises(CatalogError, match="2..6 types"):
            random_catalog(np.random.default_rng(0), bad)


# ----------------------------------------------------------------------------- slots
@pytest.mark.parametrize("T", [2, 5])
def test_padding_and_masking_shapes(T: int) -> None:
    rng = np.random.default_rng(T)
    p = small_problem(random_catalog(rng, T))
    slots = [int(s) for s in rng.permutation(MAX_TYPES)[:T]]
    view = SlotView(p, slots)
    env = SlotEnv(view)
    assert env.feature_dim == slot_feature_dim() and env.A == MAX_TYPES
    env.reset(3)
    x, m = env.observe(0)
    assert x.shape == (3, slot_feature_dim()) and m.shape == (3, MAX_TYPES)
    absent = [s for s in range(MAX_TYPES) if s not in slots]
    assert not m[:, absent].any() and m[:, slots].any()
    # Each slot block is [present, is_ps, ...]; an absent slot's block is all zeros.
    width = (slot_feature_dim() - _glob_width()) // MAX_TYPES
    blocks = x[:, _glob_width():].reshape(3, MAX_TYPES, width)
    assert (blocks[:, absent] == 0).all()
    assert (blocks[:, slots, 0] == 1).all()  # present flag
    for r, s in enumerate(slots):
        assert (blocks[:, s, 1] == (p.catalog.types[r].role == "ps")).all()
    # The paper's features of type r sit in its slot, whichever slot that is.
    inner = HeterPSEnv(p)
    inner.reset(3)
    xi, _ = inner.observe(0)
    head = len(LAYER_KINDS) + 3  # kinds one-hot and three log sizes come first
    for r, s in enumerate(slots):
        np.testing.assert_array_equal(blocks[:, s, 2:2 + PAPER_PER_TYPE],
                                      xi[:, head + PAPER_PER_TYPE * r: head + PAPER_PER_TYPE * (r + 1)])


def _glob_width() -> int:
    from scheduler.policy.slots import _inner_layout

    return len(_inner_layout(2, True)[0])


def test_absent_slots_are_never_chosen() -> None:
    """Even a policy whose logits favour the empty slots by e^50 only picks present ones."""
    rng = np.random.default_rng(1)
    p = small_problem(random_catalog(rng, 2), seed=1)
    view = SlotView(p, [4, 1])
    env = SlotEnv(view)
    bias = np.where(view.present, 0.0, 50.0)
    pol = LSTMPolicy(env.feature_dim, env.A, hidden=8, seed=0, initial_bias=bias)
    for greedy, batch in ((True, 1), (False, 16)):
        _, M, a = pol.rollout(env, batch, greedy=greedy)
        assert set(np.unique(a)) <= {1, 4}
        assert not M[..., [0, 2, 3, 5]].any()
    assert set(np.unique(pol.beam(env, 8))) <= {1, 4}
    with pytest.raises(ProblemError, match="empty slot"):
        view.types(np.zeros(p.num_decisions, dtype=np.int64))


def test_slot_view_refuses_bad_input() -> None:
    p = small_problem(random_catalog(np.random.default_rng(0), 3))
    with pytest.raises(ProblemError, match="distinct slots"):
        SlotView(p, [0, 0, 1])
    with pytest.raises(ProblemError, match="distinct slots"):
        SlotView(p, [0, 1, 6])
    one = Catalog("one", (CLOUD.types[0],))
    with pytest.raises(ProblemError, match="2..6"):
        SlotView(small_problem(one))


def test_permuted_catalog_same_exact_optimum() -> None:
    """The cost of a placement does not depend on the order of the catalog's types."""
    rng = np.random.default_rng(7)
    for T in (2, 4, 6):
        p = small_problem(random_catalog(rng, T), seed=T, n=8)
        opt = Exact().solve(p)
        for _ in range(3):
            order = [int(x) for x in rng.permutation(T)]
            q = permuted_problem(p, order)
            got = Exact().solve(q)
            assert got.objective == pytest.approx(opt.objective, rel=1e-12)
            inverse = np.argsort(order)
            assert q.objective(inverse[np.asarray(opt.assignment)]) == pytest.approx(opt.objective, rel=1e-12)
    with pytest.raises(ProblemError, match="permutation"):
        permuted_problem(p, [0, 0, 1, 2, 3, 4])


def test_tiny_training_places_on_2_and_5_types() -> None:
    """A few DAgger steps give one policy that places problems of 2 and of 5 types on valid types."""
    from scheduler.evaluation.generalise import train_dagger

    rng = np.random.default_rng(3)
    train, optima = [], []
    for i, T in enumerate((3, 4, 6)):
        p = small_problem(random_catalog(rng, T), seed=10 + i)
        view = SlotView(p, [int(s) for s in rng.permutation(MAX_TYPES)[:T]])
        train.append(view)
        optima.append(view.slots(Exact().solve(p).assignment))
    solver = slot_solver(0, samples=4, beam=4)
    info = train_dagger(solver, train, optima=optima, imitation_steps=6, dagger_steps=3, dagger_batch=2)
    assert info["imitation_steps"] == 6
    for T in (2, 5):
        p = small_problem(random_catalog(rng, T), seed=20 + T)
        a, _ = solver.apply(p)
        a = np.asarray(a)
        assert ((a >= 0) & (a < T)).all() and p.allowed[np.arange(len(a)), a].all()
        assert np.isfinite(p.penalized(a))


def test_saved_policies_load_with_the_same_weights(tmp_path) -> None:
    """save_policies / load_policies round-trip (JSON metadata, no unsafe deserialiser)."""
    from scheduler.evaluation.type_slots import load_policies, save_policies

    pol = LSTMPolicy(7, 3, hidden=8, seed=3)
    path = tmp_path / "p.npz"
    save_policies({"alexnet": pol}, path)
    (name, back), = load_policies(path).items()
    assert name == "alexnet" and (back.feature_dim, back.num_actions, back.hidden) == (7, 3, 8)
    for a, b in zip(pol.variables, back.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
