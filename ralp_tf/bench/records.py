"""The records of a results document: one run (:class:`RunRecord`), one strategy in one cell
(:class:`StrategySummary`), one cell (:class:`CellRecord`).

Each has ``to_dict()`` / ``from_dict()``; ``to_dict`` writes exactly the keys the results files
and ``--json`` have always had (docs/bench.md, "Results and --json schema"), so old results
files load and new ones read like the old. A key is written only where it is listed as present.

**Medians.** Per strategy and cell: median samples/s, step time and bytes over the valid
repetitions; ``valid`` only if every one of ``--repeats`` repetitions ran and was valid;
``spread = (max - min) / median`` of samples/s (run-to-run noise). Errors are
``measured / predicted - 1``.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Iterable, Mapping, Sequence

from ralp_tf.bench.config import RING_STRATEGIES

__all__ = ["RunRecord", "StrategySummary", "summarize_strategy", "CellRecord"]

#: RunRecord keys whose values the launcher measures: absent when the launcher raised.
_MEASURED_KEYS = ("samples_per_s", "measured_step_s", "bytes_per_step")
#: Every RunRecord key with a field of its own; all other keys of a run go to ``launcher``.
_RUN_FIELDS = ("strategy", "model", "workers", "valid", "steps", "warmup", *_MEASURED_KEYS, "predicted_step_s",
               "predicted_bytes_per_step", "predicted_payload_bytes_per_step", "bytes_kind", "wall_s",
               "repetition", "invalid_reason", "log_tail")


def _median(xs: Iterable[Any]) -> float | None:
    vals = [x for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]
    return statistics.median(vals) if vals else None


def _rel_err(measured: float | None, predicted: float | None) -> float | None:
    """``measured / predicted - 1``; None when either is missing (or the prediction is 0)."""
    if measured is None or not predicted:
        return None
    return measured / predicted - 1.0


def _present(pairs: Iterable[tuple[str, Any, bool]]) -> dict[str, Any]:
    return {key: value for key, value, present in pairs if present}


@dataclasses.dataclass
class RunRecord:
    """One repetition of one strategy. Units: a global step is ``workers x batch`` samples;
    ``*_step_s`` are seconds per global step; ``bytes_per_step`` is per global step, of the kind
    ``bytes_kind`` names (``wire``: Ethernet frames, all links, tx; else TCP payload)."""

    strategy: str = ""
    model: str = ""
    workers: int = 0
    valid: bool = False
    steps: int | None = None
    warmup: int | None = None
    samples_per_s: float | None = None
    measured_step_s: float | None = None
    bytes_per_step: float | None = None
    predicted_step_s: float | None = None
    predicted_bytes_per_step: float | None = None
    #: the cost model's payload bytes; ``predicted_bytes_per_step`` is them as ``bytes_kind``
    predicted_payload_bytes_per_step: float | None = None
    bytes_kind: str | None = None
    wall_s: float | None = None
    repetition: int | None = None
    invalid_reason: str | None = None
    log_tail: str | None = None
    #: every other key of the launcher's record (ps, batch_per_worker, link_bytes, plan, ...), verbatim
    launcher: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: False when the launcher raised instead of returning a record: no measured keys then
    measured: bool = True

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        """Read a run of a results file (or a launcher's record); unknown keys go to ``launcher``."""
        own = {k: d[k] for k in _RUN_FIELDS if k in d}
        launcher = {k: v for k, v in d.items() if k not in _RUN_FIELDS}
        return cls(**own, launcher=launcher, measured="samples_per_s" in d)

    def to_dict(self) -> dict[str, Any]:
        """The run as the results file stores it. Always: strategy, model, workers, valid, steps,
        warmup, predicted_bytes_per_step, predicted_payload_bytes_per_step, bytes_kind, wall_s,
        repetition. Measured keys only if ``measured``; ``predicted_step_s`` if measured or a
        ring (the bench predicts rings itself); ``invalid_reason``/``log_tail`` when set."""
        out = {"strategy": self.strategy, "model": self.model, "workers": self.workers, **self.launcher,
               "steps": self.steps}
        out.update(_present((k, getattr(self, k), self.measured) for k in _MEASURED_KEYS))
        out.update(_present([
            ("predicted_step_s", self.predicted_step_s, self.measured or self.strategy in RING_STRATEGIES),
            ("predicted_bytes_per_step", self.predicted_bytes_per_step, True),
            ("valid", self.valid, True),
            ("invalid_reason", self.invalid_reason, self.invalid_reason is not None),
            ("log_tail", self.log_tail, self.invalid_reason is not None or self.log_tail is not None),
            ("warmup", self.warmup, True), ("wall_s", self.wall_s, True), ("repetition", self.repetition, True),
            ("predicted_payload_bytes_per_step", self.predicted_payload_bytes_per_step, True),
            ("bytes_kind", self.bytes_kind, True)]))
        return out


@dataclasses.dataclass
class StrategySummary:
    """One strategy in one cell: its runs and their medians (see the module doc).

    ``status``: ``running`` (medians not taken yet), ``ok`` (every repetition valid), ``partial``
    (some), ``failed`` (none), ``skipped`` (not run; ``reason`` says why).
    """

    status: str = "running"
    runs: list[RunRecord] = dataclasses.field(default_factory=list)
    steps: int | None = None
    warmup: int | None = None
    reason: str | None = None
    #: whether the medians below were taken (``summarize``)
    summarized: bool = False
    samples_per_s: float | None = None
    measured_step_s: float | None = None
    bytes_per_step: float | None = None
    predicted_step_s: float | None = None
    predicted_bytes_per_step: float | None = None
    valid: bool = False
    valid_runs: int = 0
    n_runs: int = 0
    samples_per_s_all: list[float] = dataclasses.field(default_factory=list)
    spread: float | None = None
    step_error: float | None = None
    bytes_error: float | None = None
    invalid_reason: str | None = None
    log_tail: str | None = None
    speedup_vs_ps: float | None = None
    #: per host link and direction, median bytes per global step over the valid runs (of ``bytes_kind``)
    link_bytes_per_step: dict[str, dict[str, float]] | None = None

    @classmethod
    def skipped(cls, reason: str) -> StrategySummary:
        return cls(status="skipped", reason=reason)

    def summarize(self, repeats: int) -> None:
        """Take the medians of ``runs`` (valid only if all ``repeats`` ran and were valid)."""
        runs = self.runs
        ok = [r for r in runs if r.valid]
        sps = [r.samples_per_s for r in ok if r.samples_per_s]
        predicted_from = ok or runs  # no valid run: the predictions are still worth reporting
        self.summarized = True
        self.samples_per_s = _median(sps)
        self.measured_step_s = _median(r.measured_step_s for r in ok)
        self.bytes_per_step = _median(r.bytes_per_step for r in ok)
        self.predicted_step_s = _median(r.predicted_step_s for r in predicted_from)
        self.predicted_bytes_per_step = _median(r.predicted_bytes_per_step for r in predicted_from)
        self.valid = bool(runs) and len(ok) == repeats and len(runs) == repeats
        self.valid_runs, self.n_runs = len(ok), len(runs)
        self.samples_per_s_all = sps
        self.spread = (max(sps) - min(sps)) / statistics.median(sps) if len(sps) > 1 else None
        self.step_error = _rel_err(self.measured_step_s, self.predicted_step_s)
        self.bytes_error = _rel_err(self.bytes_per_step, self.predicted_bytes_per_step)
        self.link_bytes_per_step = _link_medians(ok)
        bad = [r for r in runs if not r.valid]
        if bad:
            self.invalid_reason = "; ".join(sorted({"invalid" if r.invalid_reason is None else str(r.invalid_reason) for r in bad}))
            self.log_tail = bad[-1].log_tail
        self.status = "ok" if self.valid else ("partial" if ok else "failed")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StrategySummary:
        """Read one strategy of a cell of a results file."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"runs", "summarized"}
        own = {k: d[k] for k in fields if k in d}
        return cls(**own, runs=[RunRecord.from_dict(r) for r in d.get("runs", [])],
                   summarized="valid_runs" in d)

    def to_dict(self) -> dict[str, Any]:
        """Skipped: status, reason, valid, runs. Otherwise status, steps, warmup, runs and, once
        summarized, the medians; ``invalid_reason``/``log_tail`` when some run was invalid;
        ``speedup_vs_ps`` when known."""
        runs = [r.to_dict() for r in self.runs]
        if self.status == "skipped":
            return {"status": self.status, "reason": self.reason, "valid": self.valid, "runs": runs}
        out: dict[str, Any] = {"status": self.status, "steps": self.steps, "warmup": self.warmup, "runs": runs}
        if self.summarized:
            out.update({k: getattr(self, k) for k in (
                "samples_per_s", "measured_step_s", "bytes_per_step", "predicted_step_s", "predicted_bytes_per_step",
                "valid", "valid_runs", "n_runs", "samples_per_s_all", "spread", "step_error", "bytes_error")})
            if self.invalid_reason is not None:
                out.update(invalid_reason=self.invalid_reason, log_tail=self.log_tail)
        if self.link_bytes_per_step is not None:
            out["link_bytes_per_step"] = self.link_bytes_per_step
        if self.speedup_vs_ps is not None:
            out["speedup_vs_ps"] = self.speedup_vs_ps
        return out


def _link_medians(runs: Sequence[RunRecord]) -> dict[str, dict[str, float]] | None:
    """Per host link and direction, the median over ``runs`` of the timed window's bytes
    (the launcher's ``link_bytes``) / timed global steps; None when no run counted them."""
    per_step = [{host: {d: n / r.steps for d, n in dirs.items()} for host, dirs in r.launcher["link_bytes"].items()}
                for r in runs if isinstance(r.launcher.get("link_bytes"), Mapping) and r.steps]
    if not per_step:
        return None
    hosts = dict.fromkeys(h for run in per_step for h in run)
    return {h: {d: _median(run[h][d] for run in per_step if h in run)
                for d in dict.fromkeys(d for run in per_step if h in run for d in run[h])} for h in hosts}


def summarize_strategy(runs: Sequence[Mapping[str, Any]], repeats: int) -> dict[str, Any]:
    """The JSON form of one strategy's summary over ``runs`` (results-file run dicts); see
    :meth:`StrategySummary.summarize`."""
    summary = StrategySummary(runs=[RunRecord.from_dict(r) for r in runs])
    summary.summarize(repeats)
    return summary.to_dict()


@dataclasses.dataclass
class CellRecord:
    """One cell of the matrix: its strategies in the configured order, the testbed it ran on,
    the bench-side predictions and, when it could not run, ``error``. Optional keys are written
    only when set."""

    model: str
    workers: int
    bandwidth: str
    key: str
    strategies: dict[str, StrategySummary] = dataclasses.field(default_factory=dict)
    status: str = "running"
    profile_error: str | None = None
    error: str | None = None
    testbed: dict[str, Any] | None = None
    scheduler_plan: dict[str, Any] | None = None
    bench_predictions: dict[str, Any] | None = None
    rejected_label: str | None = None
    wall_s: float | None = None
    #: ``dedicated`` or ``colocated`` (absent in results written before hosts existed)
    layout: str | None = None
    #: host name -> its tasks; every strategy of the cell ran on these hosts
    hosts: dict[str, list[str]] | None = None
    num_ps: int | None = None
    #: host name -> CPU budget in cores (None: no budget)
    host_cpu: dict[str, float | None] | None = None

    _OPTIONAL = ("profile_error", "error", "testbed", "scheduler_plan", "bench_predictions", "rejected_label",
                 "wall_s", "layout", "hosts", "num_ps", "host_cpu")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CellRecord:
        """Read one cell of a results file."""
        return cls(model=d["model"], workers=d["workers"], bandwidth=d["bandwidth"], key=d["key"],
                   strategies={s: StrategySummary.from_dict(st) for s, st in d.get("strategies", {}).items()},
                   status=d.get("status", "running"), **{k: d[k] for k in cls._OPTIONAL if k in d})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "workers": self.workers, "bandwidth": self.bandwidth,
                               "key": self.key, "strategies": {s: st.to_dict() for s, st in self.strategies.items()},
                               "status": self.status}
        out.update(_present((k, getattr(self, k), getattr(self, k) is not None) for k in self._OPTIONAL))
        return out
