"""Serving CPU: the CPU a task spends moving bytes and dispatching steps, on hosts whose cores are known.

Part of the one cost model (:mod:`ralp_tf.plan.costmodel`, *Serving CPU*, states the formulas;
docs/costmodel.md, "Serving CPU" and "Where a budgeted host's CPU goes", how each constant was
fitted). A cluster measured by ``ralp-tf calibrate`` carries its own costs
(:class:`ralp_tf.plan.rates.ServingCpu`, ``Cluster.serving``), priced on every host in place of the
constants here. Pure.
"""
from __future__ import annotations

import collections
from typing import Mapping

from ralp_tf.plan.cluster import Cluster, TaskRef
from ralp_tf.plan.traffic import HANDLES, PUSH, RPC_CONTROL_BYTES, RPC_FIXED_S, STEP_OVERHEAD_BYTES, WORKER, StepTraffic

#: The key of the chief's CPU among the tasks' (:func:`serving_core_seconds`, :func:`task_cpu_seconds`)
CHIEF = "chief"

__all__ = ["CHIEF", "SERVE_CPU_S_PER_BYTE", "PS_STEP_CPU_S", "WORKER_STEP_CPU_S", "COLOCATED_SERVE_CPU_S_PER_BYTE",
           "COLOCATED_PS_STEP_CPU_S", "COLOCATED_WORKER_STEP_CPU_S", "COLOCATED_MESSAGE_CPU_S", "step_messages_by_ps", "chained_message_ends", "serving_core_seconds",
           "serving_seconds", "task_cpu_seconds"]

#: CPU core-seconds a task spends per byte it sends or receives (module docstring, *Serving CPU*).
SERVE_CPU_S_PER_BYTE = 1.03e-9
#: CPU core-seconds a PS task spends per worker step it takes part in (dispatch), same source as
#: SERVE_CPU_S_PER_BYTE (a PS task alone on its host).
PS_STEP_CPU_S = 3.3e-3
#: CPU core-seconds a worker spends per step on each PS task its step exchanges data with (a worker
#: alone on its host): ``ralp-tf floor``'s 27.5 ms of worker CPU per closure of 8 steps with one PS
#: task (benchmarks/results/floor-cpu.json).
WORKER_STEP_CPU_S = 3.4e-3
#: Those three where the host runs both a CPU worker and a PS task (colocated), fitted together on
#: the CPU each task measured in colocated runs on 0.3- and 1-core budgets: ``python
#: benchmarks/cpu_by_task.py --fit benchmarks/results/cpu-diag-alexnet.json
#: benchmarks/results/cpu-diag-budget1.json benchmarks/results/cpu-diag-vgg16.json``.
COLOCATED_SERVE_CPU_S_PER_BYTE = 3.06e-9
COLOCATED_PS_STEP_CPU_S = 9.69e-3
COLOCATED_WORKER_STEP_CPU_S = 6.39e-3
#: CPU core-seconds each end spends per tensor message on a colocated host (every message, not only
#: the further ones of ``RPC_FIXED_S``), fitted with the three above.
COLOCATED_MESSAGE_CPU_S = 80e-6


def step_messages_by_ps(step: StepTraffic) -> dict[str, float]:
    """PS task -> the tensor messages one worker step exchanges with it: its control bytes with
    the worker, less the step's dispatch, over ``RPC_CONTROL_BYTES`` (each message puts half of
    them each way)."""
    control: dict[str, float] = collections.defaultdict(float)
    for (src, dst, phase), nbytes in step.control.items():
        if WORKER in (src, dst) and src != dst and phase != HANDLES:
            control[dst if src == WORKER else src] += nbytes
    return {ps: max(c - STEP_OVERHEAD_BYTES, 0.0) / RPC_CONTROL_BYTES for ps, c in control.items()}


