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


def test_server_def_and_remote_value_status() -> None:
    import inspect

    from tensorflow.python.distribute.coordinator.remote_value import RemoteValueStatus
    from tensorflow.python.distribute.coordinator.values import RemoteValueImpl
    from tensorflow.python.eager import context

    assert keras_compat.server_def() is None  # this process is not connected to a cluster
    assert hasattr(context.context(), "_server_def") and callable(context.context().update_server_def)
    source = inspect.getsource(RemoteValueImpl)
    assert "self._status_available_event" in source and "self._status" in source
    assert str(RemoteValueStatus.READY).endswith("READY")
    assert not keras_compat.remote_value_ready(object())


def test_cluster_resolver_of_a_strategy() -> None:
    class Strategy:
        cluster_resolver = "resolver"

    assert keras_compat.cluster_resolver_of(Strategy()) == "resolver" and keras_compat.cluster_resolver_of(1) is None
