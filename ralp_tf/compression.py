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
* ``gradients``: reserved for gradient-only codecs (``int8``, ``topk:<fraction>``), which are
  priced here but not applied yet (the applier refuses them with the reason).

Ratios (bytes on the wire / fp32 bytes): ``none`` 1, ``fp16`` and ``bf16`` 1/2, ``int8`` 1/4
(+ one fp32 scale per tensor), ``topk:f`` ``2 f`` (values and int32 indices).
``auto`` in the analyzer (``analyze(..., compression="auto")``) means: fp16 activations and
weights, the cheapest settings whose accuracy cost is known to be small; it never picks int8
or top-k on its own.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ralp_tf.errors import PlanError

KINDS = ("activations", "weights", "gradients")
FLOAT_CODECS = ("none", "fp16", "bf16")
GRADIENT_CODECS = (*FLOAT_CODECS, "int8")


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
        try:
            fraction = float(codec[5:])
        except ValueError:
            fraction = float("nan")
        if not 0 < fraction <= 1:
            raise PlanError(f"{where}: top-k fraction in {codec!r} must be in (0, 1], e.g. topk:0.01")
        return codec
    allowed = GRADIENT_CODECS if kind == "gradients" else FLOAT_CODECS
    if codec not in allowed:
        extra = ", topk:<fraction>" if kind == "gradients" else ""
        raise PlanError(f"{where}: unknown compression {codec!r} for {kind}; use one of {', '.join(allowed)}{extra}")
    return codec


def parse_setting(value: Any, where: str) -> Compression:
    """A :class:`Compression` from ``{"activations": "fp16", ...}`` or one codec name for all kinds
    it applies to (``"fp16"``)."""
    if isinstance(value, Compression):
        return value
    if isinstance(value, str):
        if value == "auto":
            return AUTO
        check_codec("activations", value, where)
        return Compression(activations=value, weights=value)
    if not isinstance(value, Mapping):
        raise PlanError(f"{where}: a compression setting is a codec name or an object like "
                        "{\"activations\": \"fp16\", \"weights\": \"bf16\"}")
    return Compression(**{k: check_codec(k, v, where) for k, v in value.items()})


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


def wire_ratio(codec: str) -> float:
    """Bytes on the wire per fp32 byte for ``codec`` (see the module docstring)."""
    if codec in ("fp16", "bf16"):
        return 0.5
    if codec == "int8":
        return 0.25
    if codec.startswith("topk:"):
        return min(1.0, 2.0 * float(codec[5:]))
    return 1.0
