"""The benchmark matrix and its configuration: :class:`Cell`, :class:`BenchConfig`, the argument
parsers and :func:`config_from_args`.

**Matrix.** Cells are ``model x workers x bandwidth`` (default: the four built-in benchmark
models x {1, 2, 3} workers x {100mbit, 1gbit, uncapped}; ``--cell MODEL:WORKERS:BW`` adds single
cells), with 1 PS task in the ``dedicated`` layout (every task on a host of its own, today's layout)
or one PS per worker in the ``colocated`` layout (``--layout colocated``: host *i* runs worker *i*
and PS *i*, the chief on host 0; :mod:`ralp_tf.testbed.layout`). ``--host-cpu CORES`` gives every
emulated host that CPU budget (a cgroup v1 quota; every strategy of a cell runs on the same hosts,
links and budgets). The colocated PSS variants ``ralp_x2`` and ``ralp_x2_fused`` run two workers per
host (:data:`PSS_VARIANTS`): their cell's testbed then holds ``2 x workers`` workers, host *i*
running workers *i* and *H + i*, and every other strategy of the cell runs on the first H, one per
host, so all compare on the same hosts and budgets.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any, Sequence

from ralp_tf.errors import RalpError, ValidationError, check_int
from ralp_tf.run.launch import TASK_MEMORY_GIB
from ralp_tf.run.training import LOOP_OPTIMIZER

__all__ = ["AUTO_STRATEGY", "AUTO_CANDIDATES", "AUTO_PROBE_STEPS", "COMPRESSED_STRATEGIES", "NO_SPLIT_STRATEGY",
           "PSS_VARIANTS", "workers_per_host", "fused_strategy", "STRATEGIES", "DEFAULT_STRATEGIES", "DEFAULT_MODELS", "DEFAULT_WORKERS",
           "DEFAULT_BANDWIDTHS", "PS_STRATEGIES", "RING_STRATEGIES", "RING_IMPLEMENTATION", "NUM_PS", "MEM_PER_TASK_GIB", "QUICK",
           "BenchError", "BenchConfigError", "Cell", "BenchConfig", "parse_strategies", "strategy_base",
           "with_compression", "parse_models", "parse_bandwidths", "max_workers", "parse_workers", "parse_cell",
           "check_layout", "config_from_args"]

#: Compressed variants, ``<strategy>_<codec>``: the strategy with that compression on the wire (RALP:
#: the plan's activations and weights, :mod:`ralp_tf.plan.compression`; Horovod: ``hvd.Compression.fp16``,
#: the only codec it ships). MultiWorkerMirroredStrategy has none: TF 2.21's ``CommunicationOptions``
#: offers only ``bytes_per_pack``, ``timeout_seconds`` and ``implementation``.
COMPRESSED_STRATEGIES = {"ralp_fp16": ("ralp", "fp16"), "ralp_bf16": ("ralp", "bf16"),
                         "horovod_fp16": ("horovod", "fp16")}
#: The analyzer's plan without head splits over PS tasks among its candidates (``split=False``).
NO_SPLIT_STRATEGY = "ralp_nosplit"
#: The analyzer's plan with two closures in flight per host and/or fused transfers: strategy -> (base,
#: workers per host, fused). ``_x2``: two worker tasks on each colocated host (stock TF's coordinator runs
#: one closure at a time per worker, so a second worker is how one step's pulls overlap another's compute
#: and pushes), planned and priced for that cluster; ``_fused``: ``--fuse-transfers`` for this strategy only,
#: so fused and unfused runs interleave in one cell.
PSS_VARIANTS = {"ralp_fused": ("ralp", 1, True), "ralp_x2": ("ralp", 2, False), "ralp_x2_fused": ("ralp", 2, True)}
#: ``--strategy auto`` as a job runs it (:mod:`ralp_tf.run.auto`): the cell's strategies ranked by the
#: bench's predictions, the top two probed on the cell's hosts, the faster measured run as this column.
AUTO_STRATEGY = "auto"
#: Which bench strategy ``auto`` runs for each strategy of the ranking (:mod:`ralp_tf.plan.strategies`).
AUTO_CANDIDATES = {"pss": "ralp", "ps": "ps", "mwms": "allreduce", "horovod": "horovod"}
#: The fewest global steps a probed strategy measures (after the cell's warm-up; its column's schedule if longer).
AUTO_PROBE_STEPS = 3
STRATEGIES = ("ps", "ralp", "scheduler", "allreduce", "horovod", "rejected", NO_SPLIT_STRATEGY, *COMPRESSED_STRATEGIES,
              AUTO_STRATEGY, *PSS_VARIANTS)
DEFAULT_STRATEGIES = ("ps", "ralp", "scheduler", "allreduce", "horovod")
DEFAULT_MODELS = ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")
DEFAULT_WORKERS = (1, 2, 3)
DEFAULT_BANDWIDTHS = ("100mbit", "1gbit", "uncapped")
PS_STRATEGIES = ("ps", "ralp", "scheduler", "rejected", NO_SPLIT_STRATEGY, "ralp_fp16", "ralp_bf16", *PSS_VARIANTS)
RING_STRATEGIES = ("allreduce", "horovod", "horovod_fp16")
#: The ring implementation each ring strategy runs, as the cost model prices its CPU
#: (:func:`ralp_tf.plan.costmodel.estimate_allreduce`): MWMS for ``allreduce``.
RING_IMPLEMENTATION = {"allreduce": "mwms", "horovod": "horovod", "horovod_fp16": "horovod"}
NUM_PS = 1
#: Memory budget per TensorFlow task used to reject cells the machine cannot hold.
MEM_PER_TASK_GIB = TASK_MEMORY_GIB
QUICK = {"model": "small_cnn", "workers": 2, "bandwidth": "1gbit", "strategies": ("ps", "ralp", "allreduce"),
         "repeats": 1, "steps": 5, "warmup": 2}


class BenchError(RalpError, RuntimeError):
    """The benchmark could not run (no testbed possible, output not writable, ...)."""


class BenchConfigError(ValidationError):
    """Bad ``ralp-tf bench`` arguments: unknown model or strategy, bad bandwidth, too many workers."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One matrix cell: ``workers`` workers and :attr:`num_ps` PS tasks training ``model`` over
    ``bandwidth`` links, on the hosts of ``layout``."""

    model: str
    workers: int
    bandwidth: str  # canonical text, e.g. "100mbit", "1gbit", "uncapped"
    #: strategies of this cell only (``--cell M:W:BW:s1+s2``); None: the run's ``--strategies``
    strategies: tuple[str, ...] | None = None
    #: ``dedicated`` (a host per task, 1 PS) or ``colocated`` (host i: worker i + PS i, chief on host 0)
    layout: str = "dedicated"
    #: worker tasks per host on the testbed: 2 when a strategy of the cell runs two (:data:`PSS_VARIANTS`)
    workers_per_host: int = 1

    @property
    def num_ps(self) -> int:
        """PS tasks: 1 (``NUM_PS``) when dedicated, one per worker host when colocated."""
        return self.workers if self.layout == "colocated" else NUM_PS

    @property
    def hosts(self) -> dict[str, list[str]]:
        """The testbed's host map (host name -> tasks), :func:`ralp_tf.testbed.layout.layout_hosts`."""
        from ralp_tf.testbed.layout import layout_hosts

        return layout_hosts(self.workers * self.workers_per_host, self.num_ps, self.layout,
                            workers_per_host=self.workers_per_host)

    @property
    def key(self) -> str:
        """``MODEL/wWORKERS/BANDWIDTH``, e.g. ``alexnet_cifar/w2/1gbit``."""
        return f"{self.model}/w{self.workers}/{self.bandwidth}"

    @property
    def tasks(self) -> list[str]:
        """The testbed's tasks: ``chief``, ``worker0..``, ``ps0..``."""
        return (["chief"] + [f"worker{i}" for i in range(self.workers * self.workers_per_host)]
                + [f"ps{i}" for i in range(self.num_ps)])

    @property
    def bandwidth_bps(self) -> float:
        """The link rate in bit/s (``inf`` for uncapped)."""
        from ralp_tf.plan.cluster import parse_bandwidth

        return parse_bandwidth(self.bandwidth)


