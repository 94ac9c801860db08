r"""Per host: the link load of a synchronous step, each worker's own transfer time, and the
compute chain of a worker step slowed by the other work on each host's CPU.

Part of the one cost model (the formulas are stated in :mod:`ralp_tf.plan.costmodel`, *Per host
link*, *Step time* and *Contention*); :func:`ralp_tf.plan.costmodel.estimate` combines them.
The traffic of one worker step (:mod:`ralp_tf.plan.traffic`) is the same for every worker with
the stepping worker on its own host, so the sums over workers are taken by task and host, not
worker by worker:

* bytes a worker step sends to PS task k in phase q cross a link for each worker not on k's
  host: k's host receives ``b_kq * (N - workers on it)``, and a worker host h sends
  ``workers on h * (sum_k b_kq - sum_{k on h} b_kq)`` (and likewise the other way);
* bytes between two PS tasks on different hosts cross once per worker step: ``N * b``.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Callable, Mapping, Sequence

from ralp_tf.plan.cluster import Cluster, TaskRef

__all__ = ["MAX_CONTENTION", "transfer_seconds", "pipeline_savings", "HostLoads", "host_loads", "ChainModel",
           "contended_step"]

#: Cap on the share of a host's CPU that other work takes from a step's chain (rho in the module
#: docstring of :mod:`ralp_tf.plan.costmodel`), so that a host loaded past its budget prices a long
#: step, not an infinite one.
MAX_CONTENTION = 0.95
_WORKER = TaskRef.worker()


def transfer_seconds(nbytes: float, bandwidth_bps: float) -> float:
    """Time to move ``nbytes`` over a link of ``bandwidth_bps`` bits/s (0 on an uncapped link)."""
    return 8.0 * nbytes / bandwidth_bps if math.isfinite(bandwidth_bps) else 0.0


def pipeline_savings(stages: Sequence[tuple[float, float, float]]) -> float:
    """Seconds a step of layers ``(compute, pull, push)`` (in forward order) saves when each layer's
    pull overlaps the compute of the layers before it and each layer's push the backward of the
    layers before it, against all of it one after another (:mod:`ralp_tf.plan.costmodel`,
    *Overlap*). Pulls share the link in layer order, and so do pushes in backward order; a layer's
    forward (a third of its compute) waits for its pull and for the layer before it, its backward
    (two thirds) for the layer after it, and its push for its backward and the push before it::

        P_l = P_{l-1} + u_l      F_l = max(F_{l-1}, P_l) + c_l / 3
        B_l = B_{l+1} + 2 c_l / 3 (B_{L+1} = F_L)      Q_l = max(Q_{l+1}, B_l) + v_l (Q_{L+1} = F_L)

    and the saving is ``sum (u_l + c_l + v_l) - Q_1`` (>= 0)."""
    pulled = forward = 0.0
    for compute, pull, _ in stages:
        pulled += pull
        forward = max(forward, pulled) + compute / 3.0
    backward = pushed = forward
    for compute, _, push in reversed(stages):
        backward += 2.0 * compute / 3.0
        pushed = max(pushed, backward) + push
    return max(sum(c + u + v for c, u, v in stages) - pushed, 0.0)


@dataclasses.dataclass
class HostLoads:
    """Per host: bytes out/in and busy seconds per synchronous step; per worker host: one
    worker's comm seconds per step (its transfers one after another)."""

    bytes_out: dict[str, float]
    bytes_in: dict[str, float]
    link_s: dict[str, float]
    comm_by_host: dict[str, float]


def host_loads(cluster: Cluster, phased: Mapping[tuple[TaskRef, TaskRef, str], float]) -> HostLoads:
    """Host link loads of N worker steps and each worker's comm time (module docstring)."""
    hosts = {h.name: h for h in cluster.hosts}
    n = cluster.num_workers
    ps_host = {TaskRef.ps(t.index): t.host for t in cluster.ps}
    workers_on = collections.Counter(t.host for t in cluster.workers)
    out: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    into: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    from_worker: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    to_worker: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    with_worker: dict[str, float] = collections.defaultdict(float)  # PS host -> one step's bytes with the worker
    between: dict[tuple[str, str], float] = collections.defaultdict(float)
    for (src, dst, phase), nbytes in phased.items():
        if src == _WORKER:
            from_worker[phase][ps_host[dst]] += nbytes
            with_worker[ps_host[dst]] += nbytes
        elif dst == _WORKER:
            to_worker[phase][ps_host[src]] += nbytes
            with_worker[ps_host[src]] += nbytes
        elif ps_host[src] != ps_host[dst]:
            out[ps_host[src]][phase] += n * nbytes
            into[ps_host[dst]][phase] += n * nbytes
            between[(ps_host[src], ps_host[dst])] += nbytes
    for phase_map, sent, received in ((from_worker, out, into), (to_worker, into, out)):
        for phase, by_host in phase_map.items():
            total = sum(by_host.values())
            for h, count in workers_on.items():
                sent[h][phase] += count * (total - by_host.get(h, 0.0))
            for h, nbytes in by_host.items():
                received[h][phase] += nbytes * (n - workers_on.get(h, 0))
    bytes_out, bytes_in, link_s = dict.fromkeys(hosts, 0.0), dict.fromkeys(hosts, 0.0), dict.fromkeys(hosts, 0.0)
    for h in hosts:
        phases = set(out.get(h, {})) | set(into.get(h, {}))
        bytes_out[h] = sum(out[h].values()) if h in out else 0.0
        bytes_in[h] = sum(into[h].values()) if h in into else 0.0
        busy = sum(max(out[h].get(q, 0.0) if h in out else 0.0, into[h].get(q, 0.0) if h in into else 0.0)
                   for q in phases)
        link_s[h] = transfer_seconds(busy, hosts[h].bandwidth_bps)
    among = sum(transfer_seconds(b, min(hosts[a].bandwidth_bps, hosts[c].bandwidth_bps)) for (a, c), b in between.items())
    comm_by_host = {}
    for h in workers_on:
        rate = hosts[h].bandwidth_bps
        comm_by_host[h] = among + sum(transfer_seconds(b, min(rate, hosts[k].bandwidth_bps))
                                      for k, b in with_worker.items() if k != h)
    return HostLoads(bytes_out, bytes_in, link_s, comm_by_host)


