"""RALP analyzer: where to cut a model between workers and PS tasks, and whether cutting pays.

Candidates, all priced by :func:`ralp_tf.plan.costmodel.estimate`:

* no split (stock ParameterServerStrategy);
* every suffix cut ``i`` of the topological order: layers ``i..n`` computed on PS tasks, provided
  each of them can compute on a PS (its profile's ``ps_refusal`` is empty), every layer with
  weights among them is of a kind in :data:`~ralp_tf.model.kinds.RALP_PS_KINDS` (dense, embedding,
  recurrent, attention, or a layer of a class with no registered kind, priced on its measured
  parameters, FLOPs and activations; conv and normalization stay on the workers, as in RALP), and
  they include such a layer with weights;
* the same with every embedding layer (and the reshapes right after it) on PS tasks too.

PS-side layers with weights go to PS tasks by longest-processing-time on parameter bytes (the
largest layer to the least loaded task: several PS compute tasks for the head, the activation
hops between them priced by the cost model); weightless layers follow their producer's task.
With more than one PS task, each candidate also comes in three more variants: the whole head
on PS task 0 (one PS compute task, no hops), and both of those with balanced storage
(:mod:`ralp_tf.plan.storage`) of the worker-computed layers instead of PSS's round-robin; "no split"
gets a balanced-storage variant too. The analyzer returns the fastest candidate (the first
listed on a tie, the unvaried candidates first), but keeps "no split" unless the winner is
predicted to be at least ``min_speedup`` times faster.

The ring all-reduce (Horovod, MultiWorkerMirroredStrategy) on the worker hosts is priced next to
it; when the ring is predicted faster than the chosen PSS plan, :meth:`Analysis.report` and
:meth:`Analysis.to_dict` (``"ring_predicted_faster": true``) say so.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import StepEstimate, estimate, estimate_allreduce
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.model.kinds import PS_PLACEABLE_KINDS, RALP_PS_KINDS
from ralp_tf.model.profiler import ModelProfile
from ralp_tf.plan.compression import AUTO, parse_setting
from ralp_tf.plan.storage import with_balanced_storage

__all__ = ["BALANCED", "HEAD_ON_ONE", "Candidate", "Analysis", "assign_ps_tasks", "plan_for", "candidate_splits",
           "analyze"]

BALANCED = ", balanced storage"
HEAD_ON_ONE = ", head on ps:0"


@dataclasses.dataclass(frozen=True)
class Candidate:
    label: str
    ps_layers: tuple[str, ...]
    plan: Plan
    estimate: StepEstimate


@dataclasses.dataclass(frozen=True)
class Analysis:
    """The analyzer's decision and the numbers behind it."""

    profile: ModelProfile
    cluster: Cluster
    plan: Plan
    chosen: Candidate
    baseline: Candidate
    best_split: Candidate | None
    allreduce: StepEstimate
    candidates: tuple[Candidate, ...]
    min_speedup: float

    @property
    def is_split(self) -> bool:
        return self.plan.is_split

    @property
    def predicted_speedup(self) -> float:
        return self.baseline.estimate.step_s / self.chosen.estimate.step_s

    @property
    def ring_predicted_faster(self) -> bool:
        """Whether the ring all-reduce is predicted to train faster than the chosen PSS plan."""
        return self.allreduce.samples_per_s > self.chosen.estimate.samples_per_s

    @property
    def ring_speedup(self) -> float:
        """Predicted ring samples/s over the chosen plan's (above 1: the ring is faster)."""
        return self.allreduce.samples_per_s / self.chosen.estimate.samples_per_s

    def report(self) -> str:
        """The decision in plain words and numbers."""
        base, chosen = self.baseline.estimate, self.chosen.estimate
        lines = [f"RALP analysis of {self.profile.model_name} (batch {self.profile.batch_size} per worker) on "
                 f"{self.cluster.describe()}:",
                 f"  stock PS: {base.bytes_per_step / 1e6:.2f} MB/step between a worker and the PS tasks, "
                 f"predicted {base.step_s * 1e3:.1f} ms/step, {base.samples_per_s:.0f} samples/s "
                 f"(bottleneck: {base.bottleneck})."]
        best = self.best_split
        if best is None:
            lines.append("  No split is possible: no suffix of PS-placeable layers holds dense or embedding weights.")
        else:
            e = best.estimate
            ps_added = sum(e.ps_compute_s.values())
            lines.append(
                f"  Best split ({best.label}): {len(best.ps_layers)} layer(s) on PS "
                f"({', '.join(best.ps_layers[:6])}{', ...' if len(best.ps_layers) > 6 else ''}); "
                f"{e.bytes_per_step / 1e6:.2f} MB/step, saving {(base.bytes_per_step - e.bytes_per_step) / 1e6:.2f} MB "
                f"({base.bytes_per_step / max(e.bytes_per_step, 1):.1f}x less); PS compute added "
                f"{ps_added * 1e3:.1f} ms per worker step; predicted {e.step_s * 1e3:.1f} ms/step, "
                f"speed-up {base.step_s / e.step_s:.2f}x (bottleneck: {e.bottleneck}).")
        if self.is_split:
            lines.append(f"  Decision: split ({self.chosen.label}). Predicted speed-up {self.predicted_speedup:.2f}x "
                         f">= the {self.min_speedup:.2f}x threshold.")
        elif self.chosen is not self.baseline:
            lines.append(f"  Decision: no split, {self.chosen.label}. Predicted speed-up "
                         f"{self.predicted_speedup:.2f}x >= the {self.min_speedup:.2f}x threshold.")
        elif best is not None:
            lines.append(f"  Decision: no split. The best split is predicted "
                         f"{base.step_s / best.estimate.step_s:.2f}x, below the {self.min_speedup:.2f}x threshold: "
                         "the PS would do more work than the traffic it saves.")
        else:
            lines.append("  Decision: no split.")
        chosen_e = self.chosen.estimate
        if chosen_e.busiest_link:
            lines.append(f"  Busiest host link with the chosen plan: {chosen_e.busiest_link}, "
                         f"{chosen_e.max_link_bytes / 1e6:.2f} MB each way per synchronous step "
                         f"({self.cluster.num_workers} worker steps).")
        ar = self.allreduce
        lines.append(f"  For reference, ring all-reduce: {ar.bytes_per_step / max(ar.num_workers, 1) / 1e6:.2f} MB "
                     f"sent per worker per step, predicted {ar.samples_per_s:.0f} samples/s.")
        if self.ring_predicted_faster:
            margin = "" if self.ring_speedup >= 1.05 else " (by under 5%: within the model's accuracy, a tie)"
            lines.append(f"  The ring all-reduce is predicted FASTER than this plan{margin}: {ar.samples_per_s:.1f} vs "
                         f"{chosen_e.samples_per_s:.1f} samples/s ({self.ring_speedup:.2f}x). Train with Horovod or "
                         "MultiWorkerMirroredStrategy on these hosts"
                         + ("." if self.cluster.num_ps >= self.cluster.num_workers else
                            ", or run a PS task on every worker host (layout 'colocated')."))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.profile.model_name, "batch_size": self.profile.batch_size,
            "split": self.is_split, "chosen": self.chosen.label, "predicted_speedup": self.predicted_speedup,
            "baseline": self.baseline.estimate.to_dict(), "chosen_estimate": self.chosen.estimate.to_dict(),
            "allreduce": self.allreduce.to_dict(), "plan": self.plan.to_dict(),
            "ring_predicted_faster": self.ring_predicted_faster, "ring_speedup": self.ring_speedup,
            "candidates": [{"label": c.label, "ps_layers": list(c.ps_layers), "step_s": c.estimate.step_s,
                            "bytes_per_step": c.estimate.bytes_per_step, "samples_per_s": c.estimate.samples_per_s,
                            "max_link_bytes": c.estimate.max_link_bytes, "storage": bool(c.plan.storage)}
                           for c in self.candidates],
        }


