"""Profiles written as data for the planning tests (no TensorFlow)."""
from __future__ import annotations

from typing import Any, Sequence

from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.profiles import cached_profile

MB = 1_000_000
BATCH = 8
DEVICE = "/job:ps/replica:0/task:{}/device:CPU:0"


def ps(k: int) -> str:
    """PS task k's device string."""
    return DEVICE.format(k)


def layer(name: str, kind: str, var_bytes: list[int], out: int, inbound: list[str], flops: float = 1e6,
          shapes: Sequence[Sequence[int]] | None = None, class_name: str = "") -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "kind": kind, "param_bytes": sum(var_bytes), "var_bytes": var_bytes,
                         "flops": flops, "output_bytes": out, "inbound": inbound, "output_shape": [out // 4]}
    if shapes is not None:
        d["var_shapes"] = [list(s) for s in shapes]
    if class_name:
        d["class_name"] = class_name
    return d


def cnn_with_head() -> ModelProfile:
    """Four conv layers of 4, 3, 2 and 1 MB (one variable each), each weight used at 64 output
    positions (2 FLOPs each), and a 10 MB dense head."""
    def conv(name: str, mb: int, inbound: str) -> dict[str, Any]:
        return layer(name, "conv", [mb * MB], 4096, [inbound], flops=2.0 * 64 * mb * MB / 4)

    layers = [layer("x", "input", [], 1024, []), conv("c4", 4, "x"), conv("c3", 3, "c4"), conv("c2", 2, "c3"),
              conv("c1", 1, "c2"), layer("flat", "reshape", [], 4096, ["c1"]),
              layer("fc", "dense", [10 * MB], 40, ["flat"])]
    return ModelProfile.from_dict({"model_name": "cnn", "batch_size": BATCH, "outputs": ["fc"], "layers": layers})


def dense(name: str, d_in: int, units: int, inbound: list[str], bias: bool = True) -> dict[str, Any]:
    """A Dense layer ``d_in -> units`` with shapes, 2 d_in units FLOPs per sample."""
    shapes = [(d_in, units)] + ([(units,)] if bias else [])
    return layer(name, "dense", [4 * d_in * units] + ([4 * units] if bias else []), 4 * units, inbound,
                 flops=2.0 * d_in * units, shapes=shapes, class_name="Dense")


def mlp(widths: Sequence[int] = (1024, 4096, 4096, 10), batch: int = BATCH) -> ModelProfile:
    """Input of ``widths[0]`` features, then Dense layers fc1.. of the following widths."""
    layers = [layer("x", "input", [], 4 * widths[0], [])]
    prev = "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:]), start=1):
        layers.append(dense(f"fc{i}", a, b, [prev]))
        prev = f"fc{i}"
    return ModelProfile.from_dict({"model_name": "mlp", "batch_size": batch, "outputs": [prev], "layers": layers})


def builtin(name: str) -> ModelProfile:
    """A built-in model's cached profile (batch 32)."""
    return cached_profile(name)
