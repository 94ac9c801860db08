"""RALP analyzer: where to cut a model between workers and PS tasks, and whether cutting pays.

Candidates, all priced by :func:`ralp_tf.plan.costmodel.estimate`:

* no split (stock ParameterServerStrategy);
* every cut of the menu (:mod:`ralp_tf.plan.menu`): a set of units closed under "computed from"
  (``"cut before fc1"``, ``"cut before heads/a, heads/b"``, ``"everything on the PS"``), every
  unit of it on PS tasks but those that cannot compute there (their profile's ``ps_refusal``;
  they stay on the workers and the activations they exchange cross the network, priced); each
  nested model alone (``"base on the PS"``); each of those with every embedding layer (and the
  reshapes right after it) on PS tasks too. Any kind may compute on a PS (conv, normalization
  with its statistics, dropout, custom layers); the cost model decides. The menu is exact over
  models with at most :data:`ralp_tf.plan.menu.EXACT_LIMIT` closed sets, else searched within
  a budget of priced cuts.

PS-side layers with weights go to PS tasks by longest-processing-time on parameter bytes (the
largest layer to the least loaded task: several PS compute tasks for the head, the activation
hops between them priced by the cost model); weightless layers follow their producer's task.
With more than one PS task, "no split" and the :data:`VARIED_CUTS` fastest cuts of the menu (and
the :data:`VARIED_CUTS` fastest whose head can be split, where those are others) also
come in three more variants: the whole head
on PS task 0 (one PS compute task, no hops), and both of those with balanced storage
(:mod:`ralp_tf.plan.storage`) of the worker-computed layers instead of PSS's round-robin; "no split"
gets a balanced-storage variant too.

Then, where the profile records variable shapes, **partitioned storage** (:func:`partition_storage
<ralp_tf.plan.storage.partition_storage>`): for "no split" every piece cap of :func:`_caps` (from
BytePS's 4 MB down by 4x, stopping when a cap prices slower than the one before) over every PS
task, and with CPU-only PS hosts also over the colocated ones alone; for each cut and head
variant, the cap and tasks "no split" priced fastest. And for each cut whose PS-side layers with
weights can all be split, the **head split** over K PS tasks (:mod:`ralp_tf.plan.spread`, each
pattern, K = 2, 4, 8, ... up to every PS task while a larger K prices faster), with that storage,
its cap searched again around the "no split" one. A cut is not varied this way when its PS-side
compute, spread perfectly over every PS host's CPU, already takes longer than the best step
found (a lower bound, so no faster plan is skipped). Each kind keeps its fastest per cut and
head variant.

The analyzer keeps "no split" unless a candidate is predicted at least ``min_speedup`` times
faster; otherwise, of the candidates predicted within ``min_speedup`` of the fastest, it returns
the one that computes the fewest FLOPs on PS tasks (then the fastest, then the first listed): no
more PS compute for a predicted gain below the threshold. Every candidate's meaning is in its fields (:class:`Candidate`); its label says the same
in words.

The ring all-reduce (Horovod, MultiWorkerMirroredStrategy) on the worker hosts is priced next to
it; when the ring is predicted faster than the chosen PSS plan, :meth:`Analysis.report` and
:meth:`Analysis.to_dict` (``"ring_predicted_faster": true``) say so.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from ralp_tf.errors import PlanError
from ralp_tf.model.profiles import ModelProfile, follows_inputs
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.compression import AUTO, parse_setting
from ralp_tf.plan.costmodel import StepEstimate, estimate, estimate_allreduce
from ralp_tf.plan.menu import Cut, cut_label, cuts, search
from ralp_tf.plan.homes import variable_shards
from ralp_tf.plan.traffic import WORKER, resolve_placements
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.spread import PATTERN_NAMES, PATTERNS, shard_counts, split_head, splittable, task_order
from ralp_tf.plan.storage import BYTEPS_PIECE_BYTES, partition_storage, with_balanced_storage, with_partitioned_storage

__all__ = ["BALANCED", "HEAD_ON_ONE", "STORAGE_KINDS", "MIN_PIECE_BYTES", "VARIED_CUTS", "Candidate", "Analysis", "Cut",
           "assign_ps_tasks", "plan_for", "cuts", "candidate_splits", "analyze"]

BALANCED = ", balanced storage"
#: the label of a head on one PS task when that task is ps:0
HEAD_ON_ONE = ", head on ps:0"
#: Storage of a candidate's worker-computed layers.
STORAGE_KINDS = ("round-robin", "balanced", "partitioned")
#: The smallest piece cap the analyzer tries for partitioned storage (BytePS's 4 MB / 4^5).
MIN_PIECE_BYTES = 4_000_000 / 4 ** 5
#: How many of the menu's fastest cuts get the storage, head and split variants.
VARIED_CUTS = 6


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One plan the analyzer priced, and what it is: ``cut`` (``"no split"``, ``"cut before L"``),
    ``embeddings_on_ps`` (every embedding layer, and the reshapes after it, on PS tasks too),
    ``head_on_one`` (the PS-side layers all on PS task 0), ``split_tasks`` (PS-side layers split
    over that many PS tasks, 0: none), ``storage`` (one of :data:`STORAGE_KINDS`),
    ``piece_bytes`` (partitioned storage: the largest piece a variable is cut into) and
    ``compression`` (the setting on the wire, "" for none). ``label`` says the same in words."""

    cut: str
    ps_layers: tuple[str, ...]
    plan: Plan
    estimate: StepEstimate
    embeddings_on_ps: bool = False
    head_on_one: bool = False
    storage: str = "round-robin"
    compression: str = ""
    split_tasks: int = 0
    split_pattern: str = ""
    piece_bytes: float = 0.0
    #: units of the cut that stay on the workers, each unable to compute on a PS (its profile says why)
    kept: tuple[str, ...] = ()
    #: with ``head_on_one``, the PS task that computes the head
    head_task: int = 0

    @property
    def label(self) -> str:
        """``"cut before fc1 + embeddings on PS, head on ps:0, balanced storage, ... on the wire"``."""
        text = cut_label(self.cut, self.embeddings_on_ps)
        if self.head_on_one:
            text += f", head on ps:{self.head_task}"
        if self.split_tasks:
            text += f", head split over {self.split_tasks} PS tasks ({self.split_pattern})"
        if self.storage == "balanced":
            text += BALANCED
        elif self.storage == "partitioned":
            text += f", partitioned storage (pieces <= {_size(self.piece_bytes)})"
        if self.compression:
            text += f", {self.compression} on the wire"
        return text


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2g} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:.3g} KB"


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
    def refusals(self) -> dict[str, str]:
        """Units of the best split's cut that stay on the workers, each with why it cannot compute on a PS."""
        best = self.best_split
        return {n: self.profile.layer(n).ps_refusal for n in (best.kept if best is not None else ())}

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
        if best is not None and best.kept:
            lines.append("  Staying on the workers inside that cut (they cannot compute on a PS): "
                         + "; ".join(f"{n}: {self.profile.layer(n).ps_refusal}" for n in best.kept) + ".")
        if self.is_split:
            lines.append(f"  Decision: split ({self.chosen.label}). Predicted speed-up {self.predicted_speedup:.2f}x "
                         f">= the {self.min_speedup:.2f}x threshold.")
            if best is not None and self.chosen is not best and best.estimate.step_s < self.chosen.estimate.step_s:
                lines.append(f"  It computes {ps_flops(self.profile, best) / 1e6 - ps_flops(self.profile, self.chosen) / 1e6:.1f} "
                             f"MFLOP per sample less on the PS than the best split, predicted within "
                             f"{self.min_speedup:.2f}x of it: no more PS compute for a smaller gain.")
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
                            "max_link_bytes": c.estimate.max_link_bytes, "storage": bool(c.plan.storage),
                            "kept_on_workers": list(c.kept)}
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
             ps_tasks: int | None = None, first_task: int = 0) -> Plan:
    """A Plan putting ``ps_layers`` on PS tasks (spread over ``ps_tasks`` of them, default all,
    counting from task ``first_task``) and every other layer on the workers."""
    if ps_layers and cluster.num_ps == 0:
        raise PlanError("a RALP split needs PS tasks, but the cluster has none; add a 'ps' job")
    spread = cluster.num_ps if ps_tasks is None else min(ps_tasks, cluster.num_ps)
    tasks = {n: (k + first_task) % cluster.num_ps for n, k in assign_ps_tasks(profile, ps_layers, spread).items()
             } if ps_layers else {}
    placements = {}
    for l in profile.layers:
        if l.kind == "input":
            continue
        placements[l.name] = cluster.ps_device(tasks[l.name]) if l.name in tasks else cluster.worker_device
    where = resolve_placements(profile, placements)  # op: records go with their inputs
    for l in profile.layers:
        if follows_inputs(l):
            placements[l.name] = cluster.ps_device(where[l.name].index) if where[l.name].is_ps else cluster.worker_device
    return Plan(placements=placements, policy=policy)


