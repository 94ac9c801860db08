r"""``ralp-tf bench``: RALP against stock PSS, a scheduler plan, ring all-reduce and Horovod,
measured side by side on an emulated cluster with bandwidth-capped links (issue 4).

**Matrix.** Cells are ``model x workers x bandwidth`` (default: the four built-in benchmark
models x {1, 2, 3} workers x {100mbit, 1gbit, uncapped}; ``--cell MODEL:WORKERS:BW`` adds single
cells), always with 1 PS task. Every cell gets one testbed,
``make_testbed(["chief", "worker0".., "ps0"], bandwidth)`` (network namespaces and ``tc tbf`` caps
as root, else the uncapped loopback fallback), and every strategy of the cell runs on it, on the
same model, the same synthetic data and the same per-worker batch ``b``:

=============  =================================================================================
``ps``         stock ParameterServerStrategy (:func:`ralp_tf.testbed.ps_job.run_ps`, policy "ps")
``ralp``       the analyzer's plan, applied by the placement pass (run_ps, policy "ralp")
``scheduler``  a plan from the ``scheduler`` package (``scheduler.SOLVERS[name]().plan(profile,
               cluster)``, saved as JSON, run with run_ps); skipped, with the reason, when the
               package or the solver is unavailable or fails
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

**Predictions.** PSS strategies: the coordinator's own ``ralp_tf.costmodel.estimate`` on a profile
with measured layer times x ``compute_scale`` (run_ps: ``max(1, workers / cores)``). Rings:
``costmodel.estimate_allreduce`` on a profile measured here the same way (a separate process,
same batch, same seed), scaled by the same ``compute_scale``, on a cluster whose links run at the
testbed's effective rate. Predicted bytes are payload bytes converted to wire bytes with
``costmodel.wire_bytes`` (``x (1 + 66/1448)``) on the namespace testbed. Errors are
``measured / predicted - 1``.

**Steps per run.** With ``--steps auto`` (default) each strategy of a cell gets
``steps = clamp(ceil(window_s / predicted_step_s), min_steps, max_steps)`` timed global steps
and ``warmup = 1`` if ``predicted_step_s > 5 s`` else 2, so a stock-PSS run at 100 Mbit/s
(~46 s per alexnet global step) stays at a few minutes while fast runs time enough steps.

**Faults.** A run whose job dies or times out is recorded with ``valid: false``, its reason and
log tail; a cell whose testbed cannot be built is marked failed; the matrix goes on. Ctrl-C /
SIGTERM tear the testbed down (its own guarantees) and leave the partial results file; SIGKILL is
handled by the testbed's reaper; the profiling helper process dies with the bench
(``PR_SET_PDEATHSIG``).

**Outputs.** ``<out>/results/<name>.json`` (rewritten after every run: every raw repetition and
the medians), and unless ``--no-report``: the Markdown tables between the markers of
``<out>/README.md`` and PNG plots in ``<out>/`` (:mod:`ralp_tf.bench_plots`). ``--json`` prints
one JSON object (a key per strategy for a single cell).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ralp_tf.errors import RalpError, ValidationError

STRATEGIES = ("ps", "ralp", "scheduler", "allreduce", "horovod", "rejected")
DEFAULT_STRATEGIES = ("ps", "ralp", "scheduler", "allreduce", "horovod")
DEFAULT_MODELS = ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")
DEFAULT_WORKERS = (1, 2, 3)
DEFAULT_BANDWIDTHS = ("100mbit", "1gbit", "uncapped")
PS_STRATEGIES = ("ps", "ralp", "scheduler", "rejected")
RING_STRATEGIES = ("allreduce", "horovod")
NUM_PS = 1
#: Memory budget per TensorFlow task used to reject cells the machine cannot hold.
MEM_PER_TASK_GIB = 1.0
QUICK = {"model": "small_cnn", "workers": 2, "bandwidth": "1gbit", "strategies": ("ps", "ralp", "allreduce"),
         "repeats": 1, "steps": 5, "warmup": 2}
README_BEGIN = "<!-- ralp-tf bench: generated tables begin (do not edit by hand) -->"
README_END = "<!-- ralp-tf bench: generated tables end -->"
#: Targets of issue 4 (see :func:`targets`).
STEP_TOLERANCE = 0.25
BYTES_TOLERANCE = 0.10


class BenchError(RalpError, RuntimeError):
    """The benchmark could not run (no testbed possible, output not writable, ...)."""


class BenchConfigError(ValidationError):
    """Bad ``ralp-tf bench`` arguments: unknown model or strategy, bad bandwidth, too many workers."""


# ------------------------------------------------------------------------------------------
# configuration


@dataclasses.dataclass(frozen=True)
class Cell:
    """One matrix cell: ``workers`` workers and 1 PS training ``model`` over ``bandwidth`` links."""

    model: str
    workers: int
    bandwidth: str  # canonical text, e.g. "100mbit", "1gbit", "uncapped"
    #: strategies of this cell only (``--cell M:W:BW:s1+s2``); None: the run's ``--strategies``
    strategies: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.model}/w{self.workers}/{self.bandwidth}"

    @property
    def tasks(self) -> list[str]:
        return ["chief"] + [f"worker{i}" for i in range(self.workers)] + [f"ps{i}" for i in range(NUM_PS)]

    @property
    def bandwidth_bps(self) -> float:
        from ralp_tf.cluster import parse_bandwidth

        return parse_bandwidth(self.bandwidth)


@dataclasses.dataclass
class BenchConfig:
    """Everything one ``ralp-tf bench`` invocation does (built by :func:`config_from_args`)."""

    cells: list[Cell]
    strategies: tuple[str, ...]
    repeats: int = 3
    batch: int = 32
    steps: int | None = None  # None: auto (see module doc)
    warmup: int | None = None  # None: auto
    window_s: float = 20.0
    min_steps: int = 2
    max_steps: int = 10
    prefix: str = "rbench"
    testbed: str = "auto"  # auto | netns | loopback
    scheduler_solver: str = "exact"
    out_dir: Path = Path("benchmarks")
    name: str = ""
    report: bool = True
    json_out: bool = False
    quick: bool = False
    command: str = ""


def _split(text: str | Sequence[str] | None) -> list[str]:
    if text is None:
        return []
    items = [text] if isinstance(text, str) else list(text)
    return [p.strip() for item in items for p in str(item).split(",") if p.strip()]


def parse_strategies(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Comma-separated strategy names -> tuple, in the order given, without duplicates."""
    names = _split(text)
    if not names:
        raise BenchConfigError(f"no strategies given; use some of {','.join(STRATEGIES)}")
    bad = [n for n in names if n not in STRATEGIES]
    if bad:
        raise BenchConfigError(f"unknown strategy {bad[0]!r}; use one or more of {','.join(STRATEGIES)} "
                               "(comma-separated)")
    return tuple(dict.fromkeys(names))


