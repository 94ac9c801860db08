"""``evaluate`` and ``predict`` on a placed model take what a Keras user passes.

The applier installs :func:`install_evaluation` on every placed model. Its contract:

* ``model.evaluate(x, ...)`` with a ``tf.data.Dataset``, arrays or tensors (with ``y``), a dict of
  them, a generator or a ``keras.utils.Sequence``, with or without ``steps``, runs on the
  coordinator with no strategy, the way tf_keras's own ``predict`` runs under
  ParameterServerStrategy: every batch once and in order (``steps`` batches at most), so it
  returns the unplaced model's numbers on the same weights. The placed layers still compute on
  their PS tasks; the worker-computed ones compute on the coordinator, reading their variables
  from the PS tasks.
* With a ``tf_keras.utils.experimental.DatasetCreator`` or a ``tf.distribute.DistributedDataset``
  (inputs made for the workers) and ``steps``, ``evaluate`` runs on the workers as it does on
  stock PSS: each worker builds its own input (the creator's ``InputContext`` says which worker it
  is), so the numbers are the unplaced model's when the workers' inputs together are its batches.
  Without ``steps`` it raises :class:`~ralp_tf.errors.ValidationError` naming the forms that work.
  A model compiled with ``pss_evaluation_shards`` (tf_keras's exact evaluation) is evaluated by
  tf_keras as it is.
* ``model.predict`` runs on the coordinator, as tf_keras runs it under PSS, with no strategy in
  scope (it fails inside ``strategy.scope()`` otherwise); a ``DatasetCreator`` or
  ``DistributedDataset`` without ``steps`` raises ValidationError.
* The evaluation ``fit`` runs on its ``validation_data`` is tf_keras's, unchanged.
* Compiled metrics that an evaluation on the coordinator builds first (``evaluate`` before any
  ``fit``) hold their variables on the coordinator, and ``fit`` then updates them there (a few
  scalars a step); built by ``fit`` first, they live on the PS tasks as on stock PSS.

Why not the workers for datasets and arrays: stock PSS sends a ``tf.data.Dataset`` to every worker
whole, each worker iterating its own copy, so the batches evaluated depend on how many workers
there are and which closures each took (2 workers, ``steps=2``: 1.66 against the unplaced
model's 2.12 on a tiny model), and a finite dataset without ``steps`` ends in ``CancelledError``:
the closures scheduled after its end of sequence are cancelled, and tf_keras fetches the last
one's logs. tf_keras refuses arrays without ``steps`` under PSS.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ralp_tf.errors import ValidationError
from ralp_tf.model import keras_compat
from ralp_tf.place.isolation import outside_strategy

__all__ = ["install_evaluation"]


def _for_the_workers(x: Any) -> bool:
    """Whether ``x`` is input made for the workers: a DatasetCreator or a distributed dataset."""
    import tensorflow as tf
    import tf_keras

    return isinstance(x, (tf_keras.utils.experimental.DatasetCreator, tf.distribute.DistributedDataset))


def _check_steps(method: str, x: Any, steps: Any) -> None:
    if _for_the_workers(x) and steps is None:
        raise ValidationError(
            f"{method}({type(x).__name__}) on a placed model needs steps=: that input is built by a "
            f"function or on the workers and has no end tf_keras can see; pass steps=N, or pass a finite "
            f"tf.data.Dataset or arrays, with or without steps")


def _on_the_coordinator(model: Any, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` with no strategy: in a thread outside any strategy scope, the
    model's own strategy and coordinator taken off (as tf_keras's ``predict`` does under PSS) and
    its cached test function set aside, all put back after."""
    with keras_compat.without_distribution(model):
        return outside_strategy(method, *args, **kwargs)


def install_evaluation(model: Any) -> None:
    """Make ``model.evaluate`` and ``model.predict`` follow the module docstring's contract (on
    this instance; the class's methods do the work)."""
    evaluate, predict = model.evaluate, model.predict
    evaluate_signature = inspect.signature(evaluate)
    predict_signature = inspect.signature(predict)

    @functools.wraps(evaluate)
    def placed_evaluate(*args: Any, **kwargs: Any) -> Any:
        bound = evaluate_signature.bind(*args, **kwargs).arguments
        x, steps = bound.get("x"), bound.get("steps")
        if kwargs.get("_use_cached_eval_dataset") or getattr(model, "_pss_evaluation_shards", 0):
            return evaluate(*args, **kwargs)
        _check_steps("evaluate", x, steps)
        if _for_the_workers(x):
            return evaluate(*args, **kwargs)
        return _on_the_coordinator(model, evaluate, *args, **kwargs)

    @functools.wraps(predict)
    def placed_predict(*args: Any, **kwargs: Any) -> Any:
        bound = predict_signature.bind(*args, **kwargs).arguments
        _check_steps("predict", bound.get("x"), bound.get("steps"))
        return _on_the_coordinator(model, predict, *args, **kwargs)

    keras_compat.override_method(model, "evaluate", placed_evaluate)
    keras_compat.override_method(model, "predict", placed_predict)
