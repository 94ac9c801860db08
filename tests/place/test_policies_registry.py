"""The placement-policy registry (ralp_tf.place.policies): built-ins, registration, lazy entry points,
plugin errors, and the scheduler package's solvers found by name."""
from __future__ import annotations

from importlib import metadata

import pytest

from ralp_tf import policies
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan


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
    assert isinstance(ps, policies.StockPolicy)
    plan = ps.plan(None, None)  # stock PS places nothing: profile and cluster are not read
    assert isinstance(plan, Plan) and plan.placements == {} and plan.policy == "ps"
    ralp = policies.resolve_policy("ralp", min_speedup=1.2)
    assert isinstance(ralp, policies.RalpPolicy) and ralp.min_speedup == 1.2


@pytest.mark.parametrize("name, canonical", [
    ("ps", "ps"), ("none", "ps"), ("stock", "ps"), ("ralp", "ralp"),
    ("rl", "scheduler.rl"), ("exact", "scheduler.exact"), ("scheduler.ralp", "scheduler.ralp"),
])
def test_one_table_of_names_aliases_and_short_names(name, canonical):
    assert policies.canonical_policy_name(name) == canonical
    described = policies.describe_policy_names()
    assert "ps (also: none, stock)" in described and "scheduler.rl (also: rl)" in described


def test_a_short_name_two_plugins_share_is_refused(registry):
    policies.register_policy("a.same", FixedPlan)
    policies.register_policy("b.same", FixedPlan)
    with pytest.raises(PlanError, match="ambiguous.*'a.same' or 'b.same'"):
        policies.resolve_policy("same")


def test_aliases_cannot_be_registered(registry):
    with pytest.raises(PlanError, match="alias"):
        policies.register_policy("stock", FixedPlan)


def test_options_a_policy_does_not_take_are_named_with_the_ones_it_takes(registry):
    policies.register_policy("fixed", FixedPlan)
    assert policies.accepted_options("fixed") == ["tag"]
    with pytest.raises(PlanError) as info:
        policies.resolve_policy("rl", method="dp")
    message = str(info.value)
    assert "'scheduler.rl' does not take the option 'method'" in message
    assert "an option of scheduler.exact" in message and "train_seconds" in message
    with pytest.raises(PlanError, match="'ps' does not take the option 'seed'.*takes: no options"):
        policies.resolve_policy("stock", seed=1)


def test_policy_from_spec(tmp_path):
    assert policies.policy_from_spec("ralp") == "ralp"
    assert policies.policy_from_spec("none") == "ps"
    assert policies.policy_from_spec("rl") == "rl"
    configured = policies.policy_from_spec("exact", {"seed": 4})
    assert isinstance(configured, policies.ConfiguredPolicy) and configured.policy == "exact"
    assert configured.instance.seed == 4
    path = tmp_path / "p.json"
    Plan(placements={}, policy="ps").save(str(path))
    assert isinstance(policies.policy_from_spec(str(path)), Plan)
    with pytest.raises(PlanError, match="takes no options"):
        policies.policy_from_spec(str(path), {"seed": 1})
    with pytest.raises(PlanError, match="unknown placement policy 'nope'.*plan JSON file"):
        policies.policy_from_spec("nope")


def test_plan_with_policy_resolves_every_name_through_the_registry():
    from ralp_tf.place.policies import plan_with_policy
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.model.builtin import small_cnn
    from ralp_tf.model.profiler import profile

    prof, cluster = profile(small_cnn(), batch_size=32), Cluster.local(2, 1)
    for name in ("ps", "none", "stock"):
        plan, analysis = plan_with_policy(name, prof, cluster)
        assert plan.placements == {} and analysis is None
    plan, analysis = plan_with_policy("ralp", prof, cluster)
    assert analysis is not None and plan == analysis.plan
    plan, analysis = plan_with_policy("greedy", prof, cluster)
    assert isinstance(plan, Plan) and analysis is None
    plan, analysis = plan_with_policy(policies.ConfiguredPolicy("ralp", min_speedup=100.0), prof, cluster)
    assert analysis is not None and not analysis.is_split


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
