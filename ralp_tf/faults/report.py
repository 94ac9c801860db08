"""What a supervised run reports: one :class:`FaultRecord` per fault, a :class:`SupervisedReport`
for the run (with :meth:`SupervisedReport.table`, the Markdown table the chaos run prints), and
:func:`leftovers`, what a run left behind. Definitions of the measured fields are in
:mod:`ralp_tf.faults.supervisor`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

__all__ = ["FaultRecord", "SupervisedReport", "leftovers"]


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