def parse_models(text: str | Sequence[str] | None) -> list[str]:
    """Comma-separated built-in model names (``ralp_tf.models``)."""
    from ralp_tf.models import BUILTIN_MODELS

    names = _split(text)
    if not names:
        raise BenchConfigError("no models given; use e.g. --models alexnet_cifar,vgg16_cifar")
    bad = [n for n in names if n not in BUILTIN_MODELS]
    if bad:
        raise BenchConfigError(f"unknown model {bad[0]!r}; the benchmark runs built-in models: "
                               f"{', '.join(sorted(BUILTIN_MODELS))}")
    return list(dict.fromkeys(names))


def parse_bandwidths(text: str | Sequence[str] | None) -> list[str]:
    """Comma-separated link rates (``100mbit``, ``1gbit``, ``uncapped`` ...) -> canonical texts."""
    from ralp_tf.cluster import format_bandwidth, parse_bandwidth

    names = _split(text)
    if not names:
        raise BenchConfigError("no bandwidths given; use e.g. --bandwidths 100mbit,1gbit,uncapped")
    out = []
    for n in names:
        try:
            out.append(format_bandwidth(parse_bandwidth(n)))
        except RalpError as exc:
            raise BenchConfigError(f"--bandwidth: {exc}") from None
    return list(dict.fromkeys(out))


def max_workers() -> int:
    """Most workers one cell can hold here: tasks (workers + chief + PS) within the memory the
    testbed allows (``MEM_PER_TASK_GIB`` per TensorFlow task) and its 250-port bridge."""
    from ralp_tf.testbed import max_tasks_for_memory

    return max(min(max_tasks_for_memory(MEM_PER_TASK_GIB), 250) - 1 - NUM_PS, 0)


def parse_workers(text: str | Sequence[str] | None) -> list[int]:
    """Comma-separated worker counts, each >= 1 and within :func:`max_workers`."""
    names = _split(text)
    if not names:
        raise BenchConfigError("no worker counts given; use e.g. --workers 1,2,3")
    out = []
    limit = max_workers()
    for n in names:
        try:
            w = int(n)
        except ValueError:
            raise BenchConfigError(f"--workers: {n!r} is not an integer; write e.g. --workers 1,2,3") from None
        if w < 1:
            raise BenchConfigError(f"--workers: must be >= 1, got {w}")
        if w > limit:
            raise BenchConfigError(
                f"--workers {w} is more than this machine can hold: a cell of {w} workers + chief + {NUM_PS} PS "
                f"needs {w + 1 + NUM_PS} TensorFlow tasks (~{MEM_PER_TASK_GIB:g} GiB each) and at most "
                f"{limit} workers fit in the memory available now; use fewer workers")
        out.append(w)
    return list(dict.fromkeys(out))


def parse_cell(text: str) -> Cell:
    """``MODEL:WORKERS:BANDWIDTH[:STRATEGY+STRATEGY...]`` -> :class:`Cell`."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise BenchConfigError(f"--cell {text!r} is not MODEL:WORKERS:BANDWIDTH[:STRATEGY+...], e.g. "
                               "alexnet_cifar:3:1gbit or vgg16_cifar:2:100mbit:ps+ralp+horovod")
    strategies = parse_strategies(parts[3].replace("+", ",")) if len(parts) == 4 else None
    return Cell(parse_models(parts[0])[0], parse_workers(parts[1])[0], parse_bandwidths(parts[2])[0], strategies)


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


def config_from_args(args: argparse.Namespace, argv: Sequence[str] | None = None) -> BenchConfig:
    """Validate the parsed arguments (raising :class:`BenchConfigError` with the fix) and build
    the run's :class:`BenchConfig`."""
    explicit_cells = [parse_cell(c) for c in _split(args.cell)] if args.cell else []
    if args.quick:
        strategies = parse_strategies(args.strategies) if args.strategies else QUICK["strategies"]
        models = parse_models(args.models) if args.models else [QUICK["model"]]
        workers = parse_workers(args.workers) if args.workers else [QUICK["workers"]]
        bws = parse_bandwidths(args.bandwidths) if args.bandwidths else [QUICK["bandwidth"]]
        repeats = args.repeats if args.repeats is not None else QUICK["repeats"]
        steps = args.steps if args.steps is not None else QUICK["steps"]
        warmup = args.warmup if args.warmup is not None else QUICK["warmup"]
    else:
        strategies = parse_strategies(args.strategies or ",".join(DEFAULT_STRATEGIES))
        models = parse_models(args.models) if args.models else ([] if explicit_cells else list(DEFAULT_MODELS))
        workers = parse_workers(args.workers) if args.workers else list(DEFAULT_WORKERS)
        bws = parse_bandwidths(args.bandwidths) if args.bandwidths else list(DEFAULT_BANDWIDTHS)
        repeats = args.repeats if args.repeats is not None else 3
        steps, warmup = args.steps, args.warmup
    cells = [Cell(m, w, b) for m in models for w in workers for b in bws]
    for c in explicit_cells:
        same = [i for i, x in enumerate(cells) if (x.model, x.workers, x.bandwidth) == (c.model, c.workers, c.bandwidth)]
        if same:
            cells[same[0]] = c
        else:
            cells.append(c)
    _positive(repeats, "--repeats")
    _positive(args.batch, "--batch")
    if steps is not None:
        _positive(steps, "--steps")
    if warmup is not None:
        _positive(warmup, "--warmup")
    if args.min_steps is not None:
        _positive(args.min_steps, "--min-steps")
    if not args.window_s > 0:
        raise BenchConfigError(f"--window-s must be positive, got {args.window_s}")
    _positive(args.max_steps, "--max-steps")
    from ralp_tf.testbed.base import validate_prefix

    try:
        validate_prefix(args.prefix)
    except RalpError as exc:
        raise BenchConfigError(f"--prefix: {exc}") from None
    name = args.name or (("quick-" if args.quick else "") + time.strftime("%Y%m%d-%H%M%S"))
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise BenchConfigError(f"--name {name!r}: use letters, digits, '-', '_' and '.' only")
    report = args.report if args.report is not None else not (args.quick or args.json)
    return BenchConfig(cells=cells, strategies=strategies, repeats=repeats, batch=args.batch, steps=steps,
                       warmup=warmup, window_s=args.window_s,
                       min_steps=min(args.min_steps if args.min_steps is not None else 2, args.max_steps),
                       max_steps=args.max_steps, prefix=args.prefix, testbed=args.testbed,
                       scheduler_solver=args.scheduler_solver, out_dir=Path(args.out_dir), name=name,
                       report=report, json_out=args.json, quick=args.quick,
                       command="ralp-tf bench " + " ".join(argv or []))