@dataclasses.dataclass
class BenchConfig:
    """Everything one ``ralp-tf bench`` invocation does (built by :func:`config_from_args`)."""

    cells: list[Cell]
    strategies: tuple[str, ...]
    repeats: int = 3
    batch: int = 32
    steps: int | None = None  # None: auto (see ralp_tf.bench.run.choose_steps)
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
    layout: str = "dedicated"  # dedicated | colocated
    host_cpu: float | None = None  # CPU budget per emulated host in cores; None: no budgets
    steps_per_closure: int = 1  # PSS strategies: worker steps per scheduled closure
    optimizer: str = LOOP_OPTIMIZER  # every strategy's SGD (ralp_tf.run.training.OPTIMIZERS)
    fuse_transfers: bool = False  # PSS strategies: one pull and one push per PS task (ralp_tf.place.fusion)
    floor: str = "builtin"  # builtin | measure | none | a `ralp-tf floor --out` JSON (--floor)
    #: ``ralp-tf calibrate --testbed``'s file the predictions price with (``--calibration``), or None
    calibration: str | None = None


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


def strategy_base(name: str) -> tuple[str, str | None]:
    """``(strategy, codec)`` of a strategy name: ``("ralp", "fp16")`` for ``ralp_fp16``,
    ``("ralp", None)`` for ``ralp_nosplit`` and the :data:`PSS_VARIANTS`, ``("ps", None)`` for ``ps``."""
    if name == NO_SPLIT_STRATEGY:
        return "ralp", None
    if name in PSS_VARIANTS:
        return PSS_VARIANTS[name][0], None
    return COMPRESSED_STRATEGIES.get(name, (name, None))


