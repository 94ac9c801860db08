"""The analyzer's menu: closed sets of units, refused units kept on the workers, nested models, the
search within its budget, and the choice of the least PS compute within the threshold. No
TensorFlow (profiles written as data)."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from plan_helpers import MB, dense, layer
from ralp_tf.model.profiles import OP_REFUSAL, ModelProfile
from ralp_tf.plan import menu
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate

WORKER_DEVICE = "/job:worker/device:CPU:0"


def _profile(layers: list[dict[str, Any]], outputs: list[str], batch: int = 32) -> ModelProfile:
    return ModelProfile.from_dict({"model_name": "m", "batch_size": batch, "outputs": outputs, "layers": layers})


def bn_head() -> ModelProfile:
    """A conv base whose FC head is Dense(no bias) -> BatchNormalization -> ReLU -> Dropout -> Dense -> Dense."""
    return _profile([
        layer("x", "input", [], 12288, []),
        layer("conv", "conv", [75_000], 16384, ["x"], flops=20e6),
        layer("flatten", "reshape", [], 16384, ["conv"], flops=0.0),
        dense("fc1", 4096, 4096, ["flatten"], bias=False),
        layer("bn", "normalization", [16384, 16384, 16384, 16384], 16384, ["fc1"], flops=16384.0),
        layer("relu", "activation", [], 16384, ["bn"], flops=4096.0),
        layer("dropout", "activation", [], 16384, ["relu"], flops=4096.0),
        dense("fc2", 4096, 2048, ["dropout"]),
        dense("logits", 2048, 10, ["fc2"]),
    ], ["logits"])


def op_joined_heads() -> ModelProfile:
    """Two 59 MB heads whose outputs a plain op of the model's call adds before the output layer."""
    op = layer("op:AddV2", "other", [], 8192, ["heads/a", "heads/b"], flops=2048.0)
    op["ps_refusal"] = OP_REFUSAL
    return _profile([
        layer("x", "input", [], 12288, []),
        layer("conv", "conv", [3584], 115200, ["x"], flops=1.5e6),
        layer("flat", "reshape", [], 115200, ["conv"], flops=0.0),
        dense("heads/a", 7200, 2048, ["flat"]), dense("heads/b", 7200, 2048, ["flat"]),
        op, dense("out", 2048, 10, ["op:AddV2"]),
    ], ["out"])


def test_a_chain_menu_is_every_suffix_named_by_its_first_unit() -> None:
    names = [c.cut for c in menu.cuts(bn_head())]
    assert names[0] == "everything on the PS"
    assert "cut before fc1" in names and "cut before bn" in names and "cut before logits" in names
    assert "cut before flatten" in names and len(names) == 8  # every unit but the weightless tail


def test_normalization_in_the_head_is_cut_through() -> None:
    """The cut before the first Dense holds the BatchNormalization (with its statistics) and ships
    about 1.3 MB per step instead of the head's 160 MB of weights twice."""
    p = bn_head()
    a = analyze(p, Cluster.local(2, 1, bandwidth="100mbit").with_shared_cores(2.0))
    assert a.is_split and {"fc1", "bn", "relu", "dropout", "fc2", "logits"} <= set(a.plan.ps_layers())
    assert a.baseline.estimate.bytes_per_step / a.chosen.estimate.bytes_per_step >= 10


def test_a_plain_op_between_units_computes_with_its_inputs() -> None:
    """The cut before both heads holds them and the output layer; the op that adds them is no
    decision: it computes on the heads' PS task (and the plan says so), so only the batch's
    activation at the cut crosses."""
    p = op_joined_heads()
    cuts = {c.cut: c for c in menu.cuts(p)}
    heads = cuts["cut before heads/a, heads/b"]
    assert heads.ps_layers == ("heads/a", "heads/b", "out") and heads.kept == ()
    a = analyze(p, Cluster.local(2, 1, bandwidth="100mbit"))
    assert a.is_split and {"heads/a", "heads/b", "op:AddV2"} <= set(a.plan.ps_layers())
    assert a.baseline.estimate.bytes_per_step / a.chosen.estimate.bytes_per_step > 50
    worker_op = estimate(p, Cluster.local(2, 1, bandwidth="100mbit"),
                         dataclasses.replace(a.plan, placements={**a.plan.placements, "op:AddV2": WORKER_DEVICE}))
    assert worker_op.bytes_per_step == a.chosen.estimate.bytes_per_step  # the plan's word on a record is not read


