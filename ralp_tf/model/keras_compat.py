"""Every private TensorFlow and tf_keras access of ralp_tf, in one place.

Each function below reads or changes something tf_keras or TensorFlow does not publish. Its
docstring names the private attribute, the public API it stands in for (or why there is none),
and the version it was checked on (TensorFlow 2.21, tf_keras 2.21). ``tests/model/
test_keras_compat.py`` pins each one, so a tf_keras or TensorFlow upgrade that changes them fails
there, by name, instead of somewhere deep in placement.

Nothing else in ralp_tf reaches a private attribute of a Keras or TensorFlow object. The
per-layer overrides the applier installs (a layer's ``call`` and ``build`` replaced on the
instance) go through :func:`override_method` / :func:`restore_method`; docs/placement.md says why a
Keras ``Wrapper`` layer cannot replace them.
"""
from __future__ import annotations

import contextlib
import functools
import re
from typing import Any, Callable, Iterable, Iterator, Mapping

__all__ = ["is_graph_network", "direct_sublayers", "snake_case", "op_layer_name_base", "default_name_bases",
           "cluster_resolver_of", "override_method", "restore_method", "overridden", "swapped_attributes",
           "attribute_value_ids", "weight_loss_callables", "set_weight_loss_callables", "call_loss_lists", "base_variable",
           "sharded_variable", "axis_sharded_variable_class", "server_def", "update_server_def",
           "server_lib_alone", "remote_value_ready", "kernel_devices", "sum_gradients_where_they_are",
           "all_reduce_only_across_replicas"]


def is_graph_network(model: Any) -> bool:
    """Whether ``model`` is a Functional or Sequential model (its layer graph is data).

    Private: ``Model._is_graph_network``. Public stand-in: none; ``isinstance(model,
    tf_keras.Sequential)`` misses Functional models and subclasses built with
    ``super().__init__(inputs, outputs)``."""
    return bool(getattr(model, "_is_graph_network", False))


def direct_sublayers(layer: Any) -> list[Any]:
    """The layers ``layer`` tracks directly (its attributes, lists and dicts of layers), in
    tracking order.

    Private: ``Layer._flatten_layers(include_self=False, recursive=False)``. Public stand-in:
    ``Model.layers`` (models only); ``Layer.submodules`` is recursive and includes non-layers."""
    return list(layer._flatten_layers(include_self=False, recursive=False))


def snake_case(class_name: str) -> str:
    """The base of the name tf_keras gives a layer of class ``class_name`` created without
    ``name=`` (``Conv2D`` -> ``conv2d``, ``ConvLSTM2D`` -> ``conv_lstm2d``, ``MultiHeadAttention``
    -> ``multi_head_attention``).

    Private: ``tf_keras.src.utils.generic_utils.to_snake_case``, called; where it cannot be
    imported, a copy of its rule in tf_keras 2.21."""
    return _keras_snake_case()(class_name)


@functools.lru_cache(maxsize=None)
def _keras_snake_case() -> Callable[[str], str]:
    try:
        from tf_keras.src.utils.generic_utils import to_snake_case
    except ImportError:
        return _snake_case_copy
    return to_snake_case


def _snake_case_copy(class_name: str) -> str:
    """tf_keras 2.21's ``to_snake_case`` rule."""
    intermediate = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    snake = re.sub("([a-z])([A-Z])", r"\1_\2", intermediate).lower()
    return snake if snake[:1] != "_" else "private" + snake


def op_layer_name_base(layer: Any) -> str | None:
    """For a layer tf_keras creates itself when a TensorFlow op is applied to a KerasTensor (users
    cannot name those), the base its name counter numbers it from: ``tf.math.add``,
    ``tf.__operators__.getitem``, a plain function's ``__name__``, ``tf.RaggedTensor.from_tensor``,
    ``input.shape``. None for every other layer.

    Private: the classes of ``tf_keras.src.layers.core.tf_op_layer`` (``TFOpLambda`` and
    ``SlicingOpLambda``: ``symbol``, ``function``; ``ClassMethod``: ``cls_symbol``,
    ``method_name``; ``InstanceProperty`` and ``InstanceMethod``: ``attr_name``) and the names
    their ``__init__`` give (checked on tf_keras 2.21). Public stand-in: none."""
    from tf_keras.src.layers.core import tf_op_layer

    if isinstance(layer, tf_op_layer.TFOpLambda):
        return "tf." + layer.symbol if layer.symbol else str(layer.function.__name__)
    if isinstance(layer, tf_op_layer.ClassMethod):
        return f"tf.{layer.cls_symbol}.{layer.method_name}"
    if isinstance(layer, tf_op_layer.InstanceProperty):
        return "input." + layer.attr_name
    return None