def candidate_splits(profile: ModelProfile) -> list[tuple[str, list[str]]]:
    """(label, PS layers) for every cut of the menu before pricing (:func:`ralp_tf.plan.menu.cuts`)."""
    return [(c.label, list(c.ps_layers)) for c in cuts(profile)]


def _priced(cluster: Cluster, profile: ModelProfile, plan: Plan, cut: Cut, step: StepEstimate | None = None,
            **fields: Any) -> Candidate:
    return Candidate(cut.cut, cut.ps_layers, plan, step or estimate(profile, cluster, plan), cut.embeddings_on_ps,
                     kept=cut.kept, **fields)


def _menu(profile: ModelProfile, cluster: Cluster) -> list[Candidate]:
    """Every cut of the menu and the search (:func:`ralp_tf.plan.menu.search`), spread by LPT,
    priced once each, in the order found."""
    steps: dict[tuple[str, ...], tuple[Plan, StepEstimate]] = {}

    def price(names: tuple[str, ...]) -> float:
        plan = plan_for(profile, cluster, list(names))
        steps[names] = (plan, estimate(profile, cluster, plan))
        return steps[names][1].step_s

    return [_priced(cluster, profile, steps[c.ps_layers][0], c, steps[c.ps_layers][1])
            for c in search(profile, price)]


