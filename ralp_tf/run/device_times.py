r"""A model's forward+backward times on one device of a running cluster (``ralp-tf calibrate``).

:func:`time_model` builds the model with its variables on ``device`` (a task's device string,
``/job:worker/replica:0/task:0/device:GPU:0`` on a GPU worker), traces it as the profiler does
(:func:`ralp_tf.model.trace.trace_calls`), and times on that device, from this process:

* each layer's forward+backward pass of its first call (:func:`ralp_tf.model.profiler.layer_gradients`)
  on random inputs made there, in a ``tf.while_loop`` of ``steps + 1`` iterations less a loop of
  one (what one remote call costs cancels), times its calls;
* the whole model's forward+backward pass (every trainable variable's gradient of the loss, no
  optimizer update) on its synthetic batch, likewise, its loop lasting at least ``min_loop_s``
  (under a CPU quota a loop shorter than a few periods runs unthrottled: a small model's 3-step
  loop measured 2 ms a step on a 0.3-core host, where the quota makes it several times that).

Each loop returns one element of each gradient, so only a scalar comes back. The layers' times
are their shares scaled to the whole pass (:mod:`ralp_tf.bench.quota_profile`'s reason: under a CPU
quota a layer shorter than a period runs unthrottled). Needs a remote context connected to the
cluster (:func:`ralp_tf.run.calibrate.measure_cluster` makes it) or a local device string.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.plan.calibration import ModelTimes

__all__ = ["loop_seconds", "loops_seconds", "time_model", "TABLE_BYTES", "time_table_pass", "time_table_passes",
           "UPDATE_BYTES", "time_dense_updates", "sgd_pass_per_byte"]

#: Bytes of the table whose whole-table passes :func:`time_table_pass` times.
TABLE_BYTES = 32 << 20
#: bytes of the variable :func:`time_dense_updates` updates: bigger than a cache, as the weights a
#: PS task updates are
UPDATE_BYTES = 16 << 20


def loop_seconds(body: Callable[[], Sequence[Any]], steps: int, repeats: int = 2, min_loop_s: float = 0.0) -> float:
    """Seconds of one iteration of ``body`` (whose outputs are tensors): the fastest of ``repeats``
    calls of a ``tf.while_loop`` of ``steps + 1`` iterations less the fastest of a loop of 1, each
    called from here, over ``steps``. With ``min_loop_s`` the long loop runs more iterations, as many
    as last that long by the first calls' measure (a CPU quota's periods average out over it). The
    loop runs on the caller's device scope."""
    return loops_seconds({None: body}, steps, repeats, min_loop_s)


def loops_seconds(bodies: Mapping[str | None, Callable[[], Sequence[Any]]], steps: int, repeats: int = 2,
                  min_loop_s: float = 0.0) -> float:
    """:func:`loop_seconds` of several loops run at once, one per device (``None``: the caller's
    scope), each on its own device with nothing crossing between them per iteration: seconds per
    iteration of the call, which the slowest device sets."""
    import tensorflow as tf

    def scope(device: str | None) -> Any:  # None: the caller's scope (tf.device(None) would clear it)
        return tf.device(device) if device is not None else contextlib.nullcontext()

    counts = {}
    for device, _ in bodies.items():
        with scope(device):  # on each loop's device: a loop reads nothing of this process's
            counts[device] = tf.Variable(1, trainable=False)

    @tf.function
    def loop() -> Any:  # traced once for every length
        ends = []
        for device, body in bodies.items():
            with scope(device):
                def step(i: Any, acc: Any, body: Any = body) -> tuple[Any, Any]:
                    picks = [tf.cast(tf.reshape(getattr(g, "values", g), [-1])[0], tf.float32) for g in body()]
                    return i + 1, acc + tf.add_n(picks)
                k = counts[device].read_value()
                ends.append(tf.while_loop(lambda i, acc, k=k: i < k, step, (tf.constant(0), tf.constant(0.0)))[1])
        return tf.add_n(ends)

    def timed(k: int) -> float:
        for v in counts.values():
            v.assign(k)
        t0 = time.perf_counter()
        loop().numpy()
        return time.perf_counter() - t0

    timed(1)  # traced and registered on the devices
    first = (timed(steps + 1) - timed(1)) / steps
    if min_loop_s > 0 and first > 0:
        steps = max(steps, min(math.ceil(min_loop_s / first), 50 * steps))
    ones, longs = [], []
    for _ in range(max(repeats, 1)):  # the fastest of each: the least disturbed by other work
        ones.append(timed(1))
        longs.append(timed(steps + 1))
    return max(min(longs) - min(ones), 0.0) / steps


