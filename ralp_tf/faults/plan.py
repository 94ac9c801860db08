"""Fault plans: which fault hits which host or task, when, and for how long (pure data).

A :class:`FaultPlan` is a list of :class:`FaultEvent`; the supervisor
(:mod:`ralp_tf.faults.supervisor`) plays it against a running cluster. Kinds:

==============  ==========================================================================
``link_down``   take the host's link down (``ip link set down``) for ``for_s`` seconds
``throttle``    cap the host's link at ``rate`` bits/s (``tc qdisc change``) for ``for_s`` s
``kill``        SIGKILL the task (a worker or a PS); with a restart budget it comes back
``add_worker``  add one worker task to the running job (no target)
==============  ==========================================================================

Each event fires either at a training step (``at_step``: once that many steps have completed)
or at a time (``at_s``: seconds after the first step completed). Targets are task names
(``worker1``, ``ps0``); a link fault hits the link of the target's host.

Text form, one event per ``--fault`` (``KIND:TARGET,key=value,...``)::

    link_down:worker1,at=20s,for=10s      # at 20 s after training started, for 10 s
    throttle:worker0,at=15,for=20s,rate=100mbit   # once 15 steps are done
    throttle:worker0,at=30s,for=20s,rate=1/10     # a tenth of the testbed's rate
    kill:ps0,at=17
    add_worker,at=20

``at=N`` is a step, ``at=Ns`` a time. JSON form: a list of objects with the dataclass fields
(``{"kind": "link_down", "target": "worker1", "at_s": 20, "for_s": 10}``).
"""
from __future__ import annotations

import dataclasses
import math
import random
import re
from typing import Any, Iterable

from ralp_tf.errors import ValidationError

__all__ = ["KINDS", "LINK_KINDS", "FaultPlanError", "LinkFaultUnavailable", "FaultEvent", "FaultPlan",
           "parse_event", "chaos_plan"]

KINDS = ("link_down", "throttle", "kill", "add_worker")
LINK_KINDS = ("link_down", "throttle")
_TASK = re.compile(r"^(worker|ps)(\d+)$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")


class FaultPlanError(ValidationError):
    """A fault plan is malformed or names a host/task the cluster does not have."""


class LinkFaultUnavailable(FaultPlanError):
    """A link fault was asked for where links are not emulated (no namespace testbed)."""


@dataclasses.dataclass(frozen=True)
class FaultEvent:
    """One fault. Exactly one of ``at_step`` / ``at_s`` is set; ``for_s`` for link faults;
    ``rate`` (bits/s) or ``rate_fraction`` (of the testbed's link rate) for ``throttle``."""

    kind: str
    target: str | None = None
    at_step: int | None = None
    at_s: float | None = None
    for_s: float | None = None
    rate: float | None = None
    rate_fraction: float | None = None

    def describe(self) -> str:
        when = f"step {self.at_step}" if self.at_step is not None else f"t+{self.at_s:g}s"
        if self.kind == "link_down":
            what = f"link of {self.target} down for {self.for_s:g}s"
        elif self.kind == "throttle":
            rate = f"1/{1 / self.rate_fraction:g} of its rate" if self.rate_fraction else _rate_text(self.rate or 0.0)
            what = f"link of {self.target} throttled to {rate} for {self.for_s:g}s"
        else:
            what = f"kill {self.target}" if self.kind == "kill" else "add a worker"
        return f"{what} at {when}"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _rate_text(bps: float) -> str:
    from ralp_tf.plan.cluster import format_bandwidth

    return format_bandwidth(bps)


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """An ordered list of faults (see the module docstring)."""

    events: tuple[FaultEvent, ...] = ()

    @property
    def has_link_faults(self) -> bool:
        return any(e.kind in LINK_KINDS for e in self.events)

    @property
    def joins(self) -> int:
        """How many workers the plan adds (``add_worker`` events)."""
        return sum(e.kind == "add_worker" for e in self.events)

    def to_list(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.events]

    @classmethod
    def from_list(cls, items: Any) -> "FaultPlan":
        if not isinstance(items, list):
            raise FaultPlanError(f"a fault plan in JSON is a list of events, got {type(items).__name__}")
        return cls(tuple(_event_from_dict(d, i) for i, d in enumerate(items)))

    @classmethod
    def parse(cls, specs: Iterable[str]) -> "FaultPlan":
        """A plan from text events (the module docstring's form)."""
        return cls(tuple(parse_event(s) for s in specs))

    def validate(self, *, workers: int, ps: int, emulated: bool, restart: bool = False,
                 spare_workers: int = 0) -> "FaultPlan":
        """Check every target exists in a cluster of ``workers`` workers (plus ``spare_workers``
        added by ``add_worker`` events) and ``ps`` PS tasks, and that link faults have an emulated
        network (``emulated``). Returns self; raises :class:`FaultPlanError` /
        :class:`LinkFaultUnavailable` naming the event and the fix."""
        added = self.joins
        tasks = [f"worker{i}" for i in range(workers + max(added, spare_workers))] + [f"ps{i}" for i in range(ps)]
        for e in self.events:
            if e.kind in LINK_KINDS and not emulated:
                raise LinkFaultUnavailable(
                    f"fault {e.describe()!r} needs the namespace testbed (root, iproute2): the loopback fallback "
                    "cannot emulate a link going down or slowing, since every task shares one loopback "
                    "interface. Run as root, or drop the link faults")
            if e.kind == "add_worker":
                continue
            if e.target not in tasks:
                raise FaultPlanError(f"fault {e.describe()!r} names {e.target!r}, which this cluster does not have "
                                     f"(tasks: {', '.join(tasks)}); name one of them")
            if e.kind == "link_down" and e.target.startswith("ps"):
                raise FaultPlanError(f"fault {e.describe()!r}: a PS host losing its link is not supported (TF's "
                                     "coordinator treats it as a PS failure); take a worker's link down, throttle "
                                     "the PS link, or kill the PS with --restart-failed")
            if e.kind == "kill" and e.target.startswith("ps") and not restart:
                raise FaultPlanError(f"fault {e.describe()!r} kills a PS task without --restart-failed: training "
                                     "would stop; pass --restart-failed (or use --inject-fault to test that stop)")
        return self