def chained_message_ends(step: StepTraffic) -> dict[str, tuple[float, float]]:
    """Task key ("worker", "ps:k") -> ``(with the worker, with other PS tasks)``: the chained tensor
    messages of one worker step at that task, those that arrive one at a time while the receiver
    waits in the step: the ``fwd:`` and ``bwd:`` phases (an activation or its gradient, a split
    layer's hops included) and the gradients the worker pushes as its backward computes them
    (``push``), counted from their control bytes (``RPC_CONTROL_BYTES`` a message, half each way;
    a push's from the PS task's half, as the worker's half also holds the step's dispatch). The
    step's pulls, sent together at its start, are not chained."""
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for (src, dst, phase), nbytes in step.control.items():
        if src == dst:
            continue
        if phase.startswith(("fwd:", "bwd:")):
            ends = nbytes / RPC_CONTROL_BYTES  # this direction's half, at each of its two ends
            between_ps = WORKER not in (src, dst)
            for t in (src, dst):
                out[str(t)][between_ps] += ends
        elif phase == PUSH and dst == WORKER:
            for t in (src, dst):
                out[str(t)][0] += nbytes / (RPC_CONTROL_BYTES / 2)
    return {k: (v[0], v[1]) for k, v in out.items()}


def serving_core_seconds(cluster: Cluster, traffic: Mapping[tuple[str, str], float],
                         messages: Mapping[str, float] | None = None,
                         sent: Mapping[str, float] | None = None,
                         chained: Mapping[str, tuple[float, float]] | None = None) -> dict[str, float]:
    """Task key ("worker:i", "ps:k") -> core-seconds one worker step's bytes, messages and dispatch
    cost it (module docstring, *Serving CPU*): per byte it sends or receives, ``SERVE_CPU_S_PER_BYTE``;
    per further message, ``RPC_FIXED_S``; on each PS task the step exchanges data with,
    ``PS_STEP_CPU_S``, and on the worker, per such PS task, ``WORKER_STEP_CPU_S``. On a host that
    runs both a CPU worker and a PS task, the ``COLOCATED_*`` values instead, and
    ``COLOCATED_MESSAGE_CPU_S`` per tensor message too. A cluster with measured serving CPU
    (``Cluster.serving``, ``ralp-tf calibrate``) is priced with it on every host. ``traffic`` is one worker step's
    ``(src, dst) -> bytes`` (the worker as ``"worker"``), ``messages`` its further messages per
    task, ``sent`` its tensor messages with each PS task (:func:`step_messages_by_ps`), ``chained``
    per task its chained messages with the worker and with other PS tasks
    (:func:`chained_message_ends`; priced where the cluster measured them)."""
    messages, sent = messages or {}, sent or {}
    moved: dict[str, float] = collections.defaultdict(float)
    for (src, dst), nbytes in traffic.items():
        moved[src] += nbytes
        moved[dst] += nbytes
    talked = {k for pair in traffic for k in pair if k != WORKER}
    if cluster.serving is not None:
        return _measured_serving(cluster, moved, messages, sent, talked, chained or {})
    colocated = {t.host for t in cluster.ps} & {w.host for w in cluster.workers if not w.gpus}
    out: dict[str, float] = {}
    for t in cluster.ps:
        both = t.host in colocated
        if t.key in talked or moved.get(t.key) or messages.get(t.key):
            out[t.key] = (moved.get(t.key, 0.0) * (COLOCATED_SERVE_CPU_S_PER_BYTE if both else SERVE_CPU_S_PER_BYTE)
                          + RPC_FIXED_S * messages.get(t.key, 0.0)
                          + COLOCATED_MESSAGE_CPU_S * sent.get(t.key, 0.0) * both
                          + (COLOCATED_PS_STEP_CPU_S if both else PS_STEP_CPU_S) * (t.key in talked))
    for w in cluster.workers:
        both = w.host in colocated
        out[w.key] = (moved.get(WORKER, 0.0) * (COLOCATED_SERVE_CPU_S_PER_BYTE if both else SERVE_CPU_S_PER_BYTE)
                      + RPC_FIXED_S * messages.get(WORKER, 0.0)
                      + COLOCATED_MESSAGE_CPU_S * sum(sent.values()) * both
                      + len(talked) * (COLOCATED_WORKER_STEP_CPU_S if both else WORKER_STEP_CPU_S))
    return out


