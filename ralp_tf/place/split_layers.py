"""Split layers: one PS-computed layer's compute spread over several PS tasks (a Plan's ``splits``;
the contract is in :mod:`ralp_tf.plan.plans`, the traffic it prices in :mod:`ralp_tf.plan.traffic`).

The variables are created as shards on the split's devices (:func:`split_homes`, through the
applier's creators); :func:`split_call` replaces the layer's ``call``:

* **Dense by columns**: shard i computes ``activation(x @ W_i + b_i)`` on ``dev_i``. The layer
  returns the concatenation of the shards' outputs (an op without a device: the worker's, where
  the loss or a worker-computed layer reads it; TensorFlow prunes it when nothing does) and
  records the pieces on it (:func:`column_pieces`), so that a split consumer reads them where they
  are: a row-split Dense over the same devices in place, a column-split one gathers every piece on
  each of its devices, a PS-computed unsplit layer concatenates them on its own device
  (:func:`assembled_on`);
* **Dense by rows**: shard i computes the partial sum ``x_i @ W_i`` on ``dev_i`` from its slice
  of the input (the column pieces in place, or slices cut where the input was produced); the
  assembly task A adds them, the bias and the activation;
* **Embedding by rows**: A partitions the ids by row range, shard i gathers its rows on ``dev_i``,
  A stitches them back in id order.

Each block of ops runs on its device forward and backward (:func:`device_block`: the gradient
of a block is computed by a tape replayed on that device), and a tensor read by blocks on several
devices is fanned out where it was produced (:func:`fan_out`), so the sum of its gradients is
formed there, not on the worker. The math is the unsplit layer's: the same products, summed in
another order (row splits), so losses and gradients agree to float32 rounding.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

from ralp_tf.errors import ModelError
from ralp_tf.model.kinds import dense_activation
from ralp_tf.plan.shards import SPLITTABLE_DENSE, SPLITTABLE_EMBEDDING, LayerSplit, column_split_refusal
from ralp_tf.place.table_handles import block_inputs, watched_views

__all__ = ["ROUTE_SCOPE", "split_refusal_of", "split_homes", "device_block", "fan_out",
           "column_pieces", "assembled_on", "split_call"]

#: Name scope of the ops that move a split layer's tensors between devices (fan-outs, slices of an
#: input, the concatenation of column pieces): they run where the data is, by design.
ROUTE_SCOPE = "ralp_route"
_PIECES = "_ralp_column_pieces"


def split_refusal_of(layer: Any, path: str, split: LayerSplit) -> str:
    """Why the live ``layer`` cannot be split as ``split`` says, with the fix (``""`` when it can):
    only exactly ``Dense`` (by columns or rows) and ``Embedding`` (by rows); no weight regulariser
    or constraint (they read the whole variable); by columns, an elementwise activation."""
    import tf_keras

    name, fix = f"layer {path!r} ({type(layer).__name__})", f"remove {path!r} from the plan's 'splits'"
    if type(layer) is tf_keras.layers.Embedding:
        if split.by != "rows":
            return f"{name} is an embedding table: it splits by rows only; use \"by\": \"rows\""
        extras = [a for a in ("embeddings_regularizer", "embeddings_constraint", "activity_regularizer")
                  if getattr(layer, a, None) is not None]
    elif type(layer) is tf_keras.layers.Dense:
        extras = [a for a in ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint",
                              "activity_regularizer") if getattr(layer, a, None) is not None]
        refusal = column_split_refusal(name, dense_activation(layer), fix) if split.by == "columns" else ""
        if refusal:
            return refusal
    else:
        return (f"{name} cannot be split: only {SPLITTABLE_DENSE} layers (by columns or rows) and "
                f"{SPLITTABLE_EMBEDDING} tables (by rows) can; {fix}")
    if extras:
        return f"{name} has {', '.join(extras)}, which read(s) the whole variable; {fix}"
    return ""


def split_homes(split: LayerSplit, assembly: int) -> tuple[tuple[tuple[int, ...], int], ...]:
    """(PS tasks, axis) of each variable of a split layer, in weight order: by columns, the kernel
    along axis 1 and the bias along axis 0 over the split's tasks; by rows, the kernel (or the
    table) along axis 0 over them and the bias whole on the ``assembly`` task."""
    tasks = split.tasks
    if split.by == "columns":
        return (tasks, 1), (tasks, 0)
    return (tasks, 0), ((assembly,), 0)


def _where(device: str) -> Any:
    import tensorflow as tf

    return tf.device(device) if device else contextlib.nullcontext()


def device_block(fn: Callable[..., Sequence[Any]], device: str, inputs: Sequence[Any],
                 tables: Sequence[Any] = ()) -> list[Any]:
    """``fn(*inputs, *views)`` (a list of tensors) with its forward ops and its gradient ops on
    ``device`` (``""``: where the caller's ops go). ``tf.GradientTape`` creates gradient ops where
    ``tape.gradient`` is called (the worker), so the block is a ``tf.custom_gradient`` whose
    gradient replays an inner tape under ``tf.device(device)``; the variables ``fn`` reads get
    their gradients there too. ``tables`` are read through their handles, ``fn`` gathering from
    their views (:mod:`ralp_tf.place.table_handles`: no whole-table copy per step)."""
    import tensorflow as tf

    n, n_h = len(inputs), len(tables)
    handle_inputs = block_inputs(tables)

    @tf.custom_gradient
    def block(*xs: Any) -> Any:
        with _where(device), tf.GradientTape() as tape:
            own = [tf.identity(x) for x in xs[:n]]
            handles = list(xs[n:])
            floats = [i for i, x in enumerate(own) if x.dtype.is_floating]
            for i in floats:
                tape.watch(own[i])
            ys = list(fn(*own, *watched_views(tape, handles, tables)))

        def grad(*dys: Any, variables: Any = None) -> Any:
            variables = list(variables or [])
            dys = [tf.zeros_like(y) if d is None else d for y, d in zip(ys, dys)]
            with _where(device):
                gs = tape.gradient(ys, [own[i] for i in floats] + handles + variables, output_gradients=dys,
                                   unconnected_gradients=tf.UnconnectedGradients.NONE)
            input_grads: list[Any] = [None] * (n + n_h)
            for i, g in zip(floats, gs):
                input_grads[i] = tf.zeros_like(own[i]) if g is None else g
            input_grads[n:] = gs[len(floats):len(floats) + n_h]
            return input_grads, [tf.zeros_like(v) if g is None else g
                                 for v, g in zip(variables, gs[len(floats) + n_h:])]

        return ys, grad

    with _where(device):
        return list(block(*inputs, *handle_inputs))


def _producer_device(x: Any) -> str:
    """The PS device ``x`` was produced on, or ``""`` (the worker: no device, or a worker device)."""
    device = getattr(x, "device", "") or ""
    return device if "/job:ps" in device else ""


def fan_out(x: Any, k: int, device: str) -> list[Any]:
    """``k`` copies of ``x`` on ``device``, one per reader: the sum of the readers' gradients is
    formed on ``device`` (the tape would form it on the worker when the readers' devices differ)."""
    import tensorflow as tf

    if k == 1:
        return [x]
    with tf.name_scope(ROUTE_SCOPE):
        return device_block(lambda t: [tf.identity(t) for _ in range(k)], device, [x])


def column_pieces(x: Any) -> tuple[tuple[str, ...], list[Any]] | None:
    """The (devices, pieces) a column-split layer recorded on its output ``x``, or None."""
    return getattr(x, _PIECES, None)


def assembled_on(x: Any, device: str) -> Any:
    """``x`` for a reader on ``device``: a column-split output concatenated there from its pieces
    (forward and backward on ``device``); any other tensor unchanged."""
    import tensorflow as tf

    found = column_pieces(x)
    if found is None:
        return x
    with tf.name_scope(ROUTE_SCOPE):
        return device_block(lambda *ps: [tf.concat(ps, -1)], device, found[1])[0]


def _shards(variable: Any, k: int, what: str) -> list[Any]:
    shards = list(getattr(variable, "variables", None) or [variable])
    if len(shards) != k:
        raise ModelError(f"{what} has {len(shards)} shard(s), not the {k} its split needs: the layer was not built "
                         "by ralp_tf's applier; place the model with place() or the decorator")
    return shards


def _matmul(x: Any, w: Any) -> Any:
    import tensorflow as tf

    if x.shape.rank == 2:
        return tf.matmul(x, w)
    return tf.tensordot(x, w, [[x.shape.rank - 1], [0]])


def _dense_input(layer: Any, path: str, inputs: Any) -> Any:
    import tensorflow as tf

    if not isinstance(inputs, tf.Tensor):
        raise ModelError(f"layer {path!r} is split, and a split Dense takes one dense tensor, not "
                         f"{type(inputs).__name__}; remove it from the plan's 'splits'")
    dtype = tf.as_dtype(layer.compute_dtype)
    return tf.cast(inputs, dtype) if inputs.dtype != dtype else inputs


def _columns(layer: Any, split: LayerSplit, path: str) -> Callable[..., Any]:
    import tensorflow as tf

    k, devices = len(split.devices), split.devices
    kernels = _shards(layer.kernel, k, f"layer {path!r}'s kernel")
    biases = _shards(layer.bias, k, f"layer {path!r}'s bias") if layer.use_bias else [None] * k

    def call(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        x = _dense_input(layer, path, inputs)
        found = column_pieces(x)
        if found is not None:  # an all-gather: every piece to every shard
            copies = [fan_out(p, k, _producer_device(p)) for p in found[1]]
            per_shard = [[c[j] for c in copies] for j in range(k)]
        else:
            per_shard = [[c] for c in fan_out(x, k, _producer_device(x))]
        outs = []
        for j, device in enumerate(devices):
            def shard(*parts: Any, w: Any = kernels[j], b: Any = biases[j]) -> list[Any]:
                y = _matmul(parts[0] if len(parts) == 1 else tf.concat(parts, -1), w)
                return [layer.activation(y if b is None else tf.nn.bias_add(y, b))]

            outs.append(device_block(shard, device, per_shard[j])[0])
        with tf.name_scope(ROUTE_SCOPE):
            whole = tf.concat(outs, -1)
        setattr(whole, _PIECES, (devices, outs))
        return whole

    return call


def _input_slices(x: Any, devices: tuple[str, ...], sizes: list[int]) -> list[Any]:
    """Input ``x`` as the column slices a row split reads: the pieces of a column split over the
    same devices in place, else slices cut where ``x`` was produced."""
    import tensorflow as tf

    found = column_pieces(x)
    if found is not None and found[0] == devices and [int(p.shape[-1]) for p in found[1]] == sizes:
        return list(found[1])
    with tf.name_scope(ROUTE_SCOPE):
        return device_block(lambda t: tf.split(t, sizes, axis=-1), _producer_device(x), [x])


def _rows(layer: Any, split: LayerSplit, path: str, assembly: str) -> Callable[..., Any]:
    import tensorflow as tf

    k, devices = len(split.devices), split.devices
    kernels = _shards(layer.kernel, k, f"layer {path!r}'s kernel")
    sizes = [int(w.shape[0]) for w in kernels]
    bias = layer.bias if layer.use_bias else None

    def call(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        slices = _input_slices(_dense_input(layer, path, inputs), devices, sizes)
        partials = [device_block(lambda s, w=w: [_matmul(s, w)], device, [s])[0]
                    for s, w, device in zip(slices, kernels, devices)]

        def assemble(*zs: Any) -> list[Any]:
            z = tf.add_n(list(zs))
            return [layer.activation(z if bias is None else tf.nn.bias_add(z, bias))]

        return device_block(assemble, assembly, partials)[0]

    return call


def _embedding_rows(layer: Any, split: LayerSplit, path: str, assembly: str) -> Callable[..., Any]:
    import tensorflow as tf

    k, devices = len(split.devices), split.devices
    tables = _shards(layer.embeddings, k, f"layer {path!r}'s table")
    sizes = [int(t.shape[0]) for t in tables]
    starts = [sum(sizes[:i]) for i in range(k)]

    def call(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        with tf.device(assembly):
            ids = inputs if inputs.dtype in (tf.int32, tf.int64) else tf.cast(inputs, tf.int32)
            flat = tf.reshape(ids, [-1])
            bounds = tf.constant(starts[1:], dtype=flat.dtype)
            owner = tf.reduce_sum(tf.cast(flat[:, None] >= bounds[None, :], tf.int32), axis=1)
            local = tf.dynamic_partition(flat - tf.gather(tf.constant(starts, dtype=flat.dtype), owner), owner, k)
            order = tf.dynamic_partition(tf.range(tf.size(flat)), owner, k)
        rows = [device_block(lambda i, v: [tf.gather(v, i)], device, [i], tables=[t])[0]
                for i, t, device in zip(local, tables, devices)]

        def stitch(*parts: Any) -> list[Any]:
            out = tf.dynamic_stitch(order, list(parts))
            return [tf.reshape(out, tf.concat([tf.shape(ids), [int(tables[0].shape[1])]], 0))]

        out = device_block(stitch, assembly, rows)[0]
        out.set_shape(ids.shape.concatenate([int(tables[0].shape[1])]))
        return out

    return call


def split_call(layer: Any, path: str, split: LayerSplit, assembly: str) -> Callable[..., Any]:
    """The ``call`` that computes ``layer`` split as ``split`` says (module docstring), its whole
    output assembled on ``assembly`` where the contract puts it there (row splits)."""
    import tensorflow as tf
    import tf_keras

    if type(layer) is tf_keras.layers.Embedding:
        call = _embedding_rows(layer, split, path, assembly)
    elif split.by == "columns":
        call = _columns(layer, split, path)
    else:
        call = _rows(layer, split, path, assembly)
    return tf.autograph.experimental.do_not_convert(call)
