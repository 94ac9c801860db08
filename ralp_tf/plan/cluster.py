"""A training cluster as data: tasks, the hosts they run on, TF device strings, link rates and FLOP rates.

Built from ``TF_CONFIG`` (:meth:`Cluster.from_tf_config`), a ``tf.train.ClusterSpec``
(:meth:`Cluster.from_cluster_spec`) or for local use (:meth:`Cluster.local`). Rates are what
the cost model uses; defaults are overridable per job.

* ``bandwidth_bps``: link rate of a task's network interface, bits per second, each direction
  (full duplex). ``math.inf`` means "not a bottleneck".
* ``flops``: sustained training FLOP rate of a task's compute device, FLOP/s.

**Hosts.** Every task runs on a host (:attr:`Task.host`). A host has one network link, shared by
all its tasks in both directions, at the lowest rate of its tasks; traffic between two tasks of
one host is loopback and costs no link time. A host has one CPU budget
(:attr:`Host.cpu_flops`, FLOP/s) shared by the CPU work of all its tasks (a task with GPUs
computes its own layers on them). From ``TF_CONFIG`` or a ClusterSpec a task's host is the host
part of its address; a loopback address (``127.x.x.x``, ``localhost``, ``::1``) cannot tell
machines apart, so each loopback task counts as a host of its own (the way a local cluster
emulates separate machines), unless ``hosts=`` says otherwise. A host may also state its CPU
budget in cores (:attr:`Host.cores`, e.g. a cgroup quota): the cost model then prices the CPU its
tasks spend handling the bytes they move (:mod:`ralp_tf.plan.costmodel`, *Serving CPU*).

**CPU-only PS hosts.** A host that runs PS tasks and no worker (:attr:`Cluster.ps_only_hosts`) has
its own link and CPU like any other; :meth:`Cluster.local` adds ``ps_hosts`` of them to either
layout (hosts ``pshost0``, ``pshost1``, ...), and a ``TF_CONFIG`` whose PS addresses are on
machines without workers describes them by itself.

**Records.** :class:`TaskRef` names a task of a step's traffic (``"worker"``, the stepping
worker, or ``"ps:K"``) with typed fields; :class:`Rates` is the one record of the link and FLOP
rates a command or a decorator gives the cost model.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from typing import Any, Iterator, Mapping

from ralp_tf.errors import ClusterConfigError, parse_json
from ralp_tf.plan.closures import MEASURED_FLOOR, FloorTerms
from ralp_tf.plan.rates import (JOBS, Rates, RingCpu, ServingCpu, check_measured, format_bandwidth, parse_bandwidth,
                                parse_flops, positive_flops)

__all__ = ["JOBS", "DEFAULT_BANDWIDTH_BPS", "DEFAULT_CPU_FLOPS", "DEFAULT_GPU_FLOPS", "LAYOUTS", "PS_HOST_PREFIX",
           "parse_bandwidth", "parse_flops", "format_bandwidth", "address_host", "TaskRef", "Rates", "ServingCpu", "RingCpu",
           "Task", "Host", "Cluster"]

DEFAULT_BANDWIDTH_BPS = 1e9
#: Sustained fp32 training rate of a multi-core CPU task (conv/GEMM through oneDNN).
DEFAULT_CPU_FLOPS = 5e10
#: Sustained fp32 training rate of a data-centre GPU.
DEFAULT_GPU_FLOPS = 1e13

_ADDRESS = re.compile(r"^(?:\[(?P<ipv6>[0-9a-fA-F:.]+)\]|(?P<name>[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?))"
                      r":(?P<port>\d{1,5})$")
_ADDRESS_FIX = "write 'host:port', e.g. '10.0.0.1:2222', 'worker-0.example.com:2222' or '[::1]:2222'"
LAYOUTS = ("dedicated", "colocated")
#: Name prefix of the CPU-only PS hosts :meth:`Cluster.local` adds (``pshost0``, ``pshost1``, ...).
PS_HOST_PREFIX = "pshost"


def address_host(address: str) -> str:
    """The host of ``'host:port'`` (lower case; an IPv6 address without brackets); a loopback
    address is its own host (the whole address, see the module docstring). Raises
    ClusterConfigError naming the address and the fix when it cannot be parsed."""
    m = _ADDRESS.match(address) if isinstance(address, str) else None
    if not m:
        raise ClusterConfigError(f"address {address!r} is not 'host:port'; {_ADDRESS_FIX}")
    if int(m.group("port")) > 65535:
        raise ClusterConfigError(f"address {address!r} has port {m.group('port')}, above 65535; {_ADDRESS_FIX}")
    host = (m.group("ipv6") or m.group("name")).lower()
    if m.group("name") and (".." in host or host.startswith((".", "-"))):
        raise ClusterConfigError(f"address {address!r}: host {host!r} is not a host name or IP address; "
                                 f"{_ADDRESS_FIX}")
    loopback = host == "localhost" or host.startswith("127.") or host in ("::1", "0:0:0:0:0:0:0:1")
    return address.lower() if loopback else host


_TASK_REFS: dict[tuple[str, int | None], "TaskRef"] = {}


class TaskRef(str):
    """A task of one worker step's traffic and compute: ``TaskRef.worker()`` (``"worker"``, whichever
    worker runs the step) or ``TaskRef.ps(k)`` (``"ps:K"``).

    A ``str`` equal to that key, so mappings keyed by it (``StepEstimate.bytes_between``, the JSON
    of ``ralp-tf explain``) read, print and serialise as plain keys; ``job`` and ``index`` are set
    once, when the reference is made, and read as fields (``index`` is None for the worker)."""

    job: str
    index: int | None

    def __new__(cls, job: str, index: int | None = None) -> "TaskRef":
        exact = cls is TaskRef and type(job) is str and (index is None or type(index) is int)
        known = _TASK_REFS.get((job, index)) if exact else None
        if known is not None:  # references are immutable: the cost model makes the same few per placement
            return known
        if job == "worker" and index is None:
            key = "worker"
        elif job == "ps" and isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            key = f"ps:{index}"
        else:
            raise ClusterConfigError(f"a task reference is ('worker', None) or ('ps', K) with K >= 0, got "
                                     f"({job!r}, {index!r})")
        ref = super().__new__(cls, key)
        ref.job, ref.index = job, index
        if exact and len(_TASK_REFS) < 4096:
            _TASK_REFS[(job, index)] = ref
        return ref

    def __getnewargs__(self) -> tuple[str, int | None]:  # type: ignore[override]
        return self.job, self.index

    @classmethod
    def worker(cls) -> "TaskRef":
        return cls("worker")

    @classmethod
    def ps(cls, index: int) -> "TaskRef":
        return cls("ps", index)

    @classmethod
    def parse(cls, key: str) -> "TaskRef":
        """From ``"worker"`` or ``"ps:K"``; anything else raises ClusterConfigError naming both forms."""
        if isinstance(key, TaskRef):
            return key
        if key == "worker":
            return cls.worker()
        job, _, index = str(key).partition(":")
        if job != "ps" or not index.isdigit():
            raise ClusterConfigError(f"task reference {key!r} is neither 'worker' nor 'ps:K' (K a PS task index)")
        return cls.ps(int(index))

    @property
    def is_ps(self) -> bool:
        return self.job == "ps"

    @property
    def is_worker(self) -> bool:
        return self.job == "worker"


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of the cluster, on host ``host`` (default: from its address, :func:`address_host`)."""

    job: str
    index: int
    address: str
    bandwidth_bps: float = DEFAULT_BANDWIDTH_BPS
    flops: float = DEFAULT_CPU_FLOPS
    gpus: int = 0
    host: str = ""

    def __post_init__(self) -> None:
        if not self.host:
            object.__setattr__(self, "host", address_host(self.address))

    @property
    def key(self) -> str:
        return f"{self.job}:{self.index}"

    def device(self, device_type: str | None = None) -> str:
        """The full TF device string of this task's compute device (GPU:0 where it has a GPU)."""
        kind = device_type or ("GPU" if self.gpus else "CPU")
        return f"/job:{self.job}/replica:0/task:{self.index}/device:{kind}:0"


