"""Running the matrix: one testbed per cell, every strategy of the cell on it.

Every cell gets one testbed, ``make_testbed(["chief", "worker0".., "ps0"..], bandwidth,
hosts=cell.hosts, host_cpu=--host-cpu)`` (network namespaces and ``tc tbf`` caps as root, else the
uncapped loopback fallback; the hosts of ``--layout``; with ``--host-cpu`` a CPU budget per host,
dropped with a warning where cgroups are unavailable), and every strategy of the cell runs on
it, on the same hosts, links and budgets, the same model, the same synthetic data and the same
per-worker batch ``b`` (rings: one rank per worker, i.e. on each worker's host):

=============  =================================================================================
``ps``         stock ParameterServerStrategy (:func:`ralp_tf.testbed.ps_job.run_ps`, policy "ps")
``ralp``       the analyzer's plan, applied by the placement pass: planned once per cell from the
               bench's profile, saved as JSON and run by every repetition (run_ps with that
               plan file), so load during one run cannot change another run's plan
``ralp_nosplit`` (opt-in) ``ralp`` without head splits over PS tasks among the analyzer's
               candidates (``RalpPolicy(split=False)``, the ``ralp`` policy before splits were built)
``ralp_x2``    (opt-in, colocated) the analyzer's plan for two workers per host, run on 2H workers
               (host i: workers i and H + i); ``ralp_fused``, ``ralp_x2_fused``: with fused transfers
``ralp_fp16``  ``ralp`` with that compression on the wire; ``horovod_fp16``: Horovod with
``ralp_bf16``  ``hvd.Compression.fp16`` (``--compression CODEC`` adds them)
``scheduler``  the plan of placement policy ``scheduler.<--scheduler-solver>`` (registered by the
               ``scheduler`` package; :func:`ralp_tf.bench.predictions.scheduler_plan`), saved
               as JSON, run with run_ps; skipped, with the reason, when the policy is
               unavailable or fails
``allreduce``  MultiWorkerMirroredStrategy with ring collectives (:func:`run_mwms`)
``horovod``    Horovod/gloo via horovodrun (:func:`run_horovod`); skipped when not installed
``rejected``   (opt-in) the alternative the analyzer rejected when it chose *no split*: its best
               split; when the analyzer chose a split, the rejected alternative is stock PS,
               which is the ``ps`` strategy, so this one is skipped
=============  =================================================================================

Repetitions are interleaved (rep 1 of every strategy, then rep 2, ...) so slow drift of the
machine's load spreads evenly; each cell reports the **median** of ``--repeats`` runs.

**Units** (those of :mod:`ralp_tf.testbed.ps_job`): a *global step* is ``workers x b`` samples (one
synchronous ring step; ``workers`` worker steps of PSS). ``samples_per_s = workers * b * steps /
timed window``. ``measured_step_s`` = seconds per global step. ``bytes_per_step`` = wire bytes
(Ethernet frames, all links, tx side) per global step; on the loopback fallback it is TCP payload.

**Steps per run.** With ``--steps auto`` (default) each strategy of a cell gets
``steps = clamp(ceil(window_s / predicted_step_s), min_steps, max_steps)`` timed global steps
and ``warmup = 1`` if ``predicted_step_s > 5 s`` else ``clamp(ceil(WARMUP_S / predicted_step_s), 2,
MAX_WARMUP)``, so a stock-PSS run at 100 Mbit/s (~46 s per alexnet global step) stays at a few
minutes while fast runs time enough steps, after the first seconds of a job, which run slower
(ctr_dnn's ring on 2 colocated 0.3-core hosts: 0.239-0.261 s a step after 2 warm-up steps,
0.192-0.209 s after 10).

**Faults.** A run whose job dies or times out is recorded with ``valid: false``, its reason and
log tail; a cell whose testbed cannot be built is marked failed; the matrix goes on. Ctrl-C /
SIGTERM tear the testbed down (its own guarantees) and leave the partial results file; SIGKILL is
handled by the testbed's reaper; the profiling helper process dies with the bench
(``PR_SET_PDEATHSIG``).

**Output.** ``<out>/results/<name>.json``, rewritten (atomic replace) after every run: every raw
repetition and the medians (schema: docs/bench.md).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ralp_tf.bench.config import AUTO_STRATEGY, MEM_PER_TASK_GIB, NUM_PS, PS_STRATEGIES, RING_STRATEGIES, \
    BenchConfig, BenchConfigError, BenchError, Cell, floor_terms, fused_strategy, strategy_base, workers_per_host
from ralp_tf.bench import auto
from ralp_tf.bench import quota_profile
from ralp_tf.bench.predictions import compute_scale, measure_profile, predictions, scheduler_plan
from ralp_tf.bench.progress import Progress
from ralp_tf.bench.records import CellRecord, RunRecord, StrategySummary
from ralp_tf.bench.targets import targets
from ralp_tf.errors import RalpError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE
from ralp_tf.run.traffic import suspect_bytes_warning

__all__ = ["UNITS", "choose_steps", "json_default", "machine_info", "Bench"]

UNITS = {"bytes_per_step": "wire bytes (Ethernet frames) summed over every link's tx, per global step "
                           "(loopback fallback: TCP payload)",
         "global_step": "workers x batch_per_worker samples", "step_s": "seconds per global step",
         "samples_per_s": "global samples per second, median of the repetitions"}


#: auto warm-up: at least this many seconds of untimed steps (module docstring), and at most
#: MAX_WARMUP of them
WARMUP_S = 2.0
MAX_WARMUP = 10


def choose_steps(cfg: BenchConfig, predicted_step_s: float | None) -> tuple[int, int]:
    """(timed global steps, warm-up global steps) for one run: ``--steps``/``--warmup`` if given,
    else ``clamp(ceil(window_s / predicted_step_s), min_steps, max_steps)`` (``max_steps``
    without a prediction) and 1 warm-up step if ``predicted_step_s > 5``, else
    ``clamp(ceil(WARMUP_S / predicted_step_s), 2, MAX_WARMUP)`` (2 without a prediction)."""
    step = predicted_step_s if predicted_step_s is not None and 0 < predicted_step_s < math.inf else None
    if cfg.warmup is not None:
        warmup = cfg.warmup
    elif step is None:
        warmup = 2
    else:
        warmup = 1 if step > 5.0 else max(2, min(MAX_WARMUP, math.ceil(WARMUP_S / step)))
    if cfg.steps is not None:
        return cfg.steps, warmup
    if step is None:
        return cfg.max_steps, warmup
    steps = math.ceil(cfg.window_s / step)
    return max(cfg.min_steps, min(cfg.max_steps, steps)), warmup


def json_default(o: Any) -> Any:
    """``json.dumps`` fallback: records via ``to_dict``, paths as text, non-finite floats as null."""
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if isinstance(o, Path):
        return str(o)
    if dataclasses.is_dataclass(o):
        return dataclasses.asdict(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


def machine_info() -> dict[str, Any]:
    """CPU count and model, memory, kernel, Python and (without importing it) TF version."""
    info: dict[str, Any] = {"cpus": os.cpu_count(), "kernel": os.uname().release, "python": sys.version.split()[0]}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        info["tensorflow"] = version("tensorflow")
        info["tf_keras"] = version("tf-keras")
        try:
            info["horovod"] = version("horovod")
        except Exception:
            info["horovod"] = None
    except Exception:
        pass
    try:
        info["loadavg_start"] = os.getloadavg()
    except OSError:
        pass
    return info


class Bench:
    """Runs a :class:`BenchConfig` and keeps the results document up to date on disk."""

    def __init__(self, cfg: BenchConfig, progress: Progress | None = None) -> None:
        self.cfg = cfg
        self.progress = progress or Progress(quiet=False)
        self._pred: dict[str, Any] = {}  # the current cell's predictions and plan files (auto runs any of them)
        self._plans: dict[str, str] = {}
        self.results_path = cfg.out_dir / "results" / f"{cfg.name}.json"
        self.work = Path(tempfile.mkdtemp(prefix="ralp_bench_"))
        self.profiles: dict[str, Any] = {}
        #: CPU budget per host actually applied (None: none; --host-cpu dropped where cgroups are missing)
        self.host_cpu, budget_note = self._budget(cfg)
        self.cells: list[CellRecord] = []
        self.doc: dict[str, Any] = {
            "name": cfg.name, "command": cfg.command, "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "machine": machine_info(), "config": {
                "strategies": list(cfg.strategies), "repeats": cfg.repeats, "batch_per_worker": cfg.batch,
                "steps": cfg.steps or "auto", "warmup": cfg.warmup or "auto", "window_s": cfg.window_s,
                "max_steps": cfg.max_steps, "num_ps": NUM_PS, "testbed": cfg.testbed,
                "layout": cfg.layout, "host_cpu": self.host_cpu, "host_cpu_requested": cfg.host_cpu,
                "scheduler_solver": cfg.scheduler_solver, "steps_per_closure": cfg.steps_per_closure,
                "optimizer": cfg.optimizer, "floor": cfg.floor, "fuse_transfers": cfg.fuse_transfers,
                "cells": [c.key + (":" + "+".join(c.strategies) if c.strategies else "") for c in cfg.cells]},
            "units": dict(UNITS), "cells": self.cells, "complete": False,
        }
        if budget_note:
            self.doc["config"]["host_cpu_note"] = budget_note
        #: the closure floor the PSS predictions price (``--floor``; ``measure`` is read in :meth:`run`)
        self.floor: Any = None if cfg.floor == "measure" else floor_terms(cfg.floor)
        #: ``--calibration``: the testbed's hosts as ``ralp-tf calibrate`` measured them (checked by the config)
        self.calibration: Any = None
        if cfg.calibration:
            from ralp_tf.plan.calibration import load_calibration

            self.calibration = load_calibration(cfg.calibration)
            self.doc["config"]["calibration"] = cfg.calibration
            self.doc["calibration"] = self.calibration.to_dict()

    def _budget(self, cfg: BenchConfig) -> tuple[float | None, str | None]:
        """(CPU budget per host to apply, why ``--host-cpu`` was dropped or None). Without root or the
        cgroup v1 CPU controller the bench runs without budgets and says so (``--testbed netns``
        raises instead: the user asked for the real thing)."""
        if cfg.host_cpu is None:
            return None, None
        from ralp_tf.testbed import cpu_budget_support

        ok, why = cpu_budget_support()
        if ok:
            return cfg.host_cpu, None
        if cfg.testbed == "netns":
            raise BenchError(f"--host-cpu: {why}")
        self.progress.warn(f"warning: --host-cpu {cfg.host_cpu:g} ignored, running without CPU budgets: {why}")
        return None, f"--host-cpu {cfg.host_cpu:g} was requested but not applied: {why}"

    def document(self) -> dict[str, Any]:
        """The results document as JSON data (what the results file holds)."""
        return json.loads(json.dumps(self.doc, default=json_default))

    def save(self) -> None:
        self.results_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.results_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=json_default))
        os.replace(tmp, self.results_path)

    def run(self) -> dict[str, Any]:
        """Run every cell; return the results document (also on disk, complete or not)."""
        t0 = time.monotonic()
        try:
            if self.cfg.floor == "measure":
                self._measure_floor()
            self._plan_eta()
            for ci, cell in enumerate(self.cfg.cells):
                self.run_cell(cell, ci)
            self.doc["complete"] = True
        except KeyboardInterrupt:
            self.doc["interrupted"] = True
            raise
        finally:
            self.doc["wall_s"] = time.monotonic() - t0
            self.doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
            self.doc["targets"] = targets(self.document(), out_dir=self.cfg.out_dir)
            self.save()
            shutil.rmtree(self.work, ignore_errors=True)
        return self.document()

    def _measure_floor(self) -> None:
        """``--floor measure``: the floor of this machine now (``ralp-tf floor --workers 2 --ps 2``,
        on loopback), recorded in the results as ``floor``."""
        from ralp_tf.run.floor import measure_floor

        self.progress.say("measuring the closure floor (ralp-tf floor --workers 2 --ps 2)")
        result = measure_floor(workers=2, ps=2, log_dir=str(self.work / "floor"))
        self.floor = result.terms
        self.doc["floor"] = {"terms": result.terms.to_dict(), "fit_max_error": result.fit_max_error,
                             "wall_s": result.wall_s}

    def _plan_eta(self) -> None:
        """Profile every model once up front and register every planned run with the ETA."""
        from ralp_tf.testbed import netns_support

        emulated = self.cfg.testbed == "netns" or (self.cfg.testbed == "auto" and netns_support()[0])
        for cell in self.cfg.cells:
            try:
                prof = self._profile(cell.model)
                pred = predictions(prof, cell, cell.bandwidth_bps if emulated else math.inf, host_cpu=self.host_cpu,
                                   steps_per_closure=self.cfg.steps_per_closure, floor=self.floor,
                                   fuse_transfers=self.cfg.fuse_transfers, calibration=self.calibration,
                                   strategies=cell.strategies or self.cfg.strategies)
            except (BenchError, RalpError):
                pred = {}
            for s in cell.strategies or self.cfg.strategies:
                p = pred.get(s, pred.get("ralp", {})).get("step_s")
                steps, warmup = choose_steps(self.cfg, p)
                for rep in range(self.cfg.repeats):
                    self.progress.plan_run((cell.key, s, rep), warmup, steps, p)

    def profile_path(self, model: str) -> Path:
        """Where the bench-side profile of ``model`` is kept as JSON (the coordinator plans with it)."""
        return self.work / f"{model}.profile.json"

    def _profile_file(self, model: str) -> str | None:
        """The bench-side profile's JSON for the coordinator to plan with, if it was measured."""
        path = self.profile_path(model)
        return str(path) if isinstance(self.profiles.get(model), ModelProfile) and path.is_file() else None

    def _profile(self, model: str) -> Any:
        if model not in self.profiles:
            budget = (f", layer shares calibrated to whole passes under a {self.host_cpu:g}-core budget"
                      if self.host_cpu is not None else "")
            what = "layer times of " + self.cfg.calibration if self.calibration is not None else \
                "measured layer times" + budget
            self.progress.say(f"profiling {model} (batch {self.cfg.batch}, {what})")
            out, group = str(self.profile_path(model)), f"{self.cfg.prefix}-profile"
            try:
                if self.calibration is not None:  # the layers' times on the hosts' devices, as calibrate timed them
                    from ralp_tf.plan.calibration import calibrated_profile

                    self.profiles[model] = calibrated_profile(self.calibration, measure_profile(
                        model, self.cfg.batch, out, measure=False))
                    Path(out).write_text(self.profiles[model].to_json())
                elif self.host_cpu is None:
                    self.profiles[model] = measure_profile(model, self.cfg.batch, out)
                else:  # medians under the quota itself are not the layers' times there (quota_profile)
                    measured = quota_profile.measure_quota_profile(model, self.cfg.batch, self.host_cpu, out,
                                                                   group_name=group)
                    self.profiles[model] = measured.profile
                    self.doc.setdefault("profile_calibration", {})[model] = measured.summary()
                # the profile every prediction of the run was made from: a later cost model re-predicts from it
                self.doc.setdefault("profiles", {})[model] = self.profiles[model].to_dict()
            except BenchError as exc:
                self.profiles[model] = exc
        p = self.profiles[model]
        if isinstance(p, BenchError):
            raise p
        return p.with_optimizer(self.cfg.optimizer)  # every strategy trains with it; its sparse updates are priced

    def _make_testbed(self, cell: Cell) -> Any:
        from ralp_tf.testbed import LoopbackTestbed, Testbed, make_testbed

        cfg = self.cfg
        common = {"prefix": cfg.prefix, "mem_per_task_gib": MEM_PER_TASK_GIB, "hosts": cell.hosts,
                  "host_cpu": self.host_cpu}
        if cfg.testbed == "loopback":
            return LoopbackTestbed(cell.tasks, cell.bandwidth, ignore_bandwidth=True, **common)
        if cfg.testbed == "netns":
            return Testbed(cell.tasks, cell.bandwidth, **common)
        return make_testbed(cell.tasks, cell.bandwidth, **common)

    def run_cell(self, cell: Cell, index: int) -> None:
        """Build the cell's testbed and run its strategies on it; a testbed failure marks the cell."""
        entry = CellRecord(model=cell.model, workers=cell.workers, bandwidth=cell.bandwidth, key=cell.key,
                           layout=cell.layout, hosts=cell.hosts, num_ps=cell.num_ps,
                           host_cpu={h: self.host_cpu for h in cell.hosts})
        self.cells.append(entry)
        head = f"cell {index + 1}/{len(self.cfg.cells)} {cell.key}"
        try:
            prof = self._profile(cell.model)
        except BenchError as exc:
            prof = None
            entry.profile_error = str(exc)
        t_cell = time.monotonic()
        try:
            tb = self._make_testbed(cell)
            tb.start()
        except KeyboardInterrupt:
            raise
        except (RalpError, OSError) as exc:
            entry.status = "failed"
            entry.error = f"testbed: {type(exc).__name__}: {exc}"
            self.progress.drop_cell(cell.key)
            self.progress.say(f"{head}: testbed failed: {exc}")
            self.save()
            return
        try:
            entry.testbed = tb.describe()
            self._run_strategies(cell, entry, tb, prof, tb.bandwidth_bps, head)
        finally:
            tb.close()
            entry.wall_s = time.monotonic() - t_cell
            self.save()

    def _plan_file(self, cell: Cell, strategy: str) -> Path:
        return self.work / f"{cell.model}-w{cell.workers}-{cell.bandwidth}-{strategy}.plan.json"

    def _scheduler_plan(self, cell: Cell, entry: CellRecord, prof: Any, eff_bps: float,
                        plans: dict[str, str]) -> tuple[Any, str | None]:
        """(the scheduler's Plan, saved to ``plans``; None) or (None, why it is skipped)."""
        if prof is None:
            return None, f"no profile to plan with ({entry.profile_error})"
        try:
            plan = scheduler_plan(prof, cell, eff_bps, self.cfg.scheduler_solver, host_cpu=self.host_cpu)
        except BenchError as exc:
            return None, str(exc)
        path = self._plan_file(cell, "scheduler")
        plan.save(str(path))
        plans["scheduler"] = str(path)
        entry.scheduler_plan = plan.to_dict()
        return plan, None

    def _rejected_skip_reason(self, cell: Cell, entry: CellRecord, pred: dict[str, Any], have_profile: bool,
                              plans: dict[str, str]) -> str | None:
        """None after saving the rejected alternative's plan to ``plans``; else why it is skipped."""
        if not have_profile:
            return f"no profile to analyze ({entry.profile_error})"
        if "rejected" in pred:
            path = self._plan_file(cell, "rejected")
            pred["rejected"]["plan"].save(str(path))
            plans["rejected"] = str(path)
            entry.rejected_label = pred["rejected"]["label"]
            return None
        if pred.get("analysis", {}).get("split"):
            return "the analyzer chose a split, so the alternative it rejected is stock PS: that is the 'ps' strategy"
        return "the analyzer found no possible split, so there is no rejected alternative"

    def _run_strategies(self, cell: Cell, entry: CellRecord, tb: Any, prof: Any, eff_bps: float,
                        head: str) -> None:
        """Plan, skip what cannot run, then run the repetitions interleaved and take the medians."""
        from ralp_tf.plan.costmodel import wire_bytes

        cfg = self.cfg
        strategies = cell.strategies or cfg.strategies
        wire = getattr(tb, "bytes_kind", "") == "wire"
        to_kind: Callable[[float | None], float | None] = (
            (lambda b: wire_bytes(b) if b is not None else None) if wire else (lambda b: b))
        pred, plans, skipped = self._plan_strategies(cell, entry, prof, eff_bps, strategies)
        self._pred, self._plans = pred, plans  # auto's repetitions run any of them
        active = [s for s in strategies if s not in skipped]
        for s in strategies:  # the configured order, in the document and in --json
            entry.strategies[s] = StrategySummary()
        for s, why in skipped.items():
            entry.strategies[s] = StrategySummary.skipped(why)
            for rep in range(cfg.repeats):
                self.progress.drop_run((cell.key, s, rep))
            self.progress.warn(f"{head}: {s} skipped: {why}")
        schedule: dict[str, tuple[int, int]] = {}
        for s in active:
            pred_step_s = pred.get(s, {}).get("step_s")
            schedule[s] = choose_steps(cfg, pred_step_s)
            for rep in range(cfg.repeats):
                self.progress.plan_run((cell.key, s, rep), schedule[s][1], schedule[s][0], pred_step_s)
            entry.strategies[s] = StrategySummary(steps=schedule[s][0], warmup=schedule[s][1])
        for rep in range(cfg.repeats):
            for s in active:
                entry.strategies[s].runs.append(self._repetition(s, rep, tb, cell, schedule[s], pred.get(s),
                                                                 plans.get(s), head, to_kind))
                self.save()
        for s in active:
            entry.strategies[s].summarize(cfg.repeats)
        ok = [s for s in active if entry.strategies[s].status == "ok"]
        entry.status = "ok" if len(ok) == len(active) else ("partial" if ok else "failed")
        base = entry.strategies["ps"].samples_per_s if "ps" in entry.strategies else None
        for st in entry.strategies.values():
            if base and st.samples_per_s:
                st.speedup_vs_ps = st.samples_per_s / base

    def _plan_strategies(self, cell: Cell, entry: CellRecord, prof: Any, eff_bps: float, strategies: list[str]
                         ) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
        """The cost model's predictions per strategy, the plan file of each planned strategy, and
        the strategies that cannot run here with why."""
        sched_plan = None
        skipped: dict[str, str] = {}
        plans: dict[str, str] = {}
        if "scheduler" in strategies:
            sched_plan, why = self._scheduler_plan(cell, entry, prof, eff_bps, plans)
            if why is not None:
                skipped["scheduler"] = why
        pred: dict[str, Any] = {}
        if prof is not None:
            pred = predictions(prof, cell, eff_bps, sched_plan, host_cpu=self.host_cpu,
                               steps_per_closure=self.cfg.steps_per_closure, floor=self.floor,
                               fuse_transfers=self.cfg.fuse_transfers, calibration=self.calibration,
                               strategies=strategies)
            entry.bench_predictions = {k: {kk: vv for kk, vv in v.items() if kk != "plan"} for k, v in pred.items()}
            for s in [*strategies, *(["ralp"] if AUTO_STRATEGY in strategies else [])]:
                if strategy_base(s)[0] == "ralp" and "plan" in pred.get(s, {}):
                    path = self._plan_file(cell, s)
                    pred[s]["plan"].save(str(path))
                    plans[s] = str(path)
        if "rejected" in strategies:
            why = self._rejected_skip_reason(cell, entry, pred, prof is not None, plans)
            if why is not None:
                skipped["rejected"] = why
        hvd_strategies = [s for s in strategies if strategy_base(s)[0] == "horovod"]
        hvd_ok = True
        if hvd_strategies or AUTO_STRATEGY in strategies:
            from ralp_tf.testbed.horovod_job import horovod_available

            hvd_ok, why = horovod_available()
            if not hvd_ok:
                skipped.update({s: why for s in hvd_strategies})
        if AUTO_STRATEGY in strategies:
            order = auto.auto_order(pred, () if hvd_ok else ("horovod",))
            if order:
                pred[AUTO_STRATEGY] = {**pred[order[0]], "order": order}
                entry.bench_predictions[AUTO_STRATEGY] = {"order": order, "step_s": pred[order[0]]["step_s"]}
            else:
                skipped[AUTO_STRATEGY] = f"no prediction to rank the strategies with ({entry.profile_error})"
        return pred, plans, skipped

    def _repetition(self, s: str, rep: int, tb: Any, cell: Cell, schedule: tuple[int, int], pred: dict[str, Any] | None,
                    plan_path: str | None, head: str, to_kind: Callable[[float | None], float | None]) -> RunRecord:
        """Repetition ``rep`` of strategy ``s``, with its predictions attached; a repetition whose
        process TF crashed (signal 11, 6, ...) measured nothing and runs again, once, the crash kept."""
        steps, warmup = schedule
        pred_step_s = (pred or {}).get("step_s")
        self.progress.say(f"{head} | {s} rep {rep + 1}/{self.cfg.repeats} ({warmup}+{steps} global steps)")
        t_run = time.monotonic()
        k = (pred or {}).get("steps_per_closure") or max(self.cfg.steps_per_closure, 1)  # auto: the prediction's K
        if self.cfg.steps_per_closure == AUTO_STEPS_PER_CLOSURE:
            k = min(k, max(steps, 1))  # a global step is one step per worker: every worker gets a closure
        run, chose = s, None
        if s == AUTO_STRATEGY:  # a job's auto: probe the top two, run the faster (ralp_tf.bench.auto)
            run, chose = auto.choose(self, tb, cell, pred["order"], self._pred, self._plans, k,
                                     lambda step_s: choose_steps(self.cfg, step_s))
            self.progress.say(f"{head} | auto rep {rep + 1}: probed {chose['probe_samples_per_s']}, running {run}")
            pred, plan_path = self._pred.get(run), self._plans.get(run)
            pred_step_s = (pred or {}).get("step_s")
        rec = self._run_one(run, tb, cell, steps, warmup, plan_path, pred_step_s, k)
        crash = rec.launcher.get("crash_signal")
        if not rec.valid and crash:
            self.progress.warn(f"warning: {head} | {s} rep {rep + 1}: {rec.invalid_reason} "
                               f"({_signal_name(crash)}); running the repetition again")
            first = {"invalid_reason": rec.invalid_reason, "log_tail": rec.log_tail, "crash_signal": crash}
            rec = self._run_one(run, tb, cell, steps, warmup, plan_path, pred_step_s, k)  # auto: its choice again
            rec.launcher["crashed_attempt"] = first
        rec.wall_s = time.monotonic() - t_run
        rec.repetition = rep + 1
        if chose is not None:
            rec.strategy, rec.launcher["auto"] = s, chose
        if run in RING_STRATEGIES:
            rec.predicted_step_s = pred["step_s"] if pred else None
            rec.predicted_payload_bytes_per_step = pred["payload_bytes_per_step"] if pred else None
        else:
            rec.predicted_payload_bytes_per_step = rec.predicted_bytes_per_step
            if (pred or {}).get("task_cpu_s"):  # the bench's own estimate: its profile, not the coordinator's
                rec.launcher["predicted_task_cpu_s_per_step"] = pred["task_cpu_s"]
        rec.predicted_bytes_per_step = to_kind(rec.predicted_payload_bytes_per_step)
        rec.bytes_kind = getattr(tb, "bytes_kind", None)
        timed = (rec.measured_step_s * steps) if rec.measured_step_s else None
        self.progress.done_run((cell.key, s, rep), rec.wall_s, timed, steps * (pred_step_s or 0.0), steps, warmup)
        self.progress.say(f"{head} | {s} rep {rep + 1}: {_run_line(rec)} ({rec.wall_s:.0f} s)")
        suspect = suspect_bytes_warning(f"{head} | {s}", rec.bytes_per_step, rec.predicted_bytes_per_step)
        if suspect:
            self.progress.warn(f"warning: {suspect}")
        return rec

    def _run_one(self, strategy: str, tb: Any, cell: Cell, steps: int, warmup: int, plan_path: str | None,
                 pred_step_s: float | None, steps_per_closure: int = 1) -> RunRecord:
        """One repetition of one strategy (PSS strategies at ``steps_per_closure``). Never raises for a
        failed job (the record has ``valid: false``); only KeyboardInterrupt escapes."""
        from ralp_tf.testbed.horovod_job import run_horovod
        from ralp_tf.testbed.mwms_job import run_mwms
        from ralp_tf.testbed.ps_job import run_ps

        expected = (warmup + steps) * (pred_step_s if pred_step_s and math.isfinite(pred_step_s) else 5.0)
        timeout = min(240.0 + 4.0 * expected, 3600.0)
        workers = [f"worker{i}" for i in range(cell.workers)]  # the rings: the first on each host
        base, codec = strategy_base(strategy)
        n = cell.workers * workers_per_host(strategy)
        try:
            if strategy in PS_STRATEGIES:
                # A plan file carries its compression; without one (no profile) the coordinator plans.
                policy = "ps" if base == "ps" else (plan_path or base)
                launched = run_ps(tb, cell.model, policy, workers=n, ps=cell.num_ps, batch=self.cfg.batch,
                                  steps=steps, warmup=warmup, timeout=timeout,
                                  compression=None if plan_path else codec,
                                  compute_scale=compute_scale(n, self.host_cpu),
                                  steps_per_closure=steps_per_closure, optimizer=self.cfg.optimizer,
                                  fuse_transfers=self.cfg.fuse_transfers or fused_strategy(strategy),
                                  profile_path=self._profile_file(cell.model),
                                  calibration_path=self.cfg.calibration)
            elif strategy == "allreduce":
                launched = run_mwms(tb, cell.model, workers, batch=self.cfg.batch, steps=steps, warmup=warmup,
                                    timeout=timeout, optimizer=self.cfg.optimizer)
            elif base == "horovod":
                launched = run_horovod(tb, cell.model, workers, batch=self.cfg.batch, steps=steps, warmup=warmup,
                                       timeout=timeout, compression=codec or "none", optimizer=self.cfg.optimizer)
            else:  # pragma: no cover - parse_strategies rejects it
                raise BenchConfigError(f"unknown strategy {strategy!r}")
            launched.pop("testbed", None)  # the cell records its testbed once
            rec = RunRecord.from_dict(launched)
            if strategy in PS_STRATEGIES:
                rec.strategy = strategy  # run_ps says "plan" for any plan file
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a launcher error: this run failed, the matrix goes on
            import traceback

            rec = RunRecord(strategy=strategy, model=cell.model, workers=cell.workers, valid=False,
                            invalid_reason=f"{type(exc).__name__}: {exc}",
                            log_tail="".join(traceback.format_exc().splitlines(True)[-15:]), measured=False)
        if rec.steps is None:
            rec.steps = steps
        rec.warmup = warmup
        return rec


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _run_line(rec: RunRecord) -> str:
    if rec.valid and rec.samples_per_s:
        return (f"{rec.samples_per_s:.1f} samples/s, {rec.measured_step_s:.2f} s/step, "
                f"{(rec.bytes_per_step or 0) / 1e6:.1f} MB/step")
    return f"FAILED: {rec.invalid_reason}"
