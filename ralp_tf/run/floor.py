"""The step floor, measured: ParameterServerStrategy's fixed costs on this machine.

:func:`measure_floor` starts a :class:`~ralp_tf.run.launch.LocalCluster` of real task processes
and schedules closures that do nothing but the fixed work of a training step: each step of a
closure *pulls* ``n`` tiny variables (float32 scalars) from each of ``m`` PS tasks and *pushes* a
new value to each (``assign``), ``k`` steps per closure in a ``tf.range`` loop inside the
``tf.function`` (the loop of ``--steps-per-closure``). Per case it measures, over ``repeats``
repetitions of as many closures as fill ``seconds`` of wall time (medians reported):

* ``closure_s``: seconds of one worker per closure, ``workers x wall / closures`` (every worker
  busy: the closures queue up on the coordinator first);
* ``schedule_s``: seconds of the coordinator's ``schedule()`` call per closure;
* ``bytes_per_closure``: bytes between the workers and each PS task, both directions
  (:mod:`ralp_tf.run.traffic`'s per-socket counters), and between the coordinator and the workers.
  The payload is 8 bytes per variable per step (4 each way); the rest is control traffic.

:func:`fit_terms` fits one linear model, weighted by relative error, to every looped case::

    closure_s(m, n, k) = F + m * F_ps + k * m * (s_ps + (n - 1) * s_var)

``F`` (``closure_s``) is the fixed cost of a scheduled closure, ``F_ps`` (``closure_per_ps_s``)
what each PS task a closure talks to adds once per closure (a function call reaches every task it
spans), ``s_ps`` (``step_per_ps_s``) what a step costs per PS task it talks to inside a closure (one
variable's pull and push, and the loop's control messages), ``s_var`` (``step_per_variable_s``) each
further variable (one more pull and push: two tensor RPCs). Bytes fit the same model per PS task:
``control_bytes_per_closure_per_ps`` and ``control_bytes_per_step_per_ps``. A step of K per closure
pays ``(F + m F_ps) / K`` of the per-closure part; the per-step parts remain whatever K is.

Each case also reads the CPU seconds of the PS tasks and of the workers (``/proc/PID/stat``,
user + system, every thread) per closure. :func:`fit_message_cpu` fits, on the one-PS looped cases,
``cpu(k, n) = a + b * k + c * k * (n - 1)`` at each end: a further variable costs one pull and one
push per step, two tensor messages, so ``c / 2`` is the CPU of one message at that end (the cost
model's ``RPC_FIXED_S``).

:func:`chain_cases` are one-step closures that pass a tensor between a worker and a PS task 1 and
``H`` times, each leg waiting for the last; :func:`fit_chained_message_cpu` gives the CPU of such a
chained message at each end, ``(cpu(H) - cpu(1)) / (2 (H - 1))``, which a message sent with others
(the pulls and pushes above) does not pay. :meth:`FloorRunner.chief_cpu` reads the coordinator's
own CPU per closure scheduled as a training loop does. :meth:`FloorRunner.table_pass_cpu` reads the
PS tasks' CPU per closure of a sparse update of a table on each of them, looked up and applied by
the workers' closures as a training step does, with ``tf_keras.optimizers.SGD`` and with
``legacy.SGD``; :func:`served_pass_cpu_per_byte` is their difference per byte of the passes.
``ralp-tf calibrate`` uses all of these.

:class:`~ralp_tf.plan.closures.FloorTerms` and :data:`~ralp_tf.plan.closures.MEASURED_FLOOR`, the
terms measured on this project's machine by ``ralp-tf floor`` (:mod:`ralp_tf.cli.floor`; the run's
JSON is benchmarks/results/floor.json), live with the cost model that prices them.
"""
from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from typing import Any, Callable, Sequence

from ralp_tf.errors import ValidationError, check_int
from ralp_tf.plan.closures import MEASURED_FLOOR, FloorTerms

__all__ = ["FloorCase", "CaseResult", "FloorTerms", "FloorResult", "MEASURED_FLOOR", "floor_cases", "fit_terms",
           "fit_message_cpu", "CHAIN_ELEMENTS", "chain_cases", "fit_chained_message_cpu", "SERVED_TABLE_BYTES",
           "served_pass_cpu_per_byte", "task_cpu_s", "FloorRunner", "measure_floor"]