def workers_per_host(name: str) -> int:
    """Worker tasks per host strategy ``name`` runs (2 for the ``_x2`` :data:`PSS_VARIANTS`, else 1)."""
    return PSS_VARIANTS[name][1] if name in PSS_VARIANTS else 1


def fused_strategy(name: str) -> bool:
    """Whether strategy ``name`` fuses its transfers whatever ``--fuse-transfers`` says (``_fused``)."""
    return name in PSS_VARIANTS and PSS_VARIANTS[name][2]


def with_compression(strategies: Sequence[str], codec: str | None) -> tuple[str, ...]:
    """``strategies`` plus, after each one that has a ``codec`` variant, that variant
    (``bench --compression fp16``: ``ralp`` -> ``ralp, ralp_fp16``; ``horovod`` ->
    ``horovod, horovod_fp16``, Horovod's only codec, for any 16-bit ``codec``)."""
    if codec is None:
        return tuple(strategies)
    if codec not in ("fp16", "bf16"):
        raise BenchConfigError(f"--compression {codec!r}: the benchmark compares fp16 or bf16 (the codecs every "
                               "compared system can apply); run int8/top-k with `ralp-tf run --compression`")
    out: list[str] = []
    for s in strategies:
        out.append(s)
        variant = {"ralp": f"ralp_{codec}", "horovod": "horovod_fp16"}.get(s)
        if variant:
            out.append(variant)
    return tuple(dict.fromkeys(out))


