"""TensorBoard for ralp_tf runs: ``tf.summary`` scalars, the plan as text, an optional profiler trace.

* :func:`write_run_summaries` writes one :class:`ralp_tf.run.training.RunResult` (``ralp-tf run
  --tensorboard-dir DIR``) under ``DIR/<run name>``: the scalar ``loss`` at every step (global step
  numbers, so a resumed run continues its curve), ``samples_per_s`` and ``steps_per_s`` (the
  measured window's), ``bytes_per_step`` (all worker<->PS traffic per worker step) and
  ``bytes_per_step/<src>-><dst>`` per task pair when bytes were measured, the cost model's
  ``predicted/bytes_per_step`` and ``predicted/step_s``; and the text summaries ``plan`` (its
  JSON) and ``analysis`` (the analyzer's report).
* :class:`SummaryCallback` does the same live for ``Model.fit`` users: per batch ``loss`` and
  ``samples_per_s`` (``batch_size`` x batches / seconds since the last log), and, with a
  ``meter`` (:class:`ralp_tf.run.traffic.TrafficMeter` or :class:`ralp_tf.run.remote.AgentMeter`),
  bytes per step per task pair over each logging interval; the plan as text at the start.
* :func:`profiler_hook` returns an ``on_measure`` callback for :func:`ralp_tf.run.training.train` that
  records a TensorFlow profiler trace of the measured window into the log directory
  (``--tensorboard-trace``); keep the window short (a few steps).

Read back with ``tf.compat.v1.train.summary_iterator`` or TensorBoard (``tensorboard --logdir DIR``).
The summaries are written with TensorFlow's own ``tf.summary.write`` and the metadata of
TensorBoard's ``scalars`` and ``text`` plugins (:func:`scalar`, :func:`text`), so writing them
does not need the ``tensorboard`` package (``tf.summary.scalar`` does); viewing them does.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Mapping

__all__ = ["scalar", "text", "write_run_summaries", "SummaryCallback", "profiler_hook"]

try:  # the callback subclasses tf_keras's Callback when tf_keras is there (it is a dependency)
    import tf_keras as _keras

    _Callback: Any = _keras.callbacks.Callback
except ImportError:  # pragma: no cover
    _Callback = object


def _metadata(plugin: str, data_class: int) -> Any:
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin),
                                       data_class=data_class)


def scalar(tag: str, value: float, step: int) -> None:
    """``tf.summary.scalar`` without the tensorboard package: a float32 scalar, ``scalars`` plugin."""
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    tf.summary.write(tag, tf.constant(float(value), tf.float32), step=step,
                     metadata=_metadata("scalars", summary_pb2.DATA_CLASS_SCALAR))


def text(tag: str, value: str, step: int) -> None:
    """``tf.summary.text`` without the tensorboard package: a string tensor, ``text`` plugin."""
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    tf.summary.write(tag, tf.constant(value), step=step, metadata=_metadata("text", summary_pb2.DATA_CLASS_TENSOR))


def _plan_text(plan: Mapping[str, Any] | None) -> str:
    return "```\n" + json.dumps(plan or {}, indent=2, sort_keys=True) + "\n```"


def write_run_summaries(logdir: str | os.PathLike[str], result: Any, name: str = "run") -> str:
    """Write ``result`` (a RunResult) under ``logdir/name`` (see the module docstring); return that folder."""
    import tensorflow as tf

    path = os.path.join(os.fspath(logdir), name)
    writer = tf.summary.create_file_writer(path)
    first = result.total_steps - len(result.losses)
    last = max(result.total_steps - 1, 0)
    with writer.as_default():
        text("plan", _plan_text(result.plan.to_dict()), step=first)
        if result.report:
            text("analysis", "```\n" + result.report + "\n```", step=first)
        for i, loss in enumerate(result.losses):
            scalar("loss", loss, step=first + i)
        scalar("samples_per_s", result.samples_per_s, step=last)
        scalar("steps_per_s", result.steps_per_s, step=last)
        scalar("predicted/bytes_per_step", result.predicted_bytes_per_step, step=last)
        scalar("predicted/step_s", result.predicted_step_s, step=last)
        if result.bytes_per_step is not None:
            scalar("bytes_per_step", result.bytes_per_step, step=last)
            for pair, nbytes in sorted(result.bytes_between.items()):
                scalar(f"bytes_per_step/{pair}", nbytes, step=last)
    writer.flush()
    writer.close()
    return path


class SummaryCallback(_Callback):  # type: ignore[misc]
    """A tf_keras callback writing ``loss``, ``samples_per_s`` and (with ``meter``) bytes per step
    per task pair every ``every`` batches, and the plan as text at the start (module docstring)."""

    def __init__(self, logdir: str | os.PathLike[str], batch_size: int, *, plan: Any = None, every: int = 1,
                 meter: Any = None) -> None:
        super().__init__()
        import tensorflow as tf

        self.writer = tf.summary.create_file_writer(os.fspath(logdir))
        self.batch_size, self.every, self.meter = batch_size, max(int(every), 1), meter
        self.plan = plan.to_dict() if hasattr(plan, "to_dict") else plan
        self.step = 0
        self._t = time.perf_counter()
        self._since = 0

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        plan = self.plan or getattr(getattr(self, "model", None), "ralp_plan", None)
        with self.writer.as_default():
            text("plan", _plan_text(plan.to_dict() if hasattr(plan, "to_dict") else plan), step=0)
        if self.meter is not None:
            self.meter.start()
        self._t = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self.step += 1
        self._since += 1
        if self.step % self.every:
            return
        now = time.perf_counter()
        with self.writer.as_default():
            loss = (logs or {}).get("loss")
            try:
                scalar("loss", float(loss), step=self.step)
            except (TypeError, ValueError):
                pass  # not fetched yet (a RemoteValue under PSS): skipped
            if now > self._t:
                scalar("samples_per_s", self._since * self.batch_size / (now - self._t), step=self.step)
            if self.meter is not None:
                delta = self.meter.stop()
                for (src, dst), nbytes in sorted(delta.items()):
                    scalar(f"bytes_per_step/{src}->{dst}", nbytes / self._since, step=self.step)
                self.meter.start()
        self._t, self._since = now, 0

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        self.writer.flush()


def profiler_hook(logdir: str | os.PathLike[str]) -> Callable[[str], None]:
    """An ``on_measure`` callback: start TF's profiler when the measured window opens, stop it
    (writing the trace under ``logdir/plugins/profile``) when it closes."""
    import tensorflow as tf

    def on_measure(what: str) -> None:
        if what == "start":
            tf.profiler.experimental.start(os.fspath(logdir))
        elif what == "end":
            tf.profiler.experimental.stop()

    return on_measure
