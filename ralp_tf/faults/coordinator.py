"""The coordinator process of a supervised run (``python -m ralp_tf.cli.coordinator_job``): its protocol.

It runs :func:`ralp_tf.run.training.train` with a checkpoint directory against an already running
cluster and reports progress on stdout in the testbed's job protocol (``RALP_JOB <kind> <json>``):

* ``progress {"done": N, "t": UNIX_TIME, "loss": L}`` whenever the number of completed steps
  grows (``done`` counts from step 0, so it includes the steps restored from the checkpoint;
  ``loss`` is the loss of the most recently completed step);
* ``waiting {"t": UNIX_TIME}`` with ``--start-file F``: its imports are done (TensorFlow, the
  model zoo, the planner) and it waits until ``F`` exists before it reads the checkpoint and
  connects to the cluster (a coordinator started ahead of a worker's join, while the previous one
  still trains);
* ``resumed {"step": S}`` when it restored checkpoint step ``S`` (0: a fresh start);
* ``result {...}`` (:class:`~ralp_tf.run.training.RunResult`) at the end, exit 0; ``stopped {"done": N}`` if
  the stop file appeared (exit 0): the run stops at the next checkpoint boundary, once that
  checkpoint is saved, so ``N`` is the checkpoint's step and nothing is lost; ``failed {"error": ...}`` and exit 3 when a task
  failed (:class:`~ralp_tf.errors.ClusterRuntimeError`), 2 on bad input.

Progress is read by :class:`ProgressCoordinator`, a wrapper around TF's ``ClusterCoordinator``
that ``train`` accepts as its ``coordinator``: it keeps every scheduled step's ``RemoteValue`` and a
thread counts those whose status is ready. TF has no public "is this closure done" query
(:func:`ralp_tf.model.keras_compat.remote_value_ready`).
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable

import numpy as np

__all__ = ["MARK", "StopRequested", "emit", "ProgressCoordinator", "checkpoint_step"]

MARK = "RALP_JOB"


class StopRequested(Exception):
    """The supervisor asked the run to stop (its stop file exists)."""


def emit(kind: str, **data: Any) -> None:
    print(f"{MARK} {kind} {json.dumps(data, sort_keys=True)}", flush=True)


class ProgressCoordinator:
    """Wraps a ``ClusterCoordinator``: counts completed steps (a closure of ``K`` steps counts ``K``)
    and calls ``report(done, loss)`` from a polling thread (every ``poll_s``) when the count grows. The first ``schedule()`` after a
    ``join()`` (``train`` joins, then checkpoints, then schedules the next steps) raises
    :class:`StopRequested` if ``stop_file`` exists. Everything else is the wrapped coordinator."""

    def __init__(self, real: Any, report: Callable[[int, float | None], None], *, offset: int = 0,
                 poll_s: float = 0.2, stop_file: str | None = None) -> None:
        self._real, self._report, self._offset = real, report, offset
        self._stop_file = stop_file
        self._values: list[Any] = []
        self._counted: set[int] = set()  # indices into _values of the closures already counted
        self._lock = threading.Lock()
        self._counting = threading.Lock()
        self._done = 0
        self._at_boundary = True
        self._quit = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(poll_s,), name="ralp-progress", daemon=True)
        self._thread.start()

    def schedule(self, fn: Any, args: Any = None, kwargs: Any = None) -> Any:
        if self._at_boundary:
            self._at_boundary = False
            if self._stop_file and os.path.exists(self._stop_file):
                raise StopRequested()
        rv = self._real.schedule(fn, args=args, kwargs=kwargs)
        with self._lock:
            self._values.append(rv)
        return rv

    def join(self) -> None:
        self._real.join()
        self._count()
        self._at_boundary = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @property
    def done(self) -> int:
        return self._offset + self._done

    def close(self) -> None:
        self._quit.set()

    def _count(self) -> None:
        """Count the steps of the closures that completed since the last count (a closure returns
        one loss per step it ran) and report the new total with the latest loss."""
        with self._lock:
            values = list(enumerate(self._values))
        with self._counting:  # the polling thread and join() both count
            steps, loss = 0, None
            for i, rv in values:
                if i in self._counted or not _is_ready(rv):
                    continue
                try:
                    losses = np.asarray(rv.fetch()).reshape(-1)
                except Exception:  # a closure being retried: counted once it completes again
                    continue
                self._counted.add(i)
                steps += losses.size
                loss = float(losses[-1]) if losses.size else loss
            if steps:
                self._done += steps
                self._report(self.done, loss)

    def _poll(self, poll_s: float) -> None:
        while not self._quit.wait(poll_s):
            try:
                self._count()
            except Exception:  # progress is best effort; training itself reports real failures
                pass


def _is_ready(rv: Any) -> bool:
    from ralp_tf.model.keras_compat import remote_value_ready

    return remote_value_ready(rv)


def checkpoint_step(directory: str | None) -> int:
    """The step of the newest complete checkpoint :func:`ralp_tf.run.training.train` saved in
    ``directory`` (0: none), which is its step counter (a checkpoint is named after its step)."""
    from ralp_tf.run.checkpoints import latest_complete_step

    return latest_complete_step(directory)