def parse_models(text: str | Sequence[str] | None) -> list[str]:
    """Comma-separated built-in model names (``ralp_tf.model.builtin``) or ``package.module:function``
    references (imported and run by every process of a cell: pass only code you trust, on the
    PYTHONPATH of this process)."""
    from ralp_tf.model.builtin import BUILTIN_MODELS, MODEL_REFERENCE

    names = _split(text)
    if not names:
        raise BenchConfigError("no models given; use e.g. --models alexnet_cifar,vgg16_cifar")
    bad = [n for n in names if n not in BUILTIN_MODELS and not MODEL_REFERENCE.match(n)]
    if bad:
        raise BenchConfigError(f"unknown model {bad[0]!r}; use a built-in model "
                               f"({', '.join(sorted(BUILTIN_MODELS))}) or a reference package.module:function")
    return list(dict.fromkeys(names))


def parse_bandwidths(text: str | Sequence[str] | None) -> list[str]:
    """Comma-separated link rates (``100mbit``, ``1gbit``, ``uncapped`` ...) -> canonical texts."""
    from ralp_tf.plan.cluster import format_bandwidth, parse_bandwidth

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
        check_int(w, "--workers", error=BenchConfigError)
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


def check_layout(cells: Sequence[Cell], host_cpu: float | None) -> None:
    """Every cell's tasks fit in memory and, with ``--host-cpu``, its hosts' budgets fit in this
    machine's cores; raises :class:`BenchConfigError` naming the cell and the fix."""
    from ralp_tf.testbed import max_tasks_for_memory, usable_cores

    if host_cpu is not None and not (math.isfinite(host_cpu) and host_cpu >= 0.01):
        raise BenchConfigError(f"--host-cpu must be a number of cores >= 0.01 (e.g. 0.5), got {host_cpu}")
    limit, cores = max_tasks_for_memory(MEM_PER_TASK_GIB), usable_cores()
    for c in cells:
        if len(c.tasks) > limit:
            raise BenchConfigError(f"cell {c.key} ({c.layout}) needs {len(c.tasks)} TensorFlow tasks "
                                   f"(~{MEM_PER_TASK_GIB:g} GiB each) but at most {limit} fit in the memory available "
                                   "now; use fewer workers")
        if host_cpu is not None and host_cpu * len(c.hosts) > cores + 1e-9:
            raise BenchConfigError(
                f"--host-cpu {host_cpu:g} x {len(c.hosts)} hosts (cell {c.key}, {c.layout} layout: "
                f"{', '.join(c.hosts)}) = {host_cpu * len(c.hosts):g} cores, more than the {cores} cores here; "
                f"use --host-cpu {math.floor(cores / len(c.hosts) * 100) / 100:g} or fewer workers")


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
    codec = getattr(args, "compression", None)
    strategies = with_compression(strategies, codec)
    explicit_cells = [dataclasses.replace(c, strategies=with_compression(c.strategies, codec)) if c.strategies else c
                      for c in explicit_cells]
    cells = [Cell(m, w, b) for m in models for w in workers for b in bws]
    layout = getattr(args, "layout", None) or "dedicated"
    host_cpu = getattr(args, "host_cpu", None)
    for c in explicit_cells:
        same = [i for i, x in enumerate(cells) if (x.model, x.workers, x.bandwidth) == (c.model, c.workers, c.bandwidth)]
        if same:
            cells[same[0]] = c
        else:
            cells.append(c)
    cells = [dataclasses.replace(c, layout=layout, workers_per_host=check_workers_per_host(
        c.strategies or strategies, layout, getattr(args, "calibration", None))) for c in cells]
    check_layout(cells, host_cpu)
    steps_per_closure = getattr(args, "steps_per_closure", 1)
    for value, flag in ((repeats, "--repeats"), (args.batch, "--batch"), (args.max_steps, "--max-steps")):
        check_int(value, flag, error=BenchConfigError)
    check_int(steps_per_closure, "--steps-per-closure", minimum=0, error=BenchConfigError,
              hint="give a step count such as 8, or auto")
    for value, flag in ((steps, "--steps"), (warmup, "--warmup"), (args.min_steps, "--min-steps")):
        if value is not None:  # None: chosen automatically
            check_int(value, flag, error=BenchConfigError)
    if not args.window_s > 0:
        raise BenchConfigError(f"--window-s must be positive, got {args.window_s}")
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
                       command="ralp-tf bench " + " ".join(argv or []), layout=layout, host_cpu=host_cpu,
                       steps_per_closure=steps_per_closure, optimizer=getattr(args, "optimizer", LOOP_OPTIMIZER),
                       floor=check_floor_source(getattr(args, "floor", "builtin")),
                       fuse_transfers=bool(getattr(args, "fuse_transfers", False)),
                       calibration=check_calibration(getattr(args, "calibration", None), cells, host_cpu))


