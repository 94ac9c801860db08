"""The per-layer wrappers the applier installs: where a layer's variables are created, where
its forward and gradient ops run, and what crosses the network narrowed.

* :func:`placed_build`: the layer's variables are created next to an anchor variable on a PS
  task (``strategy.extended.colocate_vars_with``);
* :func:`ps_call`: forward and gradient ops on a PS task. ``tf.GradientTape`` creates gradient
  ops where ``tape.gradient`` is called, so the call is wrapped in ``tf.custom_gradient``: an
  inner tape records the forward, and the gradient function replays it under the same
  ``tf.device``. The calls of a shared layer are chained (:class:`CallChain`) so the sum of its
  weight gradients is on the PS too. With an ``activations`` codec, inputs from the worker
  cross narrowed;
* :func:`narrow_weights_call`: a worker-computed layer's variables cross narrowed (and their
  gradients), cast on the PS and back on the worker;
* :func:`gpu_call`: forward under ``/device:GPU:0`` of whichever worker runs the step;
* :func:`compression_of`: the codecs the applier actually applies to one layer.

The math is unchanged (the same ops on other devices; casts only where compression is asked),
so uncompressed placed models compute exactly what the unplaced model computes.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ralp_tf.plan.compression import FLOAT_CODECS, Compression, setting_of
from ralp_tf.place.codecs import check_finite, check_float, new_prefix, send
from ralp_tf.model.kinds import layer_kind
from ralp_tf.plan.plans import Plan

__all__ = ["placed_build", "CallChain", "ps_call", "ENCODE_SCOPE", "narrow_weights_call", "gpu_call",
           "compression_of"]


def placed_build(layer: Any, strategy: Any, anchor: Any) -> None:
    original = layer.build

    @functools.wraps(original)
    def build(*args: Any, **kwargs: Any) -> Any:
        with strategy.extended.colocate_vars_with(anchor):
            return original(*args, **kwargs)

    layer.build = build


class CallChain:
    """Links the calls of one placed layer made while tracing one graph.

    ``tf.GradientTape`` sums the gradients of a variable used by several calls with an ``AddN``
    that has no device, so it would run on the worker and pull every call's weight gradient
    over the network. The calls are therefore chained: each call after the first takes a
    scalar token per trainable variable from the previous call, and its gradient function hands
    its variable gradients (plus those handed to it) back along the token. Only the first call
    returns variable gradients to the tape: one gradient per variable, summed on the layer's
    device. In eager mode nothing is chained: eager ops run on the coordinator anyway.
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


def ps_call(layer: Any, call: Callable[..., Any], device: str, path: str = "",
             activations: str = "none") -> Callable[..., Any]:
    """Wrap a layer's ``call`` so its forward and gradient ops, and the sum of its variables'
    gradients over all its calls, run on ``device`` (see :class:`CallChain`). With an
    ``activations`` codec, floating inputs arriving from the worker cross in that dtype: cast on
    the worker, cast back on ``device``; their gradients are cast on ``device`` and back on the
    worker (the casts' own gradients)."""
    import tensorflow as tf

    chain = CallChain()

    @tf.autograph.experimental.do_not_convert
    def wrapped(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        flat_in = tf.nest.flatten(inputs)
        dtypes = [getattr(x, "dtype", None) for x in flat_in]
        if activations != "none" and not tf.executing_eagerly():
            flat_in = [_encode(x, activations, path) if _from_worker(x) else x for x in flat_in]
        n_in = len(flat_in)
        chained = [v for v in layer.trainable_weights] if not tf.executing_eagerly() else []
        previous = chain.previous() if chained else None
        carried_in = list(previous or [])

        @tf.custom_gradient
        def block(*xs: Any) -> Any:
            with tf.device(device), tf.GradientTape(watch_accessed_variables=True) as tape:
                for x in xs[:n_in]:
                    if x.dtype.is_floating:
                        tape.watch(x)
                decoded = [tf.cast(x, d) if d is not None and x.dtype != d else x for x, d in zip(xs[:n_in], dtypes)]
                y = call(tf.nest.pack_sequence_as(inputs, decoded), *args, **kwargs)
                tokens = [tf.identity(t) for t in xs[n_in:]] or [tf.zeros([]) for _ in chained]
            flat_y = tf.nest.flatten(y)

            def grad(*dys: Any, variables: Any = None) -> Any:
                variables = list(variables or [])
                dy, carried = list(dys[:len(flat_y)]), list(dys[len(flat_y):])
                float_idx = [i for i, x in enumerate(xs[:n_in]) if x.dtype.is_floating]
                with tf.device(device):
                    grads = tape.gradient(flat_y, [xs[i] for i in float_idx] + variables, output_gradients=dy,
                                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
                    var_grads = list(grads[len(float_idx):])
                    # ParameterServerStrategy wraps variables (CachingVariable): match them by name
                    slot = {v.name: i for i, v in enumerate(chained)}
                    totals: list[Any] = [None] * len(chained)
                    for v, g in zip(variables, var_grads):
                        i = slot.get(v.name)
                        if i is None:
                            continue
                        c = carried[i] if i < len(carried) else None
                        has_carry = c is not None and c.shape == v.shape and (c.shape.rank or not v.shape.rank)
                        totals[i] = g + c if has_carry else g
                input_grads: list[Any] = [None] * len(xs)
                for i, g in zip(float_idx, grads[:len(float_idx)]):
                    narrowed = xs[i].dtype != dtypes[i]
                    input_grads[i] = check_finite(g, f"{path}: gradient of its input") if narrowed else g
                if carried_in:
                    # a later call: hand the variable gradients back to the previous call
                    for i, total in enumerate(totals):
                        input_grads[n_in + i] = total
                    return input_grads, [None if v.name in slot else g for v, g in zip(variables, var_grads)]
                return input_grads, [totals[slot[v.name]] if v.name in slot else g
                                     for v, g in zip(variables, var_grads)]

            return (y, tokens), grad

        with tf.device(device):
            y, tokens = block(*flat_in, *carried_in)
        if chained:
            chain.record(list(tokens))
        return y

    return wrapped


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
    pulls: dict[str, Any] = {}  # variable name -> its decoded read, for the graph being traced
    traced: list[Any] = [None]

    @tf.autograph.experimental.do_not_convert
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if tf.executing_eagerly():
            return call(*args, **kwargs)
        graph = tf.compat.v1.get_default_graph()
        if traced[0] is not graph:
            traced[0] = graph
            pulls.clear()
        swapped: list[tuple[str, Any]] = []
        for v in layer.trainable_weights:
            names = [n for n, value in vars(layer).items() if value is v]
            if not names:
                continue
            if v.name not in pulls:  # a shared layer's later calls reuse the first call's read
                pulled = _pull(v, None if codec == "none" else _narrow(codec), gradients, path, prefix)
                pulls[v.name] = tf.cast(pulled, v.dtype) if pulled.dtype != v.dtype else pulled
            pulled = pulls[v.name]
            for n in names:
                swapped.append((n, v))
                object.__setattr__(layer, n, pulled)  # bypass Keras' tracking: restored below
        try:
            return call(*args, **kwargs)
        finally:
            for n, v in swapped:
                object.__setattr__(layer, n, v)

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
    no_push = on_ps or layer_kind(layer, False) == "embedding" or not layer.trainable_weights
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
