r"""``ralp-tf calibrate``'s measurements, made on a running cluster from its coordinator.

:func:`measure_cluster` connects this process to the cluster's tasks (the plain eager remote
context: every task sees every other, as the ring's workers do) and measures, on the tasks' own
devices (what it writes: :mod:`ralp_tf.plan.calibration`):

1. **Links.** For each ordered pair that matters (worker <-> PS task and worker <-> worker, on
   different hosts), a ``tf.function`` run on the receiving task reads a float32 tensor made or held
   on the sending one: a PS task's variable read by a worker (``PS -> worker``), a tensor made on
   the worker assigned to the PS task's variable (``worker -> PS``), a tensor made on one worker
   read on another (``worker -> worker``). Each call returns one element of what arrived, so only
   the transfer crosses. Sizes go from 4 bytes and 1 MB up, doubling from 4 MB until a transfer
   takes ``min_transfer_s`` (steady state) or reaches ``max_bytes``; each size is timed
   ``transfers`` times (median). The rate is the slope between the two largest sizes (a call's
   fixed cost cancels), the latency the 4-byte transfer less an empty call on the same task. Where
   ``cpu`` is given, each size's CPU seconds per transfer at both ends are read too.
2. **Serving CPU.** The CPU per byte at each end is the slope of those readings over the sizes of
   at least 1 MB; the CPU per tensor message and per (worker step, PS task) pair come from the
   floor's plain closures of 1 and ``max_variables`` variables (below), and the CPU per chained
   message (one the receiver waits for, one after another) from closures that pass a tensor between
   a worker and a PS task 1 and ``CHAIN_HOPS`` times (:func:`~ralp_tf.run.floor.chain_cases`). The
   chief's CPU per closure is this process's (it schedules the closures, as a job's chief does) over
   ``closures`` closures scheduled as a training loop schedules its steps
   (:meth:`~ralp_tf.run.floor.FloorRunner.chief_cpu`).
3. **The floor** (:mod:`ralp_tf.run.floor`'s cases, ``closures`` per case) through a
   ``ParameterServerStrategy`` on the same tasks, fitted by :func:`~ralp_tf.run.floor.fit_terms`.
4. **Compute.** On each measured task's device (its GPU where it has one; worker 0 and PS task 0,
   and the first task of each job on every other host when ``all_hosts``), every model of
   ``models`` is built there, each layer's forward+backward pass for one batch is timed in a
   ``tf.while_loop`` of ``steps`` iterations (less a loop of one: the remote call's fixed cost
   cancels), and the whole model's forward+backward pass likewise; the layers' shares are scaled
   to the whole pass (a layer shorter than a CPU-quota period runs unthrottled: ``quota_profile``'s
   reason). The device's FLOP rate is ``3 b sum_l f_l`` over the whole pass. On PS tasks, a sparse
   update's whole-table pass is timed too (:func:`~ralp_tf.run.device_times.time_table_pass`), and
   with two or more PS tasks on all of them at once (:func:`~ralp_tf.run.device_times.time_table_passes`);
   so is each SGD's update of a dense gradient, on every PS task at once
   (:func:`~ralp_tf.run.device_times.time_dense_updates`).

The budget is work (:class:`Budget`: transfers, steps, closures), with wall time only as a safety
cap (``max_seconds``: what is left is skipped, and the file says so). ``on_progress(stage, done,
total, detail)`` is called after each item.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
import os
import socket
import statistics
import time
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.errors import ClusterRuntimeError, ValidationError, check_int
from ralp_tf.plan.calibration import Calibration, CalibratedTask, DeviceCompute, Link, ModelTimes, Transfer
from ralp_tf.plan.closures import MEASURED_FLOOR, FloorTerms
from ralp_tf.plan.cluster import address_host
from ralp_tf.plan.costmodel import WIRE_OVERHEAD
from ralp_tf.plan.rates import ServingCpu
from ralp_tf.run.calibrated import calibrated_job
from ralp_tf.run.floor import chain_cases, fit_chained_message_cpu, floor_cases, served_pass_cpu_per_byte

__all__ = ["Budget", "QUICK", "STANDARD", "Progress", "CpuReader", "PROGRESS_LINE", "device_string", "link_pairs",
           "compute_tasks", "measure_cluster", "device_kinds", "calibrated_job", "pid_reader", "main"]

Progress = Callable[[str, int, int, str], None]
#: Cumulative CPU seconds of each task (``{"worker:0": s, ...}``), or None where it cannot be read.
CpuReader = Callable[[], Mapping[str, float]]
_MB = 1 << 20
#: The longest chain case's hops (:func:`~ralp_tf.run.floor.chain_cases`)
CHAIN_HOPS = 16


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much work calibration does (module docstring); ``max_seconds`` is only a safety cap."""

    transfers: int = 3
    steps: int = 10
    closures: int = 40
    min_transfer_s: float = 0.5
    max_bytes: int = 256 * _MB
    #: the plain closures' variables (1 and this many): the floor's and the serving CPU's slope per
    #: variable, measured across as many variables as a model's step moves (resnet_cifar: 107)
    max_variables: int = 64
    loop_steps: tuple[int, ...] = (1, 8)
    all_hosts: bool = True
    #: a whole step's timing loop lasts at least this long (a CPU quota's periods average out)
    min_loop_s: float = 2.0
    max_seconds: float = 2400.0
    #: the ring probes' steps as a multiple of theirs (``ralp_tf.model.ring_probe.PROBES``); 0: no probes.
    #: ``--testbed`` with ``--host-cpu`` only (:mod:`ralp_tf.testbed.ring_probe`)
    ring_probes: float = 1.0

    def __post_init__(self) -> None:
        for name in ("transfers", "steps", "closures", "max_variables"):
            check_int(getattr(self, name), name, minimum=2 if name == "max_variables" else 1)
        if not (0 <= self.ring_probes < math.inf):
            raise ValidationError(f"ring_probes scales the ring probes' steps (>= 0; 0: none), got {self.ring_probes}")
        if not (self.min_transfer_s > 0 and self.max_seconds > 0 and self.max_bytes >= 4 * _MB):
            raise ValidationError("a calibration budget needs min_transfer_s > 0, max_seconds > 0 and max_bytes >= "
                                  f"4 MiB, got {self.min_transfer_s}, {self.max_seconds}, {self.max_bytes}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


STANDARD = Budget()
#: ``--quick``: under a minute on a 2-core machine (TensorFlow's start included), a cluster of a few tasks
QUICK = Budget(transfers=2, steps=3, closures=12, min_transfer_s=0.2, max_bytes=64 * _MB, max_variables=8,
               loop_steps=(1, 4), all_hosts=False, min_loop_s=0.5, max_seconds=50.0, ring_probes=0.0)


def device_string(key: str, kind: str = "CPU") -> str:
    """``/job:worker/replica:0/task:0/device:GPU:0`` for task ``worker:0`` on a ``GPU``."""
    job, _, index = key.partition(":")
    return f"/job:{job}/replica:0/task:{index}/device:{kind}:0"


def link_pairs(spec: Mapping[str, Sequence[str]], hosts: Mapping[str, str], quick: bool = False
               ) -> list[tuple[str, str]]:
    """The ordered pairs timed (module docstring): every worker with every PS task and every other
    worker on another host, both ways; ``quick``: per pair of hosts, the first worker<->PS pair and
    the first worker<->worker pair found, both ways."""
    keys = [f"{job}:{i}" for job in ("worker", "ps") for i in range(len(spec.get(job, [])))]
    out: list[tuple[str, str]] = []
    first: dict[tuple[frozenset[str], frozenset[str]], tuple[str, str]] = {}
    for a in keys:
        for b in keys:
            if a == b or hosts[a] == hosts[b] or (a.startswith("ps:") and b.startswith("ps:")):
                continue
            group = (frozenset((hosts[a], hosts[b])), frozenset((a.partition(":")[0], b.partition(":")[0])))
            chosen = first.setdefault(group, (a, b))
            if quick and chosen not in ((a, b), (b, a)):
                continue
            out.append((a, b))
    return out


class _Meter:
    """Timing and CPU readings around calls of a ``tf.function``."""

    def __init__(self, cpu: CpuReader | None, deadline: float) -> None:
        self.cpu, self.deadline = cpu, deadline

    def over(self) -> bool:
        return time.monotonic() > self.deadline

    def time(self, fn: Any, times: int, tasks: Sequence[str] = ()) -> tuple[float, dict[str, float | None]]:
        """Median seconds of ``times`` calls (each fetched), and CPU seconds per call of ``tasks``."""
        before = self.cpu() if self.cpu and tasks else None
        walls = []
        for _ in range(times):
            t0 = time.perf_counter()
            fn().numpy()
            walls.append(time.perf_counter() - t0)
        after = self.cpu() if before is not None else None
        cpu = {t: ((after[t] - before[t]) / times if after and t in after and t in before
                   and math.isfinite(after[t] - before[t]) else None) for t in tasks}
        return statistics.median(walls), cpu


def _transfer_function(kind: str, src: str, dst: str, n: int) -> tuple[Any, Any]:
    """``(fn, holder)``: a call that moves ``n`` float32 values from task ``src`` to ``dst`` (module
    docstring); ``holder`` keeps a PS task's variable alive (None otherwise). Nothing it reads lives
    on this process's device: a task may not reach it (the testbed's chief is in a namespace of its
    own), and a random fill value keeps the tensor from being folded into a constant."""
    import tensorflow as tf

    s, d = device_string(src), device_string(dst)
    if kind == "pull":  # PS -> worker: read the PS task's variable
        with tf.device(s):
            var = tf.Variable(tf.zeros([n]), trainable=False)

        @tf.function
        def pull() -> Any:
            with tf.device(d):
                return tf.reshape(var.read_value(), [-1])[0]
        return pull, var
    if kind == "push":  # worker -> PS: assign a tensor made on the worker
        with tf.device(d):
            var = tf.Variable(tf.zeros([n]), trainable=False)

        @tf.function
        def push() -> Any:
            with tf.device(s):
                x = tf.fill([n], tf.random.uniform([]))
            with tf.device(d):
                var.assign(x)
                return tf.reshape(var.read_value(), [-1])[0]
        return push, var

    @tf.function
    def send() -> Any:  # worker -> worker
        with tf.device(s):
            x = tf.fill([n], tf.random.uniform([]))
        with tf.device(d):
            return tf.reshape(x, [-1])[0]
    return send, None


def _empty_call(task: str) -> Any:
    import tensorflow as tf

    @tf.function
    def nothing() -> Any:
        with tf.device(device_string(task)):
            return tf.random.uniform([])
    return nothing


def _measure_link(meter: _Meter, src: str, dst: str, budget: Budget) -> Link:
    """Time one ordered pair (module docstring)."""
    kind = "pull" if src.startswith("ps:") else ("push" if dst.startswith("ps:") else "send")
    nothing = _empty_call(dst)
    nothing().numpy()
    empty, _ = meter.time(nothing, budget.transfers + 1)
    samples: list[Transfer] = []
    sizes = [4, _MB, 4 * _MB]
    while sizes:
        n = sizes.pop(0)
        fn, holder = _transfer_function(kind, src, dst, max(n // 4, 1))
        fn().numpy()  # traced, registered and warmed on both tasks
        seconds, cpu = meter.time(fn, budget.transfers, (src, dst))
        samples.append(Transfer(bytes=n, seconds=seconds, transfers=budget.transfers, src_cpu_s=cpu[src],
                                dst_cpu_s=cpu[dst]))
        del fn, holder
        if n >= 4 * _MB and seconds < budget.min_transfer_s and 2 * n <= budget.max_bytes and not meter.over():
            sizes.append(2 * n)
    slope = _slope([(s.bytes, s.seconds) for s in samples if s.bytes >= _MB])
    last = samples[-1]
    payload = 8 / slope if slope > 0 else 8 * last.bytes / max(last.seconds - empty, 1e-9)
    return Link(src=src, dst=dst, payload_bps=payload, bandwidth_bps=payload * (1 + WIRE_OVERHEAD),
                latency_s=max(samples[0].seconds - empty, 0.0), samples=tuple(samples))


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(x, y)`` points (NaN with fewer than two distinct x)."""
    if len({x for x, _ in points}) < 2:
        return math.nan
    mx, my = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def _per_byte(links: Sequence[Link], job: str) -> float:
    """CPU seconds per byte at tasks of ``job``: the slope of their CPU per transfer over the bytes,
    on sizes of at least 1 MB (NaN without readings)."""
    points = [(s.bytes, cpu) for l in links for s in l.samples if s.bytes >= _MB
              for task, cpu in ((l.src, s.src_cpu_s), (l.dst, s.dst_cpu_s))
              if task.startswith(job + ":") and cpu is not None]
    slope = _slope(points)
    return max(slope, 0.0) if math.isfinite(slope) else slope


def _serving(links: Sequence[Link], plain: Mapping[int, Any], chains: Sequence[Any] = (),
             chief: float = math.nan) -> ServingCpu | None:
    """The serving CPU from the links' readings, the plain floor closures of 1 and the most
    variables on one PS task (``plain``: variables -> CaseResult) and the chain cases (``chains``,
    :func:`~ralp_tf.run.floor.fit_chained_message_cpu`; unread: not measured) and the chief's CPU
    per closure (NaN: not measured); None where a part of the rest is unread."""
    if 1 not in plain or len(plain) < 2:
        return None
    most = max(plain)
    one, many = plain[1], plain[most]
    per = {}
    for job, field in (("ps", "ps_cpu_s_per_closure"), ("worker", "worker_cpu_s_per_closure")):
        msg = (getattr(many, field) - getattr(one, field)) / (most - 1) / 2
        per[job] = (max(msg, 0.0), max(getattr(one, field) - 2 * max(msg, 0.0), 0.0), _per_byte(links, job))
    if not all(math.isfinite(v) for values in per.values() for v in values):
        return None
    chained = fit_chained_message_cpu(chains)
    ps_chained, worker_chained = chained if all(math.isfinite(v) for v in chained) else (None, None)
    return ServingCpu(ps_s_per_byte=per["ps"][2], worker_s_per_byte=per["worker"][2], ps_message_s=per["ps"][0],
                      worker_message_s=per["worker"][0], ps_step_s=per["ps"][1], worker_step_s=per["worker"][1],
                      ps_chained_message_s=ps_chained, worker_chained_message_s=worker_chained,
                      chief_closure_s=max(chief, 0.0) if math.isfinite(chief) else None)


def _floor(spec: Mapping[str, Sequence[str]], budget: Budget, cpu: CpuReader | None,
           tick: Callable[[str], None]) -> tuple[FloorTerms, dict[int, Any], list[Any], float, float | None]:
    """The floor measured through a ParameterServerStrategy on the tasks (module docstring), the
    plain one-PS cases by variable count, the chain cases (:func:`~ralp_tf.run.floor.chain_cases`),
    this process's CPU per closure scheduled as a training loop does (:meth:`~ralp_tf.run.floor.FloorRunner.chief_cpu`)
    and, where ``cpu`` reads the tasks, the PS tasks' CPU per byte of a whole-table pass as the
    workers' closures make them (:func:`~ralp_tf.run.floor.served_pass_cpu_per_byte`; else None)."""
    import tensorflow as tf

    from ralp_tf.run.floor import FloorRunner, fit_terms

    workers, ps = len(spec["worker"]), len(spec["ps"])
    strategy = tf.distribute.ParameterServerStrategy(_resolver(spec))

    def by_job() -> dict[str, float]:
        got = cpu() if cpu else {}
        return {job: sum(v for k, v in got.items() if k.startswith(job + ":")) if got else math.nan
                for job in ("ps", "worker")}

    runner = FloorRunner(strategy, workers, ps, repeats=1, closures=budget.closures, cpu=by_job if cpu else None)
    cases = floor_cases(ps, budget.max_variables, budget.loop_steps)
    results = runner.measure(cases, budget.max_variables, lambda r: tick(r.case.name))
    terms, _ = fit_terms(results)
    # a small budget's noise can fit a term below zero, which no step pays: 0 (and the file's reader refuses it)
    fitted = {k: max(v, 0.0) for k, v in terms.to_dict().items() if isinstance(v, float) and math.isfinite(v)}
    fitted.update(control_bytes_per_closure_per_ps=MEASURED_FLOOR.control_bytes_per_closure_per_ps,
                  control_bytes_per_step_per_ps=MEASURED_FLOOR.control_bytes_per_step_per_ps)  # bytes: not counted
    terms = dataclasses.replace(terms, **fitted)
    plain = {r.case.variables: r for r in results if not r.case.looped and r.case.ps_tasks == 1}
    chains = runner.measure(chain_cases(CHAIN_HOPS), 1, lambda r: tick(r.case.name))
    chief = runner.chief_cpu(budget.closures, time.process_time)  # this process schedules them: the job's chief
    tick("chief's closures")
    served = None
    if cpu is not None:  # a PS task's CPU the reader could not read is NaN: not measured
        rate = served_pass_cpu_per_byte(runner.table_pass_cpu(), ps)
        served = rate if math.isfinite(rate) else None
        tick("table passes as served: " + (f"{rate * 1e9:.2f} ns of PS CPU a byte" if served is not None else "not read"))
    return terms, plain, chains, chief, served


def _resolver(spec: Mapping[str, Sequence[str]]) -> Any:
    import tensorflow as tf

    jobs = {j: list(spec[j]) for j in ("chief", "worker", "ps") if spec.get(j)}
    if "chief" in jobs:
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(jobs), task_type="chief", task_id=0, rpc_layer="grpc")
    return tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec(jobs), rpc_layer="grpc")


def device_kinds(spec: Mapping[str, Sequence[str]], names: Sequence[str] | None = None) -> dict[str, str]:
    """Task key -> ``GPU`` where the device names (default: what TensorFlow lists on the connected
    cluster) hold the task's ``GPU:0``, else ``CPU``."""
    if names is None:
        import tensorflow as tf

        names = [d.name for d in tf.config.list_logical_devices()]
    listed = set(names)
    return {f"{job}:{i}": ("GPU" if device_string(f"{job}:{i}", "GPU") in listed else "CPU")
            for job in ("worker", "ps") for i in range(len(spec.get(job, [])))}


def compute_tasks(tasks: Sequence[CalibratedTask], all_hosts: bool) -> list[CalibratedTask]:
    """The tasks whose devices are timed: worker 0 and PS task 0, and with ``all_hosts`` the first
    task of each job on every other host, and any task whose device kind differs from its job's first."""
    chosen: list[CalibratedTask] = []
    for t in tasks:
        first = next(u for u in tasks if u.job == t.job)
        same_host = any(c.job == t.job and c.host == t.host for c in chosen)
        if t is first or (all_hosts and not same_host) or t.device_kind != first.device_kind:
            chosen.append(t)
    return chosen


def measure_cluster(spec: Mapping[str, Sequence[str]], *, models: Sequence[str] = ("alexnet_cifar",),
                    batch_size: int = 32, budget: Budget = STANDARD, cpu: CpuReader | None = None,
                    on_progress: Progress | None = None, source: str = "", hosts: Mapping[str, str] | None = None,
                    host_cores: Mapping[str, float] | None = None, shared_cores: float | None = None,
                    testbed: Mapping[str, Any] | None = None) -> Calibration:
    """Measure the running cluster ``spec`` (``{"worker": [...], "ps": [...]}``, optionally a
    ``"chief"``: this process) from this process (module docstring). ``hosts`` names each task's host
    (default: its address's); ``host_cores`` / ``shared_cores`` are recorded for the cost model, and
    ``testbed`` (layout, link cap, CPU budget) when the cluster is the namespace testbed's."""
    import tensorflow as tf

    from ralp_tf.run.device_times import time_model, time_table_pass

    if not spec.get("worker") or not spec.get("ps"):
        raise ValidationError("calibration needs at least one worker and one PS task in the cluster")
    started = time.monotonic()
    meter = _Meter(cpu, started + budget.max_seconds)
    tf.config.experimental_connect_to_cluster(_resolver(spec), job_name="chief", make_master_device_default=False)
    kinds = device_kinds(spec)
    tasks = [CalibratedTask(key=f"{job}:{i}", address=a, host=(hosts or {}).get(f"{job}:{i}") or address_host(a),
                            device=device_string(f"{job}:{i}", kinds[f"{job}:{i}"]), device_kind=kinds[f"{job}:{i}"])
             for job in ("worker", "ps") for i, a in enumerate(spec[job])]
    host_of = {t.key: t.host for t in tasks}
    pairs = link_pairs(spec, host_of, quick=not budget.all_hosts)
    timed = compute_tasks(tasks, budget.all_hosts)
    cases = (len(floor_cases(len(spec["ps"]), budget.max_variables, budget.loop_steps)) + len(chain_cases(CHAIN_HOPS))
             + 1 + (cpu is not None))
    total, done = len(pairs) + cases + len(timed) * len(models) + (len(spec["ps"]) > 1) + 1, [0]
    skipped: list[str] = []

    def tick(stage: str, detail: str) -> None:
        done[0] += 1
        if on_progress:
            on_progress(stage, done[0], total, detail)

    links = []
    for src, dst in pairs:
        if meter.over():
            skipped.append(f"link {src}->{dst}")
            tick("links", f"{src}->{dst} skipped (time cap)")
            continue
        link = _measure_link(meter, src, dst, budget)
        links.append(link)
        tick("links", f"{src}->{dst} {link.samples[-1].bytes / 1e6:.1f} MB at {link.bandwidth_bps / 1e6:.1f} Mbit/s")
    compute = []
    for t in timed:
        entries = []
        for m in models:
            if meter.over():
                skipped.append(f"{m} on {t.key}")
                tick("compute", f"{m} on {t.key} skipped (time cap)")
                continue
            entries.append(time_model(m, batch_size, t.device, steps=budget.steps, min_loop_s=budget.min_loop_s))
            tick("compute", f"{m} on {t.key}: {entries[-1].step_s * 1e3:.1f} ms a step")
        passes = None
        if t.job == "ps" and not meter.over():  # a sparse update's whole-table passes run on PS tasks
            passes = time_table_pass(t.device, steps=budget.steps, min_loop_s=budget.min_loop_s)
        if entries:
            rate = sum(e.flops for e in entries) / sum(e.step_s for e in entries)
            compute.append(DeviceCompute(task=t.key, device=t.device, device_kind=t.device_kind, flops_per_s=rate,
                                         models=tuple(entries), table_pass_s_per_byte=passes))
    together = _passes_together([t.device for t in tasks if t.job == "ps"], budget, meter, skipped, tick)
    updates = _dense_updates([t.device for t in tasks if t.job == "ps"], budget, meter, skipped, tick)
    floor, plain, chains, chief, served = (None, {}, [], math.nan, None)
    if meter.over():
        skipped.append("floor")
    else:
        floor, plain, chains, chief, served = _floor(spec, budget, cpu, lambda name: tick("floor", name))
    if not compute:
        raise ClusterRuntimeError(f"calibration ran out of its {budget.max_seconds:g} s cap before timing any model; "
                                  "raise --max-seconds or give a smaller budget")
    return Calibration(
        tasks=tuple(tasks), links=tuple(links), compute=tuple(compute), serving=_serving(links, plain, chains, chief),
        floor=floor, table_pass_together_s_per_byte=together, table_pass_served_cpu_s_per_byte=served,
        dense_update_s_per_byte=updates,
        tensorflow_version=tf.__version__, ralp_tf_version=_version(), machine=socket.gethostname(),
        source=source or "cluster", created=datetime.datetime.now().isoformat(timespec="seconds"),
        host_cores=dict(host_cores or {}), shared_cores=shared_cores, testbed=dict(testbed) if testbed else None,
        budget={**budget.to_dict(), "models": list(models), "batch_size": batch_size, "skipped": skipped},
        wall_s=time.monotonic() - started)


def _on_ps_tasks_at_once(what: str, skipped_as: str, devices: Sequence[str], measure: Callable[[], Any],
                         describe: Callable[[Any], str], meter: _Meter, skipped: list[str],
                         tick: Callable[[str, str], None]) -> Any:
    """``measure()`` (a timing on every PS device at once), or None when the time cap came first,
    which ``skipped`` then says (``skipped_as``); ticks ``what`` with ``describe`` of the result."""
    result = None
    if meter.over():
        skipped.append(skipped_as)
    else:
        result = measure()
    tick("compute", f"{what} on {len(devices)} PS task{'s' if len(devices) > 1 else ''} at once"
         + (f": {describe(result)}" if result is not None else " skipped (time cap)"))
    return result


def _passes_together(devices: Sequence[str], budget: Budget, meter: _Meter, skipped: list[str],
                     tick: Callable[[str, str], None]) -> float | None:
    """The whole-table pass timed on every PS device at once (two or more of them; None: one, or the
    time cap came first)."""
    from ralp_tf.run.device_times import time_table_passes

    if len(devices) < 2:
        return None
    return _on_ps_tasks_at_once(
        "table passes", "table passes together", devices,
        lambda: time_table_passes(devices, steps=budget.steps, min_loop_s=budget.min_loop_s),
        lambda rate: f"{rate * 1e9:.2f} ns a byte", meter, skipped, tick)


def _dense_updates(devices: Sequence[str], budget: Budget, meter: _Meter, skipped: list[str],
                   tick: Callable[[str, str], None]) -> dict[str, float]:
    """Each SGD's update of a dense gradient timed on every PS device at once (empty: the time cap
    came first)."""
    from ralp_tf.run.device_times import time_dense_updates

    rates = _on_ps_tasks_at_once(
        "dense updates", "dense updates", devices,
        lambda: time_dense_updates(devices, steps=budget.steps, min_loop_s=budget.min_loop_s),
        lambda rates: ", ".join(f"{k} {v * 1e9:.2f} ns a byte" for k, v in rates.items()), meter, skipped, tick)
    return rates or {}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ralp_tf")
    except metadata.PackageNotFoundError:
        return "unknown"


#: Prefix of the measuring child's progress lines (``RALP_CAL {"stage", "done", "total", "detail"}``).
PROGRESS_LINE = "RALP_CAL"


def pid_reader(pids: Mapping[str, int]) -> CpuReader:
    """A :data:`CpuReader` of processes on this machine: task key -> PID (``/proc/PID/stat``)."""
    from ralp_tf.run.floor import task_cpu_s

    return lambda: {key: task_cpu_s(pid) for key, pid in pids.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ralp_tf.run.calibrate --spec JSON --out FILE [...]``: the measuring child a testbed
    starts inside the chief's namespace (:mod:`ralp_tf.testbed.calibrate`): :func:`measure_cluster`
    with progress as ``RALP_CAL <json>`` lines on stdout, the calibration written to ``--out``."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="python -m ralp_tf.run.calibrate")
    p.add_argument("--spec", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pids", default="{}")
    p.add_argument("--models", default="alexnet_cifar")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--budget", default="{}")
    p.add_argument("--host-cores", default="{}")
    p.add_argument("--shared-cores", type=float, default=None)
    p.add_argument("--source", default="")
    p.add_argument("--testbed", default="null")
    a = p.parse_args(argv)
    given = json.loads(a.budget)
    budget = Budget(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})

    def progress(stage: str, done: int, total: int, detail: str) -> None:
        print(PROGRESS_LINE, json.dumps({"stage": stage, "done": done, "total": total, "detail": detail}), flush=True)

    pids = {k: int(v) for k, v in json.loads(a.pids).items()}
    cal = measure_cluster(json.loads(a.spec), models=[m for m in a.models.split(",") if m], batch_size=a.batch_size,
                          budget=budget, cpu=pid_reader(pids) if pids else None, on_progress=progress,
                          source=a.source, host_cores=json.loads(a.host_cores), shared_cores=a.shared_cores,
                          testbed=json.loads(a.testbed))
    with open(a.out, "w") as f:
        json.dump(cal.to_dict(), f, indent=1)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    _code = main()
    os._exit(_code)  # no interpreter teardown with a remote context alive (as the train job)