@dataclasses.dataclass(frozen=True)
class FloorCase:
    """Closures of ``steps`` steps, each pulling and pushing ``variables`` tiny variables on each of
    ``ps_tasks`` PS tasks; ``looped`` False: a one-step closure without the loop (today's
    ``--steps-per-closure 1`` step function), ``ps_tasks`` 0: a trivial closure (a constant).
    ``hops`` > 0: a one-step closure that instead passes a tensor back and forth between the worker
    and the first PS task ``hops`` times (:func:`chain_cases`)."""

    ps_tasks: int
    variables: int
    steps: int
    looped: bool = True
    hops: int = 0

    @property
    def name(self) -> str:
        if self.ps_tasks == 0:
            return "trivial closure"
        if self.hops:
            return f"chain h={self.hops}"
        return f"{'loop' if self.looped else 'plain'} m={self.ps_tasks} n={self.variables} k={self.steps}"


@dataclasses.dataclass
class CaseResult:
    """One case measured (see the module docstring for each field; medians over the repetitions)."""

    case: FloorCase
    closures: int
    wall_s: list[float]
    closure_s: float
    schedule_s: float
    #: PS task name -> bytes per closure between every worker and it, both directions
    bytes_per_closure: dict[str, float]
    #: bytes per closure between the coordinator and the workers, both directions
    coordinator_bytes_per_closure: float
    #: CPU seconds per closure of all PS tasks together, and of all workers together (NaN: not read)
    ps_cpu_s_per_closure: float = math.nan
    worker_cpu_s_per_closure: float = math.nan

    def ps_bytes_per_closure(self) -> float:
        """Bytes per closure per PS task the closure talks to (mean over those tasks)."""
        touched = [self.bytes_per_closure.get(f"ps{k}", 0.0) for k in range(self.case.ps_tasks)]
        return sum(touched) / len(touched) if touched else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["case"] = dict(d["case"], name=self.case.name)
        return d


@dataclasses.dataclass
class FloorResult:
    """A floor run: its cluster, every case measured, the fitted terms and the fit's worst
    relative error over the looped cases."""

    workers: int
    ps: int
    repeats: int
    seconds: float
    cases: list[CaseResult]
    terms: FloorTerms
    fit_max_error: float
    wall_s: float = 0.0
    command: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"workers": self.workers, "ps": self.ps, "repeats": self.repeats, "seconds": self.seconds,
                "wall_s": self.wall_s, "command": self.command, "terms": self.terms.to_dict(),
                "fit_max_error": self.fit_max_error,
                "closure_floor_s": {str(m): self.terms.closure_floor_s(m) for m in range(self.ps + 1)},
                "cases": [c.to_dict() for c in self.cases]}