# ------------------------------------------------------------------------------------------
# profiles and predictions (no TensorFlow in this process: profiling runs in a child)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def measure_profile(model: str, batch: int, out_path: str, timeout: float = 600.0) -> Any:
    """Profile ``model`` at ``batch`` with measured layer times (``profile(measure=True)``) in a
    child process (it dies with this one) and return the :class:`~ralp_tf.profile.ModelProfile`.
    Raises :class:`BenchError` with the child's output tail on failure."""
    from ralp_tf.profile import ModelProfile
    from ralp_tf.testbed import jobs

    cmd = [sys.executable, "-m", "ralp_tf.bench", "_profile", model, str(batch), out_path]
    try:
        proc = subprocess.run(cmd, env=jobs.base_env(), capture_output=True, text=True, timeout=timeout,
                              preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired:
        raise BenchError(f"profiling {model} took more than {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise BenchError(f"profiling {model} failed (exit {proc.returncode}):\n{tail}")
    return ModelProfile.from_json(Path(out_path).read_text())


def _profile_main(argv: Sequence[str]) -> int:
    """Child entry: ``python -m ralp_tf.bench _profile MODEL BATCH OUT``."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tf_keras

    from ralp_tf.models import resolve_model
    from ralp_tf.profile import profile

    model, batch, out = argv[0], int(argv[1]), argv[2]
    tf_keras.utils.set_random_seed(0)
    prof = profile(resolve_model(model)(), batch_size=batch, measure=True)
    Path(out).write_text(prof.to_json())
    return 0


def compute_scale(workers: int) -> float:
    """The cores-sharing factor applied to measured layer times, as run_ps does:
    ``max(1, workers / cores)``."""
    return max(1.0, workers / (os.cpu_count() or 1))


def scaled_profile(prof: Any, scale: float) -> Any:
    """``prof`` with every measured layer time multiplied by ``scale``."""
    if scale == 1.0:
        return prof
    return dataclasses.replace(prof, layers=tuple(
        dataclasses.replace(l, measured_seconds=None if l.measured_seconds is None else l.measured_seconds * scale)
        for l in prof.layers))


def cell_cluster(cell: Cell, bandwidth_bps: float) -> Any:
    from ralp_tf.cluster import Cluster

    return Cluster.local(cell.workers, NUM_PS, bandwidth=bandwidth_bps)


def predictions(prof: Any, cell: Cell, bandwidth_bps: float, scheduler_plan: Any = None) -> dict[str, Any]:
    """Bench-side cost-model predictions for a cell (used for steps, ETA and the ring strategies):
    ``{strategy: {"step_s", "payload_bytes_per_step"}}`` per global step, plus the analyzer's
    decision and the rejected alternative's plan."""
    from ralp_tf.analyzer import analyze
    from ralp_tf.costmodel import estimate, estimate_allreduce

    p = scaled_profile(prof, compute_scale(cell.workers))
    cluster = cell_cluster(cell, bandwidth_bps)
    a = analyze(p, cluster)
    n = cell.workers
    ring = estimate_allreduce(p, cluster)
    out: dict[str, Any] = {
        "ps": {"step_s": a.baseline.estimate.step_s, "payload_bytes_per_step": a.baseline.estimate.bytes_per_step * n},
        "ralp": {"step_s": a.chosen.estimate.step_s, "payload_bytes_per_step": a.chosen.estimate.bytes_per_step * n},
        "allreduce": {"step_s": ring.step_s, "payload_bytes_per_step": ring.bytes_per_step,
                      "bottleneck": ring.bottleneck, "compute_s": ring.worker_compute_s, "comm_s": ring.comm_s},
        "analysis": {"split": a.is_split, "chosen": a.chosen.label, "predicted_speedup": a.predicted_speedup,
                     "best_split": a.best_split.label if a.best_split else None,
                     "compute_scale": compute_scale(n)},
    }
    out["horovod"] = dict(out["allreduce"])
    if not a.is_split and a.best_split is not None:
        e = a.best_split.estimate
        out["rejected"] = {"step_s": e.step_s, "payload_bytes_per_step": e.bytes_per_step * n,
                           "plan": a.best_split.plan, "label": a.best_split.label}
    if scheduler_plan is not None:
        e = estimate(p, cluster, scheduler_plan)
        out["scheduler"] = {"step_s": e.step_s, "payload_bytes_per_step": e.bytes_per_step * n}
    return out


def scheduler_plan(prof: Any, cell: Cell, bandwidth_bps: float, solver_name: str) -> Any:
    """A :class:`ralp_tf.Plan` from ``scheduler.SOLVERS[solver_name]().plan(profile, cluster)``
    (profile scaled like run_ps's). Raises :class:`BenchError` naming why it is unavailable."""
    try:
        import scheduler
    except Exception as exc:  # not there yet, or broken while being written
        raise BenchError(f"the scheduler package is not importable ({type(exc).__name__}: {exc})") from None
    solvers = getattr(scheduler, "SOLVERS", {})
    cls = solvers.get(solver_name)
    if cls is None:
        raise BenchError(f"scheduler offers no solver {solver_name!r} (has: {', '.join(sorted(solvers)) or 'none'})")
    from ralp_tf.plan import Plan

    try:
        plan = cls().plan(scaled_profile(prof, compute_scale(cell.workers)), cell_cluster(cell, bandwidth_bps))
    except Exception as exc:
        raise BenchError(f"scheduler.{cls.__name__}().plan failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(plan, Plan):
        raise BenchError(f"scheduler.{cls.__name__}().plan returned {type(plan).__name__}, not a ralp_tf.Plan")
    return plan


def choose_steps(cfg: BenchConfig, predicted_step_s: float | None) -> tuple[int, int]:
    """(timed global steps, warm-up global steps) for one run (see the module doc)."""
    slow = predicted_step_s is not None and predicted_step_s > 5.0
    warmup = cfg.warmup if cfg.warmup is not None else (1 if slow else 2)
    if cfg.steps is not None:
        return cfg.steps, warmup
    if not predicted_step_s or not math.isfinite(predicted_step_s) or predicted_step_s <= 0:
        return cfg.max_steps, warmup
    steps = math.ceil(cfg.window_s / predicted_step_s)
    return max(cfg.min_steps, min(cfg.max_steps, steps)), warmup


# ------------------------------------------------------------------------------------------
# progress


class Progress:
    """Progress lines on stderr: cell, strategy, repetition, elapsed and ETA.

    ETA = sum over remaining runs of ``startup_s + (warmup + steps) * predicted_step_s * ratio``,
    where ``startup_s`` (per run) and ``ratio`` (measured / predicted step time) are learned
    from the runs finished so far (initially 35 s and 1.5).
    """

    def __init__(self, quiet: bool = False) -> None:
        self.t0 = time.monotonic()
        self.quiet = quiet
        self.remaining: dict[tuple[str, str, int], float] = {}
        self.startups: list[float] = []
        self.ratios: list[float] = []

    def plan_run(self, key: tuple[str, str, int], warmup: int, steps: int, pred_step_s: float | None) -> None:
        self.remaining[key] = (warmup + steps) * (pred_step_s if pred_step_s and math.isfinite(pred_step_s) else 2.0)

    def eta_s(self) -> float:
        startup = statistics.median(self.startups) if self.startups else 35.0
        ratio = statistics.median(self.ratios) if self.ratios else 1.5
        return sum(startup + t * ratio for t in self.remaining.values())

    def done_run(self, key: tuple[str, str, int], wall_s: float, timed_s: float | None, predicted_s: float,
                 steps: int = 1, warmup: int = 0) -> None:
        """Learn from a finished run: ``ratio = timed_s / predicted_s`` and ``startup = wall_s -
        timed_s * (steps + warmup) / steps`` (the warm-up steps take about as long as timed ones)."""
        self.remaining.pop(key, None)
        if timed_s is not None and predicted_s > 0:
            self.ratios.append(timed_s / predicted_s)
            self.startups.append(max(wall_s - timed_s * (steps + warmup) / max(steps, 1), 0.0))

    def drop_cell(self, cell_key: str) -> None:
        for k in [k for k in self.remaining if k[0] == cell_key]:
            del self.remaining[k]

    def say(self, msg: str) -> None:
        if self.quiet:
            return
        el = time.monotonic() - self.t0
        print(f"[bench {_hms(el)} | ETA {_hms(self.eta_s())}] {msg}", file=sys.stderr, flush=True)


def _hms(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# ------------------------------------------------------------------------------------------
# running


def _median(xs: Iterable[Any]) -> float | None:
    vals = [x for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]
    return statistics.median(vals) if vals else None


def _rel_err(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or not predicted:
        return None
    return measured / predicted - 1.0


def summarize_strategy(runs: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """The median record of one strategy in one cell.

    ``valid`` is true only if every one of ``repeats`` repetitions ran and was valid; medians are
    taken over the valid runs. ``spread`` = (max - min) / median of samples/s (run-to-run noise).
    """
    ok = [r for r in runs if r.get("valid")]
    sps = [r["samples_per_s"] for r in ok if r.get("samples_per_s")]
    med: dict[str, Any] = {
        "samples_per_s": _median(sps),
        "measured_step_s": _median(r.get("measured_step_s") for r in ok),
        "bytes_per_step": _median(r.get("bytes_per_step") for r in ok),
        "predicted_step_s": _median(r.get("predicted_step_s") for r in ok) if ok else
        _median(r.get("predicted_step_s") for r in runs),
        "predicted_bytes_per_step": _median(r.get("predicted_bytes_per_step") for r in ok) if ok else
        _median(r.get("predicted_bytes_per_step") for r in runs),
        "valid": bool(runs) and len(ok) == repeats and len(runs) == repeats,
        "valid_runs": len(ok), "n_runs": len(runs),
        "samples_per_s_all": sps,
        "spread": (max(sps) - min(sps)) / statistics.median(sps) if len(sps) > 1 else None,
    }
    med["step_error"] = _rel_err(med["measured_step_s"], med["predicted_step_s"])
    med["bytes_error"] = _rel_err(med["bytes_per_step"], med["predicted_bytes_per_step"])
    bad = [r for r in runs if not r.get("valid")]
    if bad:
        med["invalid_reason"] = "; ".join(sorted({str(r.get("invalid_reason", "invalid")) for r in bad}))
        med["log_tail"] = bad[-1].get("log_tail")
    med["status"] = "ok" if med["valid"] else ("partial" if ok else "failed")
    return med


class Bench:
    """Runs a :class:`BenchConfig` and keeps the results document up to date on disk."""

    def __init__(self, cfg: BenchConfig, progress: Progress | None = None) -> None:
        self.cfg = cfg
        self.progress = progress or Progress(quiet=False)
        self.results_path = cfg.out_dir / "results" / f"{cfg.name}.json"
        self.work = Path(tempfile.mkdtemp(prefix="ralp_bench_"))
        self.profiles: dict[str, Any] = {}
        self.doc: dict[str, Any] = {
            "name": cfg.name, "command": cfg.command, "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "machine": machine_info(), "config": {
                "strategies": list(cfg.strategies), "repeats": cfg.repeats, "batch_per_worker": cfg.batch,
                "steps": cfg.steps or "auto", "warmup": cfg.warmup or "auto", "window_s": cfg.window_s,
                "max_steps": cfg.max_steps, "num_ps": NUM_PS, "testbed": cfg.testbed,
                "scheduler_solver": cfg.scheduler_solver,
                "cells": [c.key + (":" + "+".join(c.strategies) if c.strategies else "") for c in cfg.cells]},
            "units": {"bytes_per_step": "wire bytes (Ethernet frames) summed over every link's tx, per global step "
                                        "(loopback fallback: TCP payload)",
                      "global_step": "workers x batch_per_worker samples", "step_s": "seconds per global step",
                      "samples_per_s": "global samples per second, median of the repetitions"},
            "cells": [], "complete": False,
        }

    # ---- persistence
    def save(self) -> None:
        self.results_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.results_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=_json_default))
        os.replace(tmp, self.results_path)

    # ---- the matrix
    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.monotonic()
        try:
            self._plan_eta()
            for ci, cell in enumerate(cfg.cells):
                self.run_cell(cell, ci)
            self.doc["complete"] = True
        except KeyboardInterrupt:
            self.doc["interrupted"] = True
            raise
        finally:
            self.doc["wall_s"] = time.monotonic() - t0
            self.doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
            self.doc["targets"] = targets(self.doc)
            self.save()
            import shutil

            shutil.rmtree(self.work, ignore_errors=True)
        return self.doc

    def _plan_eta(self) -> None:
        """Profile every model once up front and register every planned run with the ETA."""
        from ralp_tf.testbed import netns_support

        emulated = self.cfg.testbed == "netns" or (self.cfg.testbed == "auto" and netns_support()[0])
        for cell in self.cfg.cells:
            try:
                prof = self._profile(cell.model)
                pred = predictions(prof, cell, cell.bandwidth_bps if emulated else math.inf)
            except (BenchError, RalpError):
                pred = {}
            for s in cell.strategies or self.cfg.strategies:
                p = pred.get(s, pred.get("ralp", {})).get("step_s")
                steps, warmup = choose_steps(self.cfg, p)
                for rep in range(self.cfg.repeats):
                    self.progress.plan_run((cell.key, s, rep), warmup, steps, p)

    def _profile(self, model: str) -> Any:
        if model not in self.profiles:
            self.progress.say(f"profiling {model} (batch {self.cfg.batch}, measured layer times)")
            try:
                self.profiles[model] = measure_profile(model, self.cfg.batch, str(self.work / f"{model}.profile.json"))
            except BenchError as exc:
                self.profiles[model] = exc
        p = self.profiles[model]
        if isinstance(p, BenchError):
            raise p
        return p

    def run_cell(self, cell: Cell, index: int) -> None:
        from ralp_tf.testbed import LoopbackTestbed, Testbed, make_testbed

        cfg = self.cfg
        entry: dict[str, Any] = {"model": cell.model, "workers": cell.workers, "bandwidth": cell.bandwidth,
                                 "key": cell.key, "strategies": {}, "status": "running"}
        self.doc["cells"].append(entry)
        head = f"cell {index + 1}/{len(cfg.cells)} {cell.key}"
        try:
            prof = self._profile(cell.model)
        except BenchError as exc:
            prof = None
            entry["profile_error"] = str(exc)
        t_cell = time.monotonic()
        try:
            if cfg.testbed == "loopback":
                tb = LoopbackTestbed(cell.tasks, cell.bandwidth, prefix=cfg.prefix, ignore_bandwidth=True,
                                     mem_per_task_gib=MEM_PER_TASK_GIB)
            elif cfg.testbed == "netns":
                tb = Testbed(cell.tasks, cell.bandwidth, prefix=cfg.prefix, mem_per_task_gib=MEM_PER_TASK_GIB)
            else:
                tb = make_testbed(cell.tasks, cell.bandwidth, prefix=cfg.prefix, mem_per_task_gib=MEM_PER_TASK_GIB)
            tb.start()
        except KeyboardInterrupt:
            raise
        except (RalpError, OSError) as exc:
            entry["status"] = "failed"
            entry["error"] = f"testbed: {type(exc).__name__}: {exc}"
            self.progress.drop_cell(cell.key)
            self.progress.say(f"{head}: testbed failed: {exc}")
            self.save()
            return
        try:
            entry["testbed"] = tb.describe()
            eff_bps = tb.bandwidth_bps
            self._run_strategies(cell, entry, tb, prof, eff_bps, head)
        finally:
            tb.close()
            entry["wall_s"] = time.monotonic() - t_cell
            self.save()

    def _run_strategies(self, cell: Cell, entry: dict[str, Any], tb: Any, prof: Any, eff_bps: float,
                        head: str) -> None:
        from ralp_tf.costmodel import wire_bytes

        cfg = self.cfg
        strategies = cell.strategies or cfg.strategies
        wire = getattr(tb, "bytes_kind", "") == "wire"
        to_kind = (lambda b: wire_bytes(b) if b is not None else None) if wire else (lambda b: b)
        sched_plan = None
        skipped: dict[str, str] = {}
        plans: dict[str, str] = {}
        if "scheduler" in strategies:
            if prof is None:
                skipped["scheduler"] = f"no profile to plan with ({entry.get('profile_error')})"
            else:
                try:
                    sched_plan = scheduler_plan(prof, cell, eff_bps, cfg.scheduler_solver)
                    path = self.work / f"{cell.model}-w{cell.workers}-{cell.bandwidth}-scheduler.plan.json"
                    sched_plan.save(str(path))
                    plans["scheduler"] = str(path)
                    entry["scheduler_plan"] = sched_plan.to_dict()
                except BenchError as exc:
                    skipped["scheduler"] = str(exc)
        pred: dict[str, Any] = {}
        if prof is not None:
            pred = predictions(prof, cell, eff_bps, sched_plan)
            entry["bench_predictions"] = {k: {kk: vv for kk, vv in v.items() if kk != "plan"}
                                          for k, v in pred.items()}
        if "rejected" in strategies:
            if prof is None:
                skipped["rejected"] = f"no profile to analyze ({entry.get('profile_error')})"
            elif "rejected" in pred:
                path = self.work / f"{cell.model}-w{cell.workers}-{cell.bandwidth}-rejected.plan.json"
                pred["rejected"]["plan"].save(str(path))
                plans["rejected"] = str(path)
                entry["rejected_label"] = pred["rejected"]["label"]
            elif pred.get("analysis", {}).get("split"):
                skipped["rejected"] = ("the analyzer chose a split, so the alternative it rejected is stock PS: "
                                       "that is the 'ps' strategy")
            else:
                skipped["rejected"] = "the analyzer found no possible split, so there is no rejected alternative"
        if "horovod" in strategies:
            from ralp_tf.testbed.horovod_job import horovod_available

            ok, why = horovod_available()
            if not ok:
                skipped["horovod"] = why
        active = [s for s in strategies if s not in skipped]
        for s in strategies:  # the configured order, in the document and in --json
            entry["strategies"][s] = {}
        for s, why in skipped.items():
            entry["strategies"][s] = {"status": "skipped", "reason": why, "valid": False, "runs": []}
            for rep in range(cfg.repeats):
                self.progress.remaining.pop((cell.key, s, rep), None)
            self.progress.say(f"{head}: {s} skipped: {why}")
        schedule: dict[str, tuple[int, int]] = {}
        for s in active:
            ps_ = pred.get(s, {}).get("step_s")
            schedule[s] = choose_steps(cfg, ps_)
            for rep in range(cfg.repeats):
                self.progress.plan_run((cell.key, s, rep), *reversed(schedule[s]), ps_)
            entry["strategies"][s] = {"status": "running", "steps": schedule[s][0], "warmup": schedule[s][1],
                                      "runs": []}
        for rep in range(cfg.repeats):
            for s in active:
                steps, warmup = schedule[s]
                self.progress.say(f"{head} | {s} rep {rep + 1}/{cfg.repeats} ({warmup}+{steps} global steps)")
                t_run = time.monotonic()
                rec = self._run_one(s, tb, cell, steps, warmup, plans.get(s), pred.get(s, {}).get("step_s"))
                rec["wall_s"] = time.monotonic() - t_run
                rec["repetition"] = rep + 1
                rec.pop("testbed", None)
                if s in RING_STRATEGIES:
                    r = pred.get(s)
                    rec["predicted_step_s"] = r["step_s"] if r else None
                    rec["predicted_payload_bytes_per_step"] = r["payload_bytes_per_step"] if r else None
                else:
                    rec["predicted_payload_bytes_per_step"] = rec.get("predicted_bytes_per_step")
                rec["predicted_bytes_per_step"] = to_kind(rec.get("predicted_payload_bytes_per_step"))
                rec["bytes_kind"] = getattr(tb, "bytes_kind", None)
                entry["strategies"][s]["runs"].append(rec)
                timed = (rec["measured_step_s"] * steps) if rec.get("measured_step_s") else None
                self.progress.done_run((cell.key, s, rep), rec["wall_s"], timed,
                                       steps * (pred.get(s, {}).get("step_s") or 0.0), steps, warmup)
                sps = rec.get("samples_per_s")
                self.progress.say(
                    f"{head} | {s} rep {rep + 1}: " + (
                        f"{sps:.1f} samples/s, {rec['measured_step_s']:.2f} s/step, "
                        f"{(rec.get('bytes_per_step') or 0) / 1e6:.1f} MB/step" if rec.get("valid") and sps else
                        f"FAILED: {rec.get('invalid_reason')}") + f" ({rec['wall_s']:.0f} s)")
                self.save()
        for s in active:
            st = entry["strategies"][s]
            st.update(summarize_strategy(st["runs"], cfg.repeats))
        ok = [s for s in active if entry["strategies"][s]["status"] == "ok"]
        entry["status"] = "ok" if len(ok) == len(active) else ("partial" if ok else "failed")
        base = entry["strategies"].get("ps", {}).get("samples_per_s")
        for s, st in entry["strategies"].items():
            if base and st.get("samples_per_s"):
                st["speedup_vs_ps"] = st["samples_per_s"] / base

    def _run_one(self, strategy: str, tb: Any, cell: Cell, steps: int, warmup: int, plan_path: str | None,
                 pred_step_s: float | None) -> dict[str, Any]:
        """One repetition of one strategy. Never raises for a failed job (the record has
        ``valid: false``); only KeyboardInterrupt escapes."""
        from ralp_tf.testbed.horovod_job import run_horovod
        from ralp_tf.testbed.mwms_job import run_mwms
        from ralp_tf.testbed.ps_job import run_ps

        expected = (warmup + steps) * (pred_step_s if pred_step_s and math.isfinite(pred_step_s) else 5.0)
        timeout = min(240.0 + 4.0 * expected, 3600.0)
        workers = [f"worker{i}" for i in range(cell.workers)]
        try:
            if strategy in PS_STRATEGIES:
                policy = {"ps": "ps", "ralp": "ralp"}.get(strategy, plan_path)
                rec = run_ps(tb, cell.model, policy, workers=cell.workers, ps=NUM_PS, batch=self.cfg.batch,
                             steps=steps, warmup=warmup, timeout=timeout)
                rec["strategy"] = strategy
            elif strategy == "allreduce":
                rec = run_mwms(tb, cell.model, workers, batch=self.cfg.batch, steps=steps, warmup=warmup,
                               timeout=timeout)
            elif strategy == "horovod":
                rec = run_horovod(tb, cell.model, workers, batch=self.cfg.batch, steps=steps, warmup=warmup,
                                  timeout=timeout)
            else:  # pragma: no cover - parse_strategies rejects it
                raise BenchConfigError(f"unknown strategy {strategy!r}")
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a launcher error: this run failed, the matrix goes on
            import traceback

            rec = {"strategy": strategy, "model": cell.model, "workers": cell.workers, "valid": False,
                   "invalid_reason": f"{type(exc).__name__}: {exc}",
                   "log_tail": "".join(traceback.format_exc().splitlines(True)[-15:])}
        rec.setdefault("steps", steps)
        rec["warmup"] = warmup
        return rec


def _json_default(o: Any) -> Any:
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


# ------------------------------------------------------------------------------------------
# targets and the report


def _cell(doc: dict[str, Any], model: str, workers: int, bw: str) -> dict[str, Any] | None:
    for c in doc.get("cells", []):
        if c["model"] == model and c["workers"] == workers and c["bandwidth"] == bw:
            return c
    return None


def _sps(cell: dict[str, Any] | None, s: str) -> float | None:
    if not cell:
        return None
    st = cell["strategies"].get(s, {})
    return st.get("samples_per_s") if st.get("status") in ("ok", "partial") else None


def _range(cell: dict[str, Any], s: str) -> tuple[float, float] | None:
    xs = cell["strategies"].get(s, {}).get("samples_per_s_all") or []
    return (min(xs), max(xs)) if xs else None


def targets(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 4's targets evaluated on whatever cells the document holds. Each item:
    ``{"target", "value", "goal", "met": True|False|None (not measured), "note"}``."""
    out: list[dict[str, Any]] = []

    def ratio_target(label: str, model: str, bw: str, a: str, b: str, goal: float | None, note: str = "") -> None:
        c = _cell(doc, model, 2, bw)
        x, y = _sps(c, a), _sps(c, b)
        if x is None or y is None:
            return
        r = x / y
        out.append({"target": label, "value": r, "goal": goal, "met": (r >= goal) if goal is not None else None,
                    "note": note})

    ratio_target("alexnet_cifar, 2 workers, 100mbit: RALP / stock PSS samples/s", "alexnet_cifar", "100mbit",
                 "ralp", "ps", 10.0)
    ratio_target("alexnet_cifar, 2 workers, 1gbit: RALP / stock PSS samples/s", "alexnet_cifar", "1gbit",
                 "ralp", "ps", 4.0)
    for bw in ("100mbit", "1gbit"):
        for ring in ("horovod", "allreduce"):
            ratio_target(f"alexnet_cifar, 2 workers, {bw}: RALP / {ring} samples/s", "alexnet_cifar", bw,
                         "ralp", ring, 1.0)
    c = _cell(doc, "vgg16_cifar", 2, "100mbit")
    if c and _sps(c, "ralp") and _sps(c, "ps"):
        ps_b = c["strategies"]["ps"].get("bytes_per_step")
        ralp_b = c["strategies"]["ralp"].get("bytes_per_step")
        bound = ps_b / ralp_b if ps_b and ralp_b else None
        r = _sps(c, "ralp") / _sps(c, "ps")
        if bound:
            out.append({"target": "vgg16_cifar, 2 workers, 100mbit: RALP / PSS as a share of the traffic bound",
                        "value": r / bound, "goal": 0.75, "met": r / bound >= 0.75,
                        "note": f"speed-up {r:.2f}x, traffic bound (measured bytes ratio) {bound:.2f}x"})
    for ring in ("allreduce", "horovod"):
        ratio_target(f"vgg16_cifar, 2 workers, 100mbit: RALP / {ring} samples/s (a ring may win: 1 PS)",
                     "vgg16_cifar", "100mbit", "ralp", ring, None)
    # Analyzer choice vs the alternative it rejected, in every cell where both were measured.
    for cell in doc.get("cells", []):
        split = (cell.get("bench_predictions") or {}).get("analysis", {}).get("split")
        rejected = "ps" if split else "rejected"
        if split is None or _sps(cell, "ralp") is None or _sps(cell, rejected) is None:
            continue
        ch, rj = _range(cell, "ralp"), _range(cell, rejected)
        med_c, med_r = _sps(cell, "ralp"), _sps(cell, rejected)
        within_noise = ch is not None and rj is not None and ch[1] >= rj[0]
        out.append({"target": f"{cell['key']}: analyzer's choice ({'split' if split else 'no split'}) not slower "
                              f"than the rejected {'stock PS' if split else 'best split'}",
                    "value": med_c / med_r, "goal": 1.0, "met": med_c >= med_r or within_noise,
                    "note": "ranges of the repetitions overlap" if med_c < med_r and within_noise else ""})
    # Cost model.
    n_step = n_step_ok = n_b = n_b_ok = 0
    for cell in doc.get("cells", []):
        for s, st in cell["strategies"].items():
            if st.get("status") not in ("ok", "partial"):
                continue
            if st.get("step_error") is not None:
                n_step += 1
                n_step_ok += abs(st["step_error"]) <= STEP_TOLERANCE
            if st.get("bytes_error") is not None:
                n_b += 1
                n_b_ok += abs(st["bytes_error"]) <= BYTES_TOLERANCE
    if n_step:
        out.append({"target": "predicted step time within 25% of measured (strategy-cells)",
                    "value": n_step_ok / n_step, "goal": 1.0, "met": n_step_ok == n_step,
                    "note": f"{n_step_ok} of {n_step}"})
    if n_b:
        out.append({"target": "predicted bytes per step within 10% of measured (strategy-cells)",
                    "value": n_b_ok / n_b, "goal": 1.0, "met": n_b_ok == n_b, "note": f"{n_b_ok} of {n_b}"})
    return out


def _fmt(x: Any, spec: str = ".2f", none: str = "-") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.0f}%"


def markdown_tables(doc: dict[str, Any]) -> str:
    """The generated part of benchmarks/README.md: the results table and the targets table."""
    lines = [f"Results file: `{doc.get('results_file', '')}` (run `{doc['name']}`, started {doc['started']}, "
             f"{_hms(doc.get('wall_s') or 0)} wall{'; INCOMPLETE' if not doc.get('complete') else ''}).",
             f"Command: `{doc['command']}`", "",
             "| model | workers | link | strategy | samples/s (median) | vs PS | spread | measured s/step | "
             "predicted s/step | err | MB/step measured | MB/step predicted | err | steps | valid |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc.get("cells", []):
        if c.get("error"):
            lines.append(f"| {c['model']} | {c['workers']} | {c['bandwidth']} | (cell) | failed: "
                         f"{c['error'][:80]} |  |  |  |  |  |  |  |  |  |  |")
            continue
        for s, st in c["strategies"].items():
            if st.get("status") == "skipped":
                lines.append(f"| {c['model']} | {c['workers']} | {c['bandwidth']} | {s} | skipped: "
                             f"{st['reason'][:90]} |  |  |  |  |  |  |  |  |  |  |")
                continue
            mb = lambda v: None if v is None else v / 1e6  # noqa: E731
            lines.append(
                f"| {c['model']} | {c['workers']} | {c['bandwidth']} | {s} | {_fmt(st.get('samples_per_s'), '.1f')} | "
                f"{_fmt(st.get('speedup_vs_ps'), '.2f')}x | {_pct(st.get('spread'))} | "
                f"{_fmt(st.get('measured_step_s'), '.3f')} | {_fmt(st.get('predicted_step_s'), '.3f')} | "
                f"{_pct(st.get('step_error'))} | {_fmt(mb(st.get('bytes_per_step')), '.2f')} | "
                f"{_fmt(mb(st.get('predicted_bytes_per_step')), '.2f')} | {_pct(st.get('bytes_error'))} | "
                f"{st.get('warmup', '-')}+{st.get('steps', '-')} | {st.get('valid_runs', 0)}/{st.get('n_runs', 0)}"
                + ("" if st.get("valid") else f" ({str(st.get('invalid_reason', ''))[:60]})") + " |")
    lines += ["", "| target | value | goal | met | note |", "|---|---|---|---|---|"]
    for t in doc.get("targets", []):
        met = {True: "yes", False: "**no**", None: "(report)"}[t["met"]]
        goal = "-" if t["goal"] is None else f"{t['goal']:g}"
        lines.append(f"| {t['target']} | {t['value']:.2f} | {goal} | {met} | {t.get('note', '')} |")
    return "\n".join(lines)


README_HEAD = """# Benchmarks

`ralp-tf bench` results. The tables between the markers below are generated by the command;
everything else in this file is written by hand.

"""


def update_readme(path: Path, generated: str) -> None:
    """Replace the text between :data:`README_BEGIN` and :data:`README_END` in ``path`` (appending
    the markers if they are missing; creating the file if needed). The rest is left untouched."""
    text = path.read_text() if path.exists() else README_HEAD
    block = f"{README_BEGIN}\n{generated}\n{README_END}"
    if README_BEGIN in text and README_END in text:
        pre, rest = text.split(README_BEGIN, 1)
        post = rest.split(README_END, 1)[1]
        text = pre + block + post
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_report(doc: dict[str, Any], out_dir: Path) -> list[str]:
    """README tables and PNG plots for ``doc``; returns the files written."""
    written = []
    update_readme(out_dir / "README.md", markdown_tables(doc))
    written.append(str(out_dir / "README.md"))
    try:
        from ralp_tf import bench_plots
    except ImportError as exc:  # matplotlib missing: the tables are still there
        print(f"ralp-tf bench: plots skipped: {exc} (install the 'bench' extra: pip install -e '.[bench]')",
              file=sys.stderr)
        return written
    written += bench_plots.plot_all(doc, out_dir)
    return written


def strategy_json(doc: dict[str, Any]) -> dict[str, Any]:
    """``--json`` output: for one cell, ``{strategy: {...}}``; for several, ``{"cells": {key: {...}}}``."""
    keep = ("samples_per_s", "bytes_per_step", "predicted_step_s", "measured_step_s", "valid", "status",
            "predicted_bytes_per_step", "step_error", "bytes_error", "speedup_vs_ps", "spread", "valid_runs",
            "n_runs", "steps", "warmup", "reason", "invalid_reason", "log_tail", "samples_per_s_all")

    def one(cell: dict[str, Any]) -> dict[str, Any]:
        res = {}
        for s, st in cell["strategies"].items():
            d = {k: st.get(k) for k in keep if k in st}
            for k in ("samples_per_s", "bytes_per_step", "predicted_step_s", "measured_step_s"):
                d.setdefault(k, None)
            d["valid"] = bool(st.get("valid"))
            d["bytes_kind"] = cell.get("testbed", {}).get("bytes_kind")
            res[s] = d
        if cell.get("error"):
            res = {s: {"samples_per_s": None, "bytes_per_step": None, "predicted_step_s": None,
                       "measured_step_s": None, "valid": False, "status": "failed", "reason": cell["error"]}
                   for s in doc["config"]["strategies"]}
        return res

    cells = doc.get("cells", [])
    if len(cells) == 1:
        return one(cells[0])
    return {"cells": {c["key"]: one(c) for c in cells}}


# ------------------------------------------------------------------------------------------
# CLI


def register(subparsers: Any) -> None:
    """Add the ``bench`` subcommand to ``ralp-tf``."""
    p = subparsers.add_parser(
        "bench", help="benchmark RALP vs stock PS, a scheduler plan, MWMS and Horovod on an emulated network",
        description="Run the benchmark matrix (models x workers x bandwidth, 1 PS) on an emulated cluster "
                    "(network namespaces with tc-capped links as root; uncapped loopback otherwise).")
    p.add_argument("--models", "--model", dest="models", action="append",
                   help=f"comma-separated built-in models (default {','.join(DEFAULT_MODELS)})")
    p.add_argument("--workers", action="append", help="comma-separated worker counts (default 1,2,3)")
    p.add_argument("--bandwidths", "--bandwidth", dest="bandwidths", action="append",
                   help="comma-separated link rates, e.g. 100mbit,1gbit,uncapped (the default)")
    p.add_argument("--strategies", "--strategy", dest="strategies", action="append",
                   help=f"comma-separated, from {','.join(STRATEGIES)} (default {','.join(DEFAULT_STRATEGIES)})")
    p.add_argument("--cell", action="append",
                   help="extra cell MODEL:WORKERS:BANDWIDTH[:STRATEGY+STRATEGY...] (repeatable or comma-separated), "
                        "run after the matrix; the optional strategies replace --strategies for that cell")
    p.add_argument("--repeats", type=int, default=None, help="repetitions per strategy, median reported (default 3)")
    p.add_argument("--batch", type=int, default=32, help="batch per worker (default 32)")
    p.add_argument("--steps", type=int, default=None, help="timed global steps per run (default: auto)")
    p.add_argument("--warmup", type=int, default=None, help="untimed global steps first (default: auto, 1-2)")
    p.add_argument("--window-s", type=float, default=20.0,
                   help="auto steps: aim for this many seconds of timed steps per run (default 20)")
    p.add_argument("--max-steps", type=int, default=10, help="auto steps: at most this many (default 10)")
    p.add_argument("--min-steps", type=int, default=None, help="auto steps: at least this many (default 2)")
    p.add_argument("--quick", action="store_true",
                   help="one small cell (small_cnn, 2 workers, 1gbit, ps,ralp,allreduce, 1 repetition)")
    p.add_argument("--json", action="store_true", help="print one JSON object (a key per strategy for one cell)")
    p.add_argument("--out-dir", default="benchmarks", help="where results/, README.md and plots go")
    p.add_argument("--name", default=None, help="results file name (default: a timestamp)")
    p.add_argument("--report", dest="report", action="store_true", default=None,
                   help="write README tables and plots (default unless --quick or --json)")
    p.add_argument("--no-report", dest="report", action="store_false")
    p.add_argument("--prefix", default="rbench", help="namespace prefix of the testbed (default rbench)")
    p.add_argument("--testbed", choices=("auto", "netns", "loopback"), default="auto",
                   help="netns (root), loopback (uncapped), or auto: netns where possible (default)")
    p.add_argument("--scheduler-solver", default="exact", help="scheduler.SOLVERS entry for 'scheduler' (exact)")
    p.set_defaults(func=cmd_bench)


def _strip_loopback_shim() -> None:
    """``ralp-tf`` re-executes itself with the loopback bind shim preloaded; tasks inside network
    namespaces must not inherit it (their servers would listen on 127.0.0.1 only)."""
    pre = os.environ.get("LD_PRELOAD")
    if not pre:
        return
    keep = [p for p in pre.split(":") if p and "libloopback_bind" not in p]
    if keep:
        os.environ["LD_PRELOAD"] = ":".join(keep)
    else:
        del os.environ["LD_PRELOAD"]


def cmd_bench(args: argparse.Namespace) -> int:
    """``ralp-tf bench``: validate, run the matrix, write results (and the report), print a summary
    or (``--json``) one JSON object. Exit 0 if every run was valid, 1 if some failed."""
    argv = sys.argv[sys.argv.index("bench") + 1:] if "bench" in sys.argv else []
    cfg = config_from_args(args, argv)
    _strip_loopback_shim()
    if cfg.testbed == "netns":
        from ralp_tf.testbed import netns_support

        ok, why = netns_support()
        if not ok:
            raise BenchError(why)
    bench = Bench(cfg)
    bench.progress.say(f"{len(cfg.cells)} cell(s) x {len(cfg.strategies)} strategies x {cfg.repeats} repetition(s); "
                       f"results -> {bench.results_path}")
    bench.doc["results_file"] = str(bench.results_path)
    doc = bench.run()
    if cfg.report:
        for f in write_report(doc, cfg.out_dir):
            bench.progress.say(f"wrote {f}")
    if cfg.json_out:
        print(json.dumps(strategy_json(doc), indent=2, default=_json_default))
    else:
        print(markdown_tables(doc))
        print(f"\nresults: {bench.results_path}")
    statuses = [st.get("status") for c in doc["cells"] for st in c["strategies"].values()]
    failed = any(c.get("error") for c in doc["cells"]) or any(s in ("failed", "partial") for s in statuses)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "_profile":
        sys.exit(_profile_main(sys.argv[2:]))
    print("usage: ralp-tf bench ... (python -m ralp_tf.bench is only the profiling helper)", file=sys.stderr)
    sys.exit(2)
