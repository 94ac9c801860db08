"""One layer identity: a unit's path comes from the model's structure (explicit names, attribute
paths, positions), never from Keras's process-wide name counter; composite layers are one unit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ralp_tf.errors import PlanError
from ralp_tf.model.graph import is_generated_name, walk

REPO = Path(__file__).resolve().parents[2]


def nameless_subclassed() -> Any:
    """The Keras guides' style: a subclassed CNN whose layers have no ``name=``, held in attributes,
    a list and a dict."""
    import tf_keras as keras

    L = keras.layers

    class Net(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = L.Conv2D(8, 3, activation="relu")
            self.blocks = [L.Dense(16, activation="relu"), L.Dense(16, activation="relu")]
            self.heads = {"logits": L.Dense(10), "aux": L.Dense(2)}
            self.flatten = L.Flatten()

        def call(self, x: Any) -> Any:
            h = self.flatten(self.conv1(x))
            for block in self.blocks:
                h = block(h)
            return self.heads["logits"](h) + 0.0 * self.heads["aux"](h)[:, :1]

    model = Net()
    model.build((None, 8, 8, 3))
    return model


def nameless_functional() -> Any:
    import tf_keras as keras

    L = keras.layers
    inp = keras.Input((16,))
    x = L.Dense(32, activation="relu")(inp)
    x = L.Dense(32, activation="relu")(x)
    x = L.Dense(8, name="logits")(x)
    return keras.Model(inp, x)


def composite() -> Any:
    """A Functional model with a custom layer that holds layers (a Transformer-style block)."""
    import tf_keras as keras

    L = keras.layers

    class Block(L.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.att = L.MultiHeadAttention(num_heads=2, key_dim=4)
            self.ffn = keras.Sequential([L.Dense(16, activation="relu"), L.Dense(8)])
            self.norm = L.LayerNormalization()

        def call(self, x: Any) -> Any:
            return self.norm(x + self.ffn(self.att(x, x)))

    inp = keras.Input((6, 8))
    x = Block()(inp)
    x = L.GlobalAveragePooling1D()(x)
    return keras.Model(inp, L.Dense(3)(x))


def test_paths_come_from_attributes_and_positions_not_keras_names() -> None:
    a, b = nameless_subclassed(), nameless_subclassed()
    assert walk(a).paths == walk(b).paths == ["conv1", "blocks/0", "blocks/1", "heads/aux", "heads/logits", "flatten"]
    assert [l.name for l in a.layers] != [l.name for l in b.layers]  # Keras numbered the second build on
    assert walk(nameless_functional()).paths == walk(nameless_functional()).paths == ["dense", "dense_1", "logits"]


@pytest.mark.slow  # over ~5 s: the fast tier's limit
def test_paths_are_the_same_in_a_fresh_process() -> None:
    code = ("import sys; sys.path.insert(0, 'tests/model'); import tf_keras; tf_keras.layers.Dense(3); "
            "from test_graph import nameless_subclassed, nameless_functional; from ralp_tf.model.graph import walk; "
            "print(walk(nameless_subclassed()).paths, walk(nameless_functional()).paths)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == f"{walk(nameless_subclassed()).paths} {walk(nameless_functional()).paths}"


def test_a_composite_layer_is_one_unit_and_a_nested_model_is_opened() -> None:
    from ralp_tf import models

    graph = walk(composite())
    assert graph.paths == ["block", "global_average_pooling1d", "dense"]
    assert len(graph.layer("block").trainable_weights) > 6  # the attention, the FFN and the norm, together
    assert walk(models.transfer_classifier(hidden=8)).paths[-3:] == ["classifier/fc1", "classifier/fc2",
                                                                       "classifier/logits"]


def test_older_plan_names_map_where_they_are_unambiguous() -> None:
    from ralp_tf import models

    model = composite()
    graph = walk(model)
    block = graph.layer("block")
    leaves = [f"{block.name}/{sub.name}" for sub in (block.att, block.norm)]
    assert graph.resolve([block.name, *leaves]) == {block.name: "block", leaves[0]: "block", leaves[1]: "block"}
    nested = walk(models.transfer_classifier(hidden=8))
    assert nested.resolve(["classifier/fc1"]) == {"classifier/fc1": "classifier/fc1"}
    other_build = [l.name for l in nameless_functional().layers if l.name.startswith("dense")]
    with pytest.raises(PlanError, match="another build numbers them differently"):
        walk(nameless_functional()).resolve([other_build[-1] + "_9"])


def test_generated_names_are_told_from_given_ones() -> None:
    import tf_keras as keras

    dense = keras.layers.Dense(2)
    assert is_generated_name(dense.name, dense)
    assert not is_generated_name("fc1", dense) and not is_generated_name("logits", dense)
    assert is_generated_name("tf.__operators__.add_3") and is_generated_name("model_2", nameless_functional())
