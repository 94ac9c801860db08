"""The step floor's fit (:func:`ralp_tf.run.floor.fit_terms`) on synthetic cases: pure, no cluster."""
from __future__ import annotations

import dataclasses
import math

import pytest

from cli_exit import exit_code
from ralp_tf.errors import ValidationError
from ralp_tf.run.floor import CaseResult, FloorCase, FloorTerms, fit_terms, floor_cases

TRUE = FloorTerms(closure_s=3e-3, closure_per_ps_s=2e-3, step_per_ps_s=1e-3, step_per_variable_s=2e-4,
                  control_bytes_per_closure_per_ps=1800.0, control_bytes_per_step_per_ps=1200.0)


def _case(c: FloorCase, t: FloorTerms = TRUE, noise: float = 1.0) -> CaseResult:
    seconds = (t.closure_s + c.ps_tasks * t.closure_per_ps_s
               + c.steps * c.ps_tasks * (t.step_per_ps_s + (c.variables - 1) * t.step_per_variable_s)) * noise
    per_ps = (t.control_bytes_per_closure_per_ps + c.steps * t.control_bytes_per_step_per_ps
              + 8.0 * c.steps * c.variables)
    return CaseResult(case=c, closures=100, wall_s=[seconds * 50] * 3, closure_s=seconds, schedule_s=1e-4,
                      bytes_per_closure={f"ps{k}": per_ps for k in range(c.ps_tasks)},
                      coordinator_bytes_per_closure=500.0)


def test_fit_terms_recovers_the_terms_of_noiseless_cases() -> None:
    cases = floor_cases(2)
    assert [c.name for c in cases][:2] == ["trivial closure", "loop m=1 n=1 k=1"]
    assert cases[-3:] == [FloorCase(1, 1, 1, looped=False), FloorCase(1, 16, 1, looped=False),
                          FloorCase(2, 1, 1, looped=False)]
    assert [c for c in floor_cases(1) if not c.looped] == [FloorCase(1, 16, 1, looped=False),
                                                          FloorCase(1, 1, 1, looped=False)]
    terms, error = fit_terms([_case(c) for c in cases])
    assert error < 1e-9
    for name in ("closure_s", "closure_per_ps_s", "step_per_ps_s", "step_per_variable_s"):
        assert getattr(terms, name) == pytest.approx(getattr(TRUE, name), rel=1e-6), name
    assert terms.closure_floor_s(2) == pytest.approx(3e-3 + 2 * 2e-3)
    # bytes: per closure and per step per PS task, the 8-byte payload per variable and step folded in
    assert terms.control_bytes_per_closure_per_ps == pytest.approx(1800.0, rel=1e-6)
    assert terms.control_bytes_per_step_per_ps == pytest.approx(1200.0 + 8.0, rel=1e-6)


def _plain(c: FloorCase, p: float = 5e-3, p_var: float = 3e-4) -> CaseResult:
    """A plain one-step closure of ``c`` costing ``P + (n - 1) p_var``."""
    return dataclasses.replace(_case(c), closure_s=p + (c.variables - 1) * p_var)


def test_fit_terms_ignores_plain_cases_and_reports_its_worst_error() -> None:
    cases = floor_cases(1)
    looped = [_case(c, noise=1.1 if c.steps == 32 else 1.0) for c in cases if c.looped]
    plain = [_plain(c) for c in cases if not c.looped]  # not fitted: P and the slope p_var
    terms, error = fit_terms(looped + plain)
    assert 0.0 < error < 0.1
    without = fit_terms(looped)[0]
    assert math.isnan(without.plain_closure_s) and math.isnan(without.plain_step_per_variable_s)
    assert terms.plain_closure_s == pytest.approx(5e-3) and terms.plain_step_per_variable_s == pytest.approx(3e-4)
    assert dataclasses.replace(terms, plain_closure_s=math.nan, plain_step_per_variable_s=math.nan) == without
    only_one = fit_terms(looped + [_plain(FloorCase(1, 1, 1, looped=False))])[0]  # no slope without two counts
    assert only_one.plain_closure_s == pytest.approx(5e-3) and math.isnan(only_one.plain_step_per_variable_s)


def test_the_floor_a_step_pays_amortises_its_closure_over_k_steps() -> None:
    """``K = 1``: the plain closure; ``K > 1``: ``(F + m F_ps) / K`` plus, per PS task, ``s_ps`` and
    ``s_var`` per further pair of messages (ralp_tf.plan.closures)."""
    t = dataclasses.replace(TRUE, plain_closure_s=5e-3, plain_step_per_variable_s=3e-4)
    msgs = {"ps:0": 6.0, "ps:1": 2.0}  # 3 variables on ps:0, 1 on ps:1: 2 further variables
    assert t.per_step_s(1, msgs) == pytest.approx(5e-3 + 2 * 3e-4) and t.per_step_s(8, {}) == 0.0
    assert t.per_step_s(1, {"ps:0": 2.0}) == 5e-3
    assert t.per_step_s(8, msgs) == pytest.approx((3e-3 + 2 * 2e-3) / 8 + 2 * 1e-3 + 2 * 2e-4)
    # neither plain term measured: F + m F_ps, and s_var per further variable
    assert TRUE.per_step_s(1, msgs) == pytest.approx(3e-3 + 2 * 2e-3 + 2 * 2e-4)


