"""Fault plans, the chaos schedule and the restart budget: pure, fast (no TensorFlow, no cluster)."""
from __future__ import annotations

import pytest

from ralp_tf.errors import ClusterRuntimeError, ValidationError
from ralp_tf.faults.plan import FaultEvent, FaultPlan, FaultPlanError, LinkFaultUnavailable, chaos_plan, parse_event
from ralp_tf.faults.restart import RestartPolicy, RestartsExhausted


def test_text_events_parse_steps_times_durations_and_rates() -> None:
    plan = FaultPlan.parse(["link_down:worker1,at=20s,for=10s", "throttle:worker0,at=15,for=20s,rate=100mbit",
                            "throttle:ps0,at=3.5s,for=5s,rate=1/10", "kill:ps0,at=17", "add_worker,at=20"])
    assert plan.events == (
        FaultEvent("link_down", "worker1", at_s=20.0, for_s=10.0),
        FaultEvent("throttle", "worker0", at_step=15, for_s=20.0, rate=100e6),
        FaultEvent("throttle", "ps0", at_s=3.5, for_s=5.0, rate_fraction=0.1),
        FaultEvent("kill", "ps0", at_step=17),
        FaultEvent("add_worker", at_step=20))
    assert plan.has_link_faults
    assert FaultPlan.from_list(plan.to_list()) == plan  # JSON round trip
    assert plan.events[0].describe() == "link of worker1 down for 10s at t+20s"


@pytest.mark.parametrize("text, words", [
    ("reboot:worker1,at=3", "unknown kind"),
    ("link_down:worker1,at=3", "needs a duration"),
    ("link_down:worker1,for=3s", "exactly one of a step"),
    ("kill:worker1,at=3,for=2s", "takes no duration"),
    ("kill:chief,at=3", "target task like worker1"),
    ("throttle:worker1,at=3,for=2s", "needs a rate"),
    ("throttle:worker1,at=3,for=2s,rate=3/2", "fraction between 0 and 1"),
    ("throttle:worker1,at=3,for=2s,rate=fast", "fast"),
    ("kill:worker1,at=soon", "neither a step"),
    ("kill:worker1,at=3,when=4", "unknown key"),
    ("add_worker:worker3,at=3", "takes no target"),
])
def test_malformed_events_are_refused_with_the_fix(text: str, words: str) -> None:
    with pytest.raises(FaultPlanError, match=words):
        parse_event(text)


def test_targets_must_exist_and_link_faults_need_the_testbed() -> None:
    plan = FaultPlan.parse(["link_down:worker2,at=1s,for=1s"])
    with pytest.raises(FaultPlanError, match=r"'worker2', which this cluster does not have \(tasks: worker0, "
                                             r"worker1, ps0\)"):
        plan.validate(workers=2, ps=1, emulated=True)
    assert plan.validate(workers=3, ps=1, emulated=True) is plan
    with pytest.raises(LinkFaultUnavailable, match="loopback fallback cannot emulate"):
        plan.validate(workers=3, ps=1, emulated=False)
    with pytest.raises(FaultPlanError, match="PS host losing its link is not supported"):
        FaultPlan.parse(["link_down:ps0,at=1s,for=1s"]).validate(workers=2, ps=1, emulated=True, restart=True)
    with pytest.raises(FaultPlanError, match="--restart-failed"):
        FaultPlan.parse(["kill:ps0,at=3"]).validate(workers=2, ps=1, emulated=False)
    # an added worker may be targeted
    FaultPlan.parse(["add_worker,at=5", "kill:worker2,at=9"]).validate(workers=2, ps=1, emulated=False)
    assert issubclass(FaultPlanError, ValidationError)


def test_chaos_plan_is_seeded_complete_and_spaced() -> None:
    plan = chaos_plan(7, 10, workers=2, ps=1)
    assert plan == chaos_plan(7, 10, workers=2, ps=1) != chaos_plan(8, 10, workers=2, ps=1)
    ev = plan.events
    assert len(ev) >= 8
    kinds = [(e.kind, (e.target or "")[:2]) for e in ev]
    assert kinds.count(("kill", "ps")) == 1 and ("kill", "wo") in kinds
    assert any(e.kind == "link_down" and 5 <= e.for_s <= 20 for e in ev)
    assert any(e.kind == "throttle" and e.rate_fraction == 0.1 for e in ev)
    times = [e.at_s for e in ev]
    assert times == sorted(times) and times[0] >= 20 and times[-1] < 0.85 * 600
    for a, b in zip(ev, ev[1:]):  # each fault ends well before the next starts
        assert a.at_s + (a.for_s or 0) + 10 < b.at_s
    FaultPlan(ev).validate(workers=2, ps=1, emulated=True, restart=True)
    with pytest.raises(FaultPlanError, match="at least 2 workers"):
        chaos_plan(0, 10, workers=1)
    with pytest.raises(FaultPlanError, match="45 s"):
        chaos_plan(0, 3, workers=2, faults=8)


def test_restart_policy_backs_off_and_runs_out_clearly() -> None:
    policy = RestartPolicy(3, backoff_s=1.0, factor=2.0, max_backoff_s=3.0)
    assert [policy.next_delay("ps0") for _ in range(3)] == [1.0, 2.0, 3.0]
    assert policy.next_delay("worker1") == 1.0  # budgets are per task
    with pytest.raises(RestartsExhausted, match=r"task ps0 failed 4 times \(last exit status -9\); its restart "
                                                r"budget of 3 is spent") as err:
        policy.next_delay("ps0", -9)
    assert isinstance(err.value, ClusterRuntimeError)
    assert policy.total == 4


@pytest.mark.parametrize("budget", [0, -1, True, 1.5])
def test_restart_budget_below_one_is_a_clear_error(budget: object) -> None:
    with pytest.raises(ValidationError, match="restart budget must be at least 1"):
        RestartPolicy(budget)  # type: ignore[arg-type]


def test_host_cpu_budgets_count_the_joining_workers_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """--host-cpu: every host of a supervised run gets the budget, a worker that joins included, and
    the sum over all of them must fit the machine (2 cores here: 5 hosts x 0.4 fit, x 0.5 do not)."""
    from ralp_tf.faults.hosts import host_budgets, supervised_hosts
    from ralp_tf.testbed import base
    from ralp_tf.testbed.base import TestbedConfigError

    monkeypatch.setattr(base, "usable_cores", lambda: 2)
    assert supervised_hosts(2, 1, 1) == ["worker0", "worker1", "worker2", "ps0", "chief"]
    assert host_budgets(None, 2, 1, 1) is None
    assert host_budgets(0.4, 2, 1, 1) == dict.fromkeys(["worker0", "worker1", "worker2", "ps0", "chief"], 0.4)
    assert host_budgets(0.5, 2, 1) == dict.fromkeys(["worker0", "worker1", "ps0", "chief"], 0.5)  # no join: fits
    with pytest.raises(TestbedConfigError, match=r"--host-cpu 0.5 x 5 hosts \(worker0, worker1, ps0, chief, and "
                                                 r"worker2, which joins mid-run\) = 2.5 cores, more than the 2 "
                                                 r"cores here.*Use --host-cpu 0.4 or fewer workers"):
        host_budgets(0.5, 2, 1, 1)
    with pytest.raises(TestbedConfigError, match="worker2, worker3, which join mid-run"):
        host_budgets(0.35, 2, 1, 2)
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(TestbedConfigError, match="must be a number of cores >= 0.01"):
            host_budgets(bad, 2, 1, 1)  # type: ignore[arg-type]
    assert issubclass(TestbedConfigError, ValidationError)
