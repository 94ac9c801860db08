r"""Calibration files: what ``ralp-tf calibrate`` measured on a cluster, and how plans price with it. Pure.

``ralp-tf calibrate`` (:mod:`ralp_tf.run.calibrate` measures, :mod:`ralp_tf.cli.calibrate` wires it)
writes one versioned JSON document, :data:`CALIBRATION_FORMAT`:

* who: ``ralp_tf_version``, ``tensorflow_version``, ``machine`` (where the coordinator ran),
  ``source`` (the cluster file, a local cluster or a testbed), ``created``, and ``tasks``: every
  worker and PS task with its address, host and the device it computes on (``device``,
  ``device_kind`` ``CPU`` or ``GPU``);
* ``links``: per ordered pair of tasks on different hosts, the steady-state rate of a tensor
  transfer (``payload_bps``: TCP payload bits per second; ``bandwidth_bps``: the same as a link
  rate, Ethernet frames, ``payload_bps x (1 + 66/1448)``, what ``--bandwidth`` means), its latency
  (``latency_s``: a 4-byte transfer less an empty call) and every size timed (``samples``: bytes,
  seconds per transfer, CPU seconds per transfer at each end);
* ``serving``: the CPU a task spends per byte it sends or receives, per tensor message, per chained
  message (one the receiver waits for in the step, one after another; null in files without it) and
  per (worker step, PS task) pair, at a PS task and at a worker (:class:`~ralp_tf.plan.rates.ServingCpu`);
* ``floor``: the closure floor measured on the cluster (:class:`~ralp_tf.plan.closures.FloorTerms`);
* ``compute``: per task measured, its device, an effective FLOP rate (``3 b sum_l f_l`` over the
  measured forward+backward step time), per model each layer's forward+backward seconds for one
  batch on that device, scaled to whole steps timed there, and on PS tasks the seconds per byte of
  a sparse update's whole-table pass (``table_pass_s_per_byte``), and with two or more PS tasks the
  same pass timed on all of them at once (``table_pass_together_s_per_byte``: a job's tasks pass
  together, and where hosts share a memory bus one slows the others);
* ``table_pass_served_cpu_s_per_byte``: a PS task's CPU core-seconds per byte of that pass, read
  from the PS tasks' CPU while the workers' closures look rows up in a table on each of them and
  apply SGD's sparse update to it, as a training step does (null where the tasks' CPU was not
  read); over a PS host's cores it is the rate priced, where the cores are known;
* ``dense_update_s_per_byte``: per optimizer (``sgd``, ``legacy-sgd``), the seconds per variable byte
  of its update of a dense gradient, timed on every PS task at once (the forward+backward times
  above hold no optimizer update, and a PS task applies every update of the variables it holds);
* ``ring`` (``--testbed`` with CPU budgets; null elsewhere): a ring all-reduce's own CPU per worker
  host, fitted on probe models trained with MultiWorkerMirroredStrategy (:mod:`ralp_tf.plan.ring_cpu`):
  ``implementation``, ``s_per_byte``, ``step_s``, ``tensor_hop_s``, ``sparse_gradient_s`` (per
  IndexedSlices gradient, which the ring all-gathers on its own; 0 in a file without it),
  ``table_pass_s_per_byte`` (per byte of a worker's whole-table passes over its replicas of the
  tables; null in a file without it) and every probe run (``probes``);
* ``host_cores`` (CPU budgets known per host) and ``shared_cores`` (the cores of one machine every
  host shares), ``budget`` (the work it was given: transfers, steps, closures) and ``wall_s``.

Units are in the document (``units``). **Applying** it changes no formula of the cost model, only
the values it prices with (:func:`calibrated_cluster`, :func:`calibrated_profile`):

* each host's link rate (``Task.bandwidth_bps``): of the links it takes part in, grouped by the
  host at the other end, the highest of the per-peer medians;
* each task's FLOP rate: its own measured rate, else the first measured task of its job; GPUs where
  the device is one;
* each layer's seconds on each task (``LayerProfile.device_seconds``, by task and by job), scaled
  linearly to the profile's batch; these win over the chief's measured times and FLOP rates. A
  model the file did not measure is priced at the tasks' FLOP rates (the chief's times dropped);
* the serving CPU (``Cluster.serving``), the floor (``Cluster.floor``), the host budgets, the
  seconds per byte of a sparse update's whole-table pass on a PS task (``Cluster.table_pass_s_per_byte``),
  of a dense update there (``Cluster.dense_update_s_per_byte``) and the ring's CPU (``Cluster.ring_cpu``).

**Refused** (:class:`~ralp_tf.errors.CalibrationError`, one line naming what differs and the fix,
``ralp-tf calibrate`` again): another format version, another TensorFlow version, other tasks or
another grouping of tasks into hosts, other host names (loopback tasks: another machine), another
device kind on a task.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Mapping, Sequence

from ralp_tf.errors import CalibrationError, read_json_file
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.closures import FloorTerms
from ralp_tf.plan.cluster import Cluster, address_host
from ralp_tf.plan.calibration_records import (DEVICE_KINDS, RERUN, CalibratedTask, DeviceCompute, FieldReader, Link,
                                              ModelTimes, Transfer, positive_number)
from ralp_tf.plan.rates import RingCpu, ServingCpu
from ralp_tf.plan.ring_cpu import RingProbeSample

__all__ = ["CALIBRATION_FORMAT", "DEVICE_KINDS", "UNITS", "CalibratedTask", "Transfer", "Link", "ModelTimes",
           "DeviceCompute", "Calibration", "load_calibration", "calibrated_cluster", "calibrated_profile", "priced",
           "installed_tensorflow", "is_loopback", "RERUN"]

CALIBRATION_FORMAT = "ralp_tf.calibration/1"
UNITS = {
    "bandwidth_bps": "link rate in bits per second, Ethernet frames (payload_bps x (1 + 66/1448)), each direction",
    "payload_bps": "TCP payload bits per second of a steady-state tensor transfer",
    "latency_s": "seconds of a 4-byte tensor transfer beyond an empty call",
    "seconds": "wall seconds per transfer (median)", "cpu_s": "CPU core-seconds per transfer at that end",
    "serving": "CPU core-seconds per byte, per tensor message, per (worker step, PS task) pair",
    "layers": "forward+backward seconds of one layer for one batch of batch_size on the device",
    "flops_per_s": "3 x batch x forward FLOPs per sample over the measured forward+backward step seconds",
    "ring": "CPU core-seconds per worker host and synchronous step: per byte sent plus received, per step, per "
            "gradient tensor and ring hop",
}


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A calibration file's content (module docstring); :meth:`from_dict` checks every field."""

    tasks: tuple[CalibratedTask, ...]
    links: tuple[Link, ...]
    compute: tuple[DeviceCompute, ...]
    serving: ServingCpu | None
    floor: FloorTerms | None
    tensorflow_version: str
    ralp_tf_version: str
    machine: str
    source: str
    created: str = ""
    host_cores: Mapping[str, float] = dataclasses.field(default_factory=dict)
    shared_cores: float | None = None
    budget: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    wall_s: float = 0.0
    #: the namespace testbed it was made on (``layout``, ``bandwidth_bps`` cap, ``host_cpu``, ``prefix``),
    #: or None: another cluster
    testbed: Mapping[str, Any] | None = None
    #: seconds per byte of a whole-table pass on each PS task while every PS task passes at once
    #: (two or more PS tasks; None: not timed)
    table_pass_together_s_per_byte: float | None = None
    #: CPU core-seconds of a PS task per byte of a whole-table pass, read from the PS tasks' CPU while
    #: the workers' closures look rows up and apply sparse updates to a table on each of them
    #: (:meth:`ralp_tf.run.floor.FloorRunner.table_pass_cpu`; None: not read)
    table_pass_served_cpu_s_per_byte: float | None = None
    #: the ring's CPU fitted on probe runs, and those runs (None, (): not measured)
    ring_cpu: RingCpu | None = None
    ring_probes: tuple[RingProbeSample, ...] = ()
    #: optimizer name -> seconds per variable byte of its update of a dense gradient on each PS task
    #: while every PS task updates at once (empty: not timed)
    dense_update_s_per_byte: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: where it was read from (not stored), for messages
    path: str = dataclasses.field(default="the calibration", compare=False)

    # ------------------------------------------------------------------ queries
    def task(self, key: str) -> CalibratedTask:
        for t in self.tasks:
            if t.key == key:
                return t
        raise CalibrationError(f"{self.path} has no task {key}; it measured {', '.join(t.key for t in self.tasks)}")

    @property
    def hosts(self) -> dict[str, list[str]]:
        """Host -> its task keys, in task order."""
        out: dict[str, list[str]] = {}
        for t in self.tasks:
            out.setdefault(t.host, []).append(t.key)
        return out

    def host_rates(self) -> dict[str, float]:
        """Host -> link rate (bits/s, wire): of its links, grouped by the other end's host, the
        highest of the per-peer medians (module docstring). Hosts without a measured link are absent."""
        host = {t.key: t.host for t in self.tasks}
        by_peer: dict[str, dict[str, list[float]]] = {}
        for l in self.links:
            a, b = host[l.src], host[l.dst]
            if a != b:
                by_peer.setdefault(a, {}).setdefault(b, []).append(l.bandwidth_bps)
                by_peer.setdefault(b, {}).setdefault(a, []).append(l.bandwidth_bps)
        return {h: max(statistics.median(v) for v in peers.values()) for h, peers in by_peer.items()}

    def task_flops(self) -> dict[str, float]:
        """Task key -> FLOP rate: its own measured one, else the first measured task's of its job."""
        own = {c.task: c.flops_per_s for c in self.compute}
        by_job: dict[str, float] = {}
        for c in self.compute:
            by_job.setdefault(c.task.partition(":")[0], c.flops_per_s)
        return {t.key: own.get(t.key, by_job[t.job]) for t in self.tasks if t.key in own or t.job in by_job}

    def table_pass_s_per_byte(self) -> float | None:
        """Seconds per byte the cost model prices a PS task's whole-table pass with
        (``Cluster.table_pass_s_per_byte``): the PS CPU read as the workers' closures made the
        passes (``table_pass_served_cpu_s_per_byte``) over the fewest cores of a PS host, where
        both are known; else the pass timed with every PS task passing at once
        (``table_pass_together_s_per_byte``); else the mean over the PS tasks each timed alone
        (None: not timed). The ring's workers pass at the ring probes' rate where it was measured
        (:func:`ralp_tf.plan.updates.ring_pass_s_per_byte`)."""
        cores = [self.host_cores.get(t.host) for t in self.tasks if t.job == "ps"]
        if self.table_pass_served_cpu_s_per_byte is not None and cores and all(cores):
            return self.table_pass_served_cpu_s_per_byte / min(cores)  # type: ignore[type-var]
        if self.table_pass_together_s_per_byte is not None:
            return self.table_pass_together_s_per_byte
        rates = [c.table_pass_s_per_byte for c in self.compute
                 if c.task.startswith("ps:") and c.table_pass_s_per_byte is not None]
        return sum(rates) / len(rates) if rates else None

    def models(self) -> list[str]:
        return sorted({m.model for c in self.compute for m in c.models})

    # ------------------------------------------------------------------ checks
    def check(self, cluster: Cluster, *, tensorflow_version: str | None = None, machine: str | None = None,
              device_kinds: Mapping[str, str] | None = None, match_hosts: bool = True) -> None:
        """Raise CalibrationError (one line: what differs, and the fix) unless this calibration is of
        ``cluster``: the same worker and PS tasks, grouped into hosts the same way; with
        ``match_hosts`` the same host names (loopback tasks: the same ``machine``); each task's
        device kind (``device_kinds``, else ``GPU`` where the cluster gives the task GPUs); and the
        same ``tensorflow_version`` when given."""
        where = self.path
        if tensorflow_version and tensorflow_version != self.tensorflow_version:
            raise CalibrationError(f"{where} was measured with TensorFlow {self.tensorflow_version}, this is "
                                   f"{tensorflow_version}; {RERUN}")
        mine = [t.key for t in self.tasks]
        theirs = [t.key for t in cluster.tasks if t.job in ("worker", "ps")]
        if sorted(mine) != sorted(theirs):
            raise CalibrationError(f"{where} measured {_shape(mine)}, this cluster has {_shape(theirs)}; {RERUN}")
        groups = sorted(sorted(keys) for keys in self.hosts.values())
        their_hosts: dict[str, list[str]] = {}
        for t in cluster.tasks:
            if t.job in ("worker", "ps"):
                their_hosts.setdefault(t.host, []).append(t.key)
        if groups != sorted(sorted(keys) for keys in their_hosts.values()):
            raise CalibrationError(f"{where} measured hosts {_grouping(self.hosts)}, this cluster's are "
                                   f"{_grouping(their_hosts)}; {RERUN}")
        if match_hosts:
            self._check_hosts(cluster, machine)
        for t in self.tasks:
            kind = (device_kinds or {}).get(t.key) or ("GPU" if cluster.task(t.job, int(t.key.partition(":")[2])).gpus
                                                       else "CPU")
            if device_kinds is not None or kind == "GPU" or t.device_kind == "GPU":
                if kind != t.device_kind:
                    raise CalibrationError(f"{where} measured {t.key} on a {t.device_kind} ({t.device}), this cluster "
                                           f"runs it on a {kind}; {RERUN}")

    def check_counts(self, workers: int | None = None, ps: int | None = None) -> None:
        """Refuse worker or PS counts asked for (None: not given) that are not the calibration's."""
        counts = {job: sum(1 for t in self.tasks if t.job == job) for job in ("worker", "ps")}
        for job, flag, asked in (("worker", "--workers", workers), ("ps", "--ps", ps)):
            if asked is not None and asked != counts[job]:
                raise CalibrationError(f"{self.path} measured {_shape([t.key for t in self.tasks])}, not {asked} "
                                       f"{job} task(s); drop {flag}, or calibrate a cluster of that shape "
                                       "(`ralp-tf calibrate`)")

    def check_testbed(self, layout: str, bandwidth_bps: float, host_cpu: float | None) -> None:
        """Refuse to price a testbed cell of another layout, link cap or CPU budget than the one this
        calibration was made on (``ralp-tf calibrate --testbed``)."""
        tb = self.testbed
        if tb is None:
            raise CalibrationError(f"{self.path} is of {self.source}, not of the testbed; rerun `ralp-tf calibrate "
                                   "--testbed` with the bench's --layout, link rate and --host-cpu")
        mine = (tb.get("layout"), tb.get("bandwidth_bps"), tb.get("host_cpu"))
        if mine != (layout, bandwidth_bps, host_cpu):
            raise CalibrationError(f"{self.path} is of testbed hosts with layout {mine[0]}, links capped at "
                                   f"{mine[1]:g} bit/s and {mine[2]} cores per host, this cell's are {layout}, "
                                   f"{bandwidth_bps:g} bit/s and {host_cpu} cores; rerun `ralp-tf calibrate --testbed` "
                                   "with those")

    def _check_hosts(self, cluster: Cluster, machine: str | None) -> None:
        for t in self.tasks:
            other = cluster.task(t.job, int(t.key.partition(":")[2]))
            if is_loopback(t.address) != is_loopback(other.address):
                raise CalibrationError(f"{self.path} measured {t.key} at {t.address}, this cluster has it at "
                                       f"{other.address}; {RERUN}")
            if is_loopback(t.address):
                if machine is not None and machine != self.machine:
                    raise CalibrationError(f"{self.path} was measured on machine {self.machine!r}, this is "
                                           f"{machine!r}; {RERUN}")
            elif address_host(other.address) != address_host(t.address):
                raise CalibrationError(f"{self.path} is of host {address_host(t.address)} for {t.key}, this "
                                       f"cluster has {address_host(other.address)}; {RERUN}")

    # ------------------------------------------------------------------ the cluster it measured
    def cluster(self) -> Cluster:
        """The calibrated cluster itself (its tasks, addresses and hosts), with every measured value
        applied (:func:`calibrated_cluster`)."""
        jobs: dict[str, list[str]] = {}
        hosts: dict[str, list[str]] = {}
        for job in ("worker", "ps"):
            mine = sorted((t for t in self.tasks if t.job == job), key=lambda t: int(t.key.partition(":")[2]))
            if mine:
                jobs[job] = [t.address for t in mine]
                hosts[job] = [t.host for t in mine]
        gpus = {job: 1 for job in jobs if any(t.device_kind == "GPU" for t in self.tasks if t.job == job)}
        base = Cluster.from_dict(jobs, hosts=hosts, gpus=gpus or None)
        return calibrated_cluster(self, base, match_hosts=False)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": CALIBRATION_FORMAT, "created": self.created, "ralp_tf_version": self.ralp_tf_version,
            "tensorflow_version": self.tensorflow_version, "machine": self.machine, "source": self.source,
            "units": UNITS, "budget": dict(self.budget), "wall_s": self.wall_s,
            "tasks": [dataclasses.asdict(t) for t in self.tasks],
            "host_cores": dict(self.host_cores), "shared_cores": self.shared_cores,
            "testbed": None if self.testbed is None else {k: (None if v == math.inf else v) for k, v in self.testbed.items()},
            "links": [{**{k: v for k, v in dataclasses.asdict(l).items() if k != "samples"},
                       "samples": [dataclasses.asdict(s) for s in l.samples]} for l in self.links],
            "serving": self.serving.to_dict() if self.serving else None,
            "table_pass_together_s_per_byte": self.table_pass_together_s_per_byte,
            "table_pass_served_cpu_s_per_byte": self.table_pass_served_cpu_s_per_byte,
            "dense_update_s_per_byte": dict(self.dense_update_s_per_byte) or None,
            "ring": {**self.ring_cpu.to_dict(), "probes": [p.to_dict() for p in self.ring_probes]}
            if self.ring_cpu else None,
            "floor": {k: (None if isinstance(v, float) and math.isnan(v) else v)
                      for k, v in self.floor.to_dict().items()} if self.floor else None,
            "compute": [{"task": c.task, "device": c.device, "device_kind": c.device_kind,
                         "flops_per_s": c.flops_per_s, "table_pass_s_per_byte": c.table_pass_s_per_byte,
                         "models": [{**{k: v for k, v in dataclasses.asdict(m).items() if k != "layers"},
                                     "layers": dict(m.layers)} for m in c.models]} for c in self.compute],
        }

    @classmethod
    def from_dict(cls, doc: Any, path: str = "the calibration") -> "Calibration":
        """Read and check a calibration document; CalibrationError names the field and the fix."""
        r = FieldReader(path)
        doc = r.mapping(doc, "the document")
        fmt = doc.get("format")
        if fmt != CALIBRATION_FORMAT:
            raise CalibrationError(f"{path} is format {fmt!r}, not {CALIBRATION_FORMAT!r} (a file of another ralp_tf "
                                   f"version, or not a calibration); {RERUN}")
        tasks = tuple(r.task(t, i) for i, t in enumerate(r.items(doc, "tasks", nonempty=True)))
        keys = [t.key for t in tasks]
        if len(set(keys)) != len(keys):
            raise CalibrationError(f"{path}: 'tasks' lists a task twice ({', '.join(keys)}); {RERUN}")
        links = tuple(r.link(l, i, set(keys)) for i, l in enumerate(r.items(doc, "links")))
        compute = tuple(r.compute(c, i, set(keys)) for i, c in enumerate(r.items(doc, "compute")))
        hosts = {t.host for t in tasks}
        cores = r.mapping(doc.get("host_cores", {}), "'host_cores'")
        for h, c in cores.items():
            if h not in hosts or not positive_number(c):
                raise CalibrationError(f"{path}: 'host_cores' maps hosts of its tasks ({', '.join(sorted(hosts))}) to "
                                       f"cores > 0, got {h!r}: {c!r}; {RERUN}")
        shared = doc.get("shared_cores")
        if shared is not None and not positive_number(shared):
            raise CalibrationError(f"{path}: 'shared_cores' must be a number of cores > 0 or null; {RERUN}")
        ring_cpu, ring_probes = r.ring(doc.get("ring"))
        return cls(tasks=tasks, links=links, compute=compute, serving=r.serving(doc.get("serving")),
                   ring_cpu=ring_cpu, ring_probes=ring_probes,
                   table_pass_together_s_per_byte=r.optional(doc.get("table_pass_together_s_per_byte"),
                                                             "'table_pass_together_s_per_byte'"),
                   table_pass_served_cpu_s_per_byte=r.optional(doc.get("table_pass_served_cpu_s_per_byte"),
                                                               "'table_pass_served_cpu_s_per_byte'"),
                   dense_update_s_per_byte=r.dense_updates(doc.get("dense_update_s_per_byte")),
                   floor=r.floor(doc.get("floor")), tensorflow_version=r.text(doc, "tensorflow_version"),
                   ralp_tf_version=r.text(doc, "ralp_tf_version"), machine=r.text(doc, "machine"),
                   source=r.text(doc, "source"), created=str(doc.get("created", "")),
                   host_cores={h: float(c) for h, c in cores.items()},
                   shared_cores=float(shared) if shared is not None else None,
                   budget=dict(r.mapping(doc.get("budget", {}), "'budget'")), testbed=r.testbed(doc.get("testbed")),
                   wall_s=r.number(doc.get("wall_s", 0.0), "'wall_s'"), path=path)