def floor_cases(ps: int, max_variables: int = 16, loop_steps: Sequence[int] = (1, 8, 32)) -> list[FloorCase]:
    """The cases of a run on ``ps`` PS tasks: the trivial closure; for every ``m`` in ``1..ps`` one
    variable per task at each of ``loop_steps``; on one task ``4`` and ``max_variables`` variables
    at the middle of ``loop_steps``; the plain one-step closure (``--steps-per-closure 1``) on one
    task with 1 and ``max_variables`` variables; and the plain one with one variable on all ``ps``
    tasks (the last case)."""
    check_int(ps, "ps")
    check_int(max_variables, "max_variables")
    mid = sorted(loop_steps)[len(loop_steps) // 2]
    cases = [FloorCase(0, 0, 1)]
    cases += [FloorCase(m, 1, k) for m in range(1, ps + 1) for k in loop_steps]
    cases += [FloorCase(1, n, mid) for n in sorted({min(4, max_variables), max_variables}) if n > 1]
    cases += [FloorCase(1, n, 1, looped=False) for n in sorted({1, max_variables}) if n > 1 or ps > 1]
    cases.append(FloorCase(ps, 1, 1, looped=False))
    return cases


#: Floats in the tensor a chain case passes back and forth (16 KB: a small activation)
CHAIN_ELEMENTS = 4096


def chain_cases(max_hops: int = 16) -> list[FloorCase]:
    """The chains of 1 and ``max_hops`` hops between a worker and one PS task: each hop sends a
    tensor made on the worker to the PS task, which scales it by its variable, and back, so each is
    two tensor messages that the receiving end waits for in the step, one after the other (a cut
    plan's activations and gradients, a split layer's hops between PS tasks), unlike the floor's
    pulls and pushes, which a step sends all at once. :func:`fit_chained_message_cpu` fits them."""
    check_int(max_hops, "max_hops", minimum=2)
    return [FloorCase(1, 1, 1, looped=False, hops=h) for h in (1, max_hops)]


def fit_chained_message_cpu(results: Sequence[CaseResult]) -> tuple[float, float]:
    """CPU seconds of one chained tensor message (:func:`chain_cases`) at the PS task and at the
    worker: ``(cpu(H) - cpu(1)) / (2 (H - 1))`` at each end, clamped at 0; NaN at an end without
    both readings."""
    chains = {r.case.hops: r for r in results if r.case.hops}
    if 1 not in chains or len(chains) < 2:
        return math.nan, math.nan
    most = max(chains)
    out = []
    for field in ("ps_cpu_s_per_closure", "worker_cpu_s_per_closure"):
        per = (getattr(chains[most], field) - getattr(chains[1], field)) / (2 * (most - 1))
        out.append(max(per, 0.0) if math.isfinite(per) else math.nan)
    return out[0], out[1]


def fit_terms(results: Sequence[CaseResult]) -> tuple[FloorTerms, float]:
    """The floor terms fitted to the looped cases and the trivial one (least squares on relative
    errors), and the fit's largest relative error. Plain one-step closures are not fitted: the
    median of those with one variable on the most PS tasks is ``plain_closure_s``, and the slope
    between the one-task plain closures of 1 and of the most variables is
    ``plain_step_per_variable_s`` (NaN without both)."""
    import numpy as np

    results = [r for r in results if not r.case.hops]
    used = [r for r in results if r.case.looped]
    if len({(r.case.ps_tasks, r.case.steps) for r in used}) < 3 or not any(r.case.variables > 1 for r in used):
        raise ValidationError("fitting the floor needs the trivial case, two step counts and two variable counts "
                              "(use floor_cases)")

    def features(c: FloorCase) -> list[float]:
        return [1.0, c.ps_tasks, c.steps * c.ps_tasks, c.steps * c.ps_tasks * (c.variables - 1)]

    x = np.array([features(r.case) for r in used])
    y = np.array([r.closure_s for r in used])
    coef = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]
    error = float(np.max(np.abs(x @ coef / y - 1.0)))
    touching = [r for r in used if r.case.ps_tasks > 0]
    xb = np.array([[1.0, r.case.steps, r.case.steps * (r.case.variables - 1)] for r in touching])
    yb = np.array([max(r.ps_bytes_per_closure(), 1.0) for r in touching])
    bcoef = np.linalg.lstsq(xb / yb[:, None], np.ones_like(yb), rcond=None)[0]
    plain_cases = [r for r in results if not r.case.looped and r.case.ps_tasks > 0]
    widest = max((r.case.ps_tasks for r in plain_cases if r.case.variables == 1), default=0)
    plain = [r.closure_s for r in plain_cases if r.case.variables == 1 and r.case.ps_tasks == widest]
    one_task = {r.case.variables: r.closure_s for r in plain_cases if r.case.ps_tasks == 1}
    most = max(one_task, default=1)
    slope = (one_task[most] - one_task[1]) / (most - 1) if most > 1 and 1 in one_task else math.nan
    return FloorTerms(closure_s=float(coef[0]), closure_per_ps_s=float(coef[1]), step_per_ps_s=float(coef[2]),
                      step_per_variable_s=float(coef[3]), control_bytes_per_closure_per_ps=float(bcoef[0]),
                      control_bytes_per_step_per_ps=float(bcoef[1]),
                      plain_closure_s=float(statistics.median(plain)) if plain else math.nan,
                      plain_step_per_variable_s=float(slope)), error


def fit_message_cpu(results: Sequence[CaseResult]) -> tuple[float, float]:
    """CPU seconds of one tensor message at a PS task and at a worker: the fit of the module
    docstring on the looped one-PS cases with CPU readings, ``c / 2`` at each end; NaN at an end
    with fewer than two variable counts or three cases."""
    import numpy as np

    used = [r for r in results if r.case.looped and r.case.ps_tasks == 1]
    out = []
    for field in ("ps_cpu_s_per_closure", "worker_cpu_s_per_closure"):
        rows = [r for r in used if math.isfinite(getattr(r, field))]
        if len(rows) < 3 or len({r.case.variables for r in rows}) < 2:
            out.append(math.nan)
            continue
        x = np.array([[1.0, r.case.steps, r.case.steps * (r.case.variables - 1)] for r in rows])
        y = np.array([getattr(r, field) for r in rows])
        out.append(float(np.linalg.lstsq(x, y, rcond=None)[0][2]) / 2)
    return out[0], out[1]