def _top_cuts(menu: Sequence[Candidate], profile: ModelProfile) -> list[Cut]:
    """The cuts of the :data:`VARIED_CUTS` fastest menu candidates with distinct PS-side layers,
    fastest first (the first listed on a tie), then those of the :data:`VARIED_CUTS` fastest whose
    weighted PS-side layers can all be split (:func:`~ralp_tf.plan.spread.splittable`) not among
    them: a dense head priced whole on PS tasks round-robin can rank below cuts through convs and
    still be the fastest once split and its conv weights partitioned (vgg16_cifar, 64 GPU hosts at
    10 Gbit/s: 2,152 samples/s whole, 19,953 split)."""
    order = sorted(range(len(menu)), key=lambda i: (menu[i].estimate.step_s, i))
    out: list[Cut] = []
    for want_splittable in (False, True):
        added = 0
        for i in order:
            if added == VARIED_CUTS:
                break
            if want_splittable and not (menu[i].ps_layers and splittable(profile, list(menu[i].ps_layers))):
                continue
            if all(c.ps_layers != menu[i].ps_layers for c in out):
                out.append(Cut(menu[i].cut, menu[i].embeddings_on_ps, menu[i].ps_layers, menu[i].kept))
                added += 1
            elif want_splittable:
                added += 1  # already among the fastest: it counts
    return out