def load_calibration(path: str) -> Calibration:
    """Read the calibration file ``path`` (CalibrationError, exit 2, on any problem)."""
    return Calibration.from_dict(read_json_file(path, CalibrationError, "calibration file"),
                                 path=f"calibration file {path}")


def calibrated_cluster(cal: Calibration, cluster: Cluster, **check: Any) -> Cluster:
    """``cluster`` with ``cal``'s measured values (module docstring), after :meth:`Calibration.check`
    (``check``: its keyword arguments). The calibration's hosts map onto ``cluster``'s through the
    tasks they run, so a cluster shape with other host names (``Cluster.local``) takes it too
    when ``match_hosts=False``. A cluster that does not say where its chief runs takes, from a
    calibration of the colocated testbed, worker 0's host (where the testbed runs it)."""
    cal.check(cluster, **check)
    rates, flops = cal.host_rates(), cal.task_flops()
    kinds = {t.key: t.device_kind for t in cal.tasks}
    host_of = {t.key: t.host for t in cal.tasks}
    tasks = []
    for t in cluster.tasks:
        if t.key not in kinds:
            tasks.append(t)
            continue
        gpus = max(t.gpus, 1) if kinds[t.key] == "GPU" else 0
        tasks.append(dataclasses.replace(t, bandwidth_bps=rates.get(host_of[t.key], t.bandwidth_bps),
                                         flops=flops.get(t.key, t.flops), gpus=gpus))
    theirs = {cal_host: cluster.task(*_split(keys[0])).host for cal_host, keys in cal.hosts.items()}
    cores = {theirs[h]: c for h, c in cal.host_cores.items()}
    chief = cluster.chief_host
    if chief is None and cal.testbed and cal.testbed.get("layout") == "colocated":
        chief = cluster.task("worker", 0).host  # the testbed's chief runs on worker 0's host
    out = dataclasses.replace(cluster, tasks=tuple(tasks), host_cores={**cluster.host_cores, **cores}, chief_host=chief,
                              shared_cores=cal.shared_cores if cal.shared_cores else cluster.shared_cores,
                              serving=cal.serving if cal.serving is not None else cluster.serving,
                              table_pass_s_per_byte=cal.table_pass_s_per_byte() or cluster.table_pass_s_per_byte,
                              ring_cpu=cal.ring_cpu if cal.ring_cpu is not None else cluster.ring_cpu,
                              dense_update_s_per_byte={**cluster.dense_update_s_per_byte, **cal.dense_update_s_per_byte})
    return out.with_closures(cluster.steps_per_closure, cal.floor) if cal.floor is not None else out


