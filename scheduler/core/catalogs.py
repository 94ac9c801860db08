"""Resource catalogs with plausible prices and speeds (sources and reasoning in docs/scheduler.md).

* :data:`CLOUD` (default): a V100 GPU worker, a compute-optimised CPU worker and a
  memory-optimised CPU parameter server, priced as AWS on-demand instances (us-east-1).
* :func:`catalog_from_cluster`: the types of a ralp_tf :class:`~ralp_tf.Cluster` (its worker
  type, GPU or CPU, and its PS type), with the cluster's rates and task counts as unit caps.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ralp_tf.plan import Cluster
from ralp_tf.errors import read_json_file
from scheduler.core.errors import CatalogError
from scheduler.core.resources import Catalog, ResourceType

__all__ = ["GPU_V100", "CPU_C5", "PS_R5", "CLOUD", "GPU_T4", "CPU_M5", "CLOUD5", "CATALOGS", "CLUSTER_DEFAULTS",
           "catalog_from_dict", "get_catalog", "catalog_from_cluster"]

#: p3.2xlarge: 1x V100-16GB, $3.06/h. fp32 peak 15.7 TFLOP/s; ~45% sustained in training.
GPU_V100 = ResourceType(
    name="gpu_v100", device_template="/job:worker/device:GPU:0", flops=7.0e12, memory_bytes=16e9,
    price_per_hour=3.06, max_units=16, bandwidth_bps=10e9, overhead_s=30e-6,
    source="AWS p3.2xlarge on-demand us-east-1 $3.06/h; V100 fp32 15.7 TFLOP/s peak, 45% sustained; "
           "up to 10 Gbit/s; ~30 us launch overhead per layer (3 kernels fwd+bwd)")
#: c5.4xlarge: 16 vCPU (8 cores, AVX-512), 32 GB, $0.68/h.
CPU_C5 = ResourceType(
    name="cpu_c5", device_template="/job:worker/device:CPU:0", flops=3.0e11, memory_bytes=32e9,
    price_per_hour=0.68, max_units=32, bandwidth_bps=10e9, overhead_s=10e-6,
    source="AWS c5.4xlarge on-demand $0.68/h; 8 cores x 3.0 GHz x 64 fp32 FLOP/cycle = 1.5 TFLOP/s peak, "
           "20% sustained with oneDNN; up to 10 Gbit/s")
#: r5.2xlarge: 8 vCPU (4 cores), 64 GB, $0.504/h: the parameter-server type.
PS_R5 = ResourceType(
    name="ps_r5", device_template="/job:ps/replica:0/task:{k}/device:CPU:0", flops=1.5e11, memory_bytes=64e9,
    price_per_hour=0.504, max_units=16, bandwidth_bps=10e9, overhead_s=10e-6,
    source="AWS r5.2xlarge on-demand $0.504/h; 4 cores x 3.1 GHz x 64 = 0.8 TFLOP/s peak, 20% sustained; "
           "up to 10 Gbit/s")

CLOUD = Catalog("cloud", (GPU_V100, CPU_C5, PS_R5))

#: g4dn.xlarge: 1x T4-16GB, $0.526/h. fp32 peak 8.1 TFLOP/s; ~45% sustained.
GPU_T4 = ResourceType(
    name="gpu_t4", device_template="/job:worker/device:GPU:0", flops=3.6e12, memory_bytes=16e9,
    price_per_hour=0.526, max_units=16, bandwidth_bps=25e9, overhead_s=30e-6,
    source="AWS g4dn.xlarge on-demand us-east-1 $0.526/h; T4 fp32 8.1 TFLOP/s peak, 45% sustained; "
           "up to 25 Gbit/s")
#: m5.2xlarge: 8 vCPU (4 cores, AVX-512), 32 GB, $0.384/h.
CPU_M5 = ResourceType(
    name="cpu_m5", device_template="/job:worker/device:CPU:0", flops=1.6e11, memory_bytes=32e9,
    price_per_hour=0.384, max_units=32, bandwidth_bps=10e9, overhead_s=10e-6,
    source="AWS m5.2xlarge on-demand $0.384/h; 4 cores x 3.1 GHz x 64 = 0.8 TFLOP/s peak, 20% sustained; "
           "up to 10 Gbit/s")
#: Five types (two GPUs, two CPU workers, one PS): the harder workloads' catalog.
CLOUD5 = Catalog("cloud5", (GPU_V100, GPU_T4, CPU_C5, CPU_M5, PS_R5))

CATALOGS: dict[str, Catalog] = {"cloud": CLOUD, "cloud5": CLOUD5}

#: Prices and memory used by :func:`catalog_from_cluster` (a Cluster has neither).
CLUSTER_DEFAULTS = {
    "gpu_worker": {"price": GPU_V100.price_per_hour, "memory": GPU_V100.memory_bytes, "overhead": GPU_V100.overhead_s},
    "cpu_worker": {"price": CPU_C5.price_per_hour, "memory": CPU_C5.memory_bytes, "overhead": CPU_C5.overhead_s},
    "ps": {"price": PS_R5.price_per_hour, "memory": PS_R5.memory_bytes, "overhead": PS_R5.overhead_s},
}


_TYPE_FIELDS = {f.name for f in dataclasses.fields(ResourceType)}
_REQUIRED = {"name", "device_template", "flops", "memory_bytes", "price_per_hour", "max_units", "bandwidth_bps"}


def catalog_from_dict(data: Any) -> Catalog:
    """A Catalog from JSON data ``{"name": ..., "types": [{ResourceType fields}, ...]}``; raises
    CatalogError naming the type and field on anything malformed."""
    if not isinstance(data, Mapping) or not isinstance(data.get("types"), list):
        raise CatalogError('a catalog is a JSON object {"name": ..., "types": [...]} listing resource types')
    name = data.get("name", "catalog")
    if not isinstance(name, str):
        raise CatalogError("catalog 'name' must be a string")
    types = []
    for i, t in enumerate(data["types"]):
        if not isinstance(t, Mapping):
            raise CatalogError(f"catalog {name!r} type #{i} must be an object with fields {sorted(_REQUIRED)}")
        label = t.get("name", f"#{i}")
        missing = _REQUIRED - set(t)
        if missing:
            raise CatalogError(f"catalog {name!r} type {label!r} lacks field(s) {sorted(missing)}")
        unknown = set(t) - _TYPE_FIELDS
        if unknown:
            raise CatalogError(f"catalog {name!r} type {label!r} has unknown field(s) {sorted(unknown)}; "
                               f"allowed: {sorted(_TYPE_FIELDS)}")
        for field in ("flops", "memory_bytes", "price_per_hour", "bandwidth_bps", "overhead_s", "max_units"):
            if isinstance(t.get(field), bool):
                raise CatalogError(f"catalog {name!r} type {label!r}: {field} must be a number, got {t[field]!r}")
        if not isinstance(t.get("source", ""), str):
            raise CatalogError(f"catalog {name!r} type {label!r}: source must be a string")
        types.append(ResourceType(**t))
    return Catalog(name, tuple(types))


def get_catalog(name: str) -> Catalog:
    """A built-in catalog by name, or one read from a JSON file path (see :func:`catalog_from_dict`)."""
    if name in CATALOGS:
        return CATALOGS[name]
    if isinstance(name, str) and name.endswith(".json"):
        return catalog_from_dict(read_json_file(name, CatalogError, "catalog file"))
    raise CatalogError(f"unknown catalog {name!r}; use one of {', '.join(CATALOGS)} or a path to a catalog JSON file")


def catalog_from_cluster(cluster: Cluster) -> Catalog:
    """Resource types of ``cluster``: its worker type (GPU when its workers have GPUs, else CPU)
    with ``max_units`` = number of workers, and its PS type (``max_units`` = number of PS tasks),
    with the tasks' FLOP and link rates. Prices and memory from :data:`CLUSTER_DEFAULTS`."""
    if not isinstance(cluster, Cluster):
        raise CatalogError(f"expected a ralp_tf.Cluster, got {type(cluster).__name__}")
    types = []
    if cluster.workers:
        w = cluster.workers[0]
        key = "gpu_worker" if w.gpus else "cpu_worker"
        d = CLUSTER_DEFAULTS[key]
        types.append(ResourceType(
            name=key, device_template=cluster.worker_device, flops=float(w.flops), memory_bytes=d["memory"],
            price_per_hour=d["price"], max_units=cluster.num_workers,
            bandwidth_bps=float(min(t.bandwidth_bps for t in cluster.workers)), overhead_s=d["overhead"],
            source="from the cluster's worker tasks"))
    if cluster.ps:
        p = cluster.ps[0]
        d = CLUSTER_DEFAULTS["ps"]
        bw = min(t.bandwidth_bps for t in cluster.ps)
        types.append(ResourceType(
            name="ps", device_template="/job:ps/replica:0/task:{k}/device:CPU:0", flops=float(p.flops),
            memory_bytes=d["memory"], price_per_hour=d["price"], max_units=cluster.num_ps,
            bandwidth_bps=float(bw) if not math.isnan(bw) else math.inf, overhead_s=d["overhead"],
            source="from the cluster's PS tasks"))
    return Catalog(f"cluster({cluster.describe()})", tuple(types))