def time_model(model: str, batch_size: int, device: str, *, steps: int = 10, min_loop_s: float = 0.0) -> ModelTimes:
    """``model`` (a built-in name or ``module:function``) timed on ``device`` (module docstring); the
    whole step's loop lasts at least ``min_loop_s`` (:func:`loop_seconds`)."""
    import tensorflow as tf

    from ralp_tf.model import per_sample_loss, resolve_model, synthetic_batch
    from ralp_tf.model.graph import walk
    from ralp_tf.model.profiler import layer_gradients, profile, random_input
    from ralp_tf.model.trace import input_signature, trace_calls

    with tf.device(device):
        built = resolve_model(model)()
        graph = walk(built)
        trace = trace_calls(built, input_signature(built, None, None, graph), graph)
        calls: dict[str, list[Any]] = {}
        for c in trace.calls:
            calls.setdefault(c.name, []).append(c)
        raw: dict[str, float] = {}
        for name, group in calls.items():
            first = group[0]
            if first.layer is None or not first.inputs:
                continue
            xs = [random_input(t, batch_size, first.layer) for t in first.inputs]
            raw[name] = loop_seconds(lambda f=first, xs=xs: layer_gradients(f.layer, f, xs), steps) * len(group)
        x, y = synthetic_batch(built, batch_size, seed=0)
        x = tf.nest.map_structure(tf.constant, tuple(x) if isinstance(x, list) else x)
        y = tf.nest.map_structure(tf.constant, tuple(y) if isinstance(y, list) else y)
        loss_fn = per_sample_loss(built)

        def whole() -> list[Any]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(loss_fn(y, built(x, training=True)))
            return [g for g in tape.gradient(loss, built.trainable_variables) if g is not None] or [loss]

        step_s = loop_seconds(whole, steps, min_loop_s=min_loop_s)
    prof = profile(built, batch_size, graph=graph)
    flops = 3.0 * batch_size * sum(l.flops for l in prof.compute_layers)
    layer_sum = sum(raw.values())
    scale = step_s / layer_sum if layer_sum > 0 else 1.0
    return ModelTimes(model=prof.model_name, batch_size=batch_size, step_s=step_s, layer_sum_s=layer_sum,
                      flops=flops, layers=tuple((name, seconds * scale) for name, seconds in raw.items()))


def time_table_pass(device: str, *, steps: int = 10, min_loop_s: float = 0.0, nbytes: int = TABLE_BYTES) -> float:
    """Seconds per byte of one whole-table pass of a sparse update on ``device`` (the cost model's
    ``DENSE_PASS_S_PER_BYTE``, :mod:`ralp_tf.model.optimizers`), measured as that constant was fitted:
    a batch's sparse gradient (32 rows) applied to a float32 table of ``nbytes`` made there, by
    ``tf_keras.optimizers.SGD`` (its passes over the table and its slot) and by
    ``tf_keras.optimizers.legacy.SGD`` (none), each timed as :func:`loop_seconds` does; the difference
    over the passes' bytes."""
    return time_table_passes([device], steps=steps, min_loop_s=min_loop_s, nbytes=nbytes)