def calibrated_profile(cal: Calibration, profile: ModelProfile) -> ModelProfile:
    """``profile`` with each layer's seconds on the calibrated tasks (``device_seconds``, by task and
    by job, scaled from the measured batch to the profile's) and without the chief's measured
    times; a model ``cal`` did not time keeps only its FLOPs (priced at the tasks' calibrated rates).
    CalibrationError when the file timed a model of that name with other layers."""
    timed = [(c, m) for c in cal.compute for m in c.models if m.model == profile.model_name]
    per_layer: dict[str, list[tuple[str, float]]] = {}
    jobs_done: set[str] = set()
    names = {l.name for l in profile.layers}
    for c, m in timed:
        layers = dict(m.layers)
        missing = sorted(set(layers) - names)
        if missing:
            raise CalibrationError(f"{cal.path} timed layers {', '.join(missing[:4])} of model {m.model}, which this "
                                   f"profile lacks (another model of that name?); {RERUN} --models <your model>")
        scale = profile.batch_size / m.batch_size
        job = c.task.partition(":")[0]
        for name, seconds in layers.items():
            per_layer.setdefault(name, []).append((c.task, seconds * scale))
            if job not in jobs_done:
                per_layer[name].append((job, seconds * scale))
        jobs_done.add(job)
    return dataclasses.replace(profile, layers=tuple(dataclasses.replace(
        l, measured_seconds=None, device_seconds=tuple(per_layer.get(l.name, ()))) for l in profile.layers))


