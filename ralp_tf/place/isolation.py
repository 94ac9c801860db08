"""Run work outside the caller's TensorFlow context (distribution strategy above all): solvers, profiling copies.

Solvers are called as placement policies from inside ``with strategy.scope():`` (the
``@ralp_tf.placement`` decorator plans while the user's ParameterServerStrategy scope is active).
Whatever TensorFlow work a solver does there (the BO solver's Gaussian-process fit, the RL
solver's LSTM policy and its REINFORCE updates) would run *under that strategy*: its variables
would be created on the user's parameter servers, and its optimizer would run in the strategy's
cross-replica context, where ``tf_keras`` optimizers fail
(``all_reduce_sum_gradients``: ``'NoneType' object has no attribute 'merge_call'``).

TensorFlow keeps the distribution-strategy stack, the variable-creator stack, device scopes and
the eager/graph mode per thread (on the thread-local part of the default graph and of the eager
context), so a fresh thread starts with none of them: no strategy, no device pin, eager mode.
:func:`outside_strategy` runs the solver there and waits for it. This needs no private
TensorFlow API and also covers callers inside a ``tf.device`` scope or a graph being traced.
Process-wide state (the global random seed, logging) is shared with the caller as usual.
"""
from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any, Callable, TypeVar

__all__ = ["T", "STOP_WAIT_S", "outside_strategy"]

T = TypeVar("T")

#: Seconds the caller waits for the solver thread to stop after the caller is interrupted.
STOP_WAIT_S = 5.0

_state = threading.local()


def _strategy_active() -> bool:
    """Whether a tf.distribute strategy scope is active in this thread (never imports TensorFlow:
    when it has not been imported, no strategy can be active)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and tf.distribute.has_strategy()


def _raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Ask ``thread`` (started) to raise ``exc_type`` at its next Python bytecode (CPython's
    ``PyThreadState_SetAsyncExc``)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type))


def outside_strategy(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run in a fresh thread with TensorFlow's default context: no
    distribution strategy, no variable creator, no device scope, eager mode (module docstring).

    Contract:

    * returns ``fn``'s result; the caller blocks until ``fn`` returns;
    * an exception raised by ``fn`` (any ``BaseException``, ``KeyboardInterrupt`` and
      ``SystemExit`` included) is re-raised in the caller: the same object, so its type and its
      traceback (the frames inside ``fn``) are kept;
    * when the caller is interrupted while waiting (Ctrl-C: ``KeyboardInterrupt`` in the main
      thread), the solver thread is asked to stop with a ``KeyboardInterrupt`` of its own, waited
      for up to :data:`STOP_WAIT_S` seconds, and the caller's exception propagates;
    * nested calls (a solver entry point calling another from inside ``fn``) run directly in
      the already isolated thread, unless that thread entered a strategy scope itself.
    """
    if getattr(_state, "isolated", False) and not _strategy_active():
        return fn(*args, **kwargs)
    outcome: dict[str, Any] = {}
    # Waited on instead of Thread.join: a KeyboardInterrupt inside join() marks the thread as
    # stopped while it still runs (CPython 3.11, bpo-45274), which would hide it from the stop below.
    finished = threading.Event()

    def run() -> None:
        _state.isolated = True
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the caller, re-raised there
            outcome["error"] = error
        finally:
            finished.set()

    name = getattr(fn, "__qualname__", type(fn).__name__)
    # daemon: a solver that ignores the stop request must not keep the interpreter from exiting.
    thread = threading.Thread(target=run, name=f"scheduler-solver:{name}", daemon=True)
    thread.start()
    try:
        finished.wait()
    except BaseException:
        if not finished.is_set():
            _raise_in_thread(thread, KeyboardInterrupt)
            finished.wait(STOP_WAIT_S)
        raise
    if "error" in outcome:
        error = outcome.pop("error")
        try:
            raise error
        finally:
            del error  # no reference cycle through this frame
    return outcome["value"]
