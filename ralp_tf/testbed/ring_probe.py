"""The ring's CPU measured on a testbed: the probe models of :mod:`ralp_tf.model.ring_probe` trained
with MultiWorkerMirroredStrategy (the bench's MWMS job, :mod:`ralp_tf.testbed.mwms_job`) on its worker hosts.

:func:`measure_ring_cpu` runs each probe for ``warmup`` + its ``steps`` synchronous steps (times
``scale``), one after another in one job (:func:`ralp_tf.testbed.mwms_job.run_mwms_sequence`: the
ranks start TensorFlow once), reads each worker host's CPU seconds per step from its CPU group over
each probe's timed window, and returns the samples with their fit
(:func:`ralp_tf.plan.ring_cpu.fit_ring_cpu`); each sample's ``table_pass_bytes`` is ``optimizer``'s
whole-table passes over the probe's tables.
It needs CPU budgets on the hosts (the CPU groups it reads; the cost model prices the ring's CPU only
where a host's cores are known) and two or more workers on hosts of their own.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ralp_tf.model.optimizers import sparse_update
from ralp_tf.model.ring_probe import PROBES
from ralp_tf.plan.rates import RingCpu
from ralp_tf.plan.ring_cpu import RingProbeSample, fit_ring_cpu
from ralp_tf.run.training import LOOP_OPTIMIZER
from ralp_tf.testbed.errors import TestbedError

__all__ = ["PROBE_MODULE", "ring_probe_hosts", "measure_ring_cpu"]

PROBE_MODULE = "ralp_tf.model.ring_probe"


def ring_probe_hosts(tb: Any, workers: Sequence[str]) -> list[str]:
    """The hosts of ``workers`` (in order, each once)."""
    return list(dict.fromkeys(tb.host_of(w) for w in workers))


def measure_ring_cpu(tb: Any, workers: Sequence[str] | None = None, *, scale: float = 1.0, warmup: int = 3,
                     batch: int = 32, timeout: float = 600.0, optimizer: str = LOOP_OPTIMIZER,
                     log_path: str | None = None, on_probe: Callable[[str, RingProbeSample], None] | None = None
                     ) -> tuple[RingCpu, list[RingProbeSample]]:
    """Run the probes on ``tb`` (module docstring) and return the fitted :class:`RingCpu` (``"mwms"``)
    and the samples. Raises TestbedError when the hosts have no CPU groups, the workers share one
    host, or a probe's job fails (its reason and log tail)."""
    from ralp_tf.testbed import jobs
    from ralp_tf.testbed.mwms_job import run_mwms_sequence

    workers = jobs.resolve_workers(tb, workers)
    hosts = ring_probe_hosts(tb, workers)
    if len(workers) < 2 or len(hosts) != len(workers):
        raise TestbedError(f"the ring's CPU is measured with 2 or more workers on hosts of their own; got {workers} "
                           f"on hosts {hosts}")
    if any(tb.cpu_group(h) is None for h in hosts):
        raise TestbedError("the ring's CPU is read from the hosts' CPU groups: give the testbed CPU budgets "
                           "(--host-cpu)")
    shapes = list(PROBES.values())
    records = run_mwms_sequence(tb, [(shape.name, f"{PROBE_MODULE}:{shape.name}", max(round(shape.steps * scale), 2))
                                     for shape in shapes], workers, batch=batch, warmup=warmup,
                                timeout=timeout * len(shapes), optimizer=optimizer, log_path=log_path)
    samples = []
    for shape, rec in zip(shapes, records):
        if not rec.get("valid"):
            raise TestbedError(f"ring probe {shape.name} failed: {rec.get('invalid_reason')}\n{rec.get('log_tail', '')}")
        cpu = rec.get("host_cpu_s_per_step") or {}
        if not all(h in cpu for h in hosts):
            raise TestbedError(f"ring probe {shape.name} read no CPU for hosts {[h for h in hosts if h not in cpu]}")
        sample = RingProbeSample(probe=shape.name, tensors=shape.tensors, param_bytes=shape.param_bytes,
                                 workers=len(workers), host_cpu_s={h: float(cpu[h]) for h in hosts},
                                 step_s=float(rec["measured_step_s"]), tables=shape.tables,
                                 table_pass_bytes=float(sparse_update(optimizer).dense_passes * shape.table_bytes))
        samples.append(sample)
        if on_probe:
            on_probe(shape.name, sample)
    return fit_ring_cpu(samples, "mwms"), samples
