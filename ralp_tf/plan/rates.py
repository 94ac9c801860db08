"""Link and FLOP rates as the cost model reads them: parsing ``100mbit``/``5e10``/``worker=100t,ps=1t``,
:class:`Rates`, the one record of the rates a command or a decorator gives, :class:`ServingCpu`,
the CPU costs of moving bytes measured on a cluster, and :class:`RingCpu`, a ring all-reduce's own CPU
measured there (both by ``ralp-tf calibrate``). Pure."""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping

from ralp_tf.errors import ClusterConfigError

__all__ = ["JOBS", "parse_bandwidth", "format_bandwidth", "parse_flops", "positive_flops", "Rates", "ServingCpu", "OPTIONAL_SERVING", "RingCpu",
           "check_measured"]

JOBS = ("chief", "worker", "ps", "evaluator")

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(bit|bps|b)?\s*$", re.IGNORECASE)
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_FLOPS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)(?:flops?(?:/s)?)?\s*$", re.IGNORECASE)


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
class Rates:
    """The link and FLOP rates given to the cost model: ``bandwidth`` (one rate, ``"1gbit"``, bits/s
    or ``"uncapped"``; or ``{job: rate}``) and ``flops`` (FLOP/s, one value or ``{job: value}``).
    None leaves the default of :meth:`Cluster.from_dict`. Values are checked when the record is
    made (bad rates raise ClusterConfigError naming the value and the fix); :meth:`kwargs` gives
    the keyword arguments of :meth:`Cluster.local` / :meth:`Cluster.from_dict` /
    :meth:`Cluster.with_rates` for the rates that were given."""

    bandwidth: Any = None
    flops: Any = None

    def __post_init__(self) -> None:
        if self.bandwidth is not None:
            _each_rate(self.bandwidth, parse_bandwidth)
        if self.flops is not None:
            object.__setattr__(self, "flops", parse_flops(self.flops))

    def kwargs(self) -> dict[str, Any]:
        """``{"bandwidth": ..., "flops": ...}`` for the rates given (absent ones left out)."""
        return {k: v for k, v in (("bandwidth", self.bandwidth), ("flops", self.flops)) if v is not None}


@dataclasses.dataclass(frozen=True)
class ServingCpu:
    """The CPU a cluster's tasks spend moving bytes, measured on it (``ralp-tf calibrate``,
    :mod:`ralp_tf.plan.calibration`), in core-seconds: per byte a task sends or receives, per tensor
    message at each end, and per (worker step, PS task) pair at the PS task and at the worker. A
    cluster that carries one prices every host with it (:func:`ralp_tf.plan.costmodel.serving_core_seconds`),
    instead of the constants fitted on this project's machine (dedicated and colocated)."""

    ps_s_per_byte: float
    worker_s_per_byte: float
    ps_message_s: float
    worker_message_s: float
    ps_step_s: float
    worker_step_s: float
    #: per tensor message that arrives on its own while the receiving end waits in the step (an
    #: activation or its gradient at a cut, a split layer's hop between PS tasks, a gradient pushed as
    #: the backward computes it), at each end; ``*_message_s`` is then what a message sent together
    #: with others costs (the step's pulls). None: not measured (every message costs
    #: ``*_message_s``, and hops between PS tasks nothing)
    ps_chained_message_s: float | None = None
    worker_chained_message_s: float | None = None
    #: the chief's CPU per closure it schedules (dispatch, results); None: not measured
    chief_closure_s: float | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None or f.name not in OPTIONAL_SERVING:
                check_measured(f"serving CPU {f.name}", getattr(self, f.name))

    @property
    def chained(self) -> bool:
        """Whether the chained messages' CPU was measured (at both ends)."""
        return self.ps_chained_message_s is not None and self.worker_chained_message_s is not None

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


#: The :class:`ServingCpu` fields a calibration may lack (None: not measured)
OPTIONAL_SERVING = ("ps_chained_message_s", "worker_chained_message_s", "chief_closure_s")


@dataclasses.dataclass(frozen=True)
class RingCpu:
    """A ring all-reduce's own CPU on each worker host per synchronous step, measured on a cluster
    (``ralp-tf calibrate``, :mod:`ralp_tf.plan.ring_cpu`), in core-seconds:
    ``r_h = s_per_byte (out_h + in_h) + step_s + tensor_hop_s G 2 (N-1) + sparse_gradient_s S`` for
    ``implementation`` (``"mwms"`` or ``"horovod"``), ``S`` the step's sparse (IndexedSlices)
    gradients, each all-gathered on its own; the cost model's ``RING_*`` constants for that
    implementation otherwise (:func:`ralp_tf.plan.costmodel.ring_cpu_seconds`). A file without
    ``sparse_gradient_s`` (no sparse probe) prices none. ``table_pass_s_per_byte`` is a ring
    worker's core-seconds per byte of the optimizer's whole-table passes over its replicas
    (:func:`ralp_tf.plan.updates.ring_pass_s_per_byte`; None: not measured)."""

    implementation: str
    s_per_byte: float
    step_s: float
    tensor_hop_s: float
    sparse_gradient_s: float = 0.0
    table_pass_s_per_byte: float | None = None

    def __post_init__(self) -> None:
        if self.implementation not in ("mwms", "horovod"):
            raise ClusterConfigError(f"ring CPU implementation must be 'mwms' or 'horovod', got {self.implementation!r}")
        for name in ("s_per_byte", "step_s", "tensor_hop_s", "sparse_gradient_s"):
            check_measured(f"ring CPU {name}", getattr(self, name))
        if self.table_pass_s_per_byte is not None:
            check_measured("ring CPU table_pass_s_per_byte", self.table_pass_s_per_byte)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_measured(what: str, v: Any, unit: str = "core-seconds") -> None:
    """ClusterConfigError unless ``v`` (the measured ``what``) is a finite number >= 0 of ``unit``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
        raise ClusterConfigError(f"{what} must be a number of {unit} >= 0, got {v!r}")


def positive_flops(value: Any) -> float:
    """One FLOP rate: a positive number of FLOP/s, or text like ``5e10``, ``100t``, ``2.5g``."""
    if isinstance(value, str):
        m = _FLOPS.match(value)
        if not m:
            raise ClusterConfigError(f"cannot parse FLOP rate {value!r}; write FLOP/s like 5e10, 100t, 2.5g or 800m")
        value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ClusterConfigError(f"a FLOP rate must be a positive number of FLOP/s, e.g. 5e10 or 100t, got {value!r}")
    return float(value)


def parse_flops(value: Any) -> float | dict[str, float]:
    """FLOP/s for the cost model: one rate for every task (``5e10``, ``"100t"``), or per job, as
    ``"worker=100t,ps=1t"`` or ``{"worker": "100t", "ps": 1e12}`` (jobs of :data:`JOBS`, or
    ``default``). Raises ClusterConfigError naming the part that is wrong and the form."""
    if isinstance(value, str) and "=" in value:
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        value = {job.strip(): rate.strip() for job, _, rate in pairs}
    if isinstance(value, Mapping):
        unknown = [j for j in value if j not in (*JOBS, "default")]
        if unknown or not value:
            raise ClusterConfigError(f"FLOP rates are given per job ({', '.join(JOBS)} or default), got "
                                     f"{', '.join(map(repr, unknown)) or 'none'}; write e.g. worker=100t,ps=1t")
        return {job: positive_flops(rate) for job, rate in value.items()}
    return positive_flops(value)


def _each_rate(value: Any, convert: Any) -> None:
    for v in (value.values() if isinstance(value, Mapping) else [value]):
        convert(v)