def head_task(profile: ModelProfile, cluster: Cluster, ps_layers: Sequence[str]) -> int:
    """The PS task a head computed on one task goes to: the one that ParameterServerStrategy's
    round-robin leaves the fewest bytes of the worker-computed layers' variables (the lowest on a tie)."""
    where = resolve_placements(profile, plan_for(profile, cluster, list(ps_layers), ps_tasks=1))
    stored = [0.0] * cluster.num_ps
    for name, shards in variable_shards(profile, where, cluster.num_ps).items():
        if where[name] == WORKER:
            for v, parts in zip(profile.layer(name).var_bytes, shards):
                for task, share in parts:
                    stored[int(task.index)] += v * share  # type: ignore[arg-type]
    return min(range(cluster.num_ps), key=lambda k: (stored[k], k))


def _basic(profile: ModelProfile, cluster: Cluster, partition: bool) -> tuple[list[Candidate], list[Cut]]:
    """Stock PSS, every cut of the menu spread by LPT, and with more than one PS task, for "no
    split" and the :data:`VARIED_CUTS` fastest cuts, the head on PS 0 and balanced storage (module
    docstring), in that order; and those fastest cuts."""
    none = Cut("no split", False, ())
    out = [_priced(cluster, profile, plan_for(profile, cluster, []), none)]
    menu = _menu(profile, cluster) if cluster.num_ps else []
    out += menu
    top = _top_cuts(menu, profile)
    if cluster.num_ps > 1:
        for c in [none, *top]:
            names = list(c.ps_layers)
            variants = [(False, plan_for(profile, cluster, names))]
            if names:
                k = head_task(profile, cluster, names)
                variants.append((True, plan_for(profile, cluster, names, ps_tasks=1, first_task=k)))
                out.append(_priced(cluster, profile, variants[1][1], c, head_on_one=True, head_task=k))
            for one, vplan in variants:
                plan = with_balanced_storage(vplan, profile, cluster, partition=partition)
                out.append(_priced(cluster, profile, plan, c, head_on_one=one, storage="balanced",
                                   head_task=head_task(profile, cluster, names) if one else 0))
    return out, top


def _lower_bound_s(profile: ModelProfile, cluster: Cluster, ps_layers: Sequence[str]) -> float:
    """A synchronous step can take no less than the PS-side compute of every worker's step
    spread perfectly over every PS host's CPU budget (3 f_l b N / sum_h F_h)."""
    flops = 3.0 * sum(profile.layer(n).flops for n in ps_layers) * profile.batch_size * cluster.num_workers
    budget = sum(h.cpu_flops for h in cluster.hosts if any(k.startswith("ps:") for k in h.tasks))
    return flops / budget if budget else 0.0


def _storage_sets(cluster: Cluster) -> list[list[int]]:
    """The PS task sets partitioned storage may use: all; with CPU-only PS hosts also the others."""
    alone = {k for h in cluster.ps_only_hosts for k in h.tasks}
    colocated = [k for k in range(cluster.num_ps) if f"ps:{k}" not in alone]
    return [list(range(cluster.num_ps))] + ([colocated] if alone and colocated else [])


def _caps() -> list[float]:
    """The piece caps partitioned storage tries: BytePS's 4 MB, then down by 4x to MIN_PIECE_BYTES."""
    caps, cap = [], float(BYTEPS_PIECE_BYTES)
    while cap >= MIN_PIECE_BYTES:
        caps.append(cap)
        cap /= 4
    return caps