def assign_ps_tasks(profile: ModelProfile, ps_layers: list[str], num_ps: int) -> dict[str, int]:
    """PS task per layer: weights by longest-processing-time, weightless layers follow a producer."""
    load = [0] * num_ps
    out: dict[str, int] = {}
    weighted = sorted((n for n in ps_layers if profile.layer(n).param_bytes), key=lambda n: -profile.layer(n).param_bytes)
    for name in weighted:
        k = min(range(num_ps), key=lambda i: (load[i], i))
        out[name] = k
        load[k] += profile.layer(name).param_bytes
    for name in ps_layers:  # topological order
        if name not in out:
            producers = [u for u in profile.layer(name).inbound if u in out]
            out[name] = out[producers[0]] if producers else min(range(num_ps), key=lambda i: (load[i], i))
    return out


def plan_for(profile: ModelProfile, cluster: Cluster, ps_layers: list[str], policy: str = "ralp", *,
             ps_tasks: int | None = None) -> Plan:
    """A Plan putting ``ps_layers`` on PS tasks (spread over the first ``ps_tasks`` of them,
    default all) and every other layer on the workers."""
    if ps_layers and cluster.num_ps == 0:
        raise PlanError("a RALP split needs PS tasks, but the cluster has none; add a 'ps' job")
    spread = cluster.num_ps if ps_tasks is None else min(ps_tasks, cluster.num_ps)
    tasks = assign_ps_tasks(profile, ps_layers, spread) if ps_layers else {}
    placements = {}
    for l in profile.layers:
        if l.kind == "input":
            continue
        placements[l.name] = cluster.ps_device(tasks[l.name]) if l.name in tasks else cluster.worker_device
    return Plan(placements=placements, policy=policy)


