"""Cluster files: a ``TF_CONFIG``-style document or a bare cluster spec, read the same way everywhere.

Every command that takes a cluster (``ralp-tf server``, ``agent``, ``run --cluster``) reads it
with :func:`load_cluster_config`, from one of:

* ``None`` or ``"TF_CONFIG"``: the ``TF_CONFIG`` environment variable;
* a path to a JSON file;
* JSON text (starting with ``{``).

The document is either ``TF_CONFIG``-style, ``{"cluster": {job: [address, ...]}, "task":
{"type": "worker", "index": 0}}`` (``task`` optional), or a bare cluster spec ``{job: [address,
...]}``. Either may hold ``"rates"``, the cost model's rates for this cluster: ``{"bandwidth":
"10gbit", "flops": {"worker": "100t", "ps": "1t"}, "gpus": {"worker": 1}}`` (each optional; a rate
given on the command line wins). A ``--task JOB:INDEX`` given on the command line overrides the document's task. Addresses
are checked by :meth:`ralp_tf.plan.cluster.Cluster.from_dict` (``host:port``), the task against the
spec (its job is a job of the cluster and its index below the job's size).
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Mapping

from ralp_tf.plan.cluster import JOBS, Cluster, Rates
from ralp_tf.errors import ClusterConfigError, parse_json, read_json_file

__all__ = ["ClusterConfig", "parse_task", "check_task", "load_cluster_config"]

_TASK = re.compile(r"^(?P<job>[a-z]+):(?P<index>\d+)$")
_EXAMPLE = ('{"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "ps": ["10.0.0.3:2222"]}, '
            '"task": {"type": "worker", "index": 0}}')


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """A cluster spec (``{job: [address, ...]}``, jobs in :data:`ralp_tf.plan.cluster.JOBS` order), the
    task this process is (``(job, index)``, or None when none was named) and where it came from."""

    spec: dict[str, list[str]]
    task: tuple[str, int] | None
    source: str
    #: the document's ``"rates"`` as keyword arguments of :meth:`Cluster.from_dict` (``bandwidth``,
    #: ``flops``, ``gpus``); {} when it has none
    rates: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def cost_cluster(self, **given: Any) -> Cluster:
        """The worker and PS jobs as the cost model's Cluster, at the document's rates with ``given``
        (the command line's, e.g. ``flops=...``) taking precedence."""
        return Cluster.from_dict(self.training_spec(), **{**self.rates, **given})

    def address(self, job: str, index: int) -> str:
        """``host:port`` of task ``job:index`` (ClusterConfigError naming the jobs when absent)."""
        check_task(self.spec, (job, index), self.source)
        return self.spec[job][index]

    def tf_config(self, job: str, index: int) -> dict[str, Any]:
        """The ``TF_CONFIG`` document of task ``job:index`` of this cluster."""
        check_task(self.spec, (job, index), self.source)
        return {"cluster": self.spec, "task": {"type": job, "index": index}}

    def training_spec(self) -> dict[str, list[str]]:
        """The worker and PS jobs only (what the coordinator's cluster resolver and the cost model see)."""
        return {j: a for j, a in self.spec.items() if j in ("worker", "ps")}


def parse_task(text: str) -> tuple[str, int]:
    """``"worker:0"`` -> ``("worker", 0)``; ClusterConfigError for anything else."""
    m = _TASK.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ClusterConfigError(f"task {text!r} is not JOB:INDEX; write e.g. worker:0 or ps:1")
    return m.group("job"), int(m.group("index"))


def check_task(spec: Mapping[str, list[str]], task: tuple[str, int], source: str = "the cluster spec") -> None:
    """Raise ClusterConfigError unless ``task`` = ``(job, index)`` is a task of ``spec``."""
    job, index = task
    if job not in spec:
        raise ClusterConfigError(f"task {job}:{index} is not in {source}: it has no job {job!r} (jobs: "
                                 f"{', '.join(f'{j} x{len(a)}' for j, a in spec.items())}); pass --task with one "
                                 "of them")
    if not 0 <= index < len(spec[job]):
        raise ClusterConfigError(f"task {job}:{index} is not in {source}: job {job!r} has {len(spec[job])} task(s), "
                                 f"indices 0-{len(spec[job]) - 1}")


def _read(source: str | os.PathLike[str] | None, env: Mapping[str, str]) -> tuple[Any, str]:
    if source is None or str(source) == "TF_CONFIG":
        text = env.get("TF_CONFIG")
        if not text:
            raise ClusterConfigError(f"TF_CONFIG is not set; set it to JSON like {_EXAMPLE}, or pass a cluster "
                                     "file (--cluster-spec FILE / --cluster FILE) with --task worker:0")
        return parse_json(text, ClusterConfigError, "TF_CONFIG", hint=f"it must look like {_EXAMPLE}"), "TF_CONFIG"
    text = str(source)
    if text.lstrip().startswith("{"):
        return parse_json(text, ClusterConfigError, "the cluster JSON", hint=f"it must look like {_EXAMPLE}"), \
            "the cluster JSON"
    if not Path(text).is_file():
        raise ClusterConfigError(f"cluster file {text!r} does not exist; pass a TF_CONFIG-style JSON file, a bare "
                                 "cluster spec file ({\"worker\": [...], \"ps\": [...]}) or TF_CONFIG")
    return read_json_file(text, ClusterConfigError, f"cluster file {text}"), f"cluster file {text}"


def load_cluster_config(source: str | os.PathLike[str] | None = None, *, task: str | tuple[str, int] | None = None,
                        env: Mapping[str, str] | None = None) -> ClusterConfig:
    """Read a cluster (see the module docstring); ``task`` (``"worker:0"``) overrides the document's."""
    doc, where = _read(source, os.environ if env is None else env)
    if not isinstance(doc, Mapping):
        raise ClusterConfigError(f"{where} must be a JSON object like {_EXAMPLE}")
    doc_task = None
    rates = _rates(doc.get("rates"), where)
    if "cluster" in doc:
        spec_doc = doc["cluster"]
        raw_task = doc.get("task")
        if raw_task not in (None, {}):
            if not isinstance(raw_task, Mapping) or not isinstance(raw_task.get("type"), str):
                raise ClusterConfigError(f"{where}: 'task' must be an object like {{\"type\": \"worker\", \"index\": 0}}")
            index = raw_task.get("index", 0)
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ClusterConfigError(f"{where}: task index must be an integer >= 0, got {index!r}")
            doc_task = (raw_task["type"], index)
    else:
        spec_doc = {k: v for k, v in doc.items() if k != "rates"}
    try:
        cluster = Cluster.from_dict(spec_doc)
    except ClusterConfigError as exc:
        raise ClusterConfigError(f"{where}: {exc}") from None
    spec = cluster.cluster_dict()
    chosen = parse_task(task) if isinstance(task, str) else (task or doc_task)
    if chosen is not None:
        check_task(spec, chosen, where)
    return ClusterConfig(spec=spec, task=chosen, source=where, rates=rates)


def _rates(doc: Any, where: str) -> dict[str, Any]:
    """The keyword arguments of a document's ``"rates"`` (module docstring), checked."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or set(doc) - {"bandwidth", "flops", "gpus"}:
        raise ClusterConfigError(f"{where}: 'rates' is an object with any of bandwidth, flops and gpus, like "
                                 '{"bandwidth": "10gbit", "flops": {"worker": "100t", "ps": "1t"}, "gpus": {"worker": 1}}')
    out = dict(Rates(doc.get("bandwidth"), doc.get("flops")).kwargs())
    gpus = doc.get("gpus")
    if gpus is not None:
        if not isinstance(gpus, Mapping) or not all(
                j in JOBS and isinstance(n, int) and not isinstance(n, bool) and n >= 0 for j, n in gpus.items()):
            raise ClusterConfigError(f"{where}: 'rates.gpus' maps jobs to GPUs per task, e.g. {{\"worker\": 1}}")
        out["gpus"] = dict(gpus)
    return out