def _best_partition(profile: ModelProfile, cluster: Cluster, plan: Plan, cut: Cut, caps: Sequence[float],
                    task_sets: Sequence[Sequence[int]], **fields: Any) -> Candidate | None:
    """``plan`` with partitioned storage over each of ``task_sets``, trying ``caps`` from the largest
    until one prices slower than the one before; the fastest (None when nothing is
    worker-computed)."""
    best = None
    for tasks in task_sets:
        previous = math.inf
        for cap in sorted(caps, reverse=True):
            stored = with_partitioned_storage(plan, profile, cluster, piece_bytes=cap, tasks=tasks)
            if not stored.storage:
                return None
            c = _priced(cluster, profile, stored, cut, storage="partitioned", piece_bytes=cap, **fields)
            if best is None or c.estimate.step_s < best.estimate.step_s:
                best = c
            if c.estimate.step_s > previous:
                break
            previous = c.estimate.step_s
    return best


def _best_split(profile: ModelProfile, cluster: Cluster, cut: Cut, storage: Any,
                refine: tuple[Sequence[float], Sequence[Sequence[int]]] | None) -> Candidate | None:
    """The head of ``cut`` split over K PS tasks (K of :func:`~ralp_tf.plan.spread.shard_counts`,
    growing until a K prices slower than the one before, and each pattern), priced with ``storage`` for the worker-computed layers (balanced when
    None); the fastest, with its partitioned storage searched again over ``refine`` (caps, task
    sets) when given."""
    names = list(cut.ps_layers)
    best: tuple[float, Plan, int, str] | None = None
    previous = math.inf
    for k in shard_counts(cluster.num_ps):
        fastest = math.inf
        for pattern in PATTERNS:
            plan = split_head(plan_for(profile, cluster, names, ps_tasks=1), profile, cluster, names,
                              task_order(cluster)[:k], pattern)
            plan = (dataclasses.replace(plan, storage=storage) if storage is not None else
                    with_balanced_storage(plan, profile, cluster, partition=False))
            step_s = estimate(profile, cluster, plan).step_s
            fastest = min(fastest, step_s)
            if best is None or step_s < best[0]:
                best = (step_s, plan, k, pattern)
        if fastest > previous:  # more shards stopped paying
            break
        previous = fastest
    if best is None:
        return None
    _, plan, k, pattern = best
    fields = {"split_tasks": k, "split_pattern": PATTERN_NAMES[pattern]}
    if refine is not None:
        refined = _best_partition(profile, cluster, dataclasses.replace(plan, storage={}), cut, *refine, **fields)
        if refined is not None:
            return refined
    return _priced(cluster, profile, plan, cut, storage="balanced", **fields)


def _spread(profile: ModelProfile, cluster: Cluster, found: Sequence[Candidate], top: Sequence[Cut],
            split: bool) -> list[Candidate]:
    """Partitioned storage (module docstring): for "no split", every cap and task set; for every
    cut worth it (its lower bound below the best step so far), the cap and task set "no split"
    priced fastest. Then, for cuts whose weighted PS-side layers can all be split, the head split
    over K PS tasks (:func:`_best_split`), its storage searched again around that cap."""
    best_s = min(c.estimate.step_s for c in found)
    out: list[Candidate] = []
    shapes = any(l.var_shapes for l in profile.layers if l.var_bytes)
    caps, sets = _caps(), _storage_sets(cluster)
    nosplit = Cut("no split", False, ())
    first = _best_partition(profile, cluster, plan_for(profile, cluster, []), nosplit, caps, sets) if shapes else None
    if first is not None:
        out.append(first)
        best_s = min(best_s, first.estimate.step_s)
        tasks = sorted(set().union(*[set(t) for t in first.plan.stored_on().values()]))
        cap, sets = first.piece_bytes, [tasks]
        caps = [c for c in caps if cap / 4 <= c <= cap * 4]
    for c in top:
        if _lower_bound_s(profile, cluster, c.ps_layers) >= best_s:
            continue
        names = list(c.ps_layers)
        if first is not None:
            for one in (False, True):
                base = plan_for(profile, cluster, names, ps_tasks=1 if one else None)
                cand = _best_partition(profile, cluster, base, c, [first.piece_bytes], sets, head_on_one=one)
                if cand is not None:
                    out.append(cand)
                    best_s = min(best_s, cand.estimate.step_s)
        if not (split and splittable(profile, names)):
            continue
        storage = (partition_storage(profile, sets[0], plan_for(profile, cluster, names), piece_bytes=first.piece_bytes)
                   or None) if first is not None else None
        cand = _best_split(profile, cluster, c, storage, (caps, sets) if first is not None else None)
        if cand is not None:
            out.append(cand)
            best_s = min(best_s, cand.estimate.step_s)
    return out