#: Bytes of the table on each PS task that :meth:`FloorRunner.table_pass_cpu` updates (bigger than a
#: cache, as a model's tables are)
SERVED_TABLE_BYTES = 32 << 20
_SERVED_WIDTH = 32


def served_pass_cpu_per_byte(cpu_s: dict[str, float], ps: int, nbytes: int = SERVED_TABLE_BYTES) -> float:
    """CPU core-seconds of a PS task per byte of one whole-table pass, from
    :meth:`FloorRunner.table_pass_cpu`'s ``cpu_s`` (every PS task's CPU per closure with each SGD):
    ``(cpu(sgd) - cpu(legacy-sgd)) / (dense_passes(sgd) * nbytes * ps)``, at least 0."""
    from ralp_tf.run.device_times import sgd_pass_per_byte

    return sgd_pass_per_byte(cpu_s, nbytes * ps)


def task_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and all its threads so far (``/proc/PID/stat``);
    NaN where it cannot be read. (``ralp_tf.testbed._nsops.process_cpu_seconds`` reads the same
    fields, but lives in a stdlib-only module that the testbed's reaper imports by path under
    ``python -S``, and ``run`` does not import ``testbed``.)"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def _closure_function(variables: Sequence[Any], looped: bool) -> Any:
    """The ``tf.function`` of a case: ``k`` steps (an int32 argument; none when not ``looped``), each
    reading every variable (a pull) and assigning each a new value computed on the worker (a push)."""
    import tensorflow as tf

    def one_step() -> Any:
        pulled = [v.read_value() for v in variables]
        total = tf.add_n(pulled) if pulled else tf.constant(1.0)
        for v, r in zip(variables, pulled):
            v.assign(r * 0.5 + total * 0.0 + 1.0)  # one distinct tensor per variable: one push each
        return total

    if not looped:
        return tf.function(one_step)

    @tf.function
    def closure(k: Any) -> Any:
        total = tf.constant(0.0)
        for _ in tf.range(k):
            total += one_step()
        return total

    return closure


def _chain_function(variable: Any, hops: int) -> Any:
    """The ``tf.function`` of a chain case: a tensor made on the worker goes to ``variable``'s PS task
    and back ``hops`` times, each leg depending on the last (:func:`chain_cases`)."""
    import tensorflow as tf

    @tf.function
    def chain() -> Any:
        x = tf.fill([CHAIN_ELEMENTS], tf.random.uniform([]))
        for _ in range(hops):
            with tf.device(variable.device):
                x = x * variable.read_value()
            x = x + 1.0  # on the worker that runs the closure
        return tf.reduce_sum(x)

    return chain


def _by_task(strategy: Any, ps: int, per_task: int) -> dict[int, list[Any]]:
    """``per_task`` float32 scalars on each PS task (created through the strategy's round-robin)."""
    import tensorflow as tf

    by_task: dict[int, list[Any]] = {k: [] for k in range(ps)}
    with strategy.scope():
        for i in range(ps * per_task):
            v = tf.Variable(0.0, name=f"floor_{i}")
            by_task[int(tf.DeviceSpec.from_string(v.device).task or 0)].append(v)
    return by_task


