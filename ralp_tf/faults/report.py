"""What a supervised run reports: one :class:`FaultRecord` per fault, a :class:`SupervisedReport`
for the run (with :meth:`SupervisedReport.table`, the Markdown table the chaos run prints), and
:func:`leftovers`, what a run left behind. Definitions of the measured fields are in
:mod:`ralp_tf.faults.supervisor`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

__all__ = ["measure_recovery", "rates_per_worker_count", "FaultRecord", "SupervisedReport", "leftovers"]


@dataclasses.dataclass
class FaultRecord:
    """One fault as it happened (times in seconds since the first training step)."""

    kind: str
    target: str | None
    planned: str
    start_s: float
    end_s: float | None = None
    #: the last completed step the supervisor had read from the coordinator when the fault began
    #: (the coordinator can be a step or two further; ``steps_lost`` counts from where it really was)
    step_at_start: int = 0
    recovery_s: float | None = None
    steps_during: int | None = None
    steps_lost: int = 0
    note: str = ""
    #: how many coordinator processes had started when it began
    coordinator_run: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class SupervisedReport:
    """What a supervised run did: steps, final loss, every fault with its recovery, restarts,
    samples/s per worker count, and anything left behind (filled by the caller after teardown)."""

    model: str
    policy: str
    steps_requested: int
    steps_completed: int
    final_loss: float | None
    wall_s: float
    faults: list[FaultRecord]
    restarts: dict[str, int]
    coordinator_runs: int
    steps_lost: int
    samples_per_s: dict[str, float]
    batch_size: int
    stopped_by_time: bool = False
    leftovers: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    log_dir: str | None = None
    #: host -> CPU budget in cores (``--host-cpu``), None: no budgets
    host_cpu: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def table(self) -> str:
        """A Markdown table of the faults, then one summary line."""
        rows = ["| # | fault | at (s) | step | ended (s) | recovery (s) | steps during | steps lost | note |",
                "|---|---|---|---|---|---|---|---|---|"]
        for i, f in enumerate(self.faults, 1):
            rows.append(f"| {i} | {f.planned} | {f.start_s:.1f} | {f.step_at_start} | "
                        f"{'' if f.end_s is None else f'{f.end_s:.1f}'} | "
                        f"{'-' if f.recovery_s is None else f'{f.recovery_s:.1f}'} | "
                        f"{'' if f.steps_during is None else f.steps_during} | {f.steps_lost} | {f.note} |")
        loss = "n/a" if self.final_loss is None else f"{self.final_loss:.4f}"
        left = ", ".join(f"{k}: {v}" for k, v in self.leftovers.items() if v) or "nothing"
        rates = ", ".join(f"{k}: {v:.1f}" for k, v in self.samples_per_s.items())
        rows.append("")
        steps = (f"{self.steps_completed} steps (stopped by the time limit)" if self.stopped_by_time
                 else f"{self.steps_completed}/{self.steps_requested} steps")
        rows.append(f"{self.model} ({self.policy}): {steps} in {self.wall_s:.0f} s, "
                    f"final loss {loss}, steps lost {self.steps_lost}, coordinator runs {self.coordinator_runs}, "
                    f"restarts {self.restarts or 'none'}; samples/s {rates or 'n/a'}; left behind: {left}"
                    + self._budget_text())
        return "\n".join(rows)

    def _budget_text(self) -> str:
        if not self.host_cpu:
            return ""
        cores = set(self.host_cpu.values())
        if len(cores) == 1:
            return f"; CPU budget {cores.pop():g} cores on each of {len(self.host_cpu)} hosts"
        return f"; CPU budgets {self.host_cpu}"


def leftovers(pids: Sequence[int], prefix: str | None = None) -> dict[str, list[Any]]:
    """What a finished run left behind: live processes among ``pids``, namespaces named
    ``<prefix>-*`` (``ip netns list``) and CPU groups named so (``/sys/fs/cgroup/cpu/<prefix>-*``)."""
    from ralp_tf.testbed._cgroups import stale_groups
    from ralp_tf.testbed._nsops import _alive, list_netns

    out: dict[str, list[Any]] = {"processes": sorted(p for p in set(pids) if _alive(p))}
    if prefix:
        out["namespaces"] = [n for n in list_netns() if n.startswith(prefix + "-")]
        out["cpu_groups"] = stale_groups(prefix)
    return out


def measure_recovery(rec: FaultRecord, progress: Sequence[tuple[float, int, Any, int]],
                     t0: float | None) -> None:
    """Fill ``rec.recovery_s`` and ``rec.steps_during`` from a supervised run's progress log
    (``(unix time, steps done, loss, coordinator run)`` per completed step; ``t0`` the run's start):
    a PS failure recovers at the first step of the next coordinator run; a worker that joins costs
    the time from the last step on N workers to the first on N + 1; any other fault recovers at
    the first step completed after it ended."""
    if t0 is None:
        return
    prog = [(t - t0, d, r) for t, d, _, r in progress]
    if rec.target and rec.target.startswith("ps") and rec.kind in ("kill", "died"):
        after = [t for t, _, r in prog if r > rec.coordinator_run]
        if after:
            rec.recovery_s = after[0] - rec.start_s
    elif rec.kind == "add_worker":
        before = [t for t, _, _ in prog if t <= rec.start_s]
        after = [t for t, _, _ in prog if t > rec.start_s]
        if before and after:
            rec.recovery_s = after[0] - before[-1]
    elif rec.end_s is not None:
        at_end = max((d for t, d, _ in prog if t <= rec.end_s), default=0)
        after = [t for t, d, _ in prog if t > rec.end_s and d > at_end]
        if after:
            rec.recovery_s = after[0] - rec.end_s
    if rec.end_s is not None:
        rec.steps_during = max((d for t, d, _ in prog if t <= rec.end_s), default=0) - \
            max((d for t, d, _ in prog if t <= rec.start_s), default=0)


def rates_per_worker_count(progress: Sequence[tuple[float, int, Any, int]],
                           worker_count_at: Sequence[tuple[float, int]], ahead_at: dict[int, float],
                           checkpoint_every: int, batch_size: int) -> dict[str, float]:
    """Samples/s per worker count: steps completed while each coordinator run lasted (runs start at
    the unix times of ``worker_count_at``, with the worker count then), skipping each run's first
    3 steps (tracing), times ``batch_size``. A run during which the next worker and coordinator
    were started ahead of a join (``ahead_at[run]``) ends its window there: their start is not the
    N-worker rate. A window shorter than a checkpoint interval (steps come in bursts) is skipped."""
    out: dict[str, list[float]] = {}
    bounds = list(worker_count_at) + [(float("inf"), 0)]
    for run, ((t_a, n), (t_b, _)) in enumerate(zip(bounds, bounds[1:]), 1):
        t_b = min(t_b, ahead_at.get(run, t_b))
        pts = [(t, d) for t, d, _, _ in progress if t_a <= t < t_b]
        if len(pts) < 5:
            continue
        (t1, d1), (t2, d2) = pts[3], pts[-1]
        if t2 > t1 and d2 - d1 >= min(checkpoint_every, 10):
            out.setdefault(f"{n} workers", []).append((d2 - d1) * batch_size / (t2 - t1))
    return {k: max(v) for k, v in out.items()}
