"""Model profiles as data, for planning without TensorFlow: the built-in models' cached profiles
and two profiles built from the published architectures.

* :func:`cached_profile`: the profile the profiler (:func:`ralp_tf.model.profiler.profile`, batch
  32, no measured times) wrote for a built-in model, read from ``ralp_tf/plan/profiles/NAME.json``
  (layer kinds, parameters, variable shapes, FLOPs, activations, tensors). ``python -m
  ralp_tf.plan.profiles`` rewrites them (it imports TensorFlow); a test compares them with fresh
  profiles.
* :func:`resnet50_profile`: ImageNet ResNet-50 size (25.5 M parameters, 7.7 GFLOP per image
  forward), one layer per bottleneck block holding that block's conv kernels, with their Keras
  shapes ``[kh, kw, c_in, c_out]``.
* :func:`bert_base_profile`: BERT-base size (110 M parameters, a 93.8 MB word-embedding table, 12
  encoder layers as an attention and a feed-forward layer each, sequence length 128), with the
  shapes of its variables (the attention's query, key and value kernels as one ``[768, 2304]``).
  The encoder layers are composites (class ``EncoderAttention`` / ``EncoderFeedForward``): they
  are stored partitioned like any layer, but not split (:mod:`ralp_tf.plan.shards`).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Sequence

from ralp_tf.errors import ValidationError
from ralp_tf.model.profiles import ModelProfile

__all__ = ["CACHED_MODELS", "PROFILE_DIR", "cached_profile", "dump_profile", "resnet50_profile", "bert_base_profile",
           "write_cached", "main"]

#: The built-in models whose profiles are cached (batch 32).
CACHED_MODELS = ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn", "small_cnn")
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
_F32 = 4


def cached_profile(name: str, batch_size: int = 32) -> ModelProfile:
    """The cached profile of built-in model ``name`` at ``batch_size`` (module docstring)."""
    if name not in CACHED_MODELS:
        raise ValidationError(f"no cached profile of model {name!r}; cached: {', '.join(CACHED_MODELS)} (profile "
                              "other models with ralp_tf.profile)")
    with open(os.path.join(PROFILE_DIR, f"{name}.json")) as f:
        prof = ModelProfile.from_json(f.read())
    return prof if batch_size == prof.batch_size else prof.with_batch_size(batch_size)


def dump_profile(profile: ModelProfile) -> str:
    """``profile`` as JSON with one layer and one tensor per line (keys sorted), so that a
    refreshed cache diffs layer by layer."""
    d = profile.to_dict()
    head = {k: v for k, v in d.items() if k not in ("layers", "tensors")}
    lines = ["{" + json.dumps(head, sort_keys=True)[1:-1] + ","]
    for key in ("layers", "tensors"):
        if key in d:
            rows = [json.dumps(item, sort_keys=True) for item in d[key]]
            lines.append(f' "{key}": [\n  ' + ",\n  ".join(rows) + "],")
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines) + "}\n"


def write_cached(names: Sequence[str] = CACHED_MODELS) -> list[str]:
    """Profile the built-in models ``names`` (imports TensorFlow) and rewrite their cached JSON;
    return the paths written."""
    from ralp_tf.model import builtin
    from ralp_tf.model.profiler import profile

    paths = []
    for name in names:
        path = os.path.join(PROFILE_DIR, f"{name}.json")
        with open(path, "w") as f:
            f.write(dump_profile(profile(builtin.BUILTIN_MODELS[name](), batch_size=32)))
        paths.append(path)
    return paths


def _layer(name: str, kind: str, shapes: Sequence[Sequence[int]], flops: float, out_elems: int, inbound: list[str],
           out_shape: Sequence[int] = (), class_name: str = "") -> dict[str, Any]:
    var_bytes = [_F32 * _prod(s) for s in shapes]
    return {"name": name, "kind": kind, "class_name": class_name or kind, "param_bytes": sum(var_bytes),
            "flops": flops, "output_bytes": out_elems * _F32, "inbound": inbound, "var_bytes": var_bytes,
            "var_shapes": [list(s) for s in shapes], "output_shape": list(out_shape)}


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for n in shape:
        out *= int(n)
    return out


def resnet50_profile(batch_size: int = 64, num_classes: int = 1000) -> ModelProfile:
    """An ImageNet ResNet-50-size profile: stem, 16 bottleneck blocks (one layer each, holding the
    block's 1x1, 3x3 and 1x1 kernels and, in a stage's first block, the 1x1 projection, with
    ``2 x MACs`` FLOPs at its output resolution), global pooling and the ``2048 x classes`` dense
    head."""
    layers = [_layer("image", "input", [], 0, 224 * 224 * 3, []),
              _layer("stem", "conv", [(7, 7, 3, 64)], 2 * 9_408 * 112 * 112, 56 * 56 * 64, ["image"],
                     class_name="Conv2D")]
    stages = ((64, 256, 3, 56), (128, 512, 4, 28), (256, 1024, 6, 14), (512, 2048, 3, 7))
    prev, c_in = "stem", 64
    for s, (width, c_out, blocks, side) in enumerate(stages, start=1):
        for b in range(1, blocks + 1):
            shapes = [(1, 1, c_in, width), (3, 3, width, width), (1, 1, width, c_out)]
            if b == 1:
                shapes.append((1, 1, c_in, c_out))
            params = sum(_prod(x) for x in shapes)
            name = f"stage{s}_block{b}"
            layers.append(_layer(name, "conv", shapes, 2.0 * params * side * side, side * side * c_out, [prev],
                                 class_name="BottleneckBlock"))
            prev, c_in = name, c_out
    layers.append(_layer("avg_pool", "pool", [], 7 * 7 * 2048, 2048, [prev], out_shape=[2048],
                         class_name="GlobalAveragePooling2D"))
    layers.append(_layer("fc", "dense", [(2048, num_classes), (num_classes,)], 2.0 * 2048 * num_classes, num_classes,
                         ["avg_pool"], out_shape=[num_classes], class_name="Dense"))
    return ModelProfile.from_dict({"model_name": "resnet50_size", "batch_size": batch_size, "outputs": ["fc"],
                                   "layers": layers})


def bert_base_profile(batch_size: int = 32, seq_len: int = 128, vocab: int = 30_522) -> ModelProfile:
    """A BERT-base-size profile: word-embedding table (``vocab x 768``), position/type
    embeddings with layer norm, 12 encoder layers (attention: ``4 x 768^2`` weights, FLOPs
    ``2 x weights x seq + 4 x seq^2 x 768``; feed-forward: ``2 x 768 x 3072`` weights), pooler
    and a 2-way classifier, for ``seq_len`` tokens per sample."""
    d, ff = 768, 3072
    tokens = seq_len * d
    layers = [_layer("token_ids", "input", [], 0, seq_len, []),
              _layer("word_embeddings", "embedding", [(vocab, d)], tokens, tokens, ["token_ids"],
                     out_shape=[seq_len, d], class_name="Embedding"),
              _layer("embeddings_norm", "normalization", [(512, d), (2, d), (d,), (d,)], 6.0 * tokens, tokens,
                     ["word_embeddings"], out_shape=[seq_len, d], class_name="EmbeddingsNorm")]
    prev = "embeddings_norm"
    for i in range(12):
        attn = [(d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,)]
        ffn = [(d, ff), (ff,), (ff, d), (d,), (d,), (d,)]
        attn_params, ffn_params = sum(_prod(s) for s in attn), sum(_prod(s) for s in ffn)
        layers.append(_layer(f"encoder{i}_attention", "dense", attn,
                             2.0 * attn_params * seq_len + 4.0 * seq_len ** 2 * d, tokens, [prev],
                             out_shape=[seq_len, d], class_name="EncoderAttention"))
        layers.append(_layer(f"encoder{i}_ffn", "dense", ffn, 2.0 * ffn_params * seq_len, tokens,
                             [f"encoder{i}_attention"], out_shape=[seq_len, d], class_name="EncoderFeedForward"))
        prev = f"encoder{i}_ffn"
    layers.append(_layer("pooler", "dense", [(d, d), (d,)], 2.0 * d * d, d, [prev], out_shape=[d], class_name="Dense"))
    layers.append(_layer("classifier", "dense", [(d, 2), (2,)], 4.0 * d, 2, ["pooler"], out_shape=[2],
                         class_name="Dense"))
    return ModelProfile.from_dict({"model_name": "bert_base_size", "batch_size": batch_size,
                                   "outputs": ["classifier"], "layers": layers})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ralp_tf.plan.profiles [NAME ...]``: rewrite the cached profiles (all by default)."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(CACHED_MODELS)
    for path in write_cached(names):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
