"""A training cluster as data: tasks, their TF device strings, link bandwidths and FLOP rates.

Built from ``TF_CONFIG`` (:meth:`Cluster.from_tf_config`), a ``tf.train.ClusterSpec``
(:meth:`Cluster.from_cluster_spec`) or for local use (:meth:`Cluster.local`). Rates are what
the cost model uses; defaults are overridable per job.

* ``bandwidth_bps``: link rate of a task's network interface, bits per second, each direction
  (full duplex). ``math.inf`` means "not a bottleneck".
* ``flops``: sustained training FLOP rate of a task's compute device, FLOP/s.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any, Iterator, Mapping

from ralp_tf.errors import ClusterConfigError, parse_json

JOBS = ("chief", "worker", "ps", "evaluator")
DEFAULT_BANDWIDTH_BPS = 1e9
#: Sustained fp32 training rate of a multi-core CPU task (conv/GEMM through oneDNN).
DEFAULT_CPU_FLOPS = 5e10
#: Sustained fp32 training rate of a data-centre GPU.
DEFAULT_GPU_FLOPS = 1e13

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(bit|bps|b)?\s*$", re.IGNORECASE)
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_bandwidth(value: str | float | int | None) -> float:
    """Bits per second from ``"100mbit"``, ``"1gbit"``, ``"10gbit"``, ``"2.5g"``, a number, or
    ``"uncapped"``/``None`` (infinite). Rates use tc's decimal units."""
    if value is None:
        return math.inf
    if isinstance(value, bool):
        raise ClusterConfigError(f"bandwidth {value!r} is not a rate; write e.g. '100mbit', '1gbit' or 1e9")
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        text = str(value).strip().lower()
        if text in ("uncapped", "inf", "none", "unlimited"):
            return math.inf
        m = _RATE.match(text)
        if not m:
            raise ClusterConfigError(f"cannot parse bandwidth {value!r}; write a rate like '100mbit', '1gbit', "
                                     "'10gbit' or 'uncapped'")
        rate = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if not rate > 0 or math.isnan(rate):
        raise ClusterConfigError(f"bandwidth must be positive, got {value!r}")
    return rate


def format_bandwidth(bps: float) -> str:
    if math.isinf(bps):
        return "uncapped"
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bit"


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of the cluster."""

    job: str
    index: int
    address: str
    bandwidth_bps: float = DEFAULT_BANDWIDTH_BPS
    flops: float = DEFAULT_CPU_FLOPS
    gpus: int = 0

    @property
    def key(self) -> str:
        return f"{self.job}:{self.index}"

    def device(self, device_type: str | None = None) -> str:
        """The full TF device string of this task's compute device (GPU:0 where it has a GPU)."""
        kind = device_type or ("GPU" if self.gpus else "CPU")
        return f"/job:{self.job}/replica:0/task:{self.index}/device:{kind}:0"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Tasks by job. ``tasks`` is ordered by job then index."""

    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        seen = set()
        for t in self.tasks:
            if t.job not in JOBS:
                raise ClusterConfigError(f"unknown job {t.job!r}; jobs are {', '.join(JOBS)}")
            if t.key in seen:
                raise ClusterConfigError(f"task {t.key} is listed twice")
            seen.add(t.key)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_dict(cls, jobs: Mapping[str, Any], *, bandwidth: Any = DEFAULT_BANDWIDTH_BPS,
                  flops: Mapping[str, float] | float | None = None,
                  gpus: Mapping[str, int] | None = None) -> "Cluster":
        """From ``{"worker": ["host:port", ...], "ps": [...]}``.

        ``bandwidth`` is one rate for every task or a ``{job: rate}`` mapping; ``flops`` likewise
        (default: CPU or GPU rate by ``gpus``); ``gpus`` is ``{job: GPUs per task}``.
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
            for i, a in enumerate(addrs):
                if not isinstance(a, str) or not re.match(r"^[^\s:]+:\d+$|^\[[0-9a-fA-F:]+\]:\d+$", a):
                    raise ClusterConfigError(f"cluster job {job!r} task {i} address {a!r} is not 'host:port'")
                g = int((gpus or {}).get(job, 0))
                tasks.append(Task(job=job, index=i, address=a, bandwidth_bps=_per_job(bandwidth, job, parse_bandwidth),
                                  flops=_per_job(flops, job, float) if flops is not None else
                                  (DEFAULT_GPU_FLOPS if g else DEFAULT_CPU_FLOPS), gpus=g))
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
              **kwargs: Any) -> "Cluster":
        """A loopback cluster shape of any size (``workers >= 1``, ``ps >= 0``).

        Addresses are distinct placeholders until :class:`ralp_tf.LocalCluster` assigns real
        ones: ``127.0.0.1`` with consecutive ports from ``base_port`` (default 20000), moving on
        to the next loopback host (``127.0.0.2``, ...) when the port range ends at 65535, so
        every address is a valid ``host:port`` however many tasks there are."""
        for name, n, low in (("workers", workers, 1), ("ps", ps, 0)):
            if isinstance(n, bool) or not isinstance(n, int) or n < low:
                raise ClusterConfigError(f"{name} must be an integer >= {low}, got {n!r}")
        if isinstance(base_port, bool) or not isinstance(base_port, int) or not 0 <= base_port <= 65535:
            raise ClusterConfigError(f"base_port must be an integer port 1..65535 (or 0 for the default 20000), "
                                     f"got {base_port!r}")
        port = _placeholder_addresses(base_port or 20000)
        jobs: dict[str, list[str]] = {}
        if chief:
            jobs["chief"] = [next(port)]
        jobs["worker"] = [next(port) for _ in range(workers)]
        if ps:
            jobs["ps"] = [next(port) for _ in range(ps)]
        return cls.from_dict(jobs, **kwargs)

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

    def task(self, job: str, index: int) -> Task:
        for t in self.tasks:
            if t.job == job and t.index == index:
                return t
        raise ClusterConfigError(f"cluster has no task {job}:{index}")

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
                flops=t.flops if flops is None else _per_job(flops, t.job, float)))
        return Cluster(tuple(tasks))

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster_dict(),
                "tasks": [dataclasses.asdict(t) for t in self.tasks]}

    def describe(self) -> str:
        parts = [f"{len(self.job_tasks(j))} {j}" for j in JOBS if self.job_tasks(j)]
        bw = {format_bandwidth(t.bandwidth_bps) for t in self.tasks}
        return f"{', '.join(parts)}; links {'/'.join(sorted(bw))}"


def _placeholder_addresses(first_port: int) -> Iterator[str]:
    """Distinct loopback ``host:port`` strings: ports ``first_port..65535`` on ``127.0.0.1``, then
    on ``127.0.0.2`` and so on through ``127.255.255.254`` (more addresses than any memory holds)."""
    for host in range(1, 2**24 - 1):
        ip = f"127.{host >> 16}.{(host >> 8) & 255}.{host & 255}"
        for p in range(first_port, 65536):
            yield f"{ip}:{p}"
    raise ClusterConfigError("a local cluster shape cannot have more tasks than there are loopback addresses")


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