@dataclasses.dataclass(frozen=True)
class Host:
    """One machine: the keys of its tasks (``"worker:0"``...), its link rate (bits/s, each
    direction, shared by its tasks) and its CPU budget (FLOP/s, shared by its tasks' CPU work)."""

    name: str
    tasks: tuple[str, ...]
    bandwidth_bps: float
    cpu_flops: float
    #: the CPU budget in cores, when known (None: unknown, serving CPU is not priced)
    cores: float | None = None


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Tasks by job (``tasks`` ordered by job then index), and optional CPU budgets per host name
    (``host_cpu_flops``; a host not named gets the highest FLOP rate of its CPU tasks) and in
    cores (``host_cores``; a host not named has an unknown core count)."""

    tasks: tuple[Task, ...]
    host_cpu_flops: Mapping[str, float] = dataclasses.field(default_factory=dict)
    host_cores: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: the closure floor priced per worker step (:mod:`ralp_tf.plan.closures`); None: not priced, as
    #: for a cluster whose floor was not measured (``ralp-tf run`` and ``bench`` price this machine's)
    floor: FloorTerms | None = None
    #: training steps per scheduled closure (``--steps-per-closure``)
    steps_per_closure: int = 1
    #: one pull and one push per PS task for the worker's variables (``--fuse-transfers``)
    fused_transfers: bool = False
    #: the cores of the one machine every host runs on and shares (the namespace testbed or a
    #: LocalCluster without CPU budgets); None: each host is a machine of its own
    shared_cores: float | None = None
    #: the CPU its tasks spend moving bytes, measured on it (``ralp-tf calibrate``); None: the cost
    #: model's constants (:mod:`ralp_tf.plan.costmodel`, *Serving CPU*)
    serving: ServingCpu | None = None
    #: seconds per table byte of a sparse update's whole-table pass on its PS tasks, measured there
    #: (``ralp-tf calibrate``); None: ``costmodel.DENSE_PASS_S_PER_BYTE``
    table_pass_s_per_byte: float | None = None
    #: a ring all-reduce's own CPU, measured on it (``ralp-tf calibrate --testbed --host-cpu``); None,
    #: or another implementation's: the cost model's ``RING_*`` constants
    ring_cpu: RingCpu | None = None
    #: optimizer name -> seconds per variable byte of its update of a dense gradient on a PS task,
    #: measured there (``ralp-tf calibrate``); an optimizer not in it: the update is not priced
    dense_update_s_per_byte: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: the host whose CPU budget the job's chief (its coordinator) shares, when it shares one with
    #: the job's tasks: a ``chief`` task on a worker's or PS task's host, or ``host0`` of the
    #: colocated layout; None: a machine of its own, whose CPU is not priced
    chief_host: str | None = None

    def __post_init__(self) -> None:
        steps = self.steps_per_closure
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ClusterConfigError(f"steps_per_closure must be a positive integer, got {steps!r}; e.g. 8")
        seen = set()
        for t in self.tasks:
            if t.job not in JOBS:
                raise ClusterConfigError(f"unknown job {t.job!r}; jobs are {', '.join(JOBS)}")
            if t.key in seen:
                raise ClusterConfigError(f"task {t.key} is listed twice")
            seen.add(t.key)
        names = {t.host for t in self.tasks}
        for name, budget in self.host_cpu_flops.items():
            if name not in names:
                raise ClusterConfigError(f"CPU budget given for host {name!r}, which runs no task; hosts are "
                                         f"{', '.join(sorted(names))}")
            if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
                raise ClusterConfigError(f"CPU budget of host {name!r} must be a positive FLOP rate, got {budget!r}")
        for name, cores in self.host_cores.items():
            if name not in names:
                raise ClusterConfigError(f"core count given for host {name!r}, which runs no task; hosts are "
                                         f"{', '.join(sorted(names))}")
            if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not 0 < cores < math.inf:
                raise ClusterConfigError(f"core count of host {name!r} must be a positive number of cores, "
                                         f"e.g. 0.5, got {cores!r}")
        shared = self.shared_cores
        if shared is not None and (isinstance(shared, bool) or not isinstance(shared, (int, float))
                                   or not 0 < shared < math.inf):
            raise ClusterConfigError(f"shared_cores must be a positive number of cores or None, got {shared!r}")
        for name, rate in self.dense_update_s_per_byte.items():
            check_measured(f"dense update rate of optimizer {name!r}", rate, "seconds per byte")
        object.__setattr__(self, "dense_update_s_per_byte", dict(self.dense_update_s_per_byte))
        task_hosts = {t.host for t in self.tasks if t.job != "chief"}
        if self.chief_host is None:
            chief = next((t.host for t in self.tasks if t.job == "chief" and t.host in task_hosts), None)
            object.__setattr__(self, "chief_host", chief)
        elif self.chief_host not in task_hosts:
            raise ClusterConfigError(f"chief_host {self.chief_host!r} is not the host of a worker or PS task; "
                                     f"hosts: {sorted(task_hosts)}")
        object.__setattr__(self, "host_cpu_flops", dict(self.host_cpu_flops))
        object.__setattr__(self, "host_cores", dict(self.host_cores))

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_dict(cls, jobs: Mapping[str, Any], *, bandwidth: Any = DEFAULT_BANDWIDTH_BPS,
                  flops: Mapping[str, float] | float | None = None,
                  gpus: Mapping[str, int] | None = None,
                  hosts: Mapping[str, Any] | None = None) -> "Cluster":
        """From ``{"worker": ["host:port", ...], "ps": [...]}``.

        ``bandwidth`` is one rate for every task or a ``{job: rate}`` mapping; ``flops`` likewise
        (default: CPU or GPU rate by ``gpus``); ``gpus`` is ``{job: GPUs per task}``. ``hosts``
        (``{job: [host name per task]}``) overrides the hosts read from the addresses.
        """
        if not isinstance(jobs, Mapping) or not jobs:
            raise ClusterConfigError("a cluster is a mapping of job name to a list of 'host:port' addresses, "
                                     "e.g. {'worker': ['10.0.0.1:2222'], 'ps': ['10.0.0.2:2222']}")
        tasks = []
        for job in JOBS:
            if job not in jobs:
                continue
            addrs = jobs[job]
            if isinstance(addrs, Mapping):  # ClusterSpec sparse form {index: address}
                addrs = [addrs[i] for i in sorted(addrs)]
            if isinstance(addrs, str) or not isinstance(addrs, (list, tuple)):
                raise ClusterConfigError(f"cluster job {job!r} must list addresses, got {addrs!r}")
            given_hosts = _given_hosts(hosts, job, len(addrs))
            for i, a in enumerate(addrs):
                try:
                    host = address_host(a)
                except ClusterConfigError as exc:
                    raise ClusterConfigError(f"cluster job {job!r} task {i}: {exc}") from None
                g = int((gpus or {}).get(job, 0))
                tasks.append(Task(job=job, index=i, address=a, bandwidth_bps=_per_job(bandwidth, job, parse_bandwidth),
                                  flops=_per_job(flops, job, positive_flops) if flops is not None else
                                  (DEFAULT_GPU_FLOPS if g else DEFAULT_CPU_FLOPS), gpus=g,
                                  host=given_hosts[i] if given_hosts else host))
        unknown = set(jobs) - set(JOBS)
        if unknown:
            raise ClusterConfigError(f"unknown job(s) {sorted(unknown)} in cluster; jobs are {', '.join(JOBS)}")
        return cls(tuple(tasks))

    @classmethod
    def from_tf_config(cls, tf_config: str | Mapping[str, Any] | None = None, **kwargs: Any) -> "Cluster":
        """From the ``TF_CONFIG`` JSON (the environment variable when not given)."""
        if tf_config is None:
            tf_config = os.environ.get("TF_CONFIG")
            if not tf_config:
                raise ClusterConfigError("TF_CONFIG is not set; set it to JSON like "
                                         '{"cluster": {"worker": ["host:port"], "ps": ["host:port"]}, '
                                         '"task": {"type": "chief", "index": 0}} or use Cluster.local()')
        if isinstance(tf_config, str):
            tf_config = parse_json(tf_config, ClusterConfigError, "TF_CONFIG",
                                   hint='it must look like {"cluster": {"worker": [...], "ps": [...]}, '
                                        '"task": {"type": "worker", "index": 0}}')
        if not isinstance(tf_config, Mapping) or not isinstance(tf_config.get("cluster"), Mapping):
            raise ClusterConfigError("TF_CONFIG must be a JSON object with a 'cluster' object mapping job "
                                     "names to address lists")
        task = tf_config.get("task")
        if task is not None:
            if not isinstance(task, Mapping) or not isinstance(task.get("type"), str):
                raise ClusterConfigError("TF_CONFIG 'task' must be an object like {\"type\": \"worker\", \"index\": 0}")
            index = task.get("index", 0)
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ClusterConfigError(f"TF_CONFIG task index must be an integer >= 0, got {index!r}")
            if task["type"] not in tf_config["cluster"] and task["type"] != "chief":
                raise ClusterConfigError(f"TF_CONFIG task type {task['type']!r} is not a job of its cluster "
                                         f"({', '.join(tf_config['cluster'])})")
        return cls.from_dict(tf_config["cluster"], **kwargs)

    @classmethod
    def from_cluster_spec(cls, spec: Any, **kwargs: Any) -> "Cluster":
        """From a ``tf.train.ClusterSpec`` (or anything with ``as_dict()``)."""
        if not hasattr(spec, "as_dict"):
            raise ClusterConfigError(f"expected a tf.train.ClusterSpec, got {type(spec).__name__}")
        return cls.from_dict(spec.as_dict(), **kwargs)

    @classmethod
    def local(cls, workers: int = 2, ps: int = 1, *, chief: bool = False, base_port: int = 0,
              layout: str = "dedicated", ps_hosts: int = 0, workers_per_host: int = 1, **kwargs: Any) -> "Cluster":
        """A loopback cluster shape of any size (``workers >= 1``, ``ps >= 0``), its tasks on
        emulated hosts by ``layout``:

        * ``"dedicated"``: every task on a host of its own, named after it (``worker0``,
          ``ps0``, ``chief0``);
        * ``"colocated"``: host ``host{i}`` runs worker i and PS task i (BytePS's and the TF
          CNN benchmarks' layout); workers or PS tasks beyond the other job's count get hosts
          of their own. The chief runs on ``host0``: it only dispatches step functions (a few
          KB per step, which the cost model counts as per-step control traffic of the
          workers), so a host of its own would add a machine that no strategy it is compared
          with (ring all-reduce on the worker hosts) gets. With ``workers_per_host`` W > 1, host
          ``host{i}`` of H = ceil(workers / W) runs the workers ``j`` with ``j % H == i`` (``i,
          i + H, ...``): two closures in flight per host on stock TensorFlow, whose coordinator runs
          one closure at a time per worker; strided, so the first H workers are one per host, as
          the testbed lays them out (:func:`ralp_tf.testbed.layout.layout_hosts`).

        ``ps_hosts`` adds that many CPU-only PS hosts to either layout: PS tasks ``ps .. ps +
        ps_hosts - 1``, each alone on host ``pshost{j}`` (its own link and CPU, no worker).

        Addresses are distinct placeholders until :class:`ralp_tf.LocalCluster` assigns real
        ones: ``127.0.0.1`` with consecutive ports from ``base_port`` (default 20000), moving on
        to the next loopback host (``127.0.0.2``, ...) when the port range ends at 65535, so
        every address is a valid ``host:port`` however many tasks there are."""
        for name, n, low in (("workers", workers, 1), ("ps", ps, 0), ("ps_hosts", ps_hosts, 0),
                             ("workers_per_host", workers_per_host, 1)):
            if isinstance(n, bool) or not isinstance(n, int) or n < low:
                raise ClusterConfigError(f"{name} must be an integer >= {low}, got {n!r}")
        if isinstance(base_port, bool) or not isinstance(base_port, int) or not 0 <= base_port <= 65535:
            raise ClusterConfigError(f"base_port must be an integer port 1..65535 (or 0 for the default 20000), "
                                     f"got {base_port!r}")
        if layout not in LAYOUTS:
            raise ClusterConfigError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")
        if workers_per_host > 1 and layout != "colocated":
            raise ClusterConfigError(f"workers_per_host={workers_per_host} needs layout='colocated'; the "
                                     f"{layout} layout puts every task on a host of its own")
        if "hosts" in kwargs:
            raise ClusterConfigError("Cluster.local places tasks on hosts by 'layout'; use Cluster.from_dict(..., "
                                     "hosts=...) for any other assignment")
        port = _placeholder_addresses(base_port or 20000)
        jobs: dict[str, list[str]] = {}
        if chief:
            jobs["chief"] = [next(port)]
        jobs["worker"] = [next(port) for _ in range(workers)]
        if ps or ps_hosts:
            jobs["ps"] = [next(port) for _ in range(ps + ps_hosts)]
        if layout == "dedicated":
            hosts = {job: [f"{job}{i}" for i in range(len(addrs))] for job, addrs in jobs.items()}
        else:
            hosts = {job: [f"host{i}" for i in range(len(addrs))] for job, addrs in jobs.items()}
            worker_hosts = -(-workers // workers_per_host)
            hosts["worker"] = [f"host{j % worker_hosts}" for j in range(workers)]
        if ps_hosts:
            hosts["ps"] = hosts["ps"][:ps] + [f"{PS_HOST_PREFIX}{j}" for j in range(ps_hosts)]
        cluster = cls.from_dict(jobs, hosts=hosts, **kwargs)
        return dataclasses.replace(cluster, chief_host="host0") if layout == "colocated" else cluster

    # ----------------------------------------------------------------- queries
    def job_tasks(self, job: str) -> list[Task]:
        return [t for t in self.tasks if t.job == job]

    @property
    def workers(self) -> list[Task]:
        return self.job_tasks("worker")

    @property
    def ps(self) -> list[Task]:
        return self.job_tasks("ps")

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    @property
    def num_ps(self) -> int:
        return len(self.ps)

    @functools.cached_property
    def hosts(self) -> tuple[Host, ...]:
        """Every host, in order of its first task (see the module docstring for its rates)."""
        by_name: dict[str, list[Task]] = {}
        for t in self.tasks:
            by_name.setdefault(t.host, []).append(t)
        out = []
        for name, tasks in by_name.items():
            cpu_rates = [t.flops for t in tasks if not t.gpus]
            budget = self.host_cpu_flops.get(name, max(cpu_rates) if cpu_rates else DEFAULT_CPU_FLOPS)
            cores = self.host_cores.get(name)
            out.append(Host(name=name, tasks=tuple(t.key for t in tasks),
                            bandwidth_bps=min(t.bandwidth_bps for t in tasks), cpu_flops=float(budget),
                            cores=float(cores) if cores is not None else None))
        return tuple(out)

    @functools.cached_property
    def _hosts_by_name(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    def host(self, name: str) -> Host:
        if name not in self._hosts_by_name:
            raise ClusterConfigError(f"cluster has no host {name!r}; hosts are "
                                     f"{', '.join(h.name for h in self.hosts)}")
        return self._hosts_by_name[name]

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)

    @functools.cached_property
    def ps_only_hosts(self) -> tuple[Host, ...]:
        """The CPU-only PS hosts: hosts that run PS tasks and no worker (module docstring)."""
        return tuple(h for h in self.hosts if any(k.startswith("ps:") for k in h.tasks)
                     and not any(k.startswith("worker:") for k in h.tasks))

    def host_of(self, ref: TaskRef) -> str:
        """The host of PS task ``ref`` (a :class:`TaskRef` of job ``ps``)."""
        return self.task("ps", ref.index).host  # type: ignore[arg-type]

    def with_host_cpu(self, cpu_flops: Mapping[str, float] | float) -> "Cluster":
        """A copy with CPU budgets per host (FLOP/s): one value for every host or ``{host: rate}``."""
        budgets = dict(cpu_flops) if isinstance(cpu_flops, Mapping) else {h.name: cpu_flops for h in self.hosts}
        return dataclasses.replace(self, host_cpu_flops={**self.host_cpu_flops, **budgets})

    def with_host_cores(self, cores: Mapping[str, float] | float) -> "Cluster":
        """A copy with CPU budgets in cores per host: one value for every host or ``{host: cores}``."""
        given = dict(cores) if isinstance(cores, Mapping) else {h.name: cores for h in self.hosts}
        return dataclasses.replace(self, host_cores={**self.host_cores, **given})

    def with_shared_cores(self, cores: float | None) -> "Cluster":
        """A copy whose hosts all run on one machine of ``cores`` cores (None: each its own)."""
        return dataclasses.replace(self, shared_cores=cores)

    def with_closures(self, steps_per_closure: int, floor: FloorTerms | None = MEASURED_FLOOR) -> "Cluster":
        """A copy whose steps run ``steps_per_closure`` to a closure, with ``floor``'s terms priced."""
        return dataclasses.replace(self, floor=floor, steps_per_closure=steps_per_closure)

    def with_serving(self, serving: ServingCpu | None) -> "Cluster":
        """A copy whose serving CPU is ``serving`` (measured by ``ralp-tf calibrate``; None: the constants)."""
        return dataclasses.replace(self, serving=serving)

    def with_ring_cpu(self, ring_cpu: RingCpu | None) -> "Cluster":
        """A copy whose ring CPU is ``ring_cpu`` (measured by ``ralp-tf calibrate``; None: the constants)."""
        return dataclasses.replace(self, ring_cpu=ring_cpu)

    def with_fused_transfers(self, fused: bool = True) -> "Cluster":
        """A copy whose steps move the worker's variables fused (:mod:`ralp_tf.place.fusion`)."""
        return dataclasses.replace(self, fused_transfers=bool(fused))

    def task(self, job: str, index: int) -> Task:
        found = self._tasks_by_key.get(f"{job}:{index}")
        if found is None:
            raise ClusterConfigError(f"cluster has no task {job}:{index}")
        return found

    @functools.cached_property
    def _tasks_by_key(self) -> dict[str, Task]:
        return {t.key: t for t in self.tasks}

    @property
    def worker_device(self) -> str:
        """Where worker-placed layers compute, for whichever worker runs the step."""
        ws = self.workers
        kind = "GPU" if ws and ws[0].gpus else "CPU"
        return f"/job:worker/device:{kind}:0"

    def ps_device(self, index: int) -> str:
        return self.task("ps", index).device("CPU")

    def devices(self) -> list[str]:
        """Every device string a Plan may name on this cluster."""
        out = []
        for t in self.tasks:
            out.append(t.device("CPU"))
            if t.gpus:
                out.append(t.device("GPU"))
        if self.workers:
            out.append("/job:worker/device:CPU:0")
            if self.workers[0].gpus:
                out.append("/job:worker/device:GPU:0")
        return out

    def cluster_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t in self.tasks:
            out.setdefault(t.job, []).append(t.address)
        return out

    def with_rates(self, *, bandwidth: Any = None, flops: Mapping[str, float] | float | None = None) -> "Cluster":
        """A copy with new link rates and/or FLOP rates (one value or ``{job: value}``)."""
        tasks = []
        for t in self.tasks:
            tasks.append(dataclasses.replace(
                t,
                bandwidth_bps=t.bandwidth_bps if bandwidth is None else _per_job(bandwidth, t.job, parse_bandwidth),
                flops=t.flops if flops is None else _per_job(flops, t.job, positive_flops)))
        return dataclasses.replace(self, tasks=tuple(tasks))

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster_dict(),
                "tasks": [dataclasses.asdict(t) for t in self.tasks],
                "hosts": [dataclasses.asdict(h) for h in self.hosts]}

    def describe(self) -> str:
        parts = [f"{len(self.job_tasks(j))} {j}" for j in JOBS if self.job_tasks(j)]
        bw = {format_bandwidth(t.bandwidth_bps) for t in self.tasks}
        return f"{', '.join(parts)} on {self.num_hosts} host(s); links {'/'.join(sorted(bw))}"