def default_name_bases(layer: Any) -> set[str]:
    """Every base tf_keras's process-wide name counter may have named ``layer`` from, had it been
    created without ``name=`` (its name is then ``base`` or ``base_<n>``): :func:`snake_case` of
    every layer class in its MRO (``model`` for a Functional or Sequential model, whose MRO holds
    ``Model``; a layer whose class changed after it was named still matches), ``input`` for an
    ``InputLayer``, and for an op layer only :func:`op_layer_name_base`. It may hold bases Keras
    did not use for this layer; it never misses the one it did.

    Private: mirrors ``Layer._init_set_name``, ``Functional._init_set_name`` (``Model`` for the
    ``Functional`` class), ``InputLayer.__init__`` (``backend.get_uid("input")``) and the op
    layers' ``__init__`` (checked on tf_keras 2.21). Public stand-in: none; a layer does not
    record whether its name was given."""
    import tf_keras

    op_base = op_layer_name_base(layer)
    if op_base is not None:
        return {op_base}
    bases = {snake_case(cls.__name__) for cls in type(layer).__mro__
             if isinstance(cls, type) and issubclass(cls, tf_keras.layers.Layer)}
    if isinstance(layer, tf_keras.layers.InputLayer):
        bases.add("input")
    return bases


def cluster_resolver_of(strategy: Any) -> Any:
    """The cluster resolver of a ParameterServerStrategy, or None.

    Public: ``strategy.cluster_resolver``; private fallback: ``strategy._cluster_resolver`` (set
    by the V1 constructor path)."""
    return getattr(strategy, "cluster_resolver", None) or getattr(strategy, "_cluster_resolver", None)


_OVERRIDES = "_ralp_tf_overrides"


def override_method(layer: Any, name: str, method: Callable[..., Any]) -> None:
    """Make ``layer.<name>`` (``call``, ``build`` or ``compute_mask``) be ``method`` on this instance only, until
    :func:`restore_method` takes this override off (overrides stack: each restore undoes the last).

    Private: an instance attribute shadowing the class's method, which tf_keras's ``__call__``
    (``self.call``, ``self.build`` in ``_maybe_build``, ``self.compute_mask`` in ``_set_mask_metadata``)
    picks up (checked on tf_keras 2.21).
    Public stand-in: none that keeps the layer's identity, name scope and checkpoint keys (a
    ``Wrapper`` layer changes all three; docs/placement.md)."""
    stack = layer.__dict__.setdefault(_OVERRIDES, {}).setdefault(name, [])
    stack.append(layer.__dict__.get(name))
    object.__setattr__(layer, name, method)


def restore_method(layer: Any, name: str) -> None:
    """Undo the last :func:`override_method` of ``layer.<name>``."""
    stack = layer.__dict__.get(_OVERRIDES, {}).get(name)
    if not stack:
        return
    previous = stack.pop()
    if previous is None:
        layer.__dict__.pop(name, None)
    else:
        object.__setattr__(layer, name, previous)


def overridden(layer: Any, name: str) -> bool:
    """Whether ``layer.<name>`` is an :func:`override_method` not yet restored."""
    return bool(layer.__dict__.get(_OVERRIDES, {}).get(name))


@contextlib.contextmanager
def swapped_attributes(layer: Any, values: Mapping[int, Any]) -> Iterator[None]:
    """While active, every attribute of ``layer`` that holds a variable ``v`` with ``id(v)`` in
    ``values`` holds ``values[id(v)]`` instead (a tensor read from it); restored on exit.

    Private: writes to the instance ``__dict__`` past tf_keras's attribute tracking
    (``object.__setattr__``), so the layer's weight lists are untouched. Public stand-in: none
    (a layer reads its weights through its own attributes, e.g. ``self.kernel``)."""
    swapped = [(name, value) for name, value in vars(layer).items() if id(value) in values]
    for name, value in swapped:
        object.__setattr__(layer, name, values[id(value)])
    try:
        yield
    finally:
        for name, value in swapped:
            object.__setattr__(layer, name, value)