def _update_loops(devices: Sequence[str], optimizers: Sequence[str], shape: Sequence[int],
                  gradient: Callable[[], Any], read: Callable[[Any], Any], steps: int, min_loop_s: float
                  ) -> dict[str, float]:
    """Optimizer name -> seconds per iteration of :func:`loops_seconds` whose body, on every device of
    ``devices`` at once, applies ``gradient()`` (made there) to a float32 variable of ``shape`` made
    there with that optimizer (:func:`ralp_tf.run.training.sgd_optimizer`), then returns ``read`` of
    the variable (after the update: automatic control dependencies)."""
    import tensorflow as tf

    from ralp_tf.run.training import sgd_optimizer

    seconds = {}
    # Under the first device's scope as a whole, as one device's loop was timed alone: an op the
    # optimizer makes without a device of its own lands on a task, never on this process (which, on
    # the testbed, the tasks cannot reach).
    with tf.device(devices[0]):
        for name in optimizers:
            bodies = {}
            for device in devices:
                with tf.device(device):
                    variable = tf.Variable(tf.zeros(list(shape)), trainable=True)
                    optimizer = sgd_optimizer(name, 0.01)
                    grad = gradient()
                    optimizer.apply_gradients([(grad, variable)])  # its slots, made there before the loop is traced

                def update(optimizer: Any = optimizer, variable: Any = variable, grad: Any = grad) -> list[Any]:
                    optimizer.apply_gradients([(grad, variable)])
                    return [read(variable)]

                bodies[device] = update
            seconds[name] = loops_seconds(bodies, steps, min_loop_s=min_loop_s)
    return seconds


def time_table_passes(devices: Sequence[str], *, steps: int = 10, min_loop_s: float = 0.0,
                      nbytes: int = TABLE_BYTES) -> float:
    """:func:`time_table_pass` on every device of ``devices`` at once, each over a table of its own
    (:func:`loops_seconds`): seconds per byte of one device's pass while the others pass too, as a
    job's PS tasks (or ring workers) do every step; the slowest device sets it."""
    import tensorflow as tf

    width = 32
    rows = max(nbytes // (4 * width), 64)

    def rows_gradient() -> Any:
        ids = tf.random.uniform([32], 0, rows, dtype=tf.int32)
        return tf.IndexedSlices(tf.ones([32, width]), ids, tf.constant([rows, width]))

    seconds = _update_loops(devices, ("sgd", "legacy-sgd"), (rows, width), rows_gradient,
                            lambda table: table.sparse_read([0]), steps, min_loop_s)
    return sgd_pass_per_byte(seconds, rows * width * 4)


def sgd_pass_per_byte(seconds: Mapping[str, float], nbytes: float) -> float:
    """Seconds per byte of one whole-table pass from ``seconds`` (``sgd`` and ``legacy-sgd``: the
    same sparse update's time, or CPU, with ``tf_keras.optimizers.SGD`` and without its passes) over
    tables of ``nbytes`` in all: ``(sgd - legacy-sgd) / (dense_passes(sgd) * nbytes)``, at least 0
    (NaN stays NaN: not measured)."""
    from ralp_tf.model.optimizers import sparse_update

    return max(seconds["sgd"] - seconds["legacy-sgd"], 0.0) / (sparse_update("sgd").dense_passes * nbytes)


def time_dense_updates(devices: Sequence[str], optimizers: Sequence[str] = ("sgd", "legacy-sgd"), *,
                       steps: int = 10, min_loop_s: float = 0.0, nbytes: int = UPDATE_BYTES) -> dict[str, float]:
    """Optimizer name -> seconds per variable byte of its update of a dense gradient on each of
    ``devices`` while every one of them updates at once (:func:`loops_seconds`), as a job's PS tasks
    update the variables they hold every worker step: ``optimizer.apply_gradients`` of a float32
    gradient made there to a variable of ``nbytes`` made there (``tf_keras.optimizers.SGD`` scales its
    slot and adds it, several passes; ``legacy.SGD`` one), the loop's seconds over ``nbytes``."""
    import tensorflow as tf

    elements = max(nbytes // 4, 1)
    # a dense read, as a layer's, leaves the variable out of the copy-on-read mode a gather puts it in
    seconds = _update_loops(devices, optimizers, (elements,), lambda: tf.ones([elements]),
                            lambda variable: variable.read_value()[:1], steps, min_loop_s)
    return {name: s / (elements * 4) for name, s in seconds.items()}
