"""The per-layer wrappers the applier installs: where a layer's variables are created, where
its forward and gradient ops run, and what crosses the network narrowed.

* :func:`install_placement`: what the applier installs on every unit of a placed model, per its
  plan (where its variables are created is :mod:`ralp_tf.place.colocation`);
* :func:`ps_call`: forward and gradient ops, and weight regularisers, on a PS task. ``tf.GradientTape`` creates gradient
  ops where ``tape.gradient`` is called, so the call is wrapped in ``tf.custom_gradient``: an
  inner tape records the forward, and the gradient function replays it under the same
  ``tf.device``. The calls of a shared layer are chained (:class:`CallChain`) so the sum of its
  weight gradients is on the PS too. With an ``activations`` codec, inputs from the worker
  cross narrowed; the output of a column-split layer is concatenated on the unit's device
  (:func:`ralp_tf.place.split_layers.assembled_on`);
* :func:`narrow_weights_call`: a worker-computed layer's variables cross narrowed (and their
  gradients), cast on the PS and back on the worker;
* :func:`gpu_call`: forward under ``/device:GPU:0`` of whichever worker runs the step;
* :func:`compression_of`: the codecs the applier actually applies to one layer.

The math is unchanged (the same ops on other devices; casts only where compression is asked),
so uncompressed placed models compute exactly what the unplaced model computes.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ralp_tf.plan.compression import FLOAT_CODECS, Compression, setting_of
from ralp_tf.model import keras_compat
from ralp_tf.model.graph import ModelGraph, layer_and_sublayers
from ralp_tf.model.keras_compat import swapped_attributes
from ralp_tf.place.codecs import check_finite, check_float, new_prefix, send
from ralp_tf.place.split_layers import assembled_on, split_call
from ralp_tf.place.table_handles import block_inputs, sparse_tables, viewing, watched_views
from ralp_tf.model.kinds import layer_kind
from ralp_tf.plan.plans import Plan, parse_device

__all__ = ["CallChain", "ps_call", "gradient_sum", "ENCODE_SCOPE", "narrow_weights_call", "on_device", "gpu_call",
           "compression_of", "install_placement", "constraints_where_the_variables_are"]


class CallChain:
    """Links the calls of one placed layer made while tracing one graph.

    ``tf.GradientTape`` sums the gradients of a variable used by several calls with an ``AddN``
    that has no device, so it would run on the worker and pull every call's weight gradient
    over the network. The calls are therefore chained: each call after the first takes a
    scalar token per trainable variable from the previous call, and its gradient function hands
    its variable gradients (plus those handed to it) back along the token. Only the first call
    returns variable gradients to the tape: one gradient per variable, summed on the layer's
    device (:func:`gradient_sum`: an embedding's rows stay rows). In eager mode nothing is chained: eager ops run on the coordinator anyway.
    """

    def __init__(self) -> None:
        self._graph: Any = None
        self._tokens: list[Any] | None = None

    def previous(self) -> list[Any] | None:
        import tensorflow as tf

        if tf.executing_eagerly() or self._graph is not tf.compat.v1.get_default_graph():
            return None
        return self._tokens

    def record(self, tokens: list[Any]) -> None:
        import tensorflow as tf

        self._graph, self._tokens = tf.compat.v1.get_default_graph(), tokens


class _Regularisers:
    """The weight regularisers of one PS-computed unit (its own and its sublayers' ``add_loss``
    callables), computed inside the unit's block on its device (:func:`ps_call`): the first call
    of the unit in a graph stores their values there, and the callables tf_keras reads
    (``model.losses``) return them. So a regulariser's gradient joins the unit's data gradient
    inside the block, one gradient per variable on the unit's device; without it the tape would
    sum the two with an ``AddN`` on the worker. Read in a graph where the unit did not run, or
    eagerly, a regulariser is computed on the device directly."""

    def __init__(self, layer: Any, device: str) -> None:
        self.device = device
        self.functions: list[Callable[[], Any]] = []
        self._graph: Any = None
        self._values: list[Any] = []
        for sub in layer_and_sublayers(layer):
            own = keras_compat.weight_loss_callables(sub)
            if own:
                readers = [self._reader(len(self.functions) + k) for k in range(len(own))]
                self.functions.extend(own)
                keras_compat.set_weight_loss_callables(sub, readers)

    def _reader(self, index: int) -> Callable[[], Any]:
        def read() -> Any:
            import tensorflow as tf

            if not tf.executing_eagerly() and self._graph is tf.compat.v1.get_default_graph():
                return self._values[index]
            with tf.device(self.device):
                return self.functions[index]()

        return read

    def compute(self) -> list[Any]:
        import tensorflow as tf

        return [tf.convert_to_tensor(fn()) for fn in self.functions]

    def store(self, values: list[Any]) -> None:
        import tensorflow as tf

        self._graph, self._values = tf.compat.v1.get_default_graph(), list(values)


def ps_call(layer: Any, call: Callable[..., Any], device: str, path: str = "",
            activations: str = "none", gradient_where_it_arrives: bool = False) -> Callable[..., Any]:
    """Wrap a layer's ``call`` so its forward and gradient ops, its weight regularisers
    (:class:`_Regularisers`) and the sum of its variables' gradients over all its calls
    (:class:`CallChain`) run on ``device``. Every tensor the call receives, positional or keyword
    (a second input, a mask), is an input of the block, so gradients reach each of them. With an
    ``activations`` codec, floating inputs arriving from the worker cross in that dtype: cast on
    the worker, cast back on ``device``; their gradients are cast on ``device`` and back on the
    worker (the casts' own gradients). With ``gradient_where_it_arrives`` the gradient runs where
    the output's gradient is: on its PS task when it was computed on one, else where
    ``tape.gradient`` is called (the worker)."""
    return _PsCall(layer, call, device, path, activations, gradient_where_it_arrives)


class _Slots:
    """Indices of a unit's variables, to match the variables a ``tf.custom_gradient`` hands its
    gradient function (PSS wraps them, so not by identity) by name and shape, and among variables
    alike (``add_weight`` without a name: every one is ``Variable``) in order: ``take(v)`` is
    the first index not yet taken, or None."""

    def __init__(self, variables: list[Any]) -> None:
        self.free: dict[tuple[str, tuple[Any, ...]], list[int]] = {}
        for i, v in enumerate(variables):
            self.free.setdefault(self._key(v), []).append(i)

    @staticmethod
    def _key(v: Any) -> tuple[str, tuple[Any, ...]]:
        return v.name, tuple(v.shape)

    def take(self, v: Any) -> int | None:
        free = self.free.get(self._key(v))
        return free.pop(0) if free else None


class _PsCall:
    """:func:`ps_call`'s wrapper: one ``tf.custom_gradient`` block per call (:meth:`__call__`)
    whose gradient function (:meth:`_gradients`) replays the call's inner tape on the device."""

    def __init__(self, layer: Any, call: Callable[..., Any], device: str, path: str, activations: str,
                 gradient_where_it_arrives: bool = False) -> None:
        self.layer, self.call, self.device, self.path, self.activations = layer, call, device, path, activations
        self.gradient_where_it_arrives = gradient_where_it_arrives
        self.chain = CallChain()
        self.regularisers = _Regularisers(layer, device)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import tensorflow as tf

        structure = (args, kwargs)
        leaves = tf.nest.flatten(structure)
        eager = tf.executing_eagerly()
        at = [i for i, x in enumerate(leaves) if isinstance(x, tf.Tensor) and (eager or tf.is_symbolic_tensor(x))]
        dtypes = [leaves[i].dtype for i in at]
        inputs = [assembled_on(leaves[i], self.device) for i in at]
        if self.activations != "none" and not tf.executing_eagerly():
            inputs = [_encode(x, self.activations, self.path) if _from_worker(x) else x for x in inputs]
        graph_mode = not tf.executing_eagerly()
        chained = list(self.layer.trainable_weights) if graph_mode else []
        carried_in = list((self.chain.previous() if chained else None) or [])
        tables = sparse_tables(self.layer) if graph_mode else []  # read through their handles
        handle_inputs = block_inputs(tables)
        n_in, n_h = len(inputs), len(tables)
        n_reg = len(self.regularisers.functions) if graph_mode and not carried_in else 0
        call, device = self.call, self.device

        added: list[tuple[list[Any], int]] = []  # (loss list, index) of each loss the call adds

        @tf.custom_gradient
        def block(*xs: Any) -> Any:
            with tf.device(device), tf.GradientTape(watch_accessed_variables=True) as tape:
                # one tensor per argument: a tensor passed twice (cross(x0, x0)) gets each use's gradient
                # in its place, not the sum of both in each
                own = tuple(tf.identity(x) for x in xs[:n_in]) + xs[n_in:]
                for x in own[:n_in]:
                    if x.dtype.is_floating:
                        tape.watch(x)
                views = watched_views(tape, own[n_in:n_in + n_h], tables)
                decoded = [tf.cast(x, d) if x.dtype != d else x for x, d in zip(own[:n_in], dtypes)]
                replaced = list(leaves)
                for i, x in zip(at, decoded):
                    replaced[i] = x
                a, kw = tf.nest.pack_sequence_as(structure, replaced)
                lists = keras_compat.call_loss_lists(layer_and_sublayers(self.layer)) if graph_mode else []
                marks = [len(losses) for losses in lists]
                with viewing(self.layer, {id(t): v for t, v in zip(tables, views)}):
                    y = call(*a, **kw)
                added.extend((losses, i) for losses, m in zip(lists, marks) for i in range(m, len(losses)))
                extra = (self.regularisers.compute() if n_reg else []) + [
                    tf.convert_to_tensor(losses[i]) for losses, i in added]
                tokens = [tf.identity(t) for t in xs[n_in + n_h:]] or [tf.zeros([]) for _ in chained]
            flat_y = tf.nest.flatten(y)

            def grad(*dys: Any, variables: Any = None) -> Any:
                return self._gradients(tape, own, dtypes, flat_y + extra, list(dys), chained, carried_in,
                                       list(variables or []), tables)

            return (y, extra, tokens), grad

        with tf.device(device):
            y, extra, tokens = block(*inputs, *handle_inputs, *carried_in)
        # The losses the call added (add_loss inside call) are read as block outputs, so their
        # gradient joins the block's on its device, as the regularisers' does.
        for (losses, i), value in zip(added, extra[n_reg:]):
            losses[i] = value
        if n_reg:
            self.regularisers.store(extra[:n_reg])
        if chained:
            self.chain.record(list(tokens))
        return y

    def _gradients(self, tape: Any, xs: tuple[Any, ...], dtypes: list[Any], outputs: list[Any], dys: list[Any],
                   chained: list[Any], carried_in: list[Any], variables: list[Any],
                   tables: list[Any]) -> tuple[list[Any], list[Any]]:
        """The block's gradients, on the device: of its inputs, of the tables it read through their
        handles (returned as the handles' gradients) and of its variables, each summed over the
        unit's calls (a later call hands its variable gradients back along the chain)."""
        import tensorflow as tf

        n_in, n_h = len(dtypes), len(tables)
        dy = [tf.zeros_like(o) if d is None else d for o, d in zip(outputs, dys[:len(outputs)])]
        carried = dys[len(outputs):]
        float_idx = [i for i in range(n_in) if xs[i].dtype.is_floating]
        f = len(float_idx)
        with tf.device(self._gradient_device(dys)):
            grads = tape.gradient(outputs, [xs[i] for i in float_idx] + list(xs[n_in:n_in + n_h]) + variables,
                                  output_gradients=dy, unconnected_gradients=tf.UnconnectedGradients.NONE)
            float_grads = [tf.zeros_like(xs[i]) if g is None else g for i, g in zip(float_idx, grads[:f])]
            table_grads = list(grads[f:f + n_h])  # None where unconnected: a handle has no zeros
            var_grads = [tf.zeros_like(v) if g is None else g for v, g in zip(variables, grads[f + n_h:])]
            slots = _Slots(chained)
            index = [slots.take(v) for v in variables + tables]
            totals: list[Any] = [None] * len(chained)
            for v, g, i in zip(variables + tables, var_grads + table_grads, index):
                if i is None or g is None:
                    continue
                c = carried[i] if i < len(carried) else None
                totals[i] = gradient_sum(g, c) if _is_carried_gradient(c, v) else g
        input_grads: list[Any] = [None] * len(xs)
        for i, g in zip(float_idx, float_grads):
            narrowed = xs[i].dtype != dtypes[i]
            input_grads[i] = check_finite(g, f"{self.path}: gradient of its input") if narrowed else g
        var_index, table_index = index[:len(variables)], index[len(variables):]
        if carried_in:  # a later call: hand the variable and table gradients back to the previous call
            for i, total in enumerate(totals):
                input_grads[n_in + n_h + i] = total
            return input_grads, [None if i is not None else g for g, i in zip(var_grads, var_index)]
        for j, (g, i) in enumerate(zip(table_grads, table_index)):
            input_grads[n_in + j] = totals[i] if i is not None else g
        return input_grads, [totals[i] if i is not None else g for g, i in zip(var_grads, var_index)]

    def _gradient_device(self, dys: list[Any]) -> str | None:
        """Where the block's gradient runs: its device, or with ``gradient_where_it_arrives`` the PS
        task of the first output gradient computed on one, else None (the caller's device); with a
        weight regulariser, its device (the regulariser's gradient is the variable's own shape)."""
        if not self.gradient_where_it_arrives or self.regularisers.functions:
            return self.device
        return next((d.device for d in dys if d is not None and "/job:ps" in (d.device or "")), None)


def _is_carried_gradient(c: Any, v: Any) -> bool:
    """Whether ``c``, what a later call handed back along the chain for variable ``v``, is a
    gradient of ``v``: sparse (``tf.IndexedSlices``, an embedding's rows), or dense of ``v``'s
    shape; not the scalar zero the tape gives a token no later call read (a scalar variable's
    zero carry is indistinguishable, and adding it changes nothing)."""
    import tensorflow as tf

    if c is None:
        return False
    if isinstance(c, tf.IndexedSlices):
        return True
    return c.shape == v.shape and bool(c.shape.rank or not v.shape.rank)


def gradient_sum(a: Any, b: Any) -> Any:
    """``a + b`` for two gradients of one variable, each dense or ``tf.IndexedSlices``. Two
    IndexedSlices stay sparse: their rows and ids concatenated (as the tape sums them), so an
    optimizer's sparse update and what crosses the network stay rows, not the table. One
    IndexedSlices and one dense gradient: the rows added into the dense one
    (``tensor_scatter_nd_add``; repeated ids add up)."""
    import tensorflow as tf

    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        wide = tf.int64 if tf.int64 in (a.indices.dtype, b.indices.dtype) else a.indices.dtype
        return tf.IndexedSlices(tf.concat([a.values, b.values], 0),
                                tf.concat([tf.cast(a.indices, wide), tf.cast(b.indices, wide)], 0),
                                a.dense_shape if a.dense_shape is not None else b.dense_shape)
    dense, rows = (b, a) if isinstance(a, tf.IndexedSlices) else (a, b)
    if isinstance(rows, tf.IndexedSlices):
        return tf.tensor_scatter_nd_add(dense, tf.expand_dims(rows.indices, -1), rows.values)
    return dense + rows


#: Name scope of the casts that encode a PS layer's input on the worker (they run there by design).
ENCODE_SCOPE = "ralp_encode"


def _from_worker(x: Any) -> bool:
    """Whether tensor ``x`` was produced on the worker (no device, or a worker device)."""
    return bool(getattr(x, "dtype", None) is not None and x.dtype.is_floating and "/job:ps" not in (x.device or ""))


def _narrow(codec: str) -> Any:
    import tensorflow as tf

    return {"fp16": tf.float16, "bf16": tf.bfloat16}[codec]


def _encode(x: Any, codec: str, path: str) -> Any:
    """``x`` cast to ``codec``'s dtype where it was produced, checked for NaN/Inf."""
    import tensorflow as tf

    with tf.name_scope(ENCODE_SCOPE):
        return check_finite(tf.cast(x, _narrow(codec)), f"{path}: its input activations")


def narrow_weights_call(layer: Any, call: Callable[..., Any], codec: str, path: str,
                        gradients: str = "none") -> Callable[..., Any]:
    """Wrap a worker-computed layer's ``call`` so each trainable variable is read through
    :func:`_pull`: cast to ``codec``'s dtype on its PS task (``none``: not cast), it crosses narrow
    and is cast back on the worker. Its gradient crosses back narrow (the cast's gradient) and
    lands as fp32 on the PS, or, with a ``gradients`` codec, is encoded by it on the worker and
    decoded on the PS (:mod:`ralp_tf.place.codecs`; see :mod:`ralp_tf.plan.compression`). Each
    variable is read once per traced graph: a layer called several times reuses the read, so the
    tape sums the calls' gradients on the worker and one (encoded) gradient per variable is pushed."""
    import tensorflow as tf

    if gradients != "none":
        for v in layer.trainable_weights:
            check_float(v.dtype, gradients, f"{path}: variable {v.name}")
    prefix = new_prefix()  # names this model's per-worker top-k residuals
    pulls: dict[int, Any] = {}  # id of a layer weight -> its decoded read, for the graph being traced
    traced: list[Any] = [None]

    @tf.autograph.experimental.do_not_convert
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if tf.executing_eagerly():
            return call(*args, **kwargs)
        graph = tf.compat.v1.get_default_graph()
        if traced[0] is not graph:
            traced[0] = graph
            pulls.clear()
        reads: dict[int, Any] = {}
        held = keras_compat.attribute_value_ids(layer)
        for v in layer.trainable_weights:
            if id(v) not in held:
                continue  # read through a sublayer: not narrowed
            if id(v) not in pulls:  # a shared layer's later calls reuse the first call's read
                pulled = _pull(v, None if codec == "none" else _narrow(codec), gradients, path, prefix)
                pulls[id(v)] = tf.cast(pulled, v.dtype) if pulled.dtype != v.dtype else pulled
            reads[id(v)] = pulls[id(v)]
        with swapped_attributes(layer, reads):
            return call(*args, **kwargs)

    return wrapped


def _pull(var: Any, dtype: Any, gradients: str = "none", path: str = "", prefix: str = "") -> Any:
    """``var`` read (cast to ``dtype`` unless None) on its own device. Its gradient is cast back there,
    or, with an ``int8``/``topk`` ``gradients`` codec, encoded where the tape runs (the worker) and
    decoded on the variable's device (:func:`ralp_tf.place.codecs.send`)."""
    import tensorflow as tf

    coded = gradients not in FLOAT_CODECS
    with tf.device(var.device):
        @tf.custom_gradient
        def pull() -> Any:
            value = tf.identity(var) if dtype is None else tf.cast(var, dtype)

            def grad(dy: Any, variables: Any = None) -> Any:
                variables = list(variables or [])
                if coded:
                    return [], [send(dy, gradients, v, f"{path}: gradient of {v.name}", prefix) for v in variables]
                if gradients != "none":  # fp16/bf16 on the worker, whatever the pull's dtype
                    dy = tf.cast(dy, _narrow(gradients))
                with tf.device(var.device):
                    return [], [tf.cast(dy, v.dtype) for v in variables]

            return value, grad

        return pull()


def on_device(function: Callable[..., Any], device: str) -> Callable[..., Any]:
    """``function`` with the ops it creates on ``device``: a PS-computed unit's ``compute_mask``,
    which tf_keras's ``__call__`` runs outside ``call`` (TimeDistributed and Bidirectional reshape
    their inputs there), so its ops run where the unit's call does."""
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with tf.device(device):
            return function(*args, **kwargs)

    return wrapped


def _table_on_a_ps(layer: Any) -> str | None:
    """The device of a worker-computed ``Embedding``'s table when it is one variable on a PS task,
    else None. Its forward then runs there (:func:`install_placement`, through :func:`ps_call`):
    the gather runs there anyway (colocated with the table), and so does the ``identity`` that
    ``tf.nn.embedding_lookup`` ends with, which TF's placer otherwise puts on the worker whenever
    the rows have more than one consumer (a variable-length input's ``Shape``): the rows came down
    to the worker and went back up to a consumer on the PS (measured on bidirectional_lstm_imdb, its
    recurrent layers on the table's PS: 0.52 MB more per step). Its gradient (a ``Reshape`` of the
    rows' gradient into the update's values) runs where the rows' gradient arrives
    (``gradient_where_it_arrives``): on the PS task of a consumer computed there, so the rows'
    gradient does not come down to the worker and go back (measured on ctr_head with its head on
    the PS and ``legacy.SGD``: 137 KB per step against 5.4 KB priced); on the worker for a consumer
    there, where a ``tf_keras.optimizers`` class sums repeated ids (on the table's task the rows'
    gradient went up, its reshaped values came down to be summed and the sums went up again: two
    more copies of the looked-up rows, measured on an Embedding of 40 ids per sample read by
    ``GlobalAveragePooling1D``, 2.64 MB per step against 1.31 MB priced). A consumer on the worker
    receives the rows as before."""
    import tensorflow as tf
    import tf_keras

    table = getattr(layer, "embeddings", None) if isinstance(layer, tf_keras.layers.Embedding) else None
    if not isinstance(table, tf.Variable) or not (table.device or "").startswith("/job:ps"):
        return None
    return table.device


def _computes_its_mask(layer: Any) -> bool:
    import tf_keras

    return type(layer).compute_mask is not tf_keras.layers.Layer.compute_mask


def constraints_where_the_variables_are(layer: Any) -> None:
    """Make the constraint of each of ``layer``'s variables (and its sublayers') run on the
    variable's own device. The optimizer applies constraints after its update, in the step's
    function, so under ParameterServerStrategy a constraint read its variable twice from the PS
    and wrote it back (``max_norm`` on a 33.5 MB kernel: 100.7 MB per worker step); on the
    variable's device it moves nothing. The math is the same."""
    import tensorflow as tf

    for sub in layer_and_sublayers(layer):
        for v in sub.weights:
            constraint = keras_compat.variable_constraint(v)
            if constraint is None or getattr(constraint, "_ralp_on_device", False):
                continue

            def on_its_device(x: Any, constraint: Any = constraint, device: str = v.device) -> Any:
                with tf.device(device):
                    return constraint(x)

            on_its_device._ralp_on_device = True  # type: ignore[attr-defined]
            keras_compat.set_variable_constraint(v, on_its_device)


def gpu_call(call: Callable[..., Any], device_type: str) -> Callable[..., Any]:
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with tf.device(f"/device:{device_type}:0"):
            return call(*args, **kwargs)

    return wrapped


def compression_of(plan: Plan, path: str, layer: Any) -> Compression:
    """The compression the applier applies to ``layer``: the plan's setting, less what does not
    cross the network here (warned about when the plan names the layer itself). Gradient codecs
    on variables that are not floating point raise PlanError (see :func:`narrow_weights_call`)."""
    setting = setting_of(plan.compression, path)
    on_ps = path in plan.ps_layers()
    no_push = on_ps or layer_kind(layer) == "embedding" or not layer.trainable_weights
    drop = {"weights": no_push, "activations": not on_ps, "gradients": no_push}
    kept = {k: ("none" if drop[k] else getattr(setting, k)) for k in drop}
    ignored = [k for k in drop if drop[k] and getattr(setting, k) != "none"]
    if ignored and path in plan.compression:
        warnings.warn(f"layer {path!r}: {', '.join(ignored)} compression asked, but that traffic does not cross "
                      "the network for this layer (activations compress a PS-computed layer's inputs; weights and "
                      "gradients a worker-computed layer's variables and their pushed gradients, embeddings "
                      f"excepted); ignored. Remove {', '.join(ignored)} from the plan's compression of {path!r}",
                      stacklevel=4)
    return Compression(**kept)


def install_placement(graph: ModelGraph, plan: Plan, worker_device: str) -> None:
    """Install on every unit of ``graph`` what ``plan`` asks of it: a split unit's call over its
    shards' tasks (:func:`ralp_tf.place.split_layers.split_call`); a PS-computed unit's call and
    weight regularisers on its task (:func:`ps_call`); a worker-computed
    unit's weights narrowed on the wire (:func:`narrow_weights_call`) and its forward on the GPU
    (:func:`gpu_call`) where the plan says so; a worker-computed Embedding's lookup on its table's
    task (:func:`_table_on_a_ps`). Each layer object is handled once, at its first path."""
    done: set[int] = set()
    for unit in graph:
        layer, path = unit.layer, unit.path
        if id(layer) in done:
            continue
        done.add(id(layer))
        setting = compression_of(plan, path, layer)
        d = parse_device(plan.placements.get(path, worker_device))
        if d.is_ps:
            constraints_where_the_variables_are(layer)
            call = (split_call(layer, path, plan.splits[path], d.canonical()) if path in plan.splits
                    else ps_call(layer, layer.call, d.canonical(), path, setting.activations))
            keras_compat.override_method(layer, "call", call)
            if _computes_its_mask(layer):
                keras_compat.override_method(layer, "compute_mask", on_device(layer.compute_mask, d.canonical()))
            continue
        if setting.weights != "none" or setting.gradients != "none":
            keras_compat.override_method(layer, "call", narrow_weights_call(layer, layer.call, setting.weights, path,
                                                                            setting.gradients))
        if d.device_type == "GPU":
            keras_compat.override_method(layer, "call", gpu_call(layer.call, "GPU"))
        elif (table := _table_on_a_ps(layer)) is not None:
            keras_compat.override_method(layer, "call", ps_call(layer, layer.call, table, path,
                                                                gradient_where_it_arrives=True))
