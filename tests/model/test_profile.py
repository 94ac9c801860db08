"""The profiler: layers, kinds, parameter bytes, FLOPs and activations, on the shapes users give it."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ralp_tf
from ralp_tf import models
from ralp_tf.errors import KerasVersionError, ModelError, ValidationError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.model.profiler import profile


@pytest.fixture(scope="module")
def alexnet_profile() -> ModelProfile:
    return profile(models.alexnet_cifar(), batch_size=32)


def test_alexnet_parameters_and_order(alexnet_profile: ModelProfile) -> None:
    p = alexnet_profile
    assert p.param_bytes == 35_855_178 * 4
    assert sum(l.param_bytes for l in p.layers if l.kind == "conv") == 2_251_584 * 4
    assert p.names[:3] == ["image", "conv1", "pool1"]
    assert p.names[-4:] == ["flatten", "fc1", "fc2", "logits"]
    assert p.layer("flatten").output_bytes == 4096 * 4
    assert p.layer("fc1").inbound == ("flatten",)
    assert p.is_chain()


def test_vgg16_parameters() -> None:
    p = profile(models.vgg16_cifar(), batch_size=32)
    assert p.param_bytes == 33_638_218 * 4
    assert sum(l.param_bytes for l in p.layers if l.kind == "conv") == 14_714_688 * 4
    assert p.layer("flatten").output_bytes == 512 * 4


def test_analytic_flops(alexnet_profile: ModelProfile) -> None:
    conv1 = alexnet_profile.layer("conv1")
    assert conv1.flops_source == "analytic"
    assert conv1.flops == 2 * 3 * 3 * 3 * 64 * 32 * 32
    fc1 = alexnet_profile.layer("fc1")
    assert fc1.flops == 2 * 4096 * 4096 + 4096


def test_skip_connections_resnet() -> None:
    p = profile(models.resnet_cifar(), batch_size=8)
    assert not p.is_chain()
    add = p.layer("s1b1_add")
    assert set(add.inbound) == {"stem_relu", "s1b1_bn2"}
    for l in p.layers:  # topological: every producer comes first
        assert all(p.index(u) < p.index(l.name) for u in l.inbound)
    assert p.layer("stem_bn").kind == "normalization"
    assert p.layer("stem_bn").trainable_param_bytes == 2 * 16 * 4  # gamma, beta; moving stats are not trainable
    assert p.layer("stem_bn").param_bytes == 4 * 16 * 4
    assert p.layer("s1b1_add").flops > 0  # TF's FLOP counter


def test_two_input_embedding_model() -> None:
    import tf_keras as k

    a = k.Input((5,), dtype="int32", name="user")
    b = k.Input((5,), dtype="int32", name="item")
    ea = k.layers.Embedding(1000, 16, name="user_emb")(a)
    eb = k.layers.Embedding(500, 16, name="item_emb")(b)
    x = k.layers.Concatenate(name="cat")([k.layers.Flatten(name="fa")(ea), k.layers.Flatten(name="fb")(eb)])
    out = k.layers.Dense(1, name="out")(x)
    p = profile(k.Model([a, b], out), batch_size=4)
    assert p.layer("user_emb").kind == "embedding"
    assert p.layer("user_emb").param_bytes == 1000 * 16 * 4
    assert p.layer("user_emb").output_bytes == 5 * 16 * 4
    assert set(p.layer("cat").inbound) == {"fa", "fb"}
    assert [l.name for l in p.layers if l.kind == "input"] == ["user", "item"] or \
        {l.name for l in p.layers if l.kind == "input"} == {"user", "item"}


def test_a_compiled_models_optimizer_is_the_one_its_profile_is_priced_with() -> None:
    """The profile names the optimizer whose sparse updates the cost model prices
    (:mod:`ralp_tf.model.optimizers`): the compiled one's, ``sgd`` when there is none."""
    import tf_keras as k

    from ralp_tf.model.optimizers import optimizer_name

    def model() -> object:
        x = k.Input((1,), dtype="int32", name="ids")
        return k.Model(x, k.layers.Dense(1, name="out")(k.layers.Flatten()(k.layers.Embedding(50, 4, name="emb")(x))))

    assert profile(model(), batch_size=4).optimizer == "sgd"
    for opt, name in [(k.optimizers.SGD(), "sgd"), (k.optimizers.legacy.SGD(), "legacy-sgd"),
                      (k.optimizers.Adam(), "adam"), (k.optimizers.legacy.Adagrad(), "legacy-adagrad"),
                      (k.optimizers.Adadelta(), "sgd"), (k.optimizers.legacy.Adadelta(), "legacy-sgd")]:
        assert optimizer_name(opt) == name, opt
    compiled = model()
    compiled.compile(optimizer=k.optimizers.legacy.SGD(), loss="mse")
    assert profile(compiled, batch_size=4).optimizer == "legacy-sgd"


