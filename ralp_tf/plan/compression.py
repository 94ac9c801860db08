"""Compression on the wire: which tensors cross the network in a narrower dtype. Pure data.

A plan's ``compression`` maps ``"*"`` (every layer) and layer paths (overriding ``"*"``) to a
setting per kind of traffic:

* ``activations`` (``none``, ``fp16``, ``bf16``): the activations a PS-computed layer receives
  from the worker at the cut, and their gradients going back. The worker casts before sending,
  the PS casts back on arrival; the gradient is cast on the PS and back on the worker;
* ``weights`` (``none``, ``fp16``, ``bf16``): the variables a worker-computed layer pulls from
  its PS task, and, because the cast is differentiated on both sides, the gradients it pushes
  back. The PS keeps fp32 master weights and casts on its side, so the narrow tensor crosses.
  Embedding tables are never cast (only their gathered rows move);
* ``gradients`` (``none``, ``fp16``, ``bf16``, ``int8``, ``topk:<fraction>``,
  ``topk:<fraction>:no-feedback``): the variable gradients a worker-computed layer pushes to its
  PS task, encoded on the worker and decoded on the PS task holding the variable
  (:mod:`ralp_tf.place.codecs`). ``int8``: ``round(g / s)`` in int8 with one fp32 scale
  ``s = max|g| / 127`` per tensor. ``topk:f``: the ``k = max(1, ceil(f n))`` entries of largest
  magnitude of an ``n``-element gradient, as fp32 values and int32 flat indices, with error
  feedback (each worker keeps what it did not send and adds it to the next step's gradient);
  ``:no-feedback`` drops the rest instead. A gradients codec overrides the ``weights`` codec's
  effect on the push. Embedding tables and PS-computed layers push no dense gradient over the
  network: their gradients codec is dropped (with a warning when the plan names the layer).

Encoding costs compute on the worker (:func:`codec_flops`, charged by the cost model): int8 and
top-k are a few passes over the gradient, top-k with error feedback about twice that.

Wire bytes of an ``n``-element fp32 tensor (:func:`wire_bytes`): ``none`` ``4 n``, ``fp16`` and
``bf16`` ``2 n``, ``int8`` ``n + 4`` (the scale), ``topk:f`` ``8 k``. :func:`wire_ratio` is the
same per fp32 byte for large tensors: 1, 1/2, 1/4, ``2 f``.

A setting written as text (``--compression``, :func:`parse_setting`) is one codec name or
comma-separated items, each ``kind=codec`` or a bare codec: ``fp16`` and ``bf16`` set activations
and weights, ``int8`` and ``topk:...`` set gradients (``"fp16,gradients=topk:0.01"``).
``auto`` in the analyzer (``analyze(..., compression="auto")``) means: fp16 activations and
weights, the cheapest settings whose accuracy cost is known to be small; it never picks int8
or top-k on its own.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ralp_tf.errors import PlanError

__all__ = ["KINDS", "FLOAT_CODECS", "GRADIENT_CODECS", "NO_FEEDBACK", "Compression", "NONE", "AUTO", "check_codec",
           "parse_setting", "parse_compression", "setting_of", "topk_fraction", "error_feedback", "topk_count",
           "wire_ratio", "wire_bytes", "CODEC_WORK_PER_ENTRY", "codec_flops", "pushed_bytes"]

KINDS = ("activations", "weights", "gradients")
FLOAT_CODECS = ("none", "fp16", "bf16")
GRADIENT_CODECS = (*FLOAT_CODECS, "int8")
#: Suffix of a top-k codec that drops what it does not send (no per-worker residual).
NO_FEEDBACK = ":no-feedback"


@dataclasses.dataclass(frozen=True)
class Compression:
    """The setting of one layer's traffic (see the module docstring)."""

    activations: str = "none"
    weights: str = "none"
    gradients: str = "none"

    def to_dict(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in KINDS if getattr(self, k) != "none"}

    @property
    def is_none(self) -> bool:
        return not self.to_dict()

    def describe(self) -> str:
        """``"activations fp16, weights fp16"`` (``"no compression"`` when none applies)."""
        return ", ".join(f"{k} {v}" for k, v in self.to_dict().items()) or "no compression"


NONE = Compression()
AUTO = Compression(activations="fp16", weights="fp16")


def check_codec(kind: str, codec: Any, where: str) -> str:
    """``codec`` if it is valid for ``kind``; else PlanError naming ``where`` and the choices."""
    if kind not in KINDS:
        raise PlanError(f"{where}: unknown compression kind {kind!r}; use one of {', '.join(KINDS)}")
    if not isinstance(codec, str):
        raise PlanError(f"{where}: compression of {kind} must be a string, got {codec!r}")
    if kind == "gradients" and codec.startswith("topk:"):
        body = codec[5:-len(NO_FEEDBACK)] if codec.endswith(NO_FEEDBACK) else codec[5:]
        try:
            fraction = float(body)
        except ValueError:
            fraction = float("nan")
        if not 0 < fraction <= 1:
            raise PlanError(f"{where}: top-k fraction in {codec!r} must be in (0, 1], e.g. topk:0.01 "
                            f"(or topk:0.01{NO_FEEDBACK} without error feedback)")
        return codec
    allowed = GRADIENT_CODECS if kind == "gradients" else FLOAT_CODECS
    if codec not in allowed:
        extra = ", topk:<fraction>" if kind == "gradients" else ""
        raise PlanError(f"{where}: unknown compression {codec!r} for {kind}; use one of {', '.join(allowed)}{extra}")
    return codec