def attribute_value_ids(layer: Any) -> set[int]:
    """``id()`` of every value ``layer``'s own attributes hold (what :func:`swapped_attributes` can
    swap). Private: reads the instance ``__dict__`` (``vars``), past tf_keras's tracking."""
    return {id(value) for value in vars(layer).values()}


def weight_loss_callables(layer: Any) -> list[Callable[[], Any]]:
    """The zero-argument loss functions ``layer`` itself registered (``add_loss(callable)``: its
    weight regularisers), not its sublayers'.

    Private: ``Layer._callable_losses``. Public stand-in: ``layer.losses``, which calls them (and
    every sublayer's) where it is read, so their ops cannot be given a device per layer."""
    return list(getattr(layer, "_callable_losses", []))


def set_weight_loss_callables(layer: Any, losses: list[Callable[[], Any]]) -> None:
    """Replace ``layer``'s own registered loss functions (see :func:`weight_loss_callables`).

    Private: assigns ``Layer._callable_losses`` (a plain list on tf_keras 2.21)."""
    layer._callable_losses[:] = losses


def call_loss_lists(layers: Iterable[Any]) -> list[list[Any]]:
    """The lists in which tf_keras keeps the tensor losses a call adds (``self.add_loss(tensor)``
    inside ``call``, e.g. a VAE's KL term) while a ``tf.function`` traces it: each of ``layers``'
    (a unit and its sublayers), the very list objects (entries may be replaced in place), each once.

    Private: ``Layer._eager_losses`` (a plain list on tf_keras 2.21, cleared at each top-level
    call). Public stand-in: ``layer.losses``, which reads them but cannot say which call added one."""
    lists, seen = [], set()
    for sub in layers:
        own = getattr(sub, "_eager_losses", None)
        if isinstance(own, list) and id(own) not in seen:
            seen.add(id(own))
            lists.append(own)
    return lists


def base_variable(weight: Any) -> Any:
    """The variable a layer weight reads: itself, or the variable inside a mixed-precision
    ``AutoCastVariable`` (what a variable creator created).

    Private: ``AutoCastVariable._variable``. Public stand-in: none."""
    return getattr(weight, "_variable", weight) if type(weight).__name__ == "AutoCastVariable" else weight


def sharded_variable(shards: list[Any], name: str, axis: int = 0) -> Any:
    """One variable made of ``shards``, contiguous along ``axis``: a ``ShardedVariable``, as
    ParameterServerStrategy's own ``variable_partitioner`` makes, for axis 0; for any other axis
    an :func:`axis_sharded_variable_class` instance. tf_keras lists either's shards as the layer's
    weights (each gets its own gradient and optimizer slots), a checkpoint stores either as the
    full variable (restorable into a model sharded otherwise, or not at all), and a layer reading
    it reads the concatenation of its shards, on the reading device.

    Private: ``tensorflow.python.distribute.sharded_variable.ShardedVariable``. Public stand-in:
    ``ParameterServerStrategy(variable_partitioner=...)``, which partitions every variable of the
    model along axis 0 by one rule, not the variables a plan names onto the tasks it names."""
    from tensorflow.python.distribute import sharded_variable as module

    if axis == 0:
        return module.ShardedVariable(shards, name=name)
    return axis_sharded_variable_class()(shards, axis, name)


