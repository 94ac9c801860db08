"""Hand-written calibration documents (``ralp_tf.calibration/1``) for the tests: a cluster's tasks,
links, serving CPU, floor and per-layer times, as ``ralp-tf calibrate`` writes them."""
from __future__ import annotations

from typing import Any, Mapping

from ralp_tf.plan.calibration import CALIBRATION_FORMAT
from ralp_tf.plan.profiles import cached_profile

__all__ = ["TF_VERSION", "calibration_doc", "layer_times"]

TF_VERSION = "2.21.0"


def layer_times(model: str, seconds_per_flop: float, *, kinds: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every computing layer of ``model``'s cached profile (batch 32) at ``seconds_per_flop`` per
    forward+backward FLOP, times ``kinds[kind]`` for layers of that kind (e.g. ``{"conv": 0.01}``)."""
    prof = cached_profile(model)
    return {l.name: 3 * l.flops * prof.batch_size * seconds_per_flop * (kinds or {}).get(l.kind, 1.0)
            for l in prof.layers if l.kind != "input"}


def calibration_doc(workers: int = 2, ps: int = 1, *, layout: str = "dedicated", bandwidth_bps: float = 1e8,
                    worker_kind: str = "CPU", models: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
                    flops: Mapping[str, float] | None = None, address_base: str = "10.0.0.",
                    tensorflow_version: str = TF_VERSION, **extra: Any) -> dict[str, Any]:
    """A calibration of ``workers`` workers and ``ps`` PS tasks on ``layout`` hosts at addresses
    ``<address_base><n>:2222...``, every cross-host link at ``bandwidth_bps``; ``models`` is
    ``{task: {model: {layer: seconds}}}`` (batch 32), ``flops`` the FLOP rate per task (default
    ``5e10`` on CPUs, ``1e13`` on a GPU worker)."""
    tasks = []
    for job, n in (("worker", workers), ("ps", ps)):
        for i in range(n):
            host = i if layout == "colocated" else (i if job == "worker" else workers + i)
            port = 2222 + (i if job == "worker" else workers + i)
            kind = worker_kind if job == "worker" else "CPU"
            tasks.append({"key": f"{job}:{i}", "address": f"{address_base}{host + 1}:{port}",
                          "device": f"/job:{job}/replica:0/task:{i}/device:{kind}:0", "device_kind": kind})
    hosts = {t["key"]: t["address"].rsplit(":", 1)[0] for t in tasks}
    links = []
    for a in tasks:
        for b in tasks:
            if a is b or hosts[a["key"]] == hosts[b["key"]] or a["key"][:2] == b["key"][:2] == "ps":
                continue  # worker<->PS and worker<->worker links across hosts
            links.append({"src": a["key"], "dst": b["key"], "payload_bps": bandwidth_bps / (1 + 66 / 1448),
                              "bandwidth_bps": bandwidth_bps, "latency_s": 2e-4,
                              "samples": [{"bytes": 4, "seconds": 0.003, "transfers": 3},
                                          {"bytes": 8_000_000, "seconds": 0.003 + 6.4e7 / bandwidth_bps,
                                           "transfers": 3, "src_cpu_s": 0.008, "dst_cpu_s": 0.01}]})
    rates = dict(flops or {})
    compute = []
    for t in tasks:
        if t["key"] in (models or {}) or t["key"] in rates:
            timed = (models or {}).get(t["key"], {})
            default = 1e13 if t["device_kind"] == "GPU" else 5e10
            compute.append({"task": t["key"], "device": t["device"], "device_kind": t["device_kind"],
                            "flops_per_s": rates.get(t["key"], default),
                            "models": [{"model": m, "batch_size": 32, "step_s": sum(layers.values()),
                                        "layer_sum_s": sum(layers.values()), "flops": 1.0, "layers": dict(layers)}
                                       for m, layers in timed.items()]})
    doc = {"format": CALIBRATION_FORMAT, "created": "2026-12-05T10:00:00", "ralp_tf_version": "0.1.0",
           "tensorflow_version": tensorflow_version, "machine": "chief-host", "source": "cluster file cluster.json",
           "budget": {"transfers": 3, "steps": 10}, "wall_s": 42.0, "tasks": tasks, "links": links,
           "serving": {"ps_s_per_byte": 5e-10, "worker_s_per_byte": 6e-10, "ps_message_s": 1e-4,
                       "worker_message_s": 1.2e-4, "ps_step_s": 2e-3, "worker_step_s": 3e-3},
           "floor": {"closure_s": 3e-3, "closure_per_ps_s": 4e-3, "step_per_ps_s": 2e-3, "step_per_variable_s": 4e-4,
                     "control_bytes_per_closure_per_ps": 1900.0, "control_bytes_per_step_per_ps": 1500.0,
                     "message_cpu_ps_s": None, "message_cpu_worker_s": None, "plain_closure_s": 6e-3,
                     "plain_step_per_variable_s": 3e-4},
           "compute": compute, "host_cores": {}, "shared_cores": None}
    doc.update(extra)
    return doc
