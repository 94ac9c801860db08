"""Scale on paper: predicted samples/s and bytes per host link for stock PSS, ralp_tf's plan and the
ring all-reduce, from 2 to 64 GPU hosts, with the one cost model (:mod:`ralp_tf.plan.costmodel`).

Every figure here is **predicted**, never measured. The cluster of a grid point is
``Cluster.local(N, N, layout="colocated", ps_hosts=P)``: N hosts, each with one GPU worker and
one PS task, plus P CPU-only PS hosts (0 in the main grid, ``max(1, N * ps_host_ratio)`` in the
CPU-only row set), one link of the given rate per host, and:

* **GPU rate** ``gpu_flops`` (default :data:`GPU_FLOPS` = 100 TFLOP/s sustained). An H100's
  dense TF32 peak is about 400 TFLOP/s (990 bf16), but whole models sustain far less: ResNet-50
  training at the ~4,000 images/s per H100 that MLPerf-class runs reach is about 100 TFLOP/s
  (24.6 GFLOP per image forward+backward). Assuming the peak would make every model look
  compute-free and overstate the network's share.
* **Host CPU** ``host_cpu_flops`` (default :data:`HOST_CPU_FLOPS` = 1 TFLOP/s, a two-socket
  server's sustained fp32 GEMM rate) for the PS tasks' compute (RALP's head runs on PS CPUs), the
  same on a CPU-only PS host.

Strategies, on the same hosts and links (:data:`STRATEGIES`):

* ``stock PSS``: nothing placed, variables round-robin over the PS tasks;
* ``colocated RALP``: the analyzer's choice (:func:`ralp_tf.plan.analyzer.analyze`): a cut, the
  head split over PS tasks, balanced or partitioned storage, or none of them;
* ``RALP without head splits``: the analyzer's choice with ``split=False`` (every PS-side layer
  whole on one PS task), what the ``ralp`` policy chose before head splits were applied;
* ``ring all-reduce``: :func:`ralp_tf.plan.costmodel.estimate_allreduce` over the N workers (dense
  all-reduce of every trainable byte, embedding tables included, as MultiWorkerMirroredStrategy
  does); CPU-only PS hosts take no part.

Profiles (:mod:`ralp_tf.plan.profiles`, no TensorFlow): the built-in models' cached profiles
(:data:`BUILTIN_MODELS`) and the two built as data, ResNet-50 size and BERT-base size, priced
with :data:`OPTIMIZER` (``tf_keras.optimizers.legacy.SGD``: no whole-table passes, repeated
ids summed on the table's task).
:func:`rows_json` gives the rows as JSON objects (``model``, ``hosts``, ``ps_hosts``,
``link_bps``, ``strategy``, ``samples_per_s``, ``max_link_bytes``, ``plan``, ...); ``ralp-tf
project`` prints them or the Markdown of ``benchmarks/projection.md``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Sequence

from ralp_tf.errors import ValidationError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.cluster import Cluster, format_bandwidth
from ralp_tf.plan.costmodel import StepEstimate, estimate, estimate_allreduce
from ralp_tf.plan.profiles import bert_base_profile, cached_profile, resnet50_profile
from ralp_tf.plan.strategies import rank_strategies

__all__ = ["GPU_FLOPS", "HOST_CPU_FLOPS", "HOSTS", "BANDWIDTHS_BPS", "STRATEGIES", "PS_HOST_RATIO",
           "BUILTIN_MODELS", "MODELS", "OPTIMIZER", "COMMAND", "ProjectionRow", "projection_cluster", "ps_hosts_for", "project",
           "rows_json", "to_markdown", "builtin_profiles", "model_profile", "resnet50_profile", "bert_base_profile",
           "main_table"]

GPU_FLOPS = 100e12
HOST_CPU_FLOPS = 1e12
HOSTS = (2, 4, 8, 16, 32, 64)
BANDWIDTHS_BPS = (10e9, 25e9, 100e9)
STRATEGIES = ("stock PSS", "colocated RALP", "RALP without head splits", "ring all-reduce", "auto")
#: CPU-only PS hosts per worker host in the second row set (N/4 of them, at least 1).
PS_HOST_RATIO = 0.25
BUILTIN_MODELS = ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")
#: The optimizer every projected step is priced with (:mod:`ralp_tf.model.optimizers`): one whose
#: sparse updates touch only the step's rows, as the ring's estimate assumes. tf_keras.optimizers.SGD's
#: whole-table passes are a cost of that class on one process, not of the designs compared here.
OPTIMIZER = "legacy-sgd"
_MAKERS: dict[str, Callable[[], ModelProfile]] = {
    **{name: (lambda name=name: cached_profile(name)) for name in BUILTIN_MODELS},  # type: ignore[misc]
    "resnet50_size": resnet50_profile, "bert_base_size": bert_base_profile}
#: Every model of the projection, in table order, and how its profile is made.
MODELS: dict[str, Callable[[], ModelProfile]] = {
    name: (lambda make=make: make().with_optimizer(OPTIMIZER)) for name, make in _MAKERS.items()}  # type: ignore[misc]
#: The command that writes benchmarks/projection.md (named in its header).
COMMAND = "ralp-tf project --markdown --out benchmarks/projection.md"


@dataclasses.dataclass(frozen=True)
class ProjectionRow:
    """One predicted figure: ``strategy`` training ``model`` on ``hosts`` colocated hosts (and
    ``ps_hosts`` CPU-only PS hosts) with links of ``bandwidth_bps``. ``samples_per_s`` is over all
    workers; ``max_link_bytes`` is the busiest host link's busier direction per synchronous step
    (one step of every worker); ``vs_ring`` is ``samples_per_s`` over the ring's at the same point."""

    model: str
    hosts: int
    bandwidth_bps: float
    gpu_flops: float
    host_cpu_flops: float
    batch_size: int
    strategy: str
    plan: str
    samples_per_s: float
    step_s: float
    max_link_bytes: float
    bottleneck: str
    ps_hosts: int = 0
    vs_ring: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON: ``model, hosts, ps_hosts, link_bps, strategy, samples_per_s,
        max_link_bytes, plan`` and ``vs_ring, step_s, bottleneck, batch_size, gpu_flops,
        host_cpu_flops``."""
        return {"model": self.model, "hosts": self.hosts, "ps_hosts": self.ps_hosts, "link_bps": self.bandwidth_bps,
                "strategy": self.strategy, "samples_per_s": self.samples_per_s, "max_link_bytes": self.max_link_bytes,
                "plan": self.plan, "vs_ring": self.vs_ring, "step_s": self.step_s, "bottleneck": self.bottleneck,
                "batch_size": self.batch_size, "gpu_flops": self.gpu_flops, "host_cpu_flops": self.host_cpu_flops}


def projection_cluster(hosts: int, bandwidth_bps: float, gpu_flops: float = GPU_FLOPS,
                       host_cpu_flops: float = HOST_CPU_FLOPS, ps_hosts: int = 0) -> Cluster:
    """``hosts`` colocated hosts, each a GPU worker and a CPU PS task, plus ``ps_hosts`` CPU-only
    PS hosts (module docstring)."""
    return Cluster.local(hosts, hosts, layout="colocated", ps_hosts=ps_hosts, bandwidth=bandwidth_bps,
                         gpus={"worker": 1}, flops={"worker": gpu_flops, "ps": host_cpu_flops})


def ps_hosts_for(hosts: int, ratio: float = PS_HOST_RATIO) -> int:
    """CPU-only PS hosts of the second row set: ``max(1, round(hosts * ratio))``."""
    return max(1, round(hosts * ratio))


def project(profiles: Iterable[ModelProfile], hosts: Sequence[int] = HOSTS,
            bandwidths_bps: Sequence[float] = BANDWIDTHS_BPS, *, gpu_flops: float = GPU_FLOPS,
            host_cpu_flops: float = HOST_CPU_FLOPS, ps_host_ratio: float = 0.0) -> list[ProjectionRow]:
    """Predicted rows for every profile x host count x link rate x strategy (module docstring),
    with ``ps_hosts_for(N, ps_host_ratio)`` CPU-only PS hosts when ``ps_host_ratio`` > 0."""
    rows = []
    for prof in profiles:
        for n in hosts:
            extra = ps_hosts_for(n, ps_host_ratio) if ps_host_ratio > 0 else 0
            for bw in bandwidths_bps:
                cluster = projection_cluster(n, bw, gpu_flops, host_cpu_flops, ps_hosts=extra)
                analysis = analyze(prof, cluster)
                built = analyze(prof, cluster, split=False).chosen
                ring = estimate_allreduce(prof, cluster)
                picks: list[tuple[str, str, StepEstimate]] = [
                    ("stock PSS", "no split, round-robin storage", estimate(prof, cluster)),
                    ("colocated RALP", analysis.chosen.label, analysis.chosen.estimate),
                    ("RALP without head splits", built.label, built.estimate),
                    ("ring all-reduce", "dense all-reduce", ring)]
                best = rank_strategies(prof, cluster, analysis.plan, horovod=True).best
                picks.append(("auto", f"{best.name}: " + (analysis.chosen.label if best.name == "pss" else
                                                           best.label), best.estimate))
                for strategy, plan, e in picks:
                    rows.append(ProjectionRow(model=prof.model_name, hosts=n, bandwidth_bps=bw, gpu_flops=gpu_flops,
                                              host_cpu_flops=host_cpu_flops, batch_size=prof.batch_size,
                                              strategy=strategy, plan=plan, samples_per_s=e.samples_per_s,
                                              step_s=e.step_s, max_link_bytes=e.max_link_bytes,
                                              bottleneck=e.bottleneck, ps_hosts=extra,
                                              vs_ring=e.samples_per_s / ring.samples_per_s))
    return rows


def rows_json(rows: Sequence[ProjectionRow]) -> list[dict[str, Any]]:
    """The rows as JSON objects (:meth:`ProjectionRow.to_dict`)."""
    return [r.to_dict() for r in rows]


def _points(rows: Sequence[ProjectionRow]) -> dict[tuple[str, int, int, float], dict[str, ProjectionRow]]:
    by_point: dict[tuple[str, int, int, float], dict[str, ProjectionRow]] = {}
    for r in rows:
        by_point.setdefault((r.model, r.hosts, r.ps_hosts, r.bandwidth_bps), {})[r.strategy] = r
    return by_point


def _table(rows: Sequence[ProjectionRow], heading: str) -> list[str]:
    out = []
    model = None
    for (name, n, extra, bw), point in _points(rows).items():
        if name != model:
            model = name
            batch = next(iter(point.values())).batch_size
            out += ["", f"## {name} (batch {batch} per worker){heading}", "",
                    "| hosts | link | CPU-only PS hosts | predicted samples/s: stock PSS | ralp_tf's plan | "
                    "without head splits | ring | auto | ralp_tf / ring | without head splits / ring | auto / ring | "
                    "predicted MB/link: stock PSS | ralp_tf's plan | ring | ralp_tf's plan | auto trains with |",
                    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        stock, plan, built, ring, auto = (point[s] for s in STRATEGIES)
        out.append(f"| {n} | {format_bandwidth(bw)} | {extra} | "
                   + " | ".join(f"{r.samples_per_s:,.0f}" for r in (stock, plan, built, ring, auto))
                   + f" | {plan.vs_ring:.2f}x | {built.vs_ring:.2f}x | {auto.vs_ring:.2f}x | "
                   + " | ".join(f"{r.max_link_bytes / 1e6:,.1f}" for r in (stock, plan, ring))
                   + f" | {plan.plan} | {auto.plan.split(':')[0]} |")
    return out


def _summary(rows: Sequence[ProjectionRow]) -> list[str]:
    """Per model and row set: the lowest ralp_tf / ring ratio and where it is, for the analyzer's
    plan and for the plan without head splits."""
    out = ["| model | CPU-only PS hosts | lowest ralp_tf / ring (predicted) | at | highest | "
           "lowest without head splits | at | lowest auto / ring | lowest auto / ring at 16-64 hosts |",
           "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, bool], dict[str, list[ProjectionRow]]] = {}
    for r in rows:
        if r.strategy in ("colocated RALP", "RALP without head splits", "auto"):
            groups.setdefault((r.model, r.ps_hosts > 0), {}).setdefault(r.strategy, []).append(r)
    for (model, extra), by in groups.items():
        rs, built, auto = by["colocated RALP"], by["RALP without head splits"], by["auto"]
        low, high = min(rs, key=lambda r: r.vs_ring), max(rs, key=lambda r: r.vs_ring)
        low_built = min(built, key=lambda r: r.vs_ring)
        low_auto = min(auto, key=lambda r: r.vs_ring)
        large = [r.vs_ring for r in auto if r.hosts >= 16]
        out.append(f"| {model} | {'N/4' if extra else 'none'} | {low.vs_ring:.2f}x | {low.hosts} hosts, "
                   f"{format_bandwidth(low.bandwidth_bps)} | {high.vs_ring:.2f}x | {low_built.vs_ring:.2f}x | "
                   f"{low_built.hosts} hosts, {format_bandwidth(low_built.bandwidth_bps)} | {low_auto.vs_ring:.2f}x | "
                   + (f"{min(large):.2f}x |" if large else "- |"))
    return out


def to_markdown(rows: Sequence[ProjectionRow], command: str) -> str:
    """Markdown tables per model and row set, headed by ``command`` (what produced it); every
    figure is labelled predicted."""
    if not rows:
        raise ValidationError("no projection rows to write; give at least one model, host count and link rate")
    main = [r for r in rows if not r.ps_hosts]
    extra = [r for r in rows if r.ps_hosts]
    out = ["# Scale on paper: predicted, not measured", "",
           f"Produced by `{command}`.", "",
           "Every number below is a **prediction** of ralp_tf's cost model (`ralp_tf/plan/costmodel.py`, "
           "`docs/costmodel.md`); none was measured. Each host runs one GPU worker and one PS task "
           "(colocated layout) and has one link of the rate shown; the second row set adds CPU-only PS hosts "
           "(N/4 of them), each with its own link of that rate. "
           f"GPU rate {rows[0].gpu_flops / 1e12:g} TFLOP/s sustained per worker; PS compute on the host CPU "
           f"at {rows[0].host_cpu_flops / 1e12:g} TFLOP/s (see `ralp_tf/plan/projection.py` for why). "
           "MB/link is the busiest host link's busier direction per synchronous step (one step of every worker). "
           "\"ralp_tf's plan\" is the analyzer's choice (`ralp_tf.analyze`), head splits over PS tasks included; "
           "\"without head splits\" is its choice with `split=False` (every PS-side layer whole on one PS task); "
           "the ring is "
           "`ralp_tf.plan.costmodel.estimate_allreduce` on the worker hosts; \"auto\" is what `--strategy auto` "
           "ranks first (`ralp_tf.plan.strategies.rank_strategies`: the plan, stock PSS or a ring), before its "
           "measured probe.", "", "## Summary (predicted)", "",
           *_summary(rows)]
    out += _table(main, "")
    if extra:
        out += ["", "# With CPU-only PS hosts (predicted)"] + _table(extra, ", with CPU-only PS hosts")
    return "\n".join(out) + "\n"


def model_profile(name: str) -> ModelProfile:
    """The profile of projection model ``name`` (:data:`MODELS`); ValidationError naming the choices."""
    if name not in MODELS:
        raise ValidationError(f"unknown projection model {name!r}; choose from {', '.join(MODELS)}")
    return MODELS[name]()


def builtin_profiles(names: Sequence[str] = BUILTIN_MODELS, batch_size: int = 32) -> list[ModelProfile]:
    """Cached profiles of built-in models (:func:`ralp_tf.plan.profiles.cached_profile`)."""
    return [cached_profile(n, batch_size) for n in names]


def main_table(command: str = COMMAND, profiles: Iterable[ModelProfile] | None = None) -> str:
    """The tables of ``benchmarks/projection.md``: every projection model on the default grid,
    without and with CPU-only PS hosts."""
    profs = list(profiles) if profiles is not None else [make() for make in MODELS.values()]
    return to_markdown(project(profs) + project(profs, ps_host_ratio=PS_HOST_RATIO), command)