def _placeholder_addresses(first_port: int) -> Iterator[str]:
    """Distinct loopback ``host:port`` strings: ports ``first_port..65535`` on ``127.0.0.1``, then
    on ``127.0.0.2`` and so on through ``127.255.255.254`` (more addresses than any memory holds)."""
    for host in range(1, 2**24 - 1):
        ip = f"127.{host >> 16}.{(host >> 8) & 255}.{host & 255}"
        for p in range(first_port, 65536):
            yield f"{ip}:{p}"
    raise ClusterConfigError("a local cluster shape cannot have more tasks than there are loopback addresses")


def _given_hosts(hosts: Mapping[str, Any] | None, job: str, count: int) -> list[str] | None:
    """The host names ``hosts`` gives job ``job``'s ``count`` tasks, or None when it gives none."""
    if hosts is None or job not in hosts:
        return None
    names = hosts[job]
    if (isinstance(names, str) or not isinstance(names, (list, tuple)) or len(names) != count
            or not all(isinstance(n, str) and n for n in names)):
        raise ClusterConfigError(f"hosts[{job!r}] must list one host name per {job} task ({count}), got {names!r}")
    return list(names)


def _per_job(value: Any, job: str, convert: Any) -> Any:
    if isinstance(value, Mapping):
        if job in value:
            return convert(value[job])
        if "default" in value:
            return convert(value["default"])
        if job in ("chief", "evaluator"):
            return convert(next(iter(value.values())))
        raise ClusterConfigError(f"no rate given for job {job!r} in {dict(value)!r}; add it or a 'default'")
    return convert(value)