class ChainModel:
    """One worker step's compute chain, slowed by the other work sharing each host's CPU
    (:mod:`ralp_tf.plan.costmodel`, *Contention*).

    ``stages`` are the chain's PS compute, one after another; each is ``{host: seconds}``, the
    parts of one stage running at once on different hosts (a split layer's shards), the stage
    taking as long as its slowest part. ``loads`` gives, per host, the CPU seconds (at the host's
    budget) that every worker step puts there."""

    def __init__(self, cluster: Cluster, worker_s: float, stages: Sequence[Mapping[str, float]],
                 loads: Mapping[str, float], serve_s: Mapping[str, float]) -> None:
        hosts = {h.name: h for h in cluster.hosts}
        n = cluster.num_workers
        self.serve = serve_s
        self.load: dict[str, float] = collections.defaultdict(float)  # CPU s per synchronous step, at F_h
        self.own_load: dict[str, float] = collections.defaultdict(float)  # one chain's PS load per host
        for host, seconds in loads.items():
            self.load[host] += n * seconds
            self.own_load[host] += seconds
        self.single: dict[str, float] = collections.defaultdict(float)  # one-host stages, summed per host
        self.split: list[dict[str, float]] = []
        for stage in stages:
            if len(stage) == 1:
                (host, seconds), = stage.items()
                self.single[host] += seconds
            elif stage:
                self.split.append(dict(stage))
        self.worker: dict[str, tuple[float, float]] = {}  # worker host -> (own CPU seconds, at F_h)
        self.workers_on = collections.Counter(w.host for w in cluster.workers)
        for w in cluster.workers:
            if w.gpus:
                self.worker[w.host] = (0.0, 0.0)
                continue
            share = w.flops / hosts[w.host].cpu_flops
            self.load[w.host] += worker_s * share
            self.worker[w.host] = (worker_s, worker_s * share)
        self.gpu_s = {w.host: worker_s for w in cluster.workers if w.gpus}
        self.ps_hosts = set(self.own_load) | set(self.single) | {h for s in self.split for h in s}
        self.num_workers = n

    def cpu_per_worker_step(self) -> dict[str, float]:
        """``C_h``: host -> CPU seconds per worker step, for hosts with PS compute or priced serving
        CPU."""
        hosts = self.ps_hosts | {h for h, s in self.serve.items() if s > 0}
        busy = {h: self.load.get(h, 0.0) + self.serve.get(h, 0.0) for h in hosts}
        return {h: seconds / self.num_workers for h, seconds in busy.items() if seconds > 0}

    def _slow(self, host: str, sync_step_s: float, own_extra: float) -> float:
        """``1 / (1 - rho)`` on ``host`` for a chain whose own load there is ``own_load + own_extra``."""
        if sync_step_s <= 0:
            return 1.0
        rho = (self.load.get(host, 0.0) - self.own_load.get(host, 0.0) - own_extra) / sync_step_s
        return 1.0 / (1.0 - min(max(rho, 0.0), MAX_CONTENTION))

    def seconds_by_host(self, sync_step_s: float) -> dict[str, float]:
        """Worker host -> compute seconds of one step of a worker there, when a synchronous step
        takes ``sync_step_s``: each part ``/ (1 - rho)`` (rho: the host's other work per second)."""
        other = {h: self._slow(h, sync_step_s, 0.0) for h in self.ps_hosts}
        base = sum(s * other[h] for h, s in self.single.items())
        tops = []
        for stage in self.split:
            ranked = sorted(((s * other[h], h) for h, s in stage.items()), reverse=True)
            tops.append((ranked, stage))
        common = base + sum(ranked[0][0] for ranked, _ in tops)  # a chain with no CPU work of its own
        out = {}
        for host in self.workers_on:
            own_s, own_load = self.worker.get(host, (0.0, 0.0))
            if not own_s and not own_load:
                out[host] = self.gpu_s.get(host, 0.0) + common
                continue
            total = self.gpu_s.get(host, 0.0) + base
            mine = self.single.get(host, 0.0) + own_s
            if mine > 0:
                total += mine * self._slow(host, sync_step_s, own_load) - self.single.get(host, 0.0) * other.get(host, 1.0)
            for ranked, stage in tops:
                if host in stage and own_load:
                    rest = next((v for v, h in ranked if h != host), 0.0)
                    total += max(rest, stage[host] * self._slow(host, sync_step_s, own_load))
                else:
                    total += ranked[0][0]
            out[host] = total
        return out


def contended_step(step_at: Callable[[float], float]) -> float:
    """The synchronous step time ``T`` with ``T = step_at(T)`` (``step_at`` decreases in ``T``:
    the longer the step, the less the other work per second slows it), by bisection from the
    uncontended step ``step_at(inf)``."""
    low = step_at(math.inf)
    if not math.isfinite(low) or low <= 0:
        return low
    high = low
    for _ in range(60):
        if step_at(high) <= high:
            break
        high *= 2.0
    for _ in range(50):
        if high - low <= 1e-12 * high:
            break
        mid = 0.5 * (low + high)
        if step_at(mid) > mid:
            low = mid
        else:
            high = mid
    return high

