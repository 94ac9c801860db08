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


def test_the_ops_of_a_subclassed_models_own_call_are_no_decisions_of_a_plan() -> None:
    """The profile records the TensorFlow ops of a subclassed model's ``call`` (``op:...``) beside
    its layers; they are no units of the walk and compute with their inputs whatever a plan says,
    so the applier drops them from any plan (the Keras collaborative filtering example's shape:
    embeddings combined with ``tf`` ops in ``call``)."""
    import tensorflow as tf
    import tf_keras as keras

    from ralp_tf.place.applier import prepare

    class Recommender(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.users, self.items = keras.layers.Embedding(50, 4), keras.layers.Embedding(40, 4)

        def call(self, x: Any) -> Any:
            return tf.nn.sigmoid(tf.reduce_sum(self.users(x[:, 0]) * self.items(x[:, 1]), axis=1))

    def build() -> Any:
        model = Recommender()
        model(tf.zeros((1, 2), tf.int32))
        return model

    prepared = prepare(build, 4)
    records = [l.name for l in prepared.profile.layers if l.name.startswith("op:")]
    assert records and not set(records) & set(prepared.graph.paths)
    cluster = Cluster.local(1, 2)
    plan = Plan({name: "/job:worker/device:CPU:0" for name in [*records, *prepared.graph.paths]})
    assert set(resolve_plan(plan, prepared.graph, cluster, prepared.profile).placements) == set(prepared.graph.paths)
    assert resolve_plan(Plan({records[-1]: PS0}), prepared.graph, cluster, prepared.profile).placements == {}


@pytest.mark.parametrize("make, words", [
    ("mixed", r"layer 'mlp_dense' computes under the 'mixed_float16' dtype policy.*'float32' policy"),
    ("stateful", r"layer 'char_gru' is a stateful RNN.*stateful=False"),
])
def test_what_parameter_server_strategy_cannot_train_is_refused_before_any_cluster(make: str, words: str) -> None:
    import tf_keras as keras

    from ralp_tf.errors import ModelError
    from ralp_tf.place.applier import prepare

    def build() -> Any:
        if make == "stateful":
            inp = keras.Input((5, 3), batch_size=4)
            return keras.Model(inp, keras.layers.GRU(4, stateful=True, name="char_gru")(inp))
        inp = keras.Input((6,))
        return keras.Model(inp, keras.layers.Dense(3, dtype="mixed_float16", name="mlp_dense")(inp))

    with pytest.raises(ModelError, match=words):
        prepare(build, 4)


def test_an_op_belongs_to_the_outermost_unit_whose_scope_it_is_under() -> None:
    """Keras allows "/" in layer names (DenseNet's "conv1/relu" beside its last "relu"): the op
    densenet/conv1/relu/Relu is conv1/relu's, not relu's."""
    from ralp_tf.place.verify import _in_scope

    op = "densenet121/conv1/relu/Relu"
    assert _in_scope(op, "conv1/relu", ["relu", "conv1/relu"])
    assert not _in_scope(op, "relu", ["relu", "conv1/relu"])
    assert _in_scope("gradient_tape/densenet121/relu/ReluGrad", "relu", ["relu", "conv1/relu"])
    assert _in_scope("model/classifier/fc1/MatMul", "classifier/fc1", ["classifier", "classifier/fc1", "fc1"])
