"""The analyzer's menu: which sets of a model's units the PS tasks may compute, and the search
over them. Pure: a profile in, cuts out; pricing is the caller's (a function of the PS-side
units, :func:`search`).

**Units.** The compute units of a profile (every layer but the model inputs), with their producers
and consumers among them. A unit *may compute on a PS* when its profile's ``ps_refusal`` is empty
(normalization, dropout, conv, custom layers and layers with constraints or regularisers all
may); a refused unit (a stateful RNN, an op with no CPU kernel) stays on the workers, and its
refusal is part of every cut that would have held it. A plain TF op of the model's own ``call``
(an ``op:`` record) is no decision: it computes with its inputs
(:func:`~ralp_tf.model.profiles.follows_inputs`).

**Cuts.** A cut is a *closed* set ``C`` of units: with every unit, everything computed from it
(a down-set of the data flow, so nothing crosses back from the workers to the PS side but what a
refused unit sends). It is named by its sources, the units of ``C`` none of whose producers are in
``C`` (``"cut before fc1"``, ``"cut before heads/a, heads/b"``), ``"everything on the PS"`` when
``C`` holds every unit. The PS tasks compute ``C`` less its refused units (``Cut.kept``). A cut
must put a unit with weights on the PS. Two more families: every cut with the embedding layers
(and the reshapes that only read them) on the PS too, and each nested model alone
(``"<prefix> on the PS"``, "the base on the PS").

**The menu** (:func:`cuts`): every closed set, when the model has at most ``limit`` of them (the
search is then exact over them); otherwise the suffixes of the topological order and the closure
of each single unit. **The search** (:func:`search`) prices the menu, then, when it was not
exact, climbs from its best cuts: each step adds a unit all of whose consumers are in ``C`` or
removes a source of ``C``, whichever prices fastest, until no neighbour is faster or the budget
of priced cuts is spent. Work is counted in cuts priced, so the same profile gives the same menu
on any machine.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence

from ralp_tf.model.profiles import ModelProfile, follows_inputs

__all__ = ["EXACT_LIMIT", "SEARCH_BUDGET", "CLIMB_SEEDS", "Cut", "cut_label", "UnitGraph", "cuts", "search"]

#: The most closed sets the menu enumerates whole (then the search is exact over them).
EXACT_LIMIT = 400
#: Cuts the search prices at most, the menu's included.
SEARCH_BUDGET = 600
#: How many of the menu's fastest cuts the climb starts from.
CLIMB_SEEDS = 3
#: Sources a label names before "and N more".
_LABEL_SOURCES = 3


@dataclasses.dataclass(frozen=True)
class Cut:
    """One candidate set of PS-side units: ``cut`` (its name: ``"no split"``, ``"cut before L"``,
    ``"everything on the PS"``, ``"<prefix> on the PS"``), whether the embeddings go to PS tasks
    too, the PS-side units (topological order) and ``kept``, the units of the cut that stay on the
    workers because they cannot compute on a PS (their profiles' ``ps_refusal`` says why)."""

    cut: str
    embeddings_on_ps: bool
    ps_layers: tuple[str, ...]
    kept: tuple[str, ...] = ()
    #: the closed set of unit indices the cut was made from (empty: not a closed set, e.g. a nested model)
    closed: frozenset[int] = dataclasses.field(default=frozenset(), compare=False, repr=False)

    @property
    def label(self) -> str:
        return cut_label(self.cut, self.embeddings_on_ps)


def cut_label(cut: str, embeddings_on_ps: bool) -> str:
    """A cut's name with its embedding variant: ``"cut before fc1 + embeddings on PS"``."""
    if not embeddings_on_ps:
        return cut
    return "embeddings on PS" if cut == "no split" else f"{cut} + embeddings on PS"


class UnitGraph:
    """The compute units of ``profile`` (topological order), their producers and consumers among
    them, and which may compute on a PS (module docstring)."""

    def __init__(self, profile: ModelProfile) -> None:
        self.profile = profile
        units = profile.compute_layers
        self.names: list[str] = [l.name for l in units]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.preds: list[list[int]] = [sorted({self.index[u] for u in l.inbound if u in self.index}) for l in units]
        self.succs: list[list[int]] = [[] for _ in units]
        for i, ps in enumerate(self.preds):
            for p in ps:
                self.succs[p].append(i)
        self.ps_ok = [not l.ps_refusal for l in units]
        self.follows = [follows_inputs(l) for l in units]
        self.weighted = [l.param_bytes > 0 for l in units]

    def closure(self, sources: Iterable[int]) -> frozenset[int]:
        """``sources`` and every unit computed from them."""
        out: set[int] = set()
        stack = list(sources)
        while stack:
            i = stack.pop()
            if i not in out:
                out.add(i)
                stack.extend(self.succs[i])
        return frozenset(out)

    def sources(self, closed: frozenset[int]) -> list[int]:
        """The units of ``closed`` none of whose producers are in it, in topological order."""
        return sorted(i for i in closed if not any(p in closed for p in self.preds[i]))

    def addable(self, closed: frozenset[int]) -> list[int]:
        """Units outside ``closed`` whose consumers are all in it (adding one keeps it closed)."""
        return [i for i in range(len(self.names)) if i not in closed and all(s in closed for s in self.succs[i])]

    def down_sets(self, limit: int) -> list[frozenset[int]] | None:
        """Every non-empty closed set, or None when there are more than ``limit``."""
        seen: set[frozenset[int]] = set()
        frontier: list[frozenset[int]] = [frozenset()]
        while frontier:
            grown: list[frozenset[int]] = []
            for closed in frontier:
                for i in self.addable(closed):
                    bigger = closed | {i}
                    if bigger not in seen:
                        seen.add(bigger)
                        grown.append(bigger)
                        if len(seen) > limit:
                            return None
            frontier = grown
        return list(seen)

    def suffixes(self) -> list[frozenset[int]]:
        """The suffixes of the topological order (each is closed), longest first."""
        n = len(self.names)
        return [frozenset(range(i, n)) for i in range(n)]

    def ps_side(self, closed: frozenset[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the units of ``closed`` that may compute on a PS, those that stay on the workers), each
        in topological order."""
        order = sorted(closed)
        return (tuple(self.names[i] for i in order if self.ps_ok[i]),
                tuple(self.names[i] for i in order if not self.ps_ok[i] and not self.follows[i]))

    def name_of(self, closed: frozenset[int]) -> str:
        if len(closed) == len(self.names):
            return "everything on the PS"
        srcs = [self.names[i] for i in self.sources(closed)]
        more = len(srcs) - _LABEL_SOURCES
        return "cut before " + ", ".join(srcs[:_LABEL_SOURCES]) + (f" and {more} more" if more > 0 else "")


def _embedding_group(profile: ModelProfile) -> list[str]:
    """Embedding layers plus the weightless reshapes that only consume them."""
    group = [l.name for l in profile.layers if l.kind == "embedding" and not l.ps_refusal]
    for l in profile.layers:
        if l.kind == "reshape" and l.inbound and all(u in group for u in l.inbound) and not l.ps_refusal:
            group.append(l.name)
    return group


def _cut(graph: UnitGraph, closed: frozenset[int], name: str | None = None) -> Cut | None:
    """The cut of ``closed`` (None when it would compute no unit with weights on a PS); ``name``
    given: a set that is not closed (a nested model), named so."""
    on_ps, kept = graph.ps_side(closed)
    if not any(graph.weighted[graph.index[n]] for n in on_ps):
        return None
    return Cut(name or graph.name_of(closed), False, on_ps, kept, frozenset() if name else closed)


def _with_embeddings(profile: ModelProfile, cut: Cut, group: Sequence[str]) -> Cut:
    names = set(cut.ps_layers) | set(group)
    return dataclasses.replace(cut, embeddings_on_ps=True,
                               ps_layers=tuple(l.name for l in profile.layers if l.name in names))


def _containers(graph: UnitGraph) -> list[tuple[str, frozenset[int]]]:
    """Each nested model's prefix (``base``, ``base/inner``) and its units, in order of first unit."""
    found: dict[str, set[int]] = {}
    for i, name in enumerate(graph.names):
        parts = name.split("/")[:-1]
        for k in range(1, len(parts) + 1):
            found.setdefault("/".join(parts[:k]), set()).add(i)
    return [(prefix, frozenset(units)) for prefix, units in found.items()]


def _structural(graph: UnitGraph, limit: int) -> tuple[list[Cut], bool]:
    """The menu's cuts before any pricing, and whether they are every closed set."""
    every = graph.down_sets(limit)
    exact = every is not None
    sets = every if every is not None else graph.suffixes() + [graph.closure([i]) for i in range(len(graph.names))]
    out: list[Cut] = []
    seen: set[tuple[str, ...]] = set()
    for closed in sorted(set(sets), key=lambda c: (-len(c), graph.sources(c))):
        cut = _cut(graph, closed)
        if cut is not None and cut.ps_layers not in seen:
            seen.add(cut.ps_layers)
            out.append(cut)
    for prefix, units in _containers(graph):
        cut = _cut(graph, units, f"{prefix} on the PS")
        if cut is not None and cut.ps_layers not in seen:
            seen.add(cut.ps_layers)
            out.append(cut)
    return out, exact


def cuts(profile: ModelProfile, limit: int = EXACT_LIMIT) -> list[Cut]:
    """The menu before pricing (module docstring), "no split" left out, each cut followed by its
    variant with the embeddings on PS tasks (and "embeddings on PS" alone first) where the
    model has embedding layers."""
    graph = UnitGraph(profile)
    base, _ = _structural(graph, limit)
    group = _embedding_group(profile)
    if not group:
        return base
    out = [Cut("no split", True, tuple(group))]
    for c in base:
        out.append(c)
        if not set(group) <= set(c.ps_layers):
            out.append(_with_embeddings(profile, c, group))
    return out


def search(profile: ModelProfile, price: Callable[[tuple[str, ...]], float], *, limit: int = EXACT_LIMIT,
           budget: int = SEARCH_BUDGET) -> list[Cut]:
    """The menu (:func:`cuts`) and, where it was not every closed set, the cuts the climb
    reached (module docstring), each once, in the order found. ``price(ps_layers)`` is the
    predicted step of computing those units on PS tasks (lower is better); it is called at most
    ``budget`` times (the menu is priced first, in order, until the budget is spent)."""
    graph = UnitGraph(profile)
    menu = cuts(profile, limit)
    memo: dict[tuple[str, ...], float] = {}

    def cost(ps_layers: tuple[str, ...]) -> float | None:
        if ps_layers not in memo:
            if len(memo) >= budget:
                return None
            memo[ps_layers] = price(ps_layers)
        return memo[ps_layers]

    priced = [c for c in menu if cost(c.ps_layers) is not None]
    if graph.down_sets(limit) is not None or not priced:
        return priced
    group = _embedding_group(profile)
    found = {c.ps_layers: c for c in priced}
    seeds = sorted((c for c in priced if c.closed), key=lambda c: memo[c.ps_layers])[:CLIMB_SEEDS]
    for seed in seeds:
        for cut in _climb(graph, profile, seed, group, cost):
            found.setdefault(cut.ps_layers, cut)
    return list(found.values())


def _climb(graph: UnitGraph, profile: ModelProfile, seed: Cut, group: Sequence[str],
           cost: Callable[[tuple[str, ...]], float | None]) -> list[Cut]:
    """Best-improvement moves from ``seed``'s closed set (module docstring); the cuts it moved to."""
    closed = seed.closed
    here = cost(seed.ps_layers)
    path: list[Cut] = []
    while here is not None:
        best: tuple[float, Cut, frozenset[int]] | None = None
        moves = [closed | {i} for i in graph.addable(closed)] + [closed - {i} for i in graph.sources(closed)]
        for nxt in moves:
            cut = _cut(graph, nxt) if nxt else None
            if cut is None:
                continue
            if seed.embeddings_on_ps:
                cut = _with_embeddings(profile, cut, group)
            c = cost(cut.ps_layers)
            if c is None:
                return path
            if c < here and (best is None or c < best[0]):
                best = (c, cut, nxt)
        if best is None:
            return path
        here, cut, closed = best
        path.append(cut)
    return path
