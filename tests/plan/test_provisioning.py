"""Recommending CPU-only PS hosts: samples per dollar, the cheapest meeting a throughput, bad prices."""
from __future__ import annotations

import pytest

from plan_helpers import builtin
from ralp_tf.errors import ValidationError
from ralp_tf.plan.provisioning import check_price, ps_host_counts, recommend_ps_hosts


def test_counts_double_up_to_the_maximum() -> None:
    assert ps_host_counts(0) == [0] and ps_host_counts(1) == [0, 1] and ps_host_counts(6) == [0, 1, 2, 4, 6]


def test_best_samples_per_dollar_and_cheapest_meeting_a_throughput() -> None:
    prof = builtin("vgg16_cifar")
    rec = recommend_ps_hosts(prof, 8, 25e9, worker_host_price=4.0, ps_host_price=0.5, counts=(0, 2, 8),
                             min_samples_per_s=1.0)
    assert [o.ps_hosts for o in rec.options] == [0, 2, 8]
    for o in rec.options:
        assert o.dollars_per_hour == 8 * 4.0 + o.ps_hosts * 0.5
        assert o.samples_per_dollar == pytest.approx(3600 * o.samples_per_s / o.dollars_per_hour)
    assert rec.best.samples_per_dollar == max(o.samples_per_dollar for o in rec.options)
    assert rec.cheapest is rec.options[0]  # every option meets 1 sample/s: the cheapest is no extra host
    assert rec.ring.plan == "ring all-reduce" and rec.ring.dollars_per_hour == 32.0
    fastest = max(rec.options, key=lambda o: o.samples_per_s)
    target = recommend_ps_hosts(prof, 8, 25e9, worker_host_price=4.0, ps_host_price=0.5, counts=(0, 2, 8),
                                min_samples_per_s=fastest.samples_per_s)
    assert target.cheapest is not None and target.cheapest.samples_per_s >= fastest.samples_per_s
    unreachable = recommend_ps_hosts(prof, 8, 25e9, worker_host_price=4.0, ps_host_price=0.5, counts=(0,),
                                     min_samples_per_s=1e12)
    assert unreachable.cheapest is None and "none of the options" in unreachable.report()
    d = rec.to_dict()
    assert d["best"]["ps_hosts"] == rec.best.ps_hosts and len(d["options"]) == 3


@pytest.mark.parametrize("price", [0, -1.0, float("nan"), float("inf"), "4", True, None])
def test_prices_that_are_not_positive_numbers_are_refused(price: object) -> None:
    with pytest.raises(ValidationError, match=r"ps_host_price must be a positive number \(dollars per host-hour\)"):
        recommend_ps_hosts(builtin("small_cnn"), 2, 1e9, worker_host_price=1.0, ps_host_price=price)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="--worker-price must be a positive number"):
        check_price(price, "--worker-price")


def test_a_throughput_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValidationError, match="min_samples_per_s must be a positive throughput"):
        recommend_ps_hosts(builtin("small_cnn"), 2, 1e9, worker_host_price=1.0, ps_host_price=1.0,
                           min_samples_per_s=0)
