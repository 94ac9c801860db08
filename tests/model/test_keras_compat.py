"""Every private TensorFlow/tf_keras access of ralp_tf (ralp_tf/model/keras_compat.py) still works:
a tf_keras or TensorFlow upgrade that changes one fails here, by name."""
from __future__ import annotations

from typing import Any

from ralp_tf.model import keras_compat


def _subclassed() -> Any:
    import tf_keras as keras

    class Net(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.body = keras.layers.Dense(4, kernel_regularizer="l2")
            self.head = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.head(self.body(x))

    net = Net()
    net.build((None, 3))
    return net


def test_graph_networks_and_direct_sublayers() -> None:
    import tf_keras as keras

    inp = keras.Input((3,))
    functional = keras.Model(inp, keras.layers.Dense(2)(inp))
    net = _subclassed()
    assert keras_compat.is_graph_network(functional) and not keras_compat.is_graph_network(net)
    assert keras_compat.direct_sublayers(net) == [net.body, net.head]


def test_snake_case_is_keras_own_rule() -> None:
    from tf_keras.src.utils.generic_utils import to_snake_case

    for name in ("Conv2D", "MultiHeadAttention", "TFOpLambda", "LSTM", "_Private", "Bidirectional", "ReLU"):
        assert keras_compat.snake_case(name) == to_snake_case(name)


def test_method_overrides_stack_and_restore() -> None:
    net = _subclassed()
    layer = net.head
    original = layer.call
    keras_compat.override_method(layer, "call", lambda x: ("first", x))
    keras_compat.override_method(layer, "call", lambda x: ("second", x))
    assert layer.call(1) == ("second", 1) and keras_compat.overridden(layer, "call")
    keras_compat.restore_method(layer, "call")
    assert layer.call(1) == ("first", 1)
    keras_compat.restore_method(layer, "call")
    assert not keras_compat.overridden(layer, "call") and layer.call.__func__ is original.__func__
    assert layer(__import__("tensorflow").ones([1, 4])).shape == (1, 2)  # __call__ uses the restored call


def test_swapped_attributes_and_their_ids() -> None:
    net = _subclassed()
    kernel = net.head.kernel
    assert id(kernel) in keras_compat.attribute_value_ids(net.head)
    with keras_compat.swapped_attributes(net.head, {id(kernel): "read"}):
        assert net.head.kernel == "read"
    assert net.head.kernel is kernel and net.head.trainable_weights[0] is kernel


def test_weight_loss_callables_are_the_layers_own_regularisers() -> None:
    net = _subclassed()
    own = keras_compat.weight_loss_callables(net.body)
    assert len(own) == 1 and keras_compat.weight_loss_callables(net.head) == []
    keras_compat.set_weight_loss_callables(net.body, [lambda: own[0]() * 0.0])
    assert float(net.losses[0]) == 0.0


def test_base_variable_of_a_mixed_precision_weight() -> None:
    import tf_keras as keras

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        dense = keras.layers.Dense(2)
        dense.build((None, 3))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    base = keras_compat.base_variable(dense.kernel)
    assert type(dense.kernel).__name__ == "AutoCastVariable" and type(base).__name__ == "ResourceVariable"
    assert keras_compat.base_variable(base) is base


def test_sharded_variable_and_kernel_devices() -> None:
    import tensorflow as tf

    v = keras_compat.sharded_variable([tf.Variable(tf.zeros([2, 3])), tf.Variable(tf.ones([1, 3]))], "w")
    assert tuple(v.shape) == (3, 3) and len(v.variables) == 2
    assert "CPU" in keras_compat.kernel_devices("MatMul")


def test_a_variable_sharded_along_another_axis_trains_and_checkpoints_as_the_full_variable(tmp_path: Any) -> None:
    """A conv kernel in three shards along its output channels: tf_keras lists the shards as the
    layer's weights, the layer reads the concatenation, Adam trains it like the unsharded layer,
    and a checkpoint restores into the unsharded model and back."""
    import numpy as np
    import tensorflow as tf
    import tf_keras

    def creator(next_creator: Any, **kwargs: Any) -> Any:
        init = kwargs["initial_value"]
        value = tf.convert_to_tensor(init() if callable(init) else init, dtype=kwargs.get("dtype"))
        if value.shape.rank != 4:
            return next_creator(**kwargs)
        parts = tf.split(value, [6, 5, 5], axis=3)
        return keras_compat.sharded_variable(
            [next_creator(**dict(kwargs, initial_value=p, shape=p.shape, name=f"kernel/part_{i}"))
             for i, p in enumerate(parts)], "kernel", axis=3)

    def build() -> Any:
        return tf_keras.Sequential([tf_keras.layers.Input((6, 6, 3)), tf_keras.layers.Conv2D(16, 3),
                                    tf_keras.layers.Flatten(), tf_keras.layers.Dense(2)])

    with tf.variable_creator_scope(creator):
        sharded = build()
    assert [tuple(w.shape) for w in sharded.layers[0].weights] == [(3, 3, 3, 6), (3, 3, 3, 5), (3, 3, 3, 5), (16,)]
    reference = build()
    reference.set_weights([np.concatenate([w.numpy() for w in sharded.weights[:3]], axis=3),
                           *[w.numpy() for w in sharded.weights[3:]]])
    x, y = tf.random.stateless_normal([4, 6, 6, 3], seed=[1, 2]), tf.constant([0, 1, 0, 1])
    for model in (sharded, reference):
        model.compile(tf_keras.optimizers.Adam(0.01), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, epochs=2, verbose=0)
    np.testing.assert_allclose(sharded(x), reference(x), rtol=1e-5, atol=1e-6)
    path = tf.train.Checkpoint(model=sharded).save(str(tmp_path / "sharded"))
    whole = build()
    tf.train.Checkpoint(model=whole).restore(path).expect_partial()
    np.testing.assert_allclose(whole(x), sharded(x), rtol=1e-6)
    with tf.variable_creator_scope(creator):
        again = build()
    tf.train.Checkpoint(model=again).restore(tf.train.Checkpoint(model=reference).save(str(tmp_path / "whole")))
    np.testing.assert_allclose(again(x), reference(x), rtol=1e-6)


def test_server_def_and_remote_value_status() -> None:
    import inspect

    from tensorflow.python.distribute.coordinator.remote_value import RemoteValueStatus
    from tensorflow.python.distribute.coordinator.values import RemoteValueImpl
    from tensorflow.python.eager import context

    assert keras_compat.server_def() is context.context()._server_def  # None until connected to a cluster
    assert hasattr(context.context(), "_server_def") and callable(context.context().update_server_def)
    source = inspect.getsource(RemoteValueImpl)
    assert "self._status_available_event" in source and "self._status" in source
    assert str(RemoteValueStatus.READY).endswith("READY")
    assert not keras_compat.remote_value_ready(object())


def test_cluster_resolver_of_a_strategy() -> None:
    class Strategy:
        cluster_resolver = "resolver"

    assert keras_compat.cluster_resolver_of(Strategy()) == "resolver" and keras_compat.cluster_resolver_of(1) is None


def test_server_lib_alone_loads_the_server_without_the_python_api() -> None:
    """A LocalCluster task imports TensorFlow's server library alone: the same Server class, a
    fraction of the modules (the cluster tests show such tasks train)."""
    import subprocess
    import sys

    code = ("import sys; from ralp_tf.model.keras_compat import server_lib_alone; s = server_lib_alone(); "
            "import tensorflow; print(callable(s.Server), callable(s.ClusterSpec), hasattr(tensorflow, 'function'), "
            "len(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    server, spec, api, modules = out.stdout.split()
    assert (server, spec, api) == ("True", "True", "False") and int(modules) < 1000, out.stdout


def test_call_loss_lists_hold_what_add_loss_adds_inside_call() -> None:
    import tensorflow as tf
    import tf_keras as keras

    from ralp_tf.model.graph import layer_and_sublayers

    class Penalised(keras.layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.inner = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            self.add_loss(tf.reduce_sum(x))
            return self.inner(x)

    layer = Penalised()
    seen: list[int] = []

    @tf.function
    def step(x: Any) -> Any:
        out = layer(x)
        seen.append(sum(len(losses) for losses in keras_compat.call_loss_lists(layer_and_sublayers(layer))))
        return out

    step(tf.ones((1, 3)))
    assert seen and set(seen) == {1} and len(keras_compat.call_loss_lists(layer_and_sublayers(layer))) == 2  # its list, its sublayer's


def test_the_tape_sums_a_tensors_gradients_on_the_device_of_its_summands() -> None:
    """In a traced step, a tensor read by two blocks whose gradients are computed on one device
    (as a PS unit's are) has its two gradient contributions summed on that device, not under the
    caller's (empty) device scope; summands on no device stay where the tape puts them."""
    import tensorflow as tf

    keras_compat.sum_gradients_where_they_are()
    keras_compat.sum_gradients_where_they_are()  # idempotent
    device = "/device:CPU:0"  # this process's CPU, connected to a cluster (another test's) or not

    def sin_on_device(x: Any) -> Any:
        @tf.custom_gradient
        def block(x: Any) -> Any:
            with tf.device(device):
                y = tf.sin(x)

            def grad(dy: Any) -> Any:
                with tf.device(device):
                    return dy * tf.cos(x)

            return y, grad

        return block(x)

    @tf.function(autograph=False)
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = 3.0 * x
            z = tf.sin(x)
            loss = tf.reduce_sum(sin_on_device(y) + 2.0 * sin_on_device(y)) + tf.reduce_sum(z * z + tf.cos(z))
        return tape.gradient(loss, x)

    graph = step.get_concrete_function(tf.TensorSpec([3])).graph
    sums = {op.name: op.device for op in graph.get_operations() if op.type == "AddN"}
    assert device in sums.values() and "" in sums.values(), sums
    x = tf.constant([0.1, 0.2, 0.3])
    z = tf.sin(x)
    expected = 9.0 * tf.cos(3.0 * x) + tf.cos(x) * (2 * z - tf.sin(z))
    tf.debugging.assert_near(step(x), expected)


def test_a_wrapped_tape_gradient_function_sees_every_gradient_once_per_key() -> None:
    import tensorflow as tf

    seen: list[str] = []

    def wrapper(tape_gradient: Any) -> Any:
        def gradient(op_name: str, *rest: Any) -> Any:
            seen.append(op_name)
            return tape_gradient(op_name, *rest)

        return gradient

    keras_compat.wrap_tape_gradient_function("test_keras_compat", wrapper)
    keras_compat.wrap_tape_gradient_function("test_keras_compat", wrapper)  # idempotent per key
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0 and seen.count("Mul") == 1


def test_a_variables_constraint_can_be_read_and_replaced_under_a_caching_wrapper() -> None:
    import tensorflow as tf
    from tensorflow.python.distribute.ps_values import CachingVariable

    v = tf.Variable([3.0, 4.0], constraint=lambda w: w / tf.norm(w))
    wrapped = CachingVariable(v)
    assert keras_compat.variable_constraint(v) is v.constraint
    keras_compat.set_variable_constraint(wrapped, lambda w: 2.0 * w)
    assert v.constraint(tf.constant(1.0)).numpy() == 2.0


def test_a_model_without_its_distribution_gets_it_back() -> None:
    net = _subclassed()
    before = (net._distribution_strategy, net._cluster_coordinator)
    net._cluster_coordinator = "coordinator"
    with keras_compat.without_distribution(net):
        assert net._distribution_strategy is None and net._cluster_coordinator is None
    assert net._cluster_coordinator == "coordinator" and net._distribution_strategy is before[0]