@functools.lru_cache(maxsize=1)
def axis_sharded_variable_class() -> type:
    """A ``ShardedVariable`` whose shards are contiguous along any one axis (TensorFlow's is
    axis 0 only).

    Private: subclasses ``ShardedVariable`` (tf_keras recognises split variables by that class
    name, ``base_layer_utils.is_split_variable``) and sets the attributes its ``__init__`` sets
    (``_variables``, ``_name``, ``_dtype``, ``_shape``, ``_var_offsets``, ``_saving_variable``);
    saves each shard as a slice of the full variable (``Variable.SaveSliceInfo``, as
    ``ShardedVariable._gather_saveables_for_checkpoint`` does on axis 0); converts to a tensor by
    ``tf.concat`` along its axis (``tf.register_tensor_conversion_function``, public, ahead of
    ShardedVariable's own). Its shards are not given ``_sharded_container``, so the tf_keras
    optimizer keeps one slot per shard (its ShardedVariable of slots is axis 0 only): optimizer
    state restores into the same sharding only. Indexing and sparse reads (axis-0 operations)
    raise TypeError. Public stand-in: none."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.distribute import sharded_variable as module
    from tensorflow.python.ops import resource_variable_ops
    from tensorflow.python.ops import variables as variables_lib
    from tensorflow.python.trackable import base as trackable
    from tensorflow.python.training.saving import saveable_object_util

    class AxisShardedVariable(module.ShardedVariable):
        def __init__(self, variables: list[Any], axis: int, name: str) -> None:  # noqa: D107
            self._variables, self._name, self._axis = list(variables), name, int(axis)
            self._dtype = variables[0].dtype
            shape = variables[0].shape.as_list()
            shape[self._axis] = sum(int(v.shape[self._axis]) for v in variables)
            self._shape = tf.TensorShape(shape)
            self._var_offsets, at = [], 0
            for v in variables:
                offset = [0] * len(shape)
                offset[self._axis] = at
                at += int(v.shape[self._axis])
                self._var_offsets.append(offset)
            self._saving_variable = resource_variable_ops.UninitializedVariable(
                shape=self._shape, dtype=self._dtype, name=name, trainable=variables[0].trainable,
                synchronization=variables_lib.VariableSynchronization.NONE,
                aggregation=variables_lib.VariableAggregation.NONE)

        @property
        def axis(self) -> int:
            return self._axis

        def _gather_saveables_for_checkpoint(self) -> dict[str, Any]:
            def factory(name: str = self.name) -> list[Any]:
                return [saveable_object_util.ResourceVariableSaveable(
                    v, variables_lib.Variable.SaveSliceInfo(
                        full_name=self.name, full_shape=self.shape.as_list(), var_offset=list(offset),
                        var_shape=v.shape.as_list()).spec, name)
                    for v, offset in zip(self._variables, self._var_offsets)]

            return {trackable.VARIABLE_VALUE_KEY: factory}

        def numpy(self) -> Any:
            return np.concatenate([v.numpy() for v in self._variables], axis=self._axis)

        def _copy_trackable_to_cpu(self, object_map: Any) -> None:
            raise NotImplementedError("asynchronous checkpoints of variables sharded along an axis other than 0")

        def __getitem__(self, slice_spec: Any) -> Any:
            raise TypeError(f"{self._name} is sharded along axis {self._axis}: read it whole (tf.convert_to_tensor)")

        def sparse_read(self, indices: Any, name: Any = None) -> Any:
            raise TypeError(f"{self._name} is sharded along axis {self._axis}: a lookup needs axis-0 shards")

    def to_tensor(var: Any, dtype: Any = None, name: Any = None, as_ref: bool = False) -> Any:
        if as_ref:
            raise NotImplementedError("a sharded variable cannot be used as a reference")
        return tf.concat(var.variables, axis=var.axis)

    tf.register_tensor_conversion_function(AxisShardedVariable, to_tensor, priority=99)
    return AxisShardedVariable


def server_lib_alone() -> Any:
    """TensorFlow's ``server_lib`` module (``tf.distribute.Server``, ``ClusterSpec``) imported
    without TensorFlow's Python API: 0.7 s of CPU instead of 3-4.4 s here.

    Private: puts a bare ``tensorflow`` package module (the real package's path, no
    ``tensorflow/__init__.py`` run) in ``sys.modules`` before importing
    ``tensorflow.python.training.server_lib``, which loads the same C++ runtime (every kernel,
    the gRPC server) with only the Python modules it needs. Public stand-in: ``import
    tensorflow`` (``tf.distribute.Server``). So only a process that runs nothing but a server may
    call it, before anything else imports TensorFlow (a LocalCluster task: its ops come from the
    coordinator as graphs). What the full import adds and a task would miss: the pluggable-device
    libraries of ``site-packages/tensorflow-plugins``, which this loads too, and the modular
    file systems of ``TF_USE_MODULAR_FILESYSTEM``, which it does not (a task that needs them runs
    the full import: ``RALP_TF_TASK_FULL_IMPORT=1``). Checked on TensorFlow 2.21.
    """
    import importlib.util
    import sys
    import types

    if "tensorflow" not in sys.modules:
        spec = importlib.util.find_spec("tensorflow")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("TensorFlow is not installed (pip install tensorflow)")
        package = types.ModuleType("tensorflow")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["tensorflow"] = package
    from tensorflow.python.training import server_lib

    _load_pluggable_devices()
    return server_lib


def _load_pluggable_devices() -> None:
    """Load ``site-packages/tensorflow-plugins/*.so`` as ``tensorflow/__init__.py`` does."""
    import glob
    import os
    import site

    from tensorflow.python.framework import load_library

    for root in {*site.getsitepackages(), site.getusersitepackages()}:
        for lib in sorted(glob.glob(os.path.join(root, "tensorflow-plugins", "*.so"))):
            load_library.load_pluggable_device_library(lib)


def server_def() -> Any:
    """The ``ServerDef`` this process's eager context is connected with, or None.

    Private: ``tensorflow.python.eager.context.context()._server_def``. Public stand-in: none."""
    from tensorflow.python.eager import context

    return getattr(context.context(), "_server_def", None)


def update_server_def(server_def: Any) -> None:
    """Reconnect this process's eager context with ``server_def``.

    Private: ``tensorflow.python.eager.context.context().update_server_def`` (module not
    exported). Public stand-in: ``tf.config.experimental_connect_to_cluster``, which cannot shrink
    a cluster to this process alone."""
    from tensorflow.python.eager import context

    context.context().update_server_def(server_def)


def remote_value_ready(remote_value: Any) -> bool:
    """Whether a ``ClusterCoordinator.schedule`` result has completed, without waiting.

    Private: ``RemoteValueImpl._status_available_event`` and ``_status``. Public stand-in:
    ``fetch()`` / ``get()``, which block until it has."""
    event = getattr(remote_value, "_status_available_event", None)
    if event is None or not event.is_set():
        return False
    return str(getattr(remote_value, "_status", "")).endswith("READY")


def kernel_devices(op_type: str) -> set[str]:
    """The device types (``CPU``, ``GPU``, ...) that have a registered kernel for ``op_type``.

    Private: ``tensorflow.python.framework.kernels.get_registered_kernels_for_op``. Public
    stand-in: none (placement errors appear only when a graph with that op runs)."""
    from tensorflow.python.framework import kernels

    return {k.device_type for k in kernels.get_registered_kernels_for_op(op_type).kernel}


_SUMS_COLOCATED = False


def sum_gradients_where_they_are() -> None:
    """Make ``tf.GradientTape`` add the gradients of a tensor used more than once on the device
    of its summands when they all share one (process-wide; idempotent).

    The tape sums the gradient contributions of a tensor with several consumers (``AddN``) under
    the caller's device scope, that is, on the worker. When the producer and the consumers are
    layers computed on a PS task, every contribution would cross to the worker and the sum cross
    back: measured on deep_cross_network, whose ``x0`` feeds three Cross layers on the PS, 2.5x the
    bytes of its plan. Colocated with its summands the sum moves nothing, and a sum on the worker of
    tensors on the worker stays there; summands on several devices keep the tape's placement.

    Private: ``tensorflow.python.eager.backprop._default_vspace`` (its ``aggregate_fn``) and
    ``pywrap_tfe.TFE_Py_RegisterVSpace``, which the tape reads. Public stand-in: none (graph-mode
    ``tf.gradients`` had ``colocate_gradients_with_ops``; the tape has no such option)."""
    global _SUMS_COLOCATED
    if _SUMS_COLOCATED:
        return
    import tensorflow as tf
    from tensorflow.python import pywrap_tfe
    from tensorflow.python.eager import backprop

    tape_sum = backprop._default_vspace.aggregate_fn

    def colocated_sum(gradients: list[Any]) -> Any:
        devices = {getattr(g, "device", "") for g in gradients}
        device = devices.pop() if len(gradients) > 1 and len(devices) == 1 else ""
        with tf.device(device) if device else contextlib.nullcontext():
            return tape_sum(gradients)

    backprop._default_vspace = backprop._default_vspace._replace(aggregate_fn=colocated_sum)
    pywrap_tfe.TFE_Py_RegisterVSpace(backprop._default_vspace)
    _SUMS_COLOCATED = True


_ONE_REPLICA_KEPT = False


def all_reduce_only_across_replicas() -> None:
    """Make the ``tf_keras.optimizers.legacy`` optimizers created from now on leave their gradients
    where they are when one replica is in sync (process-wide; idempotent); with several (a worker
    with several GPUs, MultiWorkerMirroredStrategy) they all-reduce them as before.

    Their default aggregator all-reduces over the replicas in sync. ParameterServerStrategy runs one
    replica per worker, and that all-reduce of one replica is an ``Identity`` under the caller's
    device scope, the worker: every gradient computed on a PS task, an embedding's rows included,
    came down to the worker and went back up to its variable (measured on ctr_head with its table
    split by rows over two PS tasks and ``legacy.SGD``: 76.5 KB per worker step, 5.7 KB without).
    The sum of one replica's gradients is those gradients, so the update is the same.

    Private: ``tf_keras.src.optimizers.utils.all_reduce_sum_gradients``, which a legacy optimizer's
    ``__init__`` takes as its ``gradient_aggregator`` when given none. Public stand-in: the
    ``gradient_aggregator`` argument, which would need every user's optimizer to pass it; the new
    optimizer classes sum a sparse gradient's ids on the worker anyway."""
    global _ONE_REPLICA_KEPT
    if _ONE_REPLICA_KEPT:
        return
    import tensorflow as tf
    from tf_keras.src.optimizers import utils as optimizer_utils

    all_reduce = optimizer_utils.all_reduce_sum_gradients

    def across_replicas(grads_and_vars: Any) -> Any:
        if tf.distribute.get_replica_context().num_replicas_in_sync == 1:
            return list(grads_and_vars)
        return all_reduce(grads_and_vars)

    optimizer_utils.all_reduce_sum_gradients = across_replicas
    _ONE_REPLICA_KEPT = True


_TAPE_GRADIENT_WRAPPERS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {}


def wrap_tape_gradient_function(key: str, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Make ``tf.GradientTape`` compute every op's gradient through ``wrapper(tape_gradient)``
    (process-wide; once per ``key``). ``tape_gradient(op_name, attr_tuple, num_inputs, inputs,
    outputs, out_grads, skip_input_indices, forward_pass_name_scope)`` is the tape's own function;
    ``inputs`` and ``outputs`` hold only the forward tensors the tape kept (None for the others, or
    None whole).

    Private: ``tensorflow.python.eager.backprop._gradient_function`` and
    ``pywrap_tfe.TFE_Py_RegisterGradientFunction``, which the tape calls. Public stand-in: none."""
    if key in _TAPE_GRADIENT_WRAPPERS:
        return
    from tensorflow.python import pywrap_tfe
    from tensorflow.python.eager import backprop

    _TAPE_GRADIENT_WRAPPERS[key] = wrapper
    function = backprop._gradient_function
    for wrap in _TAPE_GRADIENT_WRAPPERS.values():
        function = wrap(function)
    pywrap_tfe.TFE_Py_RegisterGradientFunction(function)


def variable_constraint(weight: Any) -> Any:
    """The constraint callable of a layer weight (the variable under any distribution wrapper), or None."""
    return getattr(base_variable(weight), "constraint", None)


def set_variable_constraint(weight: Any, constraint: Callable[[Any], Any]) -> None:
    """Replace the constraint of a layer weight (the variable under any distribution wrapper).

    Private: ``BaseResourceVariable._constraint``, which its ``constraint`` property returns and
    the optimizer calls after each update, and ``CachingVariable._v``, the variable a
    ParameterServerStrategy wrapper delegates to. Public stand-in: none (the constraint is fixed
    when the variable is created)."""
    variable = base_variable(weight)
    while type(variable).__name__ == "CachingVariable":
        variable = variable._v
    variable._constraint = constraint


@contextlib.contextmanager
def without_distribution(model: Any) -> Iterator[None]:
    """``model`` with no strategy, coordinator or cached test function inside the block (as
    tf_keras's ``predict`` runs under ParameterServerStrategy), all put back after.

    Private: ``Model._distribution_strategy`` and ``Model._cluster_coordinator``. Public stand-in: none."""
    saved = (model._distribution_strategy, model._cluster_coordinator, model.test_function)
    model._distribution_strategy, model._cluster_coordinator, model.test_function = None, None, None
    try:
        yield
    finally:
        model._distribution_strategy, model._cluster_coordinator, model.test_function = saved
