"""A plan's layer names, read against a model's units: stable paths, older plans' Keras names where
they are unambiguous (a composite layer's leaves mean the layer, when they agree), refusals."""
from __future__ import annotations

from typing import Any

import pytest

from ralp_tf.errors import PlanError
from ralp_tf.model.graph import walk
from ralp_tf.place.applier import resolve_plan
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.plans import Plan

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"


def _composite() -> Any:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
    from test_graph import composite

    return composite()


def test_an_older_plan_naming_a_composite_layers_leaves_means_the_layer() -> None:
    graph = walk(_composite())
    block = graph.layer("block")
    old = Plan({f"{block.name}/{block.att.name}": PS1, f"{block.name}/{block.norm.name}": PS1, "dense": PS0})
    assert resolve_plan(old, graph, Cluster.local(1, 2)).placements == {"block": PS1, "dense": PS0}
    conflicting = Plan({f"{block.name}/{block.att.name}": PS1, f"{block.name}/{block.norm.name}": PS0})
    with pytest.raises(PlanError, match="places a layer that holds layers as a whole: name 'block'"):
        resolve_plan(conflicting, graph, Cluster.local(1, 2))


def test_a_plan_with_stable_paths_is_returned_as_it_is_and_refusals_name_the_reason() -> None:
    import tf_keras as keras

    graph = walk(_composite())
    plan = Plan({"block": PS1})
    assert resolve_plan(plan, graph, Cluster.local(1, 2)) is plan
    inp = keras.Input((4, 3), batch_size=2)
    stateful = keras.Model(inp, keras.layers.Dense(2)(keras.layers.GRU(4, stateful=True)(inp)))
    with pytest.raises(PlanError, match="layer 'gru' cannot compute on a PS task: a stateful recurrent layer"):
        resolve_plan(Plan({"gru": PS0}), walk(stateful), Cluster.local(1, 2))
    with pytest.raises(PlanError, match="not in the cluster"):
        resolve_plan(Plan({"dense": "/job:ps/replica:0/task:5/device:CPU:0"}), walk(stateful), Cluster.local(1, 2))