def test_a_unit_that_cannot_compute_on_a_ps_stays_on_the_workers_with_its_reason() -> None:
    p = op_joined_heads()
    d = p.to_dict()
    for l in d["layers"]:
        if l["name"] == "heads/b":
            l["ps_refusal"] = "its op Foo has no CPU kernel"
    refused = ModelProfile.from_dict(d)
    heads = {c.cut: c for c in menu.cuts(refused)}["cut before heads/a, heads/b"]
    assert heads.ps_layers == ("heads/a", "out") and heads.kept == ("heads/b",)
    a = analyze(refused, Cluster.local(2, 1, bandwidth="100mbit"))
    assert "heads/b" not in a.plan.ps_layers() and "heads/b: its op Foo has no CPU kernel" in a.report()


def test_a_nested_model_alone_is_a_candidate() -> None:
    p = _profile([layer("x", "input", [], 4096, []), layer("base/c1", "conv", [MB], 4096, ["x"], flops=5e7),
                  layer("base/c2", "conv", [MB], 4096, ["base/c1"], flops=5e7), dense("fc", 1024, 1024, ["base/c2"])],
                 ["fc"])
    assert "base on the PS" in [c.cut for c in menu.cuts(p)]
    base = next(c for c in menu.cuts(p) if c.cut == "base on the PS")
    assert base.ps_layers == ("base/c1", "base/c2") and not base.closed


def wide(branches: int) -> ModelProfile:
    """``branches`` parallel two-Dense branches of different widths, concatenated."""
    layers = [layer("x", "input", [], 4096, [])]
    for b in range(branches):
        layers += [dense(f"a{b}", 1024, 64 * (b + 1), ["x"]), dense(f"b{b}", 64 * (b + 1), 1024, [f"a{b}"])]
    layers.append(layer("cat", "reshape", [], 4096 * branches, [f"b{b}" for b in range(branches)], flops=0.0))
    layers.append(dense("out", 1024 * branches, 10, ["cat"]))
    return _profile(layers, ["out"])


def test_the_search_is_exact_over_small_graphs_and_budgeted_over_large_ones() -> None:
    small = wide(2)
    graph = menu.UnitGraph(small)
    every = graph.down_sets(menu.EXACT_LIMIT)
    assert every is not None and len(every) == 3 * 3 + 1  # {out}, and {cat, out} with each branch 0-2 deep
    big = wide(8)  # 3^8 + 1 closed sets: over the limit
    assert menu.UnitGraph(big).down_sets(menu.EXACT_LIMIT) is None
    calls: list[tuple[str, ...]] = []

    def price(names: tuple[str, ...]) -> float:
        calls.append(names)
        return 1.0 / (1 + len(names)) + 0.01 * sum(1 for n in names if n.startswith("a"))

    found = menu.search(big, price, budget=120)
    assert len(calls) <= 120 and len(set(calls)) == len(calls)
    again: list[tuple[str, ...]] = []
    assert [c.ps_layers for c in menu.search(big, lambda n: again.append(n) or price(n), budget=120)] == [
        c.ps_layers for c in found]
    menu_best = min(price(c.ps_layers) for c in menu.cuts(big))
    assert min(price(c.ps_layers) for c in found) <= menu_best


def test_the_choice_takes_the_least_ps_compute_within_the_threshold() -> None:
    """vgg16 at 10 Gbit/s on a machine whose cores the workers fill: the fastest cut runs block5 on
    the PS; a cut of the last two Dense layers is predicted within 5% of it and is chosen."""
    from plan_helpers import builtin

    a = analyze(builtin("vgg16_cifar"), Cluster.local(2, 1, bandwidth="10gbit").with_shared_cores(2.0))
    fastest = min(a.candidates, key=lambda c: c.estimate.step_s)
    assert fastest is not a.chosen and a.chosen.estimate.step_s <= fastest.estimate.step_s * a.min_speedup
    assert sum(a.profile.layer(n).flops for n in a.chosen.ps_layers) < sum(
        a.profile.layer(n).flops for n in fastest.ps_layers)
    assert "less on the PS than the best split" in a.report()


@pytest.mark.parametrize("name", ["alexnet_cifar", "ctr_dnn"])
def test_the_menu_holds_every_cut_of_the_fc_and_embedding_menu(name: str) -> None:
    """Every suffix of PS-computable dense/embedding layers (the analyzer's menu before) is still a cut."""
    from plan_helpers import builtin

    p = builtin(name)
    have = {c.ps_layers for c in menu.cuts(p)}
    units = p.compute_layers
    for i in range(len(units)):
        suffix = tuple(l.name for l in units[i:])
        if all(l.kind in ("dense", "embedding", "reshape", "activation") for l in units[i:]) and any(
                l.param_bytes for l in units[i:]):
            assert suffix in have, suffix
