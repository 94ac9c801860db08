r"""The fixed cost of ParameterServerStrategy's closures, as the cost model prices it.

The coordinator schedules closures from Python; each pays a fixed cost whatever its bytes, and a
loop of ``K`` steps inside one closure (``--steps-per-closure K``) pays per step for its control
messages. ``ralp-tf floor`` (:mod:`ralp_tf.run.floor`) measures the terms with closures that only
pull and push tiny variables, and fits, for a closure of ``k`` steps on ``m`` PS tasks with ``n``
variables each::

    closure_s(m, n, k) = F + m * F_ps + k * m * (s_ps + (n - 1) * s_var)

A one-step closure without the loop (``K = 1``, the plain step function) with one variable on
each PS task costs ``P`` (``plain_closure_s``), measured apart; each further variable adds
``p_var`` (``plain_step_per_variable_s``, the slope between plain closures of 1 and ``n``
variables on one task; ``s_var`` where not measured: on this machine the two agree, 0.34 against
0.36 ms per variable). A variable is one pull and one push, two tensor messages, so a step whose
messages with PS task ``j`` number ``r_j`` pays ``s_ps + (r_j / 2 - 1) * s_var`` there. Per worker
step the floor is (:meth:`FloorTerms.per_step_s`)::

    K = 1:  P + sum_j max(r_j / 2 - 1, 0) p_var     (a step that talks to no PS task: 0)
    K > 1:  (F + m F_ps) / K + sum_j (s_ps + max(r_j / 2 - 1, 0) s_var)

A model of many small variables pays it on every step whatever K: resnet_cifar's 107 variables on
one PS task, about 46 ms per worker step.

and the cost model adds it to each worker's chain (:mod:`ralp_tf.plan.costmodel`, *Step time*):
the worker waits for it, it is neither link nor PS compute.

**Dispatch bytes.** Each closure is one remote function call from the coordinator to a worker,
whose request carries a resource handle per variable the step function captures, and whose
reply carries the step's outputs. Per closure and worker, for a model of ``V`` variables::

    request = DISPATCH_BYTES + V * DISPATCH_BYTES_PER_VARIABLE,   reply = DISPATCH_REPLY_BYTES

(:func:`dispatch_bytes_per_step`). They cross the coordinator's link and the worker's; the cost
model counts them in ``StepEstimate.link_bytes_per_step`` (a chief on a host of its own, as the
testbeds run it) but prices no link time for them (at most 17 KB per closure, resnet_cifar's).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping

__all__ = ["FloorTerms", "MEASURED_FLOOR", "AUTO_STEPS_PER_CLOSURE", "DISPATCH_BYTES", "DISPATCH_BYTES_PER_VARIABLE",
           "DISPATCH_REPLY_BYTES", "dispatch_bytes_per_step"]

#: ``steps_per_closure`` (``--steps-per-closure auto``) asking for the cost model's choice
#: (:func:`ralp_tf.plan.costmodel.best_steps_per_closure`).
AUTO_STEPS_PER_CLOSURE = 0

#: Payload bytes of one closure's call per worker (module docstring, *Dispatch bytes*): a least-squares
#: fit of the chief's link counters in every one-step-closure PSS run of benchmarks/results against the
#: profile's variables (small_cnn 10, ctr_dnn 12, alexnet_cifar 16, vgg16_cifar 32, resnet_cifar 107;
#: 123 runs of 4 or more steps, each model within 10%; ``python benchmarks/dispatch_bytes.py``).
DISPATCH_BYTES = 2_290
DISPATCH_BYTES_PER_VARIABLE = 140
DISPATCH_REPLY_BYTES = 690


def dispatch_bytes_per_step(num_variables: int, num_workers: int, steps_per_closure: int = 1) -> float:
    """Payload bytes between the coordinator and the workers per synchronous step (both ways):
    ``N * (DISPATCH_BYTES + V * DISPATCH_BYTES_PER_VARIABLE + DISPATCH_REPLY_BYTES) / K``."""
    per_closure = DISPATCH_BYTES + num_variables * DISPATCH_BYTES_PER_VARIABLE + DISPATCH_REPLY_BYTES
    return num_workers * per_closure / max(steps_per_closure, 1)


@dataclasses.dataclass(frozen=True)
class FloorTerms:
    """The fitted floor terms (module docstring): seconds of a worker, bytes per PS task."""

    closure_s: float
    closure_per_ps_s: float
    step_per_ps_s: float
    step_per_variable_s: float
    control_bytes_per_closure_per_ps: float
    control_bytes_per_step_per_ps: float
    #: CPU seconds of one tensor message at a PS task and at a worker (``fit_message_cpu``; NaN: not measured)
    message_cpu_ps_s: float = math.nan
    message_cpu_worker_s: float = math.nan
    #: seconds of a worker per plain one-step closure (NaN: not measured; then ``F + m F_ps``)
    plain_closure_s: float = math.nan
    #: seconds each further variable adds to a plain one-step closure (NaN: not measured; then ``s_var``)
    plain_step_per_variable_s: float = math.nan

    def closure_floor_s(self, ps_tasks: int) -> float:
        """The fixed seconds of one closure that talks to ``ps_tasks`` PS tasks, paid once per closure
        whatever its steps: ``F + m * F_ps``."""
        return self.closure_s + ps_tasks * self.closure_per_ps_s

    def per_step_s(self, steps_per_closure: int, messages_by_ps: Mapping[str, float]) -> float:
        """Seconds a worker step pays for its closure (module docstring), ``messages_by_ps`` the
        step's tensor messages with each PS task it talks to."""
        m = len(messages_by_ps)
        if m == 0:
            return 0.0
        further = sum(max(r / 2 - 1, 0.0) for r in messages_by_ps.values()) * self.per_variable_s(steps_per_closure)
        if steps_per_closure <= 1:
            return (self.plain_closure_s if math.isfinite(self.plain_closure_s) else self.closure_floor_s(m)) + further
        return self.closure_floor_s(m) / steps_per_closure + m * self.step_per_ps_s + further

    def per_variable_s(self, steps_per_closure: int) -> float:
        """Seconds each further variable (one pull and one push) adds to a step: ``p_var`` at K = 1
        (``s_var`` where it was not measured), ``s_var`` at K > 1."""
        plain = steps_per_closure <= 1 and math.isfinite(self.plain_step_per_variable_s)
        return self.plain_step_per_variable_s if plain else self.step_per_variable_s

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


#: Measured on this project's 2-core machine (shared with another test run) by
#: ``ralp-tf floor --workers 2 --ps 2 --out benchmarks/results/floor.json`` (85 s; that file has every
#: case; the fit's worst relative error is 24%, at k=32, whose closures cost more per step than k=8's).
#: The plain one-step closure on 2 PS tasks took 7.7 ms, the looped one 22.1 ms.
MEASURED_FLOOR = FloorTerms(closure_s=3.46e-3, closure_per_ps_s=4.82e-3, step_per_ps_s=2.69e-3,
                            step_per_variable_s=5.2e-4, control_bytes_per_closure_per_ps=1953.0,
                            control_bytes_per_step_per_ps=1528.0, plain_closure_s=7.7e-3)