def parse_setting(value: Any, where: str) -> Compression:
    """A :class:`Compression` from ``{"activations": "fp16", ...}``, ``"auto"``, or text (see the
    module docstring): ``"fp16"`` (activations and weights), ``"int8"`` or ``"topk:0.01"``
    (gradients), ``"weights=bf16,gradients=int8"``, ``"fp16,gradients=topk:0.01"``."""
    if isinstance(value, Compression):
        return value
    if isinstance(value, str):
        if value == "auto":
            return AUTO
        return _parse_text(value, where)
    if not isinstance(value, Mapping):
        raise PlanError(f"{where}: a compression setting is a codec name or an object like "
                        "{\"activations\": \"fp16\", \"weights\": \"bf16\"}")
    return Compression(**{k: check_codec(k, v, where) for k, v in value.items()})


def _parse_text(text: str, where: str) -> Compression:
    """A setting from ``"fp16"``, ``"int8"``, ``"gradients=int8,weights=fp16"`` (see the module docstring)."""
    fields: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        kind, sep, codec = item.partition("=")
        if sep:
            kinds = (kind.strip(),)
            codec = codec.strip()
        elif item == "int8" or item.startswith("topk:"):
            kinds, codec = ("gradients",), item
        elif item in FLOAT_CODECS:
            kinds, codec = ("activations", "weights"), item
        else:
            raise PlanError(f"{where}: unknown compression {item!r}; use fp16, bf16 or none (activations and weights), "
                            "int8 or topk:<fraction> (gradients), or kind=codec items such as "
                            "'weights=fp16,gradients=int8'")
        for k in kinds:
            fields[k] = check_codec(k, codec, where)
    return Compression(**fields)


def parse_compression(value: Any) -> dict[str, Compression]:
    """Plan ``compression``: ``{"*" or layer path: setting}``; a bare setting means ``{"*": setting}``."""
    if value is None:
        return {}
    if isinstance(value, (str, Compression)) or (isinstance(value, Mapping) and set(value) <= set(KINDS)):
        value = {"*": value}
    if not isinstance(value, Mapping):
        raise PlanError("plan 'compression' must map '*' or layer names to settings")
    out = {}
    for layer, setting in value.items():
        if not isinstance(layer, str) or not layer:
            raise PlanError(f"plan compression key {layer!r} must be '*' or a layer name")
        parsed = parse_setting(setting, f"compression of {layer!r}")
        if not parsed.is_none:
            out[layer] = parsed
    return out


def setting_of(compression: Mapping[str, Compression], layer: str) -> Compression:
    """The setting that applies to ``layer``: its own, else ``"*"``'s, else none."""
    return compression.get(layer) or compression.get("*") or NONE


def topk_fraction(codec: str) -> float:
    """``f`` of ``topk:f`` (or ``topk:f:no-feedback``)."""
    return float(codec[5:].split(":")[0])


def error_feedback(codec: str) -> bool:
    """Whether ``codec`` keeps a per-worker residual (top-k without ``:no-feedback``)."""
    return codec.startswith("topk:") and not codec.endswith(NO_FEEDBACK)


def topk_count(n: int, fraction: float) -> int:
    """``k = max(1, ceil(f n))`` (at most ``n``) entries sent of an ``n``-element tensor."""
    return min(n, max(1, math.ceil(round(fraction * n, 6))))


def wire_ratio(codec: str) -> float:
    """Bytes on the wire per fp32 byte for ``codec`` on a large tensor (see the module docstring)."""
    if codec in ("fp16", "bf16"):
        return 0.5
    if codec == "int8":
        return 0.25
    if codec.startswith("topk:"):
        return min(1.0, 2.0 * topk_fraction(codec))
    return 1.0


def wire_bytes(codec: str, nbytes: float) -> float:
    """Bytes on the wire for an fp32 tensor of ``nbytes`` sent with ``codec``: ``int8`` ``n + 4``,
    ``topk:f`` ``8 k`` (``n = nbytes / 4``, :func:`topk_count`), else ``nbytes * wire_ratio``."""
    n = int(round(nbytes / 4))
    if codec == "int8":
        return n + 4.0
    if codec.startswith("topk:"):
        return 8.0 * topk_count(n, topk_fraction(codec)) if n else 0.0
    return nbytes * wire_ratio(codec)


#: Encode + decode work per gradient entry, in FLOP-equivalents: seconds per entry measured on one
#: core of the project's 2-core machine (tensorflow-cpu 2.21, a 2.4 M-entry tensor, k = 1%) times the
#: default CPU rate 5e10 FLOP/s (:data:`ralp_tf.plan.cluster.DEFAULT_CPU_FLOPS`): int8 13 ns, top-k with
#: error feedback 25 ns (the residual is read, added and rewritten), without 12 ns.
CODEC_WORK_PER_ENTRY = {"int8": 650.0, "topk": 1250.0, "topk" + NO_FEEDBACK: 600.0}


def codec_flops(codec: str, nbytes: float) -> float:
    """Encode + decode work (FLOP-equivalents, :data:`CODEC_WORK_PER_ENTRY`) for an fp32 gradient of
    ``nbytes`` sent with gradients ``codec``; 0 for none and the casts (one cheap pass)."""
    if codec == "int8":
        key = "int8"
    elif codec.startswith("topk:"):
        key = "topk" + (NO_FEEDBACK if codec.endswith(NO_FEEDBACK) else "")
    else:
        return 0.0
    return CODEC_WORK_PER_ENTRY[key] * nbytes / 4


def pushed_bytes(setting: Compression, nbytes: float) -> float:
    """Bytes a worker-computed layer pushes for a variable gradient of ``nbytes`` (fp32): its
    ``gradients`` codec, else its ``weights`` codec (the cast's gradient crosses narrow too)."""
    return wire_bytes(setting.gradients if setting.gradients != "none" else setting.weights, nbytes)