def test_fit_terms_refuses_too_few_cases() -> None:
    with pytest.raises(ValidationError, match="needs the trivial case"):
        fit_terms([_case(FloorCase(1, 1, 1)), _case(FloorCase(1, 1, 8))])


@pytest.mark.parametrize("argv, message", [
    (["floor", "--seconds", "0"], "--seconds must be positive, got 0.0"),
    (["floor", "--out", "/nonexistent/dir/floor.json"], "does not exist"),
    (["floor", "--ps", "0"], "must be >= 1, got 0"),
])
def test_floor_command_refuses_bad_arguments_before_starting(argv: list[str], message: str,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert exit_code(argv, monkeypatch) == 2
    assert message in capsys.readouterr().err


def test_fit_message_cpu_is_half_the_cpu_of_a_further_variable_per_step() -> None:
    import dataclasses
    import math
    import os

    from ralp_tf.run.floor import fit_message_cpu, task_cpu_s

    def with_cpu(c: FloorCase) -> CaseResult:  # a further variable per step: a pull and a push, 2 x 150 us
        return dataclasses.replace(_case(c), ps_cpu_s_per_closure=1e-3 + c.steps * (4e-4 + (c.variables - 1) * 3e-4),
                                   worker_cpu_s_per_closure=2e-3 + c.steps * (c.variables - 1) * 5e-4)

    ps, worker = fit_message_cpu([with_cpu(c) for c in floor_cases(2)])
    assert ps == pytest.approx(1.5e-4, rel=1e-6) and worker == pytest.approx(2.5e-4, rel=1e-6)
    # without readings (or without two variable counts) there is nothing to fit
    assert all(math.isnan(v) for v in fit_message_cpu([_case(c) for c in floor_cases(1)]))
    assert task_cpu_s(os.getpid()) > 0 and math.isnan(task_cpu_s(2 ** 22 + 12345))


def test_a_chain_hop_is_two_chained_messages_and_the_floor_fit_ignores_chains() -> None:
    from ralp_tf.run.floor import chain_cases, fit_chained_message_cpu

    chains = chain_cases(16)
    assert [c.name for c in chains] == ["chain h=1", "chain h=16"]
    assert all(c.ps_tasks == 1 and not c.looped for c in chains)

    def with_cpu(c: FloorCase) -> CaseResult:  # each hop: a message in and one out at each end, 2 x 400 / 300 us
        return dataclasses.replace(_case(c), ps_cpu_s_per_closure=1e-3 + c.hops * 8e-4,
                                   worker_cpu_s_per_closure=2e-3 + c.hops * 6e-4)

    ps, worker = fit_chained_message_cpu([with_cpu(c) for c in chains] + [_case(c) for c in floor_cases(1)])
    assert ps == pytest.approx(4e-4) and worker == pytest.approx(3e-4)
    assert all(math.isnan(v) for v in fit_chained_message_cpu([with_cpu(chains[1])]))  # one length: no slope
    cheaper = dataclasses.replace(with_cpu(chains[1]), ps_cpu_s_per_closure=0.0)
    assert fit_chained_message_cpu([with_cpu(chains[0]), cheaper])[0] == 0.0  # noise below zero: none, not a saving
    cases = floor_cases(2)
    assert fit_terms([_case(c) for c in cases] + [_case(c) for c in chains]) == fit_terms([_case(c) for c in cases])
    with pytest.raises(ValidationError, match="max_hops"):
        chain_cases(1)


def test_the_served_pass_rate_is_the_sgd_difference_per_byte_of_its_passes() -> None:
    """SGD's two whole-table passes over a 32 MB table on each of 2 PS tasks: the PS tasks' CPU per
    closure with SGD less that with legacy SGD, over 2 x 32 MB x 2; never below 0; NaN where a PS
    task's CPU was not read (calibrate then records none)."""
    from ralp_tf.run.floor import SERVED_TABLE_BYTES, served_pass_cpu_per_byte

    nbytes = 2 * SERVED_TABLE_BYTES * 2
    assert served_pass_cpu_per_byte({"sgd": 0.050, "legacy-sgd": 0.010}, 2) == pytest.approx(0.040 / nbytes)
    assert served_pass_cpu_per_byte({"sgd": 0.009, "legacy-sgd": 0.010}, 2) == 0.0
    assert math.isnan(served_pass_cpu_per_byte({"sgd": math.nan, "legacy-sgd": 0.010}, 2))
