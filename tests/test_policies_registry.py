"""The placement-policy registry (ralp_tf.policies): built-ins, registration, lazy entry points,
plugin errors, and the scheduler package's solvers found by name."""
from __future__ import annotations

from importlib import metadata

import pytest

from ralp_tf import policies
from ralp_tf.errors import PlanError
from ralp_tf.plan import Plan


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A private copy of the registry, so a test's registrations do not leak."""
    monkeypatch.setattr(policies, "_factories", dict(policies._factories))
    monkeypatch.setattr(policies, "_loaded_entry_points", set(policies._loaded_entry_points))


class FixedPlan:
    def __init__(self, tag: str = "fixed") -> None:
        self.tag = tag

    def plan(self, profile: object, cluster: object) -> Plan:
        return Plan(placements={}, policy=self.tag)


def test_builtins_are_registered_and_plan_through_plan_with_policy():
    assert {"ralp", "ps"} <= set(policies.policy_names())
    ps = policies.resolve_policy("ps")
    assert isinstance(ps, policies.BuiltinPolicy) and ps.name == "ps"
    plan = ps.plan(None, None)  # stock PS places nothing: profile and cluster are not read
    assert isinstance(plan, Plan) and plan.placements == {} and plan.policy == "ps"
    assert policies.resolve_policy("ralp", min_speedup=1.2).min_speedup == 1.2


def test_register_and_resolve_with_options(registry):
    policies.register_policy("fixed", FixedPlan)
    policy = policies.resolve_policy("fixed", tag="mine")
    assert isinstance(policy, FixedPlan) and policy.plan(None, None).policy == "mine"
    assert "fixed" in policies.policy_names()
    policies.register_policy("fixed", FixedPlan)  # the same factory again: no-op


def test_a_taken_name_needs_replace(registry):
    policies.register_policy("fixed", FixedPlan)
    with pytest.raises(PlanError, match="already registered"):
        policies.register_policy("fixed", lambda **options: FixedPlan("other"))
    policies.register_policy("fixed", lambda **options: FixedPlan("other"), replace=True)
    assert policies.resolve_policy("fixed").tag == "other"


@pytest.mark.parametrize("name, factory, words", [("", FixedPlan, "non-empty"), ("x", 3, "callable")])
def test_bad_registrations(registry, name, factory, words):
    with pytest.raises(PlanError, match=words):
        policies.register_policy(name, factory)


def test_unknown_name_lists_the_known_ones(registry):
    with pytest.raises(PlanError) as info:
        policies.resolve_policy("no-such-policy")
    message = str(info.value)
    assert "no-such-policy" in message and "ralp" in message and "ps" in message


def test_the_scheduler_entry_point_is_declared_and_registers_every_solver():
    declared = {ep.name: ep.value for ep in metadata.entry_points(group=policies.ENTRY_POINT_GROUP)}
    assert declared.get("scheduler") == "scheduler.policies:register", (
        "reinstall: .venv/bin/python -m pip install -e . --no-deps")
    import scheduler

    names = policies.policy_names()
    for solver in scheduler.SOLVERS:
        assert f"scheduler.{solver}" in names
    exact = policies.resolve_policy("scheduler.exact", seed=3)
    assert isinstance(exact, scheduler.Exact) and exact.seed == 3


def test_plugins_load_lazily_once(registry, monkeypatch):
    calls: list[str] = []

    def register() -> None:
        calls.append("called")
        policies.register_policy("lazy", FixedPlan)

    class FakeEntryPoint:
        name, value = "fake", "fake_plugin:register"

        def load(self):
            return register

    monkeypatch.setattr(policies, "_entry_points", lambda: [FakeEntryPoint()])
    policies.resolve_policy("ps")  # registered already: no plugin is loaded
    assert calls == []
    assert isinstance(policies.resolve_policy("lazy"), FixedPlan)
    policies.policy_names()
    assert calls == ["called"]


def test_an_import_error_inside_a_plugin_propagates(registry, monkeypatch):
    broken = metadata.EntryPoint(name="broken", value="ralp_tf_no_such_plugin_module:register",
                                 group=policies.ENTRY_POINT_GROUP)
    monkeypatch.setattr(policies, "_entry_points", lambda: [broken])
    with pytest.raises(ImportError, match="ralp_tf_no_such_plugin_module"):
        policies.resolve_policy("anything")
    with pytest.raises(ImportError):  # not marked loaded: it fails again rather than vanishing
        policies.policy_names()