def ps_flops(profile: ModelProfile, candidate: Candidate) -> float:
    """Forward FLOPs per sample the candidate computes on PS tasks."""
    return sum(profile.layer(n).flops for n in candidate.ps_layers)


def _choose(profile: ModelProfile, candidates: Sequence[Candidate], min_speedup: float) -> Candidate:
    """Of the candidates predicted within ``min_speedup`` of the fastest, the one that computes the
    fewest FLOPs on PS tasks (then the fastest, then the first listed): no more PS compute for a
    predicted gain below ``min_speedup``. "No split" (the first candidate) computes none, so it is
    kept unless a plan is predicted at least ``min_speedup`` times faster."""
    fastest = min(c.estimate.step_s for c in candidates)
    near = [i for i, c in enumerate(candidates) if c.estimate.step_s <= fastest * min_speedup]
    if candidates[0].estimate.step_s < fastest * min_speedup:
        return candidates[0]
    return candidates[min(near, key=lambda i: (ps_flops(profile, candidates[i]), candidates[i].estimate.step_s, i))]


def analyze(profile: ModelProfile, cluster: Cluster, *, min_speedup: float = 1.05,
            partition: bool | None = None, compression: Any = None, split: bool = True) -> Analysis:
    """Price every candidate and choose one (see the module docstring).

    ``compression``: None (no compression), a setting applied to every candidate (``"fp16"``,
    ``{"activations": "bf16"}``, see :mod:`ralp_tf.plan.compression`), or ``"auto"``: every candidate
    is priced with and without fp16 activations and weights, and the faster kept (int8 and
    top-k are never chosen here).

    ``partition``: None (default) adds the partitioned-storage candidates where the profile has
    variable shapes; False leaves them out; True also lets balanced storage split whole layers
    over several PS tasks (the layer-wide form). ``split``: whether to price the head split
    within its layers over K PS tasks.
    """
    if cluster.num_workers == 0:
        raise PlanError("the cluster has no workers")
    candidates, top = _basic(profile, cluster, partition is True)
    if cluster.num_ps > 1 and partition is not False:
        candidates += _spread(profile, cluster, candidates, top, split)
    baseline = candidates[0]
    if compression is not None:
        auto = compression == "auto"
        setting = AUTO if auto else parse_setting(compression, "analyze(compression=...)")
        compressed = []
        for c in candidates:
            plan = dataclasses.replace(c.plan, compression={"*": setting})
            compressed.append(dataclasses.replace(c, plan=plan, estimate=estimate(profile, cluster, plan),
                                                  compression=setting.describe()))
        candidates = candidates + compressed if auto else compressed
        baseline = candidates[0]
    split_candidates = [c for c in candidates if c.ps_layers]
    best = min(split_candidates, key=lambda c: c.estimate.step_s) if split_candidates else None
    chosen = _choose(profile, candidates, min_speedup)
    notes = {"predicted_step_s": chosen.estimate.step_s, "predicted_bytes_per_step": chosen.estimate.bytes_per_step,
             "predicted_speedup": baseline.estimate.step_s / chosen.estimate.step_s, "cut": chosen.label}
    plan = dataclasses.replace(chosen.plan, notes=notes)
    return Analysis(profile=profile, cluster=cluster, plan=plan, chosen=chosen, baseline=baseline, best_split=best,
                    allreduce=estimate_allreduce(profile, cluster), candidates=tuple(candidates),
                    min_speedup=min_speedup)