def parse_event(text: str) -> FaultEvent:
    """One event from ``KIND:TARGET,key=value,...`` (``add_worker,at=20`` has no target)."""
    if not isinstance(text, str) or not text.strip():
        raise FaultPlanError(f"empty fault {text!r}; write e.g. link_down:worker1,at=20s,for=10s")
    head, *pairs = [p.strip() for p in text.strip().split(",")]
    kind, _, target = head.partition(":")
    kind = kind.strip().replace("-", "_")
    fields: dict[str, Any] = {"kind": kind, "target": target.strip() or None}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not value:
            raise FaultPlanError(f"fault {text!r}: {pair!r} is not key=value (keys: at, for, rate)")
        key = key.strip()
        if key == "at":
            m = _DURATION.match(value)
            if m:
                fields["at_s"] = float(m.group(1))
            elif value.isdigit():
                fields["at_step"] = int(value)
            else:
                raise FaultPlanError(f"fault {text!r}: at={value!r} is neither a step (at=20) nor a time (at=20s)")
        elif key == "for":
            m = _DURATION.match(value)
            if not m:
                raise FaultPlanError(f"fault {text!r}: for={value!r} is not a duration in seconds, e.g. for=10s")
            fields["for_s"] = float(m.group(1))
        elif key == "rate":
            fields.update(_parse_rate(value, text))
        else:
            raise FaultPlanError(f"fault {text!r}: unknown key {key!r} (keys: at, for, rate)")
    return _checked(fields, text)


def _parse_rate(value: str, where: str) -> dict[str, float]:
    if "/" in value:
        num, _, den = value.partition("/")
        try:
            frac = float(num) / float(den)
        except (ValueError, ZeroDivisionError):
            frac = math.nan
        if not 0 < frac < 1:
            raise FaultPlanError(f"fault {where!r}: rate={value!r} is not a fraction between 0 and 1, e.g. 1/10")
        return {"rate_fraction": frac}
    from ralp_tf.plan.cluster import parse_bandwidth
    from ralp_tf.errors import ClusterConfigError

    try:
        bps = parse_bandwidth(value)
    except ClusterConfigError as exc:
        raise FaultPlanError(f"fault {where!r}: {exc}") from None
    if math.isinf(bps):
        raise FaultPlanError(f"fault {where!r}: a throttle needs a finite rate, e.g. rate=100mbit or rate=1/10")
    return {"rate": bps}


def _event_from_dict(d: Any, i: int) -> FaultEvent:
    if not isinstance(d, dict):
        raise FaultPlanError(f"fault plan event {i} must be an object, got {d!r}")
    unknown = set(d) - {f.name for f in dataclasses.fields(FaultEvent)}
    if unknown:
        raise FaultPlanError(f"fault plan event {i} has unknown field(s) {sorted(unknown)}; fields: "
                             f"{[f.name for f in dataclasses.fields(FaultEvent)]}")
    return _checked(dict(d), f"event {i}")


def _number(v: Any, name: str, where: str, *, integer: bool = False, positive: bool = False) -> Any:
    ok = not isinstance(v, bool) and isinstance(v, int if integer else (int, float)) and math.isfinite(v) \
        and (v > 0 if positive else v >= 0)
    if not ok:
        kind = "a whole number" if integer else "a number"
        raise FaultPlanError(f"fault {where!r}: {name} must be {kind} {'> 0' if positive else '>= 0'}, got {v!r}")
    return v


