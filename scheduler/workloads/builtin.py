"""Built-in workloads: tf_keras models profiled through :func:`ralp_tf.profile`.

Four come from :mod:`ralp_tf.model.builtin` (AlexNet-, VGG16- and ResNet-style CNNs, CTR-DNN); two
are defined here: a two-tower text-matching model (MATCHNET-like) and a word-embedding model
trained with NCE loss, whose loss head is written as layers (an ``Embedding`` of output
weights and one of output biases, looked up for the true and the sampled negative words).

Profiles are cached as JSON in ``profiles/`` (regenerate with
``python -m scheduler.workloads.builtin --refresh``); :func:`load_profile` profiles the model
when no cache exists.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from ralp_tf.errors import read_json_file
from ralp_tf.model import ModelProfile
from scheduler.core.errors import WorkloadError

__all__ = ["PROFILE_DIR", "BATCH_SIZE", "matchnet", "word2vec_nce", "BUILTIN_WORKLOADS", "profile_workload",
           "read_cached_profile", "load_profile", "main"]

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
#: Per-unit batch size of the built-in profiles.
BATCH_SIZE = 64


def matchnet(vocab: int = 100_000, embed_dim: int = 64, seq_len: int = 16, filters: int = 128,
             hidden: int = 256) -> Any:
    """Two-tower matching model: each tower (query, document) is a token Embedding, a Conv1D over
    the sequence, global max pooling and a Dense projection; the metric network concatenates the
    towers and scores the pair with Dense 256-1."""
    import tf_keras as k

    L = k.layers
    towers, inputs = [], []
    for side in ("query", "doc"):
        x = inp = L.Input((seq_len,), dtype="int32", name=f"{side}_ids")
        x = L.Embedding(vocab, embed_dim, name=f"{side}_emb")(x)
        x = L.Conv1D(filters, 3, padding="same", activation="relu", name=f"{side}_conv")(x)
        x = L.GlobalMaxPooling1D(name=f"{side}_pool")(x)
        x = L.Dense(hidden, activation="relu", name=f"{side}_fc")(x)
        towers.append(x)
        inputs.append(inp)
    x = L.Concatenate(name="pair")(towers)
    x = L.Dense(hidden, activation="relu", name="metric_fc1")(x)
    out = L.Dense(1, name="match_logit")(x)
    return k.Model(inputs, out, name="matchnet")


def word2vec_nce(vocab: int = 500_000, embed_dim: int = 128, num_sampled: int = 64) -> Any:
    """Skip-gram word embeddings with an NCE loss head as layers: the centre word's input
    embedding is scored (Dot) against output-weight embeddings of the true context word and
    ``num_sampled`` sampled negatives, plus their output biases. The logits feed a sigmoid
    cross-entropy with label 1 for the true word and 0 for the negatives (the NCE objective)."""
    import tf_keras as k

    L = k.layers
    center = L.Input((1,), dtype="int32", name="center_id")
    targets = L.Input((1 + num_sampled,), dtype="int32", name="target_ids")  # true word + negatives
    c = L.Embedding(vocab, embed_dim, name="in_emb")(center)                  # [1, d]
    w = L.Embedding(vocab, embed_dim, name="nce_weights")(targets)           # [1+S, d]
    bias = L.Embedding(vocab, 1, name="nce_biases")(targets)                 # [1+S, 1]
    bias = L.Reshape((1 + num_sampled,), name="nce_bias_flat")(bias)
    dots = L.Dot(axes=(2, 2), name="nce_dot")([c, w])                        # [1, 1+S]
    dots = L.Reshape((1 + num_sampled,), name="nce_dot_flat")(dots)
    logits = L.Add(name="nce_logits")([dots, bias])
    return k.Model([center, targets], logits, name="word2vec_nce")


def _ralp_model(name: str) -> Callable[[], Any]:
    def build() -> Any:
        from ralp_tf import models

        return getattr(models, name)()
    return build


BUILTIN_WORKLOADS: dict[str, Callable[[], Any]] = {
    "alexnet": _ralp_model("alexnet_cifar"),
    "vgg16": _ralp_model("vgg16_cifar"),
    "resnet": _ralp_model("resnet_cifar"),
    "ctr_dnn": _ralp_model("ctr_dnn"),
    "matchnet": matchnet,
    "word2vec_nce": word2vec_nce,
}


def profile_workload(name: str, batch_size: int = BATCH_SIZE) -> ModelProfile:
    """Build and profile a built-in workload with :func:`ralp_tf.profile` (imports TensorFlow)."""
    if name not in BUILTIN_WORKLOADS:
        raise WorkloadError(f"unknown built-in workload {name!r}; use one of {', '.join(BUILTIN_WORKLOADS)}")
    from ralp_tf.model import profile

    model = BUILTIN_WORKLOADS[name]()
    prof = profile(model, batch_size=batch_size)
    import dataclasses

    return dataclasses.replace(prof, model_name=name)


def read_cached_profile(path: Path) -> ModelProfile:
    """The profile cached at ``path``, read with the shared JSON reader; a malformed cache raises
    :class:`WorkloadError` naming the file (delete it, or rerun with ``--refresh``, to re-profile)."""
    return ModelProfile.from_dict(read_json_file(path, WorkloadError, "cached workload profile"))


def load_profile(name: str) -> ModelProfile:
    """The cached profile of a built-in workload, profiling it when there is no cache."""
    if name not in BUILTIN_WORKLOADS:
        raise WorkloadError(f"unknown built-in workload {name!r}; use one of {', '.join(BUILTIN_WORKLOADS)}")
    path = PROFILE_DIR / f"{name}.json"
    if path.exists():
        return read_cached_profile(path)
    prof = profile_workload(name)
    try:
        PROFILE_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(prof.to_json())
    except OSError:
        pass
    return prof


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Profile the built-in scheduler workloads into profiles/*.json")
    ap.add_argument("--refresh", action="store_true", help="re-profile every workload and rewrite the cache")
    ap.add_argument("names", nargs="*", default=list(BUILTIN_WORKLOADS))
    args = ap.parse_args(argv)
    PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        path = PROFILE_DIR / f"{name}.json"
        if args.refresh or not path.exists():
            prof = profile_workload(name)
            path.write_text(prof.to_json())
        prof = read_cached_profile(path)
        print(json.dumps({"workload": name, "layers": len(prof.layers), "params_MB": prof.param_bytes / 1e6,
                          "MFLOP_per_sample": prof.flops / 1e6}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