class FloorRunner:
    """Schedules the cases' closures on a connected ``strategy`` of ``workers`` workers and ``ps`` PS
    tasks and counts time, bytes (``meter``, a :class:`~ralp_tf.run.traffic.TrafficMeter` whose
    endpoints include the coordinator's; None: not counted) and CPU (``cpu()``: cumulative CPU
    seconds ``{"ps": ..., "worker": ...}`` of each job's tasks; None: not read). Each repetition
    runs ``closures`` closures, or as many as fill ``seconds`` of wall time."""

    def __init__(self, strategy: Any, workers: int, ps: int, *, seconds: float = 2.0, repeats: int = 3,
                 cpu: Callable[[], dict[str, float]] | None = None, meter: Any = None,
                 closures: int | None = None) -> None:
        import tensorflow as tf

        self.strategy, self.workers, self.ps = strategy, workers, ps
        self.seconds, self.repeats, self.closures = seconds, repeats, closures
        self.cpu, self.meter = cpu, meter
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

    def _batch(self, fn: Any, args: tuple[Any, ...], closures: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        for _ in range(closures):
            self.coordinator.schedule(fn, args=args)
        scheduled = time.perf_counter() - t0
        self.coordinator.join()
        return time.perf_counter() - t0, scheduled

    def _between(self, prefix: str, name: str) -> float:
        """Bytes of the last interval, both directions, between ``name`` and every task named ``prefix...``."""
        return float(sum(v for (a, b), v in self.meter.delta.items()
                         if (a == name and b.startswith(prefix)) or (b == name and a.startswith(prefix))))

    def _cpu(self) -> dict[str, float]:
        return self.cpu() if self.cpu else {"ps": math.nan, "worker": math.nan}

    def run(self, case: FloorCase, variables: Sequence[Any]) -> CaseResult:
        import tensorflow as tf

        workers = self.workers
        if case.hops:
            fn, args = _chain_function(variables[0], case.hops), ()
        else:
            fn = _closure_function(variables, case.looped and case.ps_tasks > 0)
            args = (tf.constant(case.steps, tf.int32),) if case.looped and case.ps_tasks > 0 else ()
        probe, _ = self._batch(fn, args, 2 * workers)  # traced and registered on every worker
        probe, _ = self._batch(fn, args, 2 * workers)
        closures = self.closures or max(2 * workers, min(4000, math.ceil(self.seconds / max(probe / (2 * workers),
                                                                                           1e-5))))
        closures = math.ceil(closures / workers) * workers
        walls, scheds, ps_bytes, coord_bytes, ps_cpu, worker_cpu = [], [], [], [], [], []
        for _ in range(self.repeats):
            if self.meter:
                self.meter.start()
            before = self._cpu()
            wall, sched = self._batch(fn, args, closures)
            after = self._cpu()
            if self.meter:
                self.meter.stop()
                ps_bytes.append({f"ps{k}": self._between("worker", f"ps{k}") / closures for k in range(self.ps)})
                coord_bytes.append(self._between("coordinator", "worker") / closures)
            ps_cpu.append((after["ps"] - before["ps"]) / closures)
            worker_cpu.append((after["worker"] - before["worker"]) / closures)
            walls.append(wall)
            scheds.append(sched / closures)
        return CaseResult(case=case, closures=closures, wall_s=walls,
                          closure_s=statistics.median(walls) * workers / closures, schedule_s=statistics.median(scheds),
                          bytes_per_closure={k: statistics.median(b[k] for b in ps_bytes) for k in ps_bytes[0]}
                          if ps_bytes else {},
                          coordinator_bytes_per_closure=statistics.median(coord_bytes) if coord_bytes else math.nan,
                          ps_cpu_s_per_closure=statistics.median(ps_cpu),
                          worker_cpu_s_per_closure=statistics.median(worker_cpu))

    def chief_cpu(self, closures: int, process_cpu: Callable[[], float]) -> float:
        """The coordinator's CPU seconds per closure (``process_cpu()``: this process's cumulative CPU)
        for closures scheduled as a training loop schedules its steps: a per-worker dataset's
        iterator as the argument, a batch taken from it in the step (with one pull and push of a
        variable), and each closure's result fetched."""
        import tensorflow as tf

        variable = _by_task(self.strategy, 1, 1)[0][0]
        dataset = self.coordinator.create_per_worker_dataset(
            lambda: tf.data.Dataset.from_tensors(tf.ones([32, 8])).repeat())
        iterator = iter(dataset)

        @tf.function
        def step(it: Any) -> Any:
            def replica(batch: Any) -> Any:
                variable.assign(variable.read_value() * 0.5 + tf.reduce_mean(batch))
                return tf.reduce_sum(batch)
            return self.strategy.run(replica, args=(next(it),))

        def batch(n: int) -> None:
            scheduled = [self.coordinator.schedule(step, args=(iterator,)) for _ in range(n)]
            self.coordinator.join()
            for r in scheduled:
                r.fetch()

        batch(2 * self.workers)  # traced and registered on every worker
        closures = max(math.ceil(closures / self.workers) * self.workers, self.workers)
        before = process_cpu()
        batch(closures)
        return (process_cpu() - before) / closures

    def table_pass_cpu(self, nbytes: int = SERVED_TABLE_BYTES, rounds: int = 2) -> dict[str, float]:
        """Optimizer name (``sgd``, ``legacy-sgd``) -> CPU seconds of all the PS tasks per closure
        (the median over ``rounds``, the optimizers alternating) of a closure that, on a worker as
        every worker's closures run at once, looks up a batch's 32 rows of a float32 table of
        ``nbytes`` on each PS task and applies their IndexedSlices gradients with that optimizer
        (made under the strategy's scope, as the training loop's). NaN without a CPU reader."""
        import tensorflow as tf

        from ralp_tf.run.training import sgd_optimizer

        rows = max(nbytes // (4 * _SERVED_WIDTH), 64)
        with self.strategy.scope():  # round-robin: one table on each PS task
            tables = [tf.Variable(tf.zeros([rows, _SERVED_WIDTH]), name=f"served_table_{k}") for k in range(self.ps)]
        steps = {}
        for name in ("sgd", "legacy-sgd"):
            with self.strategy.scope():
                optimizer = sgd_optimizer(name, 0.01)

            @tf.function
            def step(optimizer: Any = optimizer) -> Any:
                def replica() -> Any:
                    ids = tf.random.uniform([32], 0, rows, tf.int32)
                    with tf.GradientTape() as tape:
                        loss = tf.add_n([tf.reduce_sum(tf.gather(t, ids)) for t in tables])
                    optimizer.apply_gradients(zip(tape.gradient(loss, tables), tables))
                    return loss
                return self.strategy.run(replica)

            steps[name] = step
            self._batch(step, (), 2 * self.workers)  # traced, and the optimizer's slots made
        closures = max(math.ceil((self.closures or 40) / self.workers) * self.workers, self.workers)
        cpu: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(max(rounds, 1)):
            for name, step in steps.items():
                before = self._cpu()["ps"]
                self._batch(step, (), closures)
                cpu[name].append((self._cpu()["ps"] - before) / closures)
        return {name: statistics.median(v) for name, v in cpu.items()}

    def measure(self, cases: Sequence[FloorCase], max_variables: int,
                on_case: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
        """Every case, each on ``max_variables`` tiny variables per PS task made for the run."""
        by_task = _by_task(self.strategy, self.ps, max_variables)
        results = []
        for case in cases:
            chosen = [v for k in range(case.ps_tasks) for v in by_task[k][:case.variables]]
            results.append(self.run(case, chosen))
            if on_case:
                on_case(results[-1])
        return results


def measure_floor(workers: int = 2, ps: int = 1, *, seconds: float = 2.0, repeats: int = 3, max_variables: int = 16,
                  loop_steps: Sequence[int] = (1, 8, 32), log_dir: str | None = None,
                  on_case: Callable[[CaseResult], None] | None = None) -> FloorResult:
    """Measure every case of :func:`floor_cases` on a fresh LocalCluster of ``workers`` workers and
    ``ps`` PS tasks and fit the terms (module docstring). ``on_case`` is called after each case."""
    from ralp_tf.run.launch import LocalCluster

    check_int(workers, "workers")
    check_int(repeats, "repeats")
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValidationError(f"seconds must be a positive number of seconds per repetition, got {seconds!r}")
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in loop_steps) or len(set(loop_steps)) < 2:
        raise ValidationError(f"loop_steps must be at least two different positive step counts, got {list(loop_steps)}")
    cases = floor_cases(ps, max_variables, loop_steps)
    started = time.perf_counter()
    with LocalCluster(workers=workers, ps=ps, log_dir=log_dir) as lc:
        from ralp_tf.run.traffic import Endpoint, TrafficMeter, cluster_endpoints

        def cpu() -> dict[str, float]:
            return {job: sum(task_cpu_s(t.pid) for t in lc.tasks if t.job == job) for job in ("ps", "worker")}

        # the coordinator's own connections to the workers are owned by this process
        meter = TrafficMeter(cluster_endpoints(lc) + [Endpoint("coordinator", os.getpid(), -1)])
        runner = FloorRunner(lc.strategy(), workers, ps, seconds=float(seconds), repeats=repeats, cpu=cpu, meter=meter)
        results = runner.measure(cases, max_variables, on_case)
    terms, error = fit_terms(results)
    message_ps, message_worker = fit_message_cpu(results)
    terms = dataclasses.replace(terms, message_cpu_ps_s=message_ps, message_cpu_worker_s=message_worker)
    return FloorResult(workers=workers, ps=ps, repeats=repeats, seconds=float(seconds), cases=results, terms=terms,
                       fit_max_error=error, wall_s=time.perf_counter() - started)