def _measured_serving(cluster: Cluster, moved: Mapping[str, float], messages: Mapping[str, float],
                      sent: Mapping[str, float], talked: set[str],
                      chained: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """:func:`serving_core_seconds` with the cluster's measured :class:`~ralp_tf.plan.rates.ServingCpu`:
    on every host alike, per byte, per tensor message (each one sent, and each further one) and per
    (worker step, PS task) pair; and where the chief shares a host's budget (``Cluster.chief_host``)
    and its CPU per closure was measured, ``"chief"``: that over the steps per closure. Where the chained messages' CPU was measured, each chained message
    costs that instead of a tensor message's, at both ends, those between two PS tasks included:
    ``c_ps (w_k + p_k) - m_ps w_k`` more at PS task k with ``w_k`` chained messages with the worker
    and ``p_k`` with other PS tasks, ``(c_w - m_w) sum_k w_k`` more at the worker."""
    s = cluster.serving
    assert s is not None
    out: dict[str, float] = {}
    for t in cluster.ps:
        with_worker, with_ps = chained.get(t.key, (0.0, 0.0)) if s.chained else (0.0, 0.0)
        if t.key in talked or moved.get(t.key) or messages.get(t.key) or with_ps:
            out[t.key] = (moved.get(t.key, 0.0) * s.ps_s_per_byte
                          + s.ps_message_s * (sent.get(t.key, 0.0) + messages.get(t.key, 0.0) - with_worker)
                          + (s.ps_chained_message_s or 0.0) * (with_worker + with_ps)
                          + s.ps_step_s * (t.key in talked))
    worker_chained = chained.get(WORKER, (0.0, 0.0))[0] if s.chained else 0.0
    for w in cluster.workers:
        out[w.key] = (moved.get(WORKER, 0.0) * s.worker_s_per_byte
                      + s.worker_message_s * (sum(sent.values()) + messages.get(WORKER, 0.0) - worker_chained)
                      + (s.worker_chained_message_s or 0.0) * worker_chained
                      + s.worker_step_s * len(talked))
    if s.chief_closure_s is not None and cluster.chief_host is not None:
        out[CHIEF] = s.chief_closure_s / cluster.steps_per_closure
    return out


def serving_seconds(cluster: Cluster, serving: Mapping[str, float]) -> dict[str, float]:
    """Host -> seconds of its CPU budget spent per synchronous step moving bytes and dispatching
    steps (``serving``, :func:`serving_core_seconds`, of every task on it, a PS task's N times,
    over its cores), for hosts whose core count is known."""
    hosts = {h.name: h for h in cluster.hosts}
    n = cluster.num_workers
    out: dict[str, float] = collections.defaultdict(float)
    for t in cluster.ps:
        if hosts[t.host].cores:
            out[t.host] += n * serving.get(t.key, 0.0) / hosts[t.host].cores  # type: ignore[operator]
    chief = cluster.chief_host
    if CHIEF in serving and chief is not None and hosts[chief].cores:
        out[chief] += n * serving[CHIEF] / hosts[chief].cores  # type: ignore[operator]
    for t in cluster.workers:
        if hosts[t.host].cores:
            out[t.host] += serving.get(t.key, 0.0) / hosts[t.host].cores  # type: ignore[operator]
    return dict(out)


def task_cpu_seconds(cluster: Cluster, worker_s: float, ps_s: Mapping[TaskRef, float],
                     serving: Mapping[str, float]) -> dict[str, float]:
    """Task key ("worker:i", "ps:k") -> predicted CPU core-seconds per synchronous step (one step
    of every worker), for tasks on hosts whose budget in cores ``K_h`` is known: a CPU worker's
    ``c_w F_w / F_h K_h`` (its compute, measured at the host's budget) and N times a PS task's
    ``ps_k F_k / F_h K_h``, plus their ``serving`` (:func:`serving_core_seconds`; a PS task's N
    times), and the chief's (``"chief"``) N times its serving where it shares a budgeted host. What
    the testbed measures per task (``task_cpu_s_per_step`` of a bench run) is compared with this."""
    hosts = {h.name: h for h in cluster.hosts}
    n = cluster.num_workers
    out: dict[str, float] = {}
    for w in cluster.workers:
        host = hosts[w.host]
        if host.cores:
            own = 0.0 if w.gpus else worker_s * w.flops / host.cpu_flops * host.cores
            out[w.key] = own + serving.get(w.key, 0.0)
    for t in cluster.ps:
        host = hosts[t.host]
        if host.cores:
            out[t.key] = n * (ps_s.get(TaskRef.ps(t.index), 0.0) * t.flops / host.cpu_flops * host.cores
                              + serving.get(t.key, 0.0))
    if CHIEF in serving and cluster.chief_host is not None and hosts[cluster.chief_host].cores:
        out[CHIEF] = n * serving[CHIEF]
    return out