def _embedding_group(profile: ModelProfile) -> list[str]:
    """Embedding layers plus the weightless reshapes that only consume them."""
    group = [l.name for l in profile.layers if l.kind == "embedding"]
    for l in profile.layers:
        if l.kind == "reshape" and l.inbound and all(u in group for u in l.inbound):
            group.append(l.name)
    return group


def candidate_splits(profile: ModelProfile) -> list[tuple[str, list[str]]]:
    """(label, PS layers) for every candidate split (see the module docstring)."""
    layers = profile.compute_layers
    out: list[tuple[str, list[str]]] = []
    suffixes: list[tuple[str, list[str]]] = [("no split", [])]
    for i in range(len(layers)):
        suffix = layers[i:]
        if not all(l.kind in PS_PLACEABLE_KINDS and not l.ps_refusal and (l.kind in RALP_PS_KINDS or not l.param_bytes)
                   for l in suffix):
            continue
        if not any(l.kind in RALP_PS_KINDS and l.param_bytes for l in suffix):
            break
        suffixes.append((f"cut before {layers[i].name}", [l.name for l in suffix]))
    emb = _embedding_group(profile)
    for label, names in suffixes:
        if names:
            out.append((label, names))
        if emb:
            merged = [l.name for l in profile.layers if l.name in set(names) | set(emb)]
            out.append((("embeddings on PS" if not names else f"{label} + embeddings on PS"), merged))
    return out


def analyze(profile: ModelProfile, cluster: Cluster, *, min_speedup: float = 1.05,
            partition: bool = False, compression: Any = None) -> Analysis:
    """Price every candidate split and choose one (see the module docstring).

    ``compression``: None (no compression), a setting applied to every candidate (``"fp16"``,
    ``{"activations": "bf16"}``, see :mod:`ralp_tf.plan.compression`), or ``"auto"``: every candidate
    is priced with and without fp16 activations and weights, and the faster kept (int8 and
    top-k are never chosen here).

    ``partition`` lets balanced storage split a layer's variables over several PS tasks (the
    applier creates them as shards along axis 0, :mod:`ralp_tf.place.sharding`). Off by default: a
    variable splits into at most as many shards as it has rows, so a 3x3 conv kernel cannot go
    to more than 3 tasks, and the profile does not record shapes to check it.
    """
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers")
    baseline_plan = plan_for(profile, cluster, [], policy="ralp")
    baseline = Candidate("no split", (), baseline_plan, estimate(profile, cluster, baseline_plan))
    candidates = [baseline]
    splits = candidate_splits(profile) if cluster.num_ps else []
    for label, names in splits:
        plan = plan_for(profile, cluster, names)
        candidates.append(Candidate(label, tuple(names), plan, estimate(profile, cluster, plan)))
    if cluster.num_ps > 1:
        for label, names in [("no split", []), *splits]:
            variants = [(label, plan_for(profile, cluster, names))]
            if names:
                variants.append((label + HEAD_ON_ONE, plan_for(profile, cluster, names, ps_tasks=1)))
                candidates.append(Candidate(variants[1][0], tuple(names), variants[1][1],
                                            estimate(profile, cluster, variants[1][1])))
            for vlabel, vplan in variants:
                plan = with_balanced_storage(vplan, profile, cluster, partition=partition)
                candidates.append(Candidate(vlabel + BALANCED, tuple(names), plan, estimate(profile, cluster, plan)))
    if compression is not None:
        auto = compression == "auto"
        setting = AUTO if auto else parse_setting(compression, "analyze(compression=...)")
        compressed = []
        for c in candidates:
            plan = dataclasses.replace(c.plan, compression={"*": setting})
            compressed.append(Candidate(f"{c.label}, {setting.describe()} on the wire", c.ps_layers, plan,
                                        estimate(profile, cluster, plan)))
        candidates = candidates + compressed if auto else compressed
        baseline = candidates[0]
    split_candidates = [c for c in candidates if c.ps_layers]
    best = min(split_candidates, key=lambda c: c.estimate.step_s) if split_candidates else None
    fastest = min(candidates, key=lambda c: c.estimate.step_s)
    chosen = fastest if baseline.estimate.step_s / fastest.estimate.step_s >= min_speedup else baseline
    notes = {"predicted_step_s": chosen.estimate.step_s, "predicted_bytes_per_step": chosen.estimate.bytes_per_step,
             "predicted_speedup": baseline.estimate.step_s / chosen.estimate.step_s, "cut": chosen.label}
    plan = dataclasses.replace(chosen.plan, notes=notes)
    return Analysis(profile=profile, cluster=cluster, plan=plan, chosen=chosen, baseline=baseline, best_split=best,
                    allreduce=estimate_allreduce(profile, cluster), candidates=tuple(candidates),
                    min_speedup=min_speedup)