def test_sequential_and_measure() -> None:
    p = profile(models.small_cnn(), batch_size=4, measure=True)
    assert p.layers[0].kind == "input"
    assert p.compute_layers and all(l.measured_seconds and l.measured_seconds > 0 for l in p.compute_layers)


def test_json_round_trip(alexnet_profile: ModelProfile) -> None:
    again = ModelProfile.from_json(alexnet_profile.to_json())
    assert again == alexnet_profile
    assert json.loads(alexnet_profile.to_json())["layers"][1]["name"] == "conv1"


def test_the_variables_creation_order_is_recorded_and_checked() -> None:
    """A subclassed model whose layers are assigned b then a but built a then b (its call order):
    the profile lists its variables in the order they were created; a profile naming a variable its
    layers do not hold is refused."""
    import tf_keras

    class Swapped(tf_keras.Model):
        def __init__(self) -> None:
            super().__init__(name="swapped")
            self.b = tf_keras.layers.Dense(3, name="b")
            self.a = tf_keras.layers.Dense(4, name="a")

        def call(self, x):  # type: ignore[no-untyped-def]
            return self.b(self.a(x))

    model = Swapped()
    model(np.zeros((2, 5), np.float32))
    p = profile(model, batch_size=4)
    assert model.variables[0] is model.b.kernel  # the tracking order: b first
    assert p.variable_order == (("a", 0), ("a", 1), ("b", 0), ("b", 1))
    assert ModelProfile.from_json(p.to_json()) == p
    d = json.loads(p.to_json())
    d["variable_order"] = [["a", 2]]
    with pytest.raises(ValidationError, match="variable_order"):
        ModelProfile.from_dict(d)
    d["variable_order"] = [["a"]]
    with pytest.raises(ValidationError, match="variable_order"):
        ModelProfile.from_dict(d)
    del d["variable_order"]  # a profile of before: the layers' order
    assert ModelProfile.from_dict(d).variables_in_creation_order() == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def test_with_batch_size(alexnet_profile: ModelProfile) -> None:
    assert alexnet_profile.with_batch_size(64).batch_size == 64
    with pytest.raises(ValidationError, match="batch_size"):
        alexnet_profile.with_batch_size(0)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "32", True])
def test_bad_batch_size(bad: object) -> None:
    with pytest.raises(ValidationError, match="batch_size must be a positive integer"):
        profile(models.small_cnn(), batch_size=bad)  # type: ignore[arg-type]


def test_keras3_model_is_refused_with_the_fix() -> None:
    keras = pytest.importorskip("keras")
    if not keras.__version__.startswith("3"):
        pytest.skip("Keras 3 not installed")
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(KerasVersionError, match="tf_keras"):
        profile(m)


def test_custom_layer_is_priced_as_other_and_may_go_to_a_ps() -> None:
    import tensorflow as tf
    import tf_keras as k

    class Scale(k.layers.Layer):
        def call(self, x: tf.Tensor) -> tf.Tensor:
            return x * 2.0

    inp = k.Input((8,))
    out = k.layers.Dense(2, name="d")(Scale(name="scale")(inp))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = profile(k.Model(inp, out))
    assert p.layer("scale").kind == "other" and p.layer("scale").ps_refusal == ""
    assert p.layer("scale").flops == 8  # TF's counter: one Mul per element
    ralp_tf.register_layer_kind("Scale", "activation")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert profile(k.Model(inp, out)).layer("scale").kind == "activation"


