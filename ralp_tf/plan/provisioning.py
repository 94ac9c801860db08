"""How many CPU-only PS hosts to add to N GPU worker hosts: best samples per dollar (BytePS's
argument: cheap CPU servers add link and CPU capacity for a small share of the spend) and the
cheapest count that meets a throughput (HeterPS's provisioning under a throughput constraint).

For each count ``P`` of :func:`ps_host_counts` (0, 1, 2, 4, ... up to ``max_ps_hosts``), the
cluster is :func:`ralp_tf.plan.projection.projection_cluster` with ``ps_hosts=P`` (N colocated GPU
worker hosts with a PS task each, P CPU-only PS hosts, every link at the given rate), ralp_tf's plan
is the analyzer's choice on it, and

``cost = N * worker_host_price + P * ps_host_price`` (per hour), ``samples per dollar =
3600 * samples_per_s / cost``.

:func:`recommend_ps_hosts` returns every option, the best samples per dollar, and with
``min_samples_per_s`` the cheapest option that meets it (None when none does; the command then
exits 3). The ring all-reduce on the N worker hosts alone is priced beside them for reference.
Everything is predicted by the one cost model.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from ralp_tf.errors import ValidationError, check_int
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.costmodel import estimate_allreduce
from ralp_tf.plan.projection import GPU_FLOPS, HOST_CPU_FLOPS, projection_cluster

__all__ = ["ProvisionOption", "Recommendation", "check_price", "ps_host_counts", "recommend_ps_hosts"]


@dataclasses.dataclass(frozen=True)
class ProvisionOption:
    """``ps_hosts`` CPU-only PS hosts beside the worker hosts: ralp_tf's plan (``plan``, its label)
    and what it is predicted to give for what it costs."""

    ps_hosts: int
    samples_per_s: float
    dollars_per_hour: float
    samples_per_dollar: float
    plan: str
    bottleneck: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """Every option priced, ``best`` (most samples per dollar; fewer hosts on a tie), ``cheapest``
    (lowest cost meeting ``min_samples_per_s``, None without a target or when none meets it) and
    the ring all-reduce on the worker hosts (``ring``, as an option with 0 PS hosts)."""

    model: str
    workers: int
    link_bps: float
    worker_host_price: float
    ps_host_price: float
    min_samples_per_s: float | None
    options: tuple[ProvisionOption, ...]
    best: ProvisionOption
    cheapest: ProvisionOption | None
    ring: ProvisionOption

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "workers": self.workers, "link_bps": self.link_bps,
                "worker_host_price": self.worker_host_price, "ps_host_price": self.ps_host_price,
                "min_samples_per_s": self.min_samples_per_s, "options": [o.to_dict() for o in self.options],
                "best": self.best.to_dict(), "cheapest": self.cheapest.to_dict() if self.cheapest else None,
                "ring": self.ring.to_dict()}

    def report(self) -> str:
        """The options as a table, then the recommendation in words."""
        lines = [f"{self.model} on {self.workers} GPU worker hosts, links {self.link_bps / 1e9:g} Gbit/s, "
                 f"${self.worker_host_price:g}/h per worker host, ${self.ps_host_price:g}/h per CPU-only PS host "
                 "(predicted):",
                 f"  {'PS hosts':>8} {'samples/s':>12} {'$/h':>10} {'samples/$':>12}  plan"]
        for o in (*self.options, self.ring):
            name = "ring" if o is self.ring else str(o.ps_hosts)
            lines.append(f"  {name:>8} {o.samples_per_s:>12,.0f} {o.dollars_per_hour:>10,.2f} "
                         f"{o.samples_per_dollar:>12,.0f}  {o.plan}")
        lines.append(f"  Best samples per dollar: {self.best.ps_hosts} CPU-only PS host(s), "
                     f"{self.best.samples_per_dollar:,.0f} samples/$ ({self.best.samples_per_s:,.0f} samples/s).")
        if self.min_samples_per_s is not None:
            lines.append(f"  Cheapest meeting {self.min_samples_per_s:,.0f} samples/s: " +
                         (f"{self.cheapest.ps_hosts} CPU-only PS host(s), ${self.cheapest.dollars_per_hour:,.2f}/h."
                          if self.cheapest else "none of the options (add worker hosts or lower the target)."))
        return "\n".join(lines)


def check_price(value: Any, name: str) -> float:
    """``value`` as a positive finite price per hour; ValidationError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValidationError(f"{name} must be a positive number (dollars per host-hour), e.g. 2.5, got {value!r}")
    return float(value)


def ps_host_counts(max_ps_hosts: int) -> list[int]:
    """0, 1, 2, 4, 8, ... below ``max_ps_hosts``, and ``max_ps_hosts``."""
    counts, n = [0], 1
    while n < max_ps_hosts:
        counts.append(n)
        n *= 2
    return counts + ([max_ps_hosts] if max_ps_hosts > 0 else [])


def recommend_ps_hosts(profile: ModelProfile, workers: int, link_bps: float, *, worker_host_price: float,
                       ps_host_price: float, max_ps_hosts: int | None = None, min_samples_per_s: float | None = None,
                       counts: Sequence[int] | None = None, gpu_flops: float = GPU_FLOPS,
                       host_cpu_flops: float = HOST_CPU_FLOPS) -> Recommendation:
    """Price each count of CPU-only PS hosts and recommend one (module docstring)."""
    workers = check_int(workers, "workers")
    p_w, p_ps = check_price(worker_host_price, "worker_host_price"), check_price(ps_host_price, "ps_host_price")
    if min_samples_per_s is not None and (isinstance(min_samples_per_s, bool) or not isinstance(
            min_samples_per_s, (int, float)) or not 0 < min_samples_per_s < math.inf):
        raise ValidationError(f"min_samples_per_s must be a positive throughput (samples/s), got {min_samples_per_s!r}")
    top = workers if max_ps_hosts is None else check_int(max_ps_hosts, "max_ps_hosts", minimum=0)
    options = []
    for p in (counts if counts is not None else ps_host_counts(top)):
        p = check_int(p, "ps_hosts", minimum=0)
        cluster = projection_cluster(workers, link_bps, gpu_flops, host_cpu_flops, ps_hosts=p)
        chosen = analyze(profile, cluster).chosen
        cost = workers * p_w + p * p_ps
        rate = chosen.estimate.samples_per_s
        options.append(ProvisionOption(p, rate, cost, 3600 * rate / cost, chosen.label, chosen.estimate.bottleneck))
    ring_e = estimate_allreduce(profile, projection_cluster(workers, link_bps, gpu_flops, host_cpu_flops))
    ring = ProvisionOption(0, ring_e.samples_per_s, workers * p_w, 3600 * ring_e.samples_per_s / (workers * p_w),
                           "ring all-reduce", ring_e.bottleneck)
    best = max(options, key=lambda o: (o.samples_per_dollar, -o.ps_hosts))
    meeting = [o for o in options if min_samples_per_s is not None and o.samples_per_s >= min_samples_per_s]
    cheapest = min(meeting, key=lambda o: (o.dollars_per_hour, o.ps_hosts)) if meeting else None
    return Recommendation(profile.model_name, workers, link_bps, p_w, p_ps, min_samples_per_s, tuple(options), best,
                          cheapest, ring)
