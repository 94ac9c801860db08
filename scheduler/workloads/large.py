"""HeterPS-scale workloads: 200-300 layers, generated and profiled.

* **Generated** (:data:`GENERATED`, pure data, :func:`scheduler.workloads.generated.random_profile`
  with a fixed depth, seeded): ``gen_transformer`` (22 BERT-like blocks, 10 layers each),
  ``gen_resnet`` (residual stages of 3, 8, 14 and 3 blocks), ``gen_ctr`` (110 embedding fields and
  an MLP).
* **Profiled** (:data:`PROFILED`, real tf_keras models through :func:`ralp_tf.profile` at batch
  :data:`~scheduler.workloads.builtin.BATCH_SIZE`, cached in ``profiles/`` like the built-ins;
  ``python -m scheduler.workloads.large --refresh`` re-profiles them): ``efficientnet_b0``
  (``tf_keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)``,
  240 layers) and ``transformer30`` (a 30-block Transformer encoder of tf_keras layers:
  ``MultiHeadAttention``, ``LayerNormalization``, ``Dense``, residual ``Add``; 214 layers).

:func:`large_problem` is the HeterPS problem of one of them on a catalog (default constraint:
half the best single-type throughput); :func:`scheduler.workloads.load_workload` resolves their
names.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable

import numpy as np

from ralp_tf.model import ModelProfile
from scheduler.core.errors import WorkloadError
from scheduler.workloads.builtin import BATCH_SIZE, PROFILE_DIR, read_cached_profile

__all__ = ["GENERATED", "PROFILED", "LARGE_WORKLOADS", "SINGLE_TYPE_FRACTION", "transformer_encoder",
           "large_profile", "large_problem", "main"]

#: Generated workloads: (family, seed, depth arguments of ``random_profile``).
GENERATED: dict[str, tuple[str, int, dict[str, Any]]] = {
    "gen_transformer": ("transformer", 1, {"blocks": 22}),
    "gen_resnet": ("resnet", 2, {"blocks": [3, 8, 14, 3]}),
    "gen_ctr": ("ctr", 3, {"fields": 110}),
}


def transformer_encoder(blocks: int = 30, seq: int = 64, d: int = 256, heads: int = 4, vocab: int = 30_000,
                        classes: int = 2) -> Any:
    """A Transformer encoder of tf_keras layers: token embedding, ``blocks`` blocks of
    (multi-head self-attention, residual add, layer norm, dense ``4 d`` with GELU, dense ``d``,
    residual add, layer norm), global average pooling and a classifier."""
    import tf_keras as k

    L = k.layers
    ids = L.Input((seq,), dtype="int32", name="token_ids")
    x = L.Embedding(vocab, d, name="tok_emb")(ids)
    for b in range(blocks):
        a = L.MultiHeadAttention(heads, d // heads, name=f"blk{b}_attention")(x, x)
        x = L.LayerNormalization(name=f"blk{b}_ln1")(L.Add(name=f"blk{b}_add1")([x, a]))
        h = L.Dense(4 * d, activation="gelu", name=f"blk{b}_ffn_up")(x)
        h = L.Dense(d, name=f"blk{b}_ffn_down")(h)
        x = L.LayerNormalization(name=f"blk{b}_ln2")(L.Add(name=f"blk{b}_add2")([x, h]))
    x = L.GlobalAveragePooling1D(name="pool")(x)
    return k.Model(ids, L.Dense(classes, name="logits")(x), name="transformer30")


def _efficientnet_b0() -> Any:
    import tf_keras as k

    return k.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)


#: Profiled workloads: name -> model builder.
PROFILED: dict[str, Callable[[], Any]] = {"efficientnet_b0": _efficientnet_b0, "transformer30": transformer_encoder}
#: Every HeterPS-scale workload.
LARGE_WORKLOADS: tuple[str, ...] = tuple(GENERATED) + tuple(PROFILED)


def large_profile(name: str, *, refresh: bool = False) -> ModelProfile:
    """The profile of a HeterPS-scale workload (generated, or profiled and cached)."""
    import dataclasses

    if name in GENERATED:
        from scheduler.workloads.generated import random_profile

        family, seed, size = GENERATED[name]
        return random_profile(np.random.default_rng(seed), family, name=name, **size)
    if name not in PROFILED:
        raise WorkloadError(f"unknown HeterPS-scale workload {name!r}; use one of {', '.join(LARGE_WORKLOADS)}")
    path = PROFILE_DIR / f"{name}.json"
    if path.exists() and not refresh:
        return read_cached_profile(path)
    from ralp_tf.model import profile

    prof = dataclasses.replace(profile(PROFILED[name](), batch_size=BATCH_SIZE, warn_unknown=False), model_name=name)
    PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(prof.to_json())
    return prof


#: Default constraint of a HeterPS-scale workload: this fraction of the best single-type throughput.
SINGLE_TYPE_FRACTION = 0.5


def large_problem(name: str, catalog: Any = None, throughput: float | None = None) -> Any:
    """The HeterPS problem of a HeterPS-scale workload (default catalog ``cloud``). Default
    constraint: :data:`SINGLE_TYPE_FRACTION` of the best throughput of the whole model on one
    type at its most units (2 significant digits), so that a placement meeting it exists within
    the unit caps; 25% of the bottleneck bound, the built-ins' default, assumes a pipeline of
    many stages each at its most units, which the caps shared by a type's stages rule out on
    200-300 layers."""
    from scheduler.core.catalogs import CLOUD
    from scheduler.core.problem import Problem
    from scheduler.core.resources import Constraints
    from scheduler.core.problem import round_down_2sig

    free = Problem.from_profile(large_profile(name), catalog or CLOUD, Constraints(0.0, None), name=name)
    n = free.num_decisions
    single = max(float(free.seg_max_rate[0, n - 1, r]) for r in range(free.num_choices))
    x = round_down_2sig(SINGLE_TYPE_FRACTION * single) if throughput is None else float(throughput)
    return free.with_constraints(Constraints(x, None))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Profile the HeterPS-scale workloads into profiles/*.json")
    ap.add_argument("--refresh", action="store_true", help="re-profile the tf_keras models and rewrite the cache")
    args = ap.parse_args(argv)
    for name in LARGE_WORKLOADS:
        prof = large_profile(name, refresh=args.refresh and name in PROFILED)
        print(json.dumps({"workload": name, "layers": len(prof.layers), "decisions": len(prof.compute_layers),
                          "params_MB": prof.param_bytes / 1e6, "MFLOP_per_sample": prof.flops / 1e6}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
