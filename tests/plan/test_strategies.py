"""The cost model's ranking of strategies (ralp_tf/plan/strategies.py): pure, no TensorFlow."""
from __future__ import annotations

import pytest

from ralp_tf.errors import PlanError
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.profiles import cached_profile
from ralp_tf.plan.strategies import STRATEGIES, TIE, canonical_strategy, rank_strategies


def _ranking(model: str, bandwidth: str, workers: int = 2, ps: int = 2, **kw: object):  # type: ignore[no-untyped-def]
    profile = cached_profile(model)
    cluster = Cluster.local(workers, ps, layout="colocated", bandwidth=bandwidth)
    return rank_strategies(profile, cluster, analyze(profile, cluster).plan if ps else None, **kw)


@pytest.mark.parametrize("model", ["alexnet_cifar", "vgg16_cifar", "ctr_dnn"])
def test_a_model_with_a_head_on_a_slow_link_trains_fastest_with_its_plan(model: str) -> None:
    ranking = _ranking(model, "100mbit")
    assert ranking.best.name == "pss"
    assert ranking.best.plan is not None and ranking.best.plan.ps_layers()
    assert [c.samples_per_s for c in ranking.available] == sorted((c.samples_per_s for c in ranking.available),
                                                                  reverse=True)


def test_a_model_without_a_head_has_no_plan_entry_and_ranks_the_ring_against_stock_pss() -> None:
    ranking = _ranking("resnet_cifar", "100mbit")
    names = [c.name for c in ranking.choices]
    assert "pss" not in names  # the analyzer places nothing: that is stock PSS
    assert set(names) == {"ps", "mwms", "horovod"}
    assert ranking.best.name in ("ps", "mwms")


def test_horovod_is_ranked_but_not_taken_where_it_cannot_run() -> None:
    ranking = _ranking("alexnet_cifar", "1gbit", horovod="not installed here")
    horovod = ranking.choice("horovod")
    assert not horovod.available and horovod.reason == "not installed here"
    assert "horovod" not in ranking.probe_order(4)
    assert _ranking("alexnet_cifar", "1gbit", horovod=True).choice("horovod").available


def test_without_ps_tasks_only_the_ring_can_run() -> None:
    ranking = _ranking("alexnet_cifar", "1gbit", ps=0)
    assert [c.name for c in ranking.available] == ["mwms"]
    assert ranking.best.name == "mwms"


def test_the_probe_decides_between_the_top_two() -> None:
    ranking = _ranking("alexnet_cifar", "1gbit")
    first, second = ranking.probe_order(2)
    assert ranking.decide({first: 10.0, second: 12.0}) == second
    assert ranking.decide({first: 10.0, second: 0.0}) == first
    assert ranking.decide({}) == ranking.best.name
    assert ranking.decide({"horovod": 1e9}) == ranking.best.name  # not available: never chosen


def test_a_tie_is_said_in_the_report() -> None:
    ranking = _ranking("resnet_cifar", "1gbit")
    a, b = ranking.available[:2]
    assert (a.samples_per_s < TIE * b.samples_per_s) == ("a tie" in ranking.report())
    doc = ranking.to_dict({"ps": 3.0})
    assert doc["best_predicted"] == ranking.best.name and doc["probe_samples_per_s"] == {"ps": 3.0}
    assert {r["strategy"] for r in doc["ranking"]} <= set(STRATEGIES)


def test_strategy_names_and_their_aliases() -> None:
    assert canonical_strategy("ring") == canonical_strategy("allreduce") == "mwms"
    assert canonical_strategy("ralp") == "pss" and canonical_strategy("stock") == "ps"
    with pytest.raises(PlanError, match="unknown strategy 'nccl'"):
        canonical_strategy("nccl")
    with pytest.raises(PlanError, match="no workers"):
        rank_strategies(cached_profile("small_cnn"), Cluster.from_dict({"ps": ["h:1"]}))
