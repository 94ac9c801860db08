"""``ralp_tf.fit``: train a model on a local cluster with the strategy a job would choose.

The Python entry next to the decorator (:func:`ralp_tf.placement`, for a user's own
``Model.fit`` under ParameterServerStrategy): ``ralp_tf.fit(build, workers=2, ps=1, strategy="auto",
steps=200, checkpoint_dir="ckpt")`` does what ``ralp-tf run --strategy ...`` does and returns a
:class:`Fitted` (the measured run, and for ``auto`` the decision with its ranking and probe).

``model`` is a built-in name, a ``"module:function"`` reference, or the builder function itself,
which is turned into its reference (``module:qualified_name``) when a ring may train it: every ring
worker is a process that imports and calls it. A function defined in ``__main__`` (a script) or a
lambda has no such reference; it trains only with ``strategy="pss"`` (in this process), and the
ring strategies refuse it with the fix.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from ralp_tf.errors import ValidationError
from ralp_tf.run.auto import PROBE_STEPS, AutoDecision, train_auto
from ralp_tf.run.training import DEFAULT_CHECKPOINT_EVERY, LOOP_OPTIMIZER, RunResult, TrainConfig, compare, \
    prepare_model

__all__ = ["FIT_STRATEGIES", "Fitted", "model_reference", "fit"]

FIT_STRATEGIES = ("pss", "mwms", "auto")


@dataclasses.dataclass(frozen=True)
class Fitted:
    """What :func:`fit` trained: the strategy, its measured run, and ``auto``'s decision (else None)."""

    strategy: str
    result: RunResult
    decision: AutoDecision | None = None

    def report(self) -> str:
        r = self.result
        head = self.decision.report() + "\n" if self.decision is not None else ""
        return (f"{head}Trained with {self.strategy}: {r.samples_per_s:.1f} samples/s measured, final loss "
                f"{r.final_loss:.4f}, {r.total_steps} worker steps in all")


def model_reference(model: str | Callable[[], Any]) -> str:
    """``model`` as a reference a ring worker can import: a string as it is; a function by
    ``module:qualified_name`` when that import gives the same function back. ValidationError with the
    fix otherwise (a lambda, a nested function, a function of ``__main__``)."""
    if isinstance(model, str):
        return model
    module, name = getattr(model, "__module__", None), getattr(model, "__qualname__", "")
    fix = ("define the builder at the top level of a module on PYTHONPATH (not in the script you run) and pass it, "
           "or its 'module:function' name; or train with strategy='pss'")
    if not callable(model) or not module or module == "__main__" or "<" in name or "." in name:
        raise ValidationError(f"the ring trains in worker processes that import the model's builder, and {model!r} "
                              f"cannot be imported by name: {fix}")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        found = None
    if found is not model:
        raise ValidationError(f"{module}:{name} does not import as the builder given: {fix}")
    return f"{module}:{name}"


def fit(model: str | Callable[[], Any], *, workers: int = 2, ps: int = 1, strategy: str = "auto", steps: int = 100,
        batch_size: int = 32, bandwidth: Any = None, flops: Any = None, policy: Any = "ralp", seed: int = 0,
        checkpoint_dir: str | None = None, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, warmup_steps: int = 3,
        probe_steps: int = PROBE_STEPS, optimizer: str = LOOP_OPTIMIZER, log_dir: str | None = None,
        sequence_length: int | None = None, on_step: Callable[[str, int], None] | None = None,
        calibration: Any = None) -> Fitted:
    """Train ``model`` for ``warmup_steps + steps`` worker steps on a local cluster of ``workers`` workers
    (and ``ps`` PS tasks for the PSS strategies) with ``strategy``: ``"pss"`` (ParameterServerStrategy
    with ``policy``'s plan), ``"mwms"`` (the ring) or ``"auto"`` (ranked, probed, recorded: see
    :mod:`ralp_tf.run.auto`). ``bandwidth``/``flops`` are the rates the cost model prices with;
    ``checkpoint_dir`` makes a rerun resume (under the strategy ``auto`` chose).
    ``on_step(strategy, step)`` reports progress. ``calibration`` (``ralp-tf calibrate``'s, of a local
    cluster of ``workers`` and ``ps`` on this machine: refused otherwise) prices every strategy."""
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.run.ring import train_ring

    if strategy not in FIT_STRATEGIES:
        raise ValidationError(f"strategy must be one of {', '.join(FIT_STRATEGIES)}, got {strategy!r}")
    common = dict(workers=workers, steps=steps, batch_size=batch_size, seed=seed, log_dir=log_dir,
                  checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, warmup_steps=warmup_steps,
                  sequence_length=sequence_length, optimizer=optimizer, bandwidth=bandwidth, flops=flops)
    if strategy == "pss":
        results = compare(model, ps=ps, policies=[policy], step_callback=on_step, calibration=calibration, **common)
        return Fitted("pss", next(iter(results.values())))
    reference = model_reference(model)
    if strategy == "mwms":
        prepared = prepare_model(resolve_model(reference), TrainConfig(batch_size=batch_size, seed=seed,
                                                                       sequence_length=sequence_length,
                                                                       optimizer=optimizer))
        profile, cluster = prepared.profile, None
        if calibration is not None:
            from ralp_tf.plan.cluster import Cluster, Rates
            from ralp_tf.run.calibrated import calibrated_job

            rates = Rates(bandwidth, flops).kwargs()
            profile, cluster = calibrated_job(calibration, Cluster.local(workers, ps, **rates), profile, rates=rates)
        result = train_ring(reference, profile=profile, cluster=cluster,
                            on_step=(lambda i: on_step("mwms", i)) if on_step else None, **common)
        return Fitted("mwms", result)
    results, decision = train_auto(reference, ps=ps, policy=policy, probe_steps=probe_steps, step_callback=on_step,
                                   calibration=calibration, **common)
    return Fitted(decision.strategy, next(iter(results.values())), decision)
