"""The calibration file's records (a task, a link and its transfers, a device's timed models) and
the readers that check each field of a document (:class:`FieldReader`: CalibrationError naming the
file, the field and the fix). Pure; :mod:`ralp_tf.plan.calibration` holds the file itself."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ralp_tf.errors import CalibrationError, ValidationError
from ralp_tf.plan.closures import FloorTerms
from ralp_tf.plan.cluster import address_host
from ralp_tf.plan.rates import OPTIONAL_SERVING, RingCpu, ServingCpu
from ralp_tf.plan.ring_cpu import RingProbeSample

__all__ = ["DEVICE_KINDS", "RERUN", "CalibratedTask", "Transfer", "Link", "ModelTimes", "DeviceCompute",
           "FieldReader", "positive_number"]

DEVICE_KINDS = ("CPU", "GPU")
#: The fix every refusal names.
RERUN = "rerun `ralp-tf calibrate` on this cluster"


@dataclasses.dataclass(frozen=True)
class CalibratedTask:
    """A worker or PS task as calibrated: ``key`` (``"worker:0"``), address, host, TF device string."""

    key: str
    address: str
    host: str
    device: str
    device_kind: str

    @property
    def job(self) -> str:
        return self.key.partition(":")[0]


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One tensor size timed on a link: ``bytes``, median ``seconds`` per transfer over ``transfers``,
    CPU core-seconds per transfer of the sending and receiving task (None: not read)."""

    bytes: int
    seconds: float
    transfers: int
    src_cpu_s: float | None = None
    dst_cpu_s: float | None = None


@dataclasses.dataclass(frozen=True)
class Link:
    """Transfers from task ``src`` to task ``dst`` (module docstring)."""

    src: str
    dst: str
    payload_bps: float
    bandwidth_bps: float
    latency_s: float
    samples: tuple[Transfer, ...] = ()


@dataclasses.dataclass(frozen=True)
class ModelTimes:
    """A model's layers timed on one device at ``batch_size``: ``layers`` ((name, seconds) pairs,
    shares measured per layer scaled to ``step_s``, the whole forward+backward step timed there),
    ``layer_sum_s`` the unscaled sum, ``flops`` the step's FLOPs (``3 b sum_l f_l``)."""

    model: str
    batch_size: int
    step_s: float
    layer_sum_s: float
    flops: float
    layers: tuple[tuple[str, float], ...]


@dataclasses.dataclass(frozen=True)
class DeviceCompute:
    """What one task's device computes at: its effective FLOP rate and the models timed there."""

    task: str
    device: str
    device_kind: str
    flops_per_s: float
    models: tuple[ModelTimes, ...] = ()
    #: seconds per byte of a sparse update's whole-table pass there (PS tasks; None: not timed)
    table_pass_s_per_byte: float | None = None


def positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