def _checked(f: dict[str, Any], where: str) -> FaultEvent:
    kind = f.get("kind")
    if kind not in KINDS:
        raise FaultPlanError(f"fault {where!r}: unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    target = f.get("target")
    if kind == "add_worker":
        if target is not None:
            raise FaultPlanError(f"fault {where!r}: add_worker takes no target (write add_worker,at=20)")
    elif not isinstance(target, str) or not _TASK.match(target):
        raise FaultPlanError(f"fault {where!r}: {kind} needs a target task like worker1 or ps0, got {target!r}")
    if (f.get("at_step") is None) == (f.get("at_s") is None):
        raise FaultPlanError(f"fault {where!r}: give exactly one of a step (at=20) or a time (at=20s)")
    if f.get("at_step") is not None:
        _number(f["at_step"], "at (step)", where, integer=True)
    else:
        _number(f["at_s"], "at (seconds)", where)
    if kind in LINK_KINDS:
        if f.get("for_s") is None:
            raise FaultPlanError(f"fault {where!r}: {kind} needs a duration, e.g. for=10s")
        _number(f["for_s"], "for", where, positive=True)
    elif f.get("for_s") is not None:
        raise FaultPlanError(f"fault {where!r}: {kind} takes no duration (for=)")
    if kind == "throttle":
        if (f.get("rate") is None) == (f.get("rate_fraction") is None):
            raise FaultPlanError(f"fault {where!r}: throttle needs a rate, e.g. rate=100mbit or rate=1/10")
        if f.get("rate") is not None:
            _number(f["rate"], "rate", where, positive=True)
        elif not 0 < _number(f["rate_fraction"], "rate_fraction", where, positive=True) < 1:
            raise FaultPlanError(f"fault {where!r}: rate_fraction must be between 0 and 1")
    elif f.get("rate") is not None or f.get("rate_fraction") is not None:
        raise FaultPlanError(f"fault {where!r}: only throttle takes a rate")
    return FaultEvent(**f)


def chaos_plan(seed: int, minutes: float, *, workers: int, ps: int = 1, faults: int | None = None) -> FaultPlan:
    """A seeded chaos schedule over ``minutes``: ``faults`` events (default one per 50 s of the
    window, at least 4) that never overlap, timed from the first training step.

    Contract: the same seed gives the same plan; there is always exactly one PS kill, at least one
    worker kill, one link down (5-20 s, on a worker host) and one throttle to a tenth of the rate
    (10-20 s); the rest are drawn from those three worker faults. The window
    ``[20 s, 0.85 x minutes)`` is cut into ``faults + 1`` equal units; the PS kill gets two units
    (a PS comes back through a new coordinator process, the slowest recovery), every other fault one,
    and each fault starts in the first fifth of a unit, so it has the rest of its slot to recover
    before the next one.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise FaultPlanError(f"a chaos run needs at least 2 workers (a worker is killed while the others carry "
                             f"on), got {workers!r}")
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not minutes >= 2:
        raise FaultPlanError(f"a chaos run needs --minutes >= 2 (room for 4 faults and their recoveries), "
                             f"got {minutes!r}")
    window_start, window_end = 20.0, 0.85 * minutes * 60.0
    n = faults if faults is not None else max(4, int((window_end - window_start) // 50))
    if n < 4:
        raise FaultPlanError(f"a chaos run plays at least 4 faults (one of each kind), got {n}")
    slot = (window_end - window_start) / (n + 1)
    if slot < 45:
        raise FaultPlanError(f"{n} faults in {minutes:g} minutes leave {slot:.0f} s per fault; give each at least "
                             "45 s (more minutes or fewer faults)")
    rng = random.Random(seed)
    kinds = ["kill_ps", "kill_worker", "link_down", "throttle"]
    kinds += [rng.choice(["kill_worker", "link_down", "throttle"]) for _ in range(n - 4)]
    rng.shuffle(kinds)
    events = []
    start = window_start
    for k in kinds:
        at = round(start + rng.uniform(0, slot / 5), 1)
        start += slot * (2 if k == "kill_ps" else 1)
        worker = f"worker{rng.randrange(workers)}"
        if k == "kill_ps":
            events.append(FaultEvent("kill", f"ps{rng.randrange(ps)}", at_s=at))
        elif k == "kill_worker":
            events.append(FaultEvent("kill", worker, at_s=at))
        elif k == "link_down":
            events.append(FaultEvent("link_down", worker, at_s=at, for_s=float(rng.randint(5, 20))))
        else:
            events.append(FaultEvent("throttle", worker, at_s=at, for_s=float(rng.randint(10, 20)),
                                     rate_fraction=0.1))
    return FaultPlan(tuple(events))
