"""The shipped policies: the default ``rl`` policy decides without training, a saved policy whose
feature set does not match is refused, the same seed and recipe give the same weights bit for
bit, and the decision-latency measurement."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import scheduler.policy.rl as rl_module
from scheduler.core.errors import PolicyMismatchError
from scheduler.policy.rl import RL
from scheduler.evaluation.recipes import QUICK_RECIPES, train_policy
from scheduler.policy.shipped import FILES, WEIGHTS_DIR, load_policy, save_policy, shipped_policy, weights_digest
from scheduler.workloads import builtin_problem

from sched_helpers import random_problem


def test_the_shipped_files_load_with_this_codes_feature_sets() -> None:
    for kind, name in FILES.items():
        policy, meta = load_policy(WEIGHTS_DIR / name)
        assert meta["kind"] == kind and weights_digest(policy.get_weights()) == meta["sha256"]
        assert meta["training"]["problems"] >= 10 and meta["recipe"]


def test_the_default_rl_policy_does_not_train() -> None:
    """``RL()`` and the policy name ``rl`` apply the shipped policy: no iteration, no optimizer
    step, the weights unchanged, no polish."""
    from ralp_tf.place.policies import resolve_policy

    solver = resolve_policy("rl")
    assert isinstance(solver, RL) and not solver.train_from_scratch and solver.iterations is None
    policy, _ = shipped_policy("heterps")
    before = weights_digest(policy.get_weights())
    s = solver.solve(builtin_problem("alexnet"))
    assert s.notes["policy"] == "shipped:heterps" and s.notes["features"] == "slots"
    assert "iterations" not in s.notes and s.notes["polished"] is False
    assert solver.policy is policy and int(policy.optimizer.iterations.numpy()) == 0
    assert weights_digest(policy.get_weights()) == before
    assert s.constraint_met


def _tampered(tmp_path: Path, change: dict) -> Path:
    policy, meta = load_policy(WEIGHTS_DIR / FILES["maxload"])
    path = tmp_path / "p.npz"
    save_policy(policy, path, kind=meta["kind"], features=meta["features"])
    data = dict(np.load(path))
    m = json.loads(str(data["__meta__"]))
    for key, value in change.items():
        target = m
        *head, last = key.split(".")
        for h in head:
            target = target[h]
        target[last] = value
    data["__meta__"] = np.array(json.dumps(m))
    with open(path, "wb") as f:
        np.savez(f, **data)
    return path


@pytest.mark.parametrize("change, words", [
    ({"signature.version": 1}, ["differ in version", "python -m scheduler.shipped"]),
    ({"signature.layer_kinds": ["input", "conv"]}, ["differ in layer_kinds"]),
    ({"format": "scheduler.policy/0"}, ["format"]),
    ({"sha256": "0" * 64}, ["SHA-256"]),
])
def test_a_mismatched_saved_policy_is_refused(tmp_path: Path, change: dict, words: list[str]) -> None:
    with pytest.raises(PolicyMismatchError) as err:
        load_policy(_tampered(tmp_path, change))
    assert all(w in str(err.value) for w in words), str(err.value)
    with pytest.raises(PolicyMismatchError, match="feature set 'lookahead', not 'slots'"):
        load_policy(WEIGHTS_DIR / FILES["maxload"], features="slots")
    (tmp_path / "junk.npz").write_bytes(b"not a policy")
    with pytest.raises(PolicyMismatchError, match="not a saved scheduler policy"):
        load_policy(tmp_path / "junk.npz")


@pytest.mark.slow
def test_same_seed_and_recipe_same_weights_bit_for_bit() -> None:
    """Slow only because each fresh policy traces its TensorFlow update (about 2 s)."""
    recipe = dict(QUICK_RECIPES["maxload"], graphs=1, imitation_steps=2, dagger_steps=0)
    a, _ = train_policy("maxload", seed=5, recipe=recipe)
    b, _ = train_policy("maxload", seed=5, recipe=recipe)
    assert weights_digest(a.get_weights()) == weights_digest(b.get_weights())


@pytest.mark.slow
@pytest.mark.release
@pytest.mark.parametrize("kind", list(FILES))
def test_the_documented_command_reproduces_the_shipped_weights(kind: str) -> None:
    """``python -m scheduler.shipped`` (the recipe and seed in the shipped file) makes the same bytes."""
    _, meta = load_policy(WEIGHTS_DIR / FILES[kind])
    policy, _ = train_policy(kind, seed=meta["seed"], recipe=meta["recipe"])
    assert weights_digest(policy.get_weights()) == meta["sha256"]


class _Clock:
    """A fake ``time.perf_counter``: advances only when an env observes (1 ms per decision)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_decision_latency_is_the_median_per_decision_of_greedy_decodes_with_features_computed(monkeypatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(rl_module.time, "perf_counter", clock)
    p = random_problem(2, n=7)
    solver = RL()
    solver._resolve(p)
    real_env = solver._env
    cleared = []

    def timed_env(problem):  # type: ignore[no-untyped-def]
        env = real_env(problem)
        observe, clear = env.observe, env.clear_memo

        def slow_observe(t: int):  # type: ignore[no-untyped-def]
            clock.now += 1e-3 * (2.0 if len(cleared) % 2 else 1.0)  # decodes alternate 1 and 2 ms per decision
            return observe(t)

        def counted_clear() -> None:
            cleared.append(1)
            clear()

        env.observe, env.clear_memo = slow_observe, counted_clear
        return env

    monkeypatch.setattr(solver, "_env", timed_env)
    ms = solver.decision_ms(p, repeats=15)
    assert len(cleared) == 15                                   # the memo is emptied before every timed decode
    assert ms == pytest.approx(2.0)                             # the median of 8 x 2 ms and 7 x 1 ms


def test_the_shipped_policy_is_loaded_again_once_the_process_connects_to_a_cluster(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Its variables, made before, would live on /job:localhost, which connecting removes (reading
    them failed: "Client for target /job:localhost/replica:0/task:0 not found")."""
    import scheduler.policy.shipped as shipped

    kind = next(iter(FILES))
    first, features = shipped_policy(kind)
    assert shipped_policy(kind)[0] is first  # once per process while the context stays
    monkeypatch.setattr(shipped, "_eager_context_key", lambda: b"connected to another cluster")
    again, same_features = shipped_policy(kind)
    assert again is not first and same_features == features
    for a, b in zip(again.variables, first.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