def priced(cal: Calibration, profile: ModelProfile, *, workers: int | None = None, ps: int | None = None,
           rates: Mapping[str, Any] | None = None, tensorflow_version: str | None = None
           ) -> tuple[ModelProfile, Cluster]:
    """What a command that plans without a cluster of its own (``plan``, ``explain``) prices with
    ``cal``: its profile (:func:`calibrated_profile`) and the calibrated cluster itself. ``workers`` /
    ``ps`` asked for (None: not given) must be the calibration's; ``rates`` given on the command line
    (``bandwidth``, ``flops``) override the measured ones."""
    cal.check_counts(workers, ps)
    cluster = cal.cluster()
    cal.check(cluster, tensorflow_version=tensorflow_version, match_hosts=False)
    if rates:
        cluster = cluster.with_rates(**rates)
    return calibrated_profile(cal, profile), cluster


def installed_tensorflow() -> str:
    """The installed TensorFlow's version, read from its package metadata without importing it
    ("" when none is installed)."""
    from importlib import metadata

    for dist in ("tensorflow", "tensorflow-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return ""


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` is on a loopback address (its host tells no machine apart)."""
    host = address.rsplit(":", 1)[0].strip("[]").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _split(key: str) -> tuple[str, int]:
    job, _, index = key.partition(":")
    return job, int(index)


def _shape(keys: Sequence[str]) -> str:
    workers = sum(1 for k in keys if k.startswith("worker:"))
    return f"{workers} worker(s) and {len(keys) - workers} PS task(s)"


def _grouping(hosts: Mapping[str, Sequence[str]]) -> str:
    return "; ".join("+".join(sorted(keys)) for keys in sorted(hosts.values(), key=sorted))