def test_unbuilt_and_untraceable_models_are_refused_with_the_fix() -> None:
    import tensorflow as tf
    import tf_keras as k

    class Identity(k.Model):
        def call(self, x):  # type: ignore[no-untyped-def]
            return x

    with pytest.raises(ModelError, match="never been called and has no input shape; pass input_shape"):
        profile(Identity())
    with pytest.raises(ModelError, match="not built"):
        profile(k.Sequential([k.layers.Dense(3)]))

    class Gate(k.layers.Layer):
        def call(self, x):  # type: ignore[no-untyped-def]
            return x if tf.reduce_sum(x) > 0 else -x  # Python control flow on a tensor's value

    class Gated(k.Model):
        def __init__(self) -> None:
            super().__init__()
            self.gate, self.fc = Gate(name="gate"), k.layers.Dense(2, name="fc")

        def call(self, x):  # type: ignore[no-untyped-def]
            return self.fc(self.gate(x))

    with pytest.raises(ModelError, match="cannot be traced \\(in layer 'gate'\\).*tf.cond"):
        profile(Gated(), input_shape=(4,))


def test_subclassed_and_nested_models_are_profiled_by_path() -> None:
    functional = profile(models.alexnet_cifar(), batch_size=8)
    subclassed = profile(models.alexnet_cifar_subclassed(), batch_size=8)
    assert [l.name for l in subclassed.layers][1:] == [l.name for l in functional.layers][1:]
    for a, b in zip(functional.layers[2:], subclassed.layers[2:]):  # after the input and its reader
        assert a.to_dict() == b.to_dict()
    assert functional.layers[1].flops == subclassed.layers[1].flops
    nested = profile(models.transfer_classifier(), batch_size=8)
    assert {"features/conv1", "classifier/fc1", "classifier/fc2", "classifier/logits"} <= set(nested.names)
    assert nested.layer("classifier/fc1").inbound == ("gap",) and nested.layer("classifier/fc1").kind == "dense"
    assert nested.outputs == ("classifier/logits",)


def test_plain_tensorflow_ops_between_layers_are_recorded() -> None:
    import tensorflow as tf
    import tf_keras as k

    class Residual(k.Model):
        def __init__(self) -> None:
            super().__init__(name="residual")
            self.a, self.b = k.layers.Dense(8, name="a"), k.layers.Dense(8, name="b")

        def call(self, x):  # type: ignore[no-untyped-def]
            return self.b(tf.nn.relu(self.a(x)) + x)

    prof = profile(Residual(), batch_size=4, input_shape=(8,))
    ops = [l for l in prof.layers if l.name.startswith("op:")]
    assert ops and all(l.kind == "other" for l in ops)
    assert set(prof.layer("b").inbound) <= {l.name for l in ops}
    assert "a" in {u for l in ops for u in l.inbound}


def test_summary_lists_every_layer(alexnet_profile: ModelProfile) -> None:
    text = alexnet_profile.summary()
    assert alexnet_profile.names and all(name in text for name in alexnet_profile.names)
    assert np.isclose(alexnet_profile.flops, sum(l.flops for l in alexnet_profile.layers))


def test_profile_marks_the_variables_a_weight_regulariser_reads() -> None:
    import tf_keras as k

    inp = k.Input((3,), dtype="int32")
    e = k.layers.Embedding(1000, 8, embeddings_regularizer=k.regularizers.l2(1e-6), name="emb")(inp)
    x = k.layers.Dense(4, kernel_regularizer="l2", name="fc")(k.layers.Flatten()(e))
    p = profile(k.Model(inp, k.layers.Dense(1, name="out")(x)), batch_size=8)
    assert [(l.name, l.regularised) for l in p.layers if l.has_params] == [
        ("emb", (True,)), ("fc", (True, False)), ("out", ())]


def test_a_reshape_to_the_batch_and_minus_one_is_profiled_at_its_real_size() -> None:
    """A layer that reshapes with ``tf.shape(x)[0]`` and ``-1`` (the ViT example's Patches) has no
    static shape at a batch of None; the profile takes it from a trace at the profile's batch."""
    import tensorflow as tf
    import tf_keras as k

    class Patches(k.layers.Layer):
        def call(self, images):  # type: ignore[no-untyped-def]
            patches = tf.image.extract_patches(images, [1, 4, 4, 1], [1, 4, 4, 1], [1, 1, 1, 1], "VALID")
            return tf.reshape(patches, [tf.shape(images)[0], -1, patches.shape[-1]])

    inp = k.Input((16, 16, 3))
    x = k.layers.Dense(8, name="proj")(Patches(name="patches")(inp))
    prof = profile(k.Model(inp, k.layers.Flatten(name="flat")(x)), batch_size=4)
    assert prof.layer("patches").output_bytes == 16 * 48 * 4 and prof.layer("patches").output_shape == (16, 48)
    assert prof.layer("proj").flops >= 2 * 16 * 48 * 8