class FieldReader:
    """Field readers that raise CalibrationError naming the file, the field and the fix."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, what: str) -> CalibrationError:
        return CalibrationError(f"{self.path}: {what}; {RERUN}")

    def mapping(self, v: Any, what: str) -> Mapping[str, Any]:
        if not isinstance(v, Mapping):
            raise self.fail(f"{what} must be a JSON object")
        return v

    def items(self, doc: Mapping[str, Any], key: str, nonempty: bool = False) -> list[Any]:
        v = doc.get(key, None if nonempty else [])
        if not isinstance(v, list) or (nonempty and not v):
            raise self.fail(f"'{key}' must be a{' non-empty' if nonempty else ''} list")
        return v

    def text(self, doc: Mapping[str, Any], key: str) -> str:
        v = doc.get(key)
        if not isinstance(v, str) or not v:
            raise self.fail(f"'{key}' must be a non-empty string")
        return v

    def number(self, v: Any, what: str, *, low: float = 0.0, positive: bool = False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < low \
                or (positive and v <= 0):
            raise self.fail(f"{what} must be a number {'>' if positive else '>='} {low:g}, got {v!r}")
        return float(v)

    def optional(self, v: Any, what: str) -> float | None:
        return None if v is None else self.number(v, what)

    def task(self, d: Any, i: int) -> CalibratedTask:
        d = self.mapping(d, f"tasks[{i}]")
        key, address, device, kind = (d.get(k) for k in ("key", "address", "device", "device_kind"))
        job, _, index = str(key).partition(":")
        if not isinstance(key, str) or job not in ("worker", "ps") or not index.isdigit():
            raise self.fail(f"tasks[{i}].key must be 'worker:N' or 'ps:N', got {key!r}")
        if not isinstance(address, str) or not isinstance(device, str) or kind not in DEVICE_KINDS:
            raise self.fail(f"tasks[{i}] ({key}) needs 'address' and 'device' strings and 'device_kind' in "
                            f"{', '.join(DEVICE_KINDS)}")
        try:
            host = address_host(address)
        except Exception:
            raise self.fail(f"tasks[{i}] ({key}): address {address!r} is not 'host:port'") from None
        host = d.get("host", host)
        if not isinstance(host, str) or not host:
            raise self.fail(f"tasks[{i}] ({key}): 'host' must be a non-empty string")
        return CalibratedTask(key=key, address=address, host=host, device=device, device_kind=kind)

    def link(self, d: Any, i: int, keys: set[str]) -> Link:
        d = self.mapping(d, f"links[{i}]")
        src, dst = d.get("src"), d.get("dst")
        if not isinstance(src, str) or not isinstance(dst, str) or src not in keys or dst not in keys or src == dst:
            raise self.fail(f"links[{i}] must name two different tasks of 'tasks' as 'src' and 'dst', got {src!r}, "
                            f"{dst!r}")
        samples = []
        for j, s in enumerate(self.items(d, "samples")):
            s = self.mapping(s, f"links[{i}].samples[{j}]")
            n = s.get("bytes")
            transfers = s.get("transfers", 1)
            if isinstance(n, bool) or not isinstance(n, int) or n < 0 or isinstance(transfers, bool) \
                    or not isinstance(transfers, int) or transfers < 1:
                raise self.fail(f"links[{i}].samples[{j}] needs 'bytes' (an integer >= 0) and 'transfers' (>= 1)")
            samples.append(Transfer(bytes=n, seconds=self.number(s.get("seconds"), f"links[{i}].samples[{j}].seconds"),
                                    transfers=transfers,
                                    src_cpu_s=self.optional(s.get("src_cpu_s"), f"links[{i}].samples[{j}].src_cpu_s"),
                                    dst_cpu_s=self.optional(s.get("dst_cpu_s"), f"links[{i}].samples[{j}].dst_cpu_s")))
        return Link(src=src, dst=dst, samples=tuple(samples),
                    payload_bps=self.number(d.get("payload_bps"), f"links[{i}].payload_bps", positive=True),
                    bandwidth_bps=self.number(d.get("bandwidth_bps"), f"links[{i}].bandwidth_bps", positive=True),
                    latency_s=self.number(d.get("latency_s"), f"links[{i}].latency_s"))

    def compute(self, d: Any, i: int, keys: set[str]) -> DeviceCompute:
        d = self.mapping(d, f"compute[{i}]")
        task, device, kind = d.get("task"), d.get("device"), d.get("device_kind")
        if not isinstance(task, str) or task not in keys or not isinstance(device, str) or kind not in DEVICE_KINDS:
            raise self.fail(f"compute[{i}] needs 'task' (a task of 'tasks'), 'device' and 'device_kind' in "
                            f"{', '.join(DEVICE_KINDS)}")
        models = []
        for j, m in enumerate(self.items(d, "models")):
            m = self.mapping(m, f"compute[{i}].models[{j}]")
            name, batch, layers = m.get("model"), m.get("batch_size"), self.mapping(m.get("layers"),
                                                                                   f"compute[{i}].models[{j}].layers")
            if not isinstance(name, str) or not name or isinstance(batch, bool) or not isinstance(batch, int) \
                    or batch < 1:
                raise self.fail(f"compute[{i}].models[{j}] needs 'model' (a name) and 'batch_size' (an integer >= 1)")
            models.append(ModelTimes(
                model=name, batch_size=batch,
                step_s=self.number(m.get("step_s"), f"compute[{i}].models[{j}].step_s", positive=True),
                layer_sum_s=self.number(m.get("layer_sum_s", 0.0), f"compute[{i}].models[{j}].layer_sum_s"),
                flops=self.number(m.get("flops", 0.0), f"compute[{i}].models[{j}].flops"),
                layers=tuple((str(k), self.number(v, f"compute[{i}].models[{j}].layers[{k!r}]"))
                             for k, v in layers.items())))
        return DeviceCompute(task=task, device=device, device_kind=kind, models=tuple(models),
                             flops_per_s=self.number(d.get("flops_per_s"), f"compute[{i}].flops_per_s", positive=True),
                             table_pass_s_per_byte=self.optional(d.get("table_pass_s_per_byte"),
                                                                 f"compute[{i}].table_pass_s_per_byte"))

    def testbed(self, d: Any) -> dict[str, Any] | None:
        if d is None:
            return None
        d = self.mapping(d, "'testbed'")
        cores = d.get("host_cpu")
        if d.get("layout") not in ("dedicated", "colocated") or (cores is not None and not positive_number(cores)):
            raise self.fail("'testbed' needs 'layout' (dedicated or colocated), 'bandwidth_bps' and 'host_cpu' "
                            "(cores or null)")
        cap = d.get("bandwidth_bps")
        return {"layout": d["layout"],
                "bandwidth_bps": math.inf if cap is None else self.number(cap, "testbed.bandwidth_bps", positive=True),
                "host_cpu": float(cores) if cores is not None else None, "prefix": str(d.get("prefix", ""))}

    def serving(self, d: Any) -> ServingCpu | None:
        if d is None:
            return None
        d = self.mapping(d, "'serving'")
        names = [f.name for f in dataclasses.fields(ServingCpu)]
        return ServingCpu(**{k: (self.optional if k in OPTIONAL_SERVING else self.number)(d.get(k), f"serving.{k}")
                             for k in names})

    def ring(self, d: Any) -> tuple[RingCpu | None, tuple[RingProbeSample, ...]]:
        if d is None:
            return None, ()
        d = self.mapping(d, "'ring'")
        if d.get("implementation") not in ("mwms", "horovod"):
            raise self.fail(f"ring.implementation is 'mwms' or 'horovod', got {d.get('implementation')!r}")
        terms = RingCpu(implementation=d["implementation"],
                        **{k: self.number(d.get(k), f"ring.{k}") for k in ("s_per_byte", "step_s", "tensor_hop_s")},
                        sparse_gradient_s=self.number(d.get("sparse_gradient_s", 0.0), "ring.sparse_gradient_s"),
                        table_pass_s_per_byte=self.optional(d.get("table_pass_s_per_byte"), "ring.table_pass_s_per_byte"))
        probes = []
        for i, p in enumerate(self.items(d, "probes")):
            try:
                probes.append(RingProbeSample.from_dict(self.mapping(p, f"ring.probes[{i}]")))
            except (KeyError, TypeError, ValueError, AttributeError, ValidationError) as exc:
                raise self.fail(f"ring.probes[{i}] is malformed ({type(exc).__name__}: {exc})") from None
        return terms, tuple(probes)

    def floor(self, d: Any) -> FloorTerms | None:
        if d is None:
            return None
        d = self.mapping(d, "'floor'")
        out = {}
        for f in dataclasses.fields(FloorTerms):
            v = d.get(f.name)
            if v is None and f.default is not dataclasses.MISSING:
                out[f.name] = math.nan
            else:
                out[f.name] = self.number(v, f"floor.{f.name}")
        return FloorTerms(**out)

    def dense_updates(self, d: Any) -> dict[str, float]:
        """``dense_update_s_per_byte``: optimizer name (one the cost model prices) -> seconds per byte."""
        from ralp_tf.model.optimizers import SPARSE_UPDATES

        if d is None:
            return {}
        d = self.mapping(d, "'dense_update_s_per_byte'")
        for name in d:
            if name not in SPARSE_UPDATES:
                raise self.fail(f"dense_update_s_per_byte names optimizer {name!r}, not one of {', '.join(SPARSE_UPDATES)}")
        return {str(k): self.number(v, f"dense_update_s_per_byte.{k}") for k, v in d.items()}