def check_workers_per_host(strategies: Sequence[str], layout: str, calibration: str | None) -> int:
    """The most worker tasks per host among ``strategies`` (a cell's testbed holds that many); a
    two-per-host variant needs the colocated layout and no ``--calibration`` (BenchConfigError)."""
    most = max([workers_per_host(s) for s in strategies] or [1])
    if most > 1:
        name = next(s for s in strategies if workers_per_host(s) == most)
        if layout != "colocated":
            raise BenchConfigError(f"strategy {name} runs {most} workers per host: add --layout colocated (the "
                                   f"{layout} layout puts every task on a host of its own)")
        if calibration:
            raise BenchConfigError(f"strategy {name} runs {most} workers per host, which --calibration's hosts do not "
                                   "hold; drop --calibration or the strategy")
    return most


def check_calibration(path: str | None, cells: Sequence[Cell], host_cpu: float | None) -> str | None:
    """``--calibration``'s file, read and checked against every cell before anything runs: a
    calibration of the testbed with the cell's hosts (layout, workers and PS tasks), link cap and CPU
    budget, and of this TensorFlow (CalibrationError otherwise, exit 2)."""
    if path is None:
        return None
    from ralp_tf.plan.calibration import calibrated_cluster, installed_tensorflow, load_calibration
    from ralp_tf.plan.cluster import Cluster

    cal = load_calibration(path)
    for cell in cells:
        cal.check_testbed(cell.layout, cell.bandwidth_bps, host_cpu)
        calibrated_cluster(cal, Cluster.local(cell.workers, cell.num_ps, layout=cell.layout), match_hosts=False,
                           tensorflow_version=installed_tensorflow())
    return path


def check_floor_source(source: str) -> str:
    """``--floor``'s value, checked: a keyword, or a readable floor JSON (its terms are read now)."""
    if source in FLOOR_SOURCES:
        return source
    floor_terms(source)
    return source


FLOOR_SOURCES = ("builtin", "measure", "none")


def floor_terms(source: str) -> Any:
    """The :class:`~ralp_tf.plan.closures.FloorTerms` of a ``--floor`` value other than ``measure``
    (None for ``none``); BenchConfigError naming the fix for a file that is not a floor JSON."""
    from ralp_tf.plan.closures import MEASURED_FLOOR, FloorTerms

    if source == "builtin":
        return MEASURED_FLOOR
    if source == "none":
        return None
    fix = "give builtin, measure, none, or a file written by `ralp-tf floor --out FILE`"
    try:
        with open(source) as f:
            doc = json.load(f)
        terms = dict(doc["terms"])
        plain = sorted(c["closure_s"] for c in doc.get("cases", []) if not c["case"].get("looped", True))
        if "plain_closure_s" not in terms and plain:  # written before the plain closure was a term
            terms["plain_closure_s"] = plain[len(plain) // 2]
        return FloorTerms(**terms)
    except OSError as exc:
        raise BenchConfigError(f"--floor {source!r}: cannot read it ({exc.strerror}); {fix}") from None
    except (ValueError, KeyError, TypeError):
        raise BenchConfigError(f"--floor {source!r} is not a floor JSON with the fitted 'terms'; {fix}") from None
