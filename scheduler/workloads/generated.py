"""Generated workloads: random layer graphs as :class:`ralp_tf.ModelProfile` objects (pure data).

They exist to pretrain the RL policy on many more shapes than the six built-ins, so that it
generalises to models it has never seen. No TensorFlow model is built: every layer's FLOPs,
parameter bytes and activation bytes come from the same formulas :func:`ralp_tf.profile` uses
(conv: ``2 k_h k_w C_in C_out H W``; dense: ``2 n_in n_out``; parameters ``4`` bytes each;
outputs float32), at per-unit batch :data:`~scheduler.workloads.builtin.BATCH_SIZE`.

Families (:data:`FAMILIES`), each with random depth, widths and sizes:

* ``cnn``: AlexNet/VGG-like chains: conv stages (optionally with normalisation and activation
  layers) and pooling, then flatten and a dense head;
* ``resnet``: residual stages of conv/norm/activation blocks with ``Add`` skip connections
  (DAGs), global pooling and a classifier;
* ``ctr``: CTR-DNN-like: many sparse embedding fields (vocabularies 10^4-10^7), concatenated
  with dense features, then an MLP;
* ``two_tower``: MATCHNET-like: two embedding + Conv1D/pool + dense towers and a metric MLP;
* ``embedding``: word2vec/NCE-like: huge input and output embeddings, a dot product and a bias;
* ``transformer`` (:data:`EXTRA_FAMILIES`, not in the default cycle): BERT-like encoder blocks.

:func:`random_profile` draws one profile; :func:`generated_problems` turns ``count`` of them into
HeterPS :class:`~scheduler.core.problem.Problem` s with a throughput constraint of a random fraction
(default 15-35%) of the best achievable, skipping draws that no catalog unit can hold.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ralp_tf.model import LayerProfile, ModelProfile
from scheduler.core.errors import SchedulerError, WorkloadError
from scheduler.workloads.builtin import BATCH_SIZE

__all__ = ["FAMILIES", "EXTRA_FAMILIES", "random_profile", "generated_problems"]

FAMILIES: tuple[str, ...] = ("cnn", "resnet", "ctr", "two_tower", "embedding")
_F32 = 4


class _Builder:
    """Appends layers in topological order; names are unique by construction."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.layers: list[LayerProfile] = []

    def add(self, name: str, kind: str, inbound: Sequence[str], *, params: float = 0, trainable: float | None = None,
            flops: float = 0.0, out_elems: float = 1, class_name: str | None = None) -> str:
        params = int(params) * _F32
        trainable = params if trainable is None else int(trainable) * _F32
        self.layers.append(LayerProfile(
            name=name, kind=kind, class_name=class_name or kind, param_bytes=params, trainable_param_bytes=trainable,
            var_bytes=(params,) if params else (), flops=float(flops), flops_source="generated",
            output_bytes=int(max(1, out_elems)) * _F32, inbound=tuple(inbound)))
        return name

    def profile(self) -> ModelProfile:
        return ModelProfile(model_name=self.name, batch_size=BATCH_SIZE, layers=tuple(self.layers),
                            outputs=(self.layers[-1].name,))


def _conv_block(b: _Builder, x: str, tag: str, hw: int, cin: int, cout: int, k: int, rng: np.random.Generator,
                norm: bool, act: bool) -> str:
    x = b.add(f"{tag}_conv", "conv", [x], params=k * k * cin * cout + cout, flops=2 * k * k * cin * cout * hw * hw,
              out_elems=hw * hw * cout)
    if norm:
        x = b.add(f"{tag}_bn", "normalization", [x], params=4 * cout, trainable=2 * cout, flops=4 * hw * hw * cout,
                  out_elems=hw * hw * cout)
    if act:
        x = b.add(f"{tag}_relu", "activation", [x], flops=hw * hw * cout, out_elems=hw * hw * cout)
    return x


def _dense_head(b: _Builder, x: str, n_in: int, widths: Sequence[int], classes: int) -> str:
    for i, w in enumerate(widths):
        x = b.add(f"fc{i + 1}", "dense", [x], params=n_in * w + w, flops=2 * n_in * w, out_elems=w)
        n_in = w
    return b.add("logits", "dense", [x], params=n_in * classes + classes, flops=2 * n_in * classes, out_elems=classes)


def _cnn(b: _Builder, rng: np.random.Generator) -> None:
    hw = int(rng.choice([32, 32, 64, 112]))
    c = int(rng.choice([3, 3, 1]))
    x = b.add("image", "input", [], out_elems=hw * hw * c)
    width = int(rng.choice([16, 32, 64, 96]))
    norm, act = rng.random() < 0.4, rng.random() < 0.4
    for s in range(int(rng.integers(2, 6))):
        for j in range(int(rng.integers(1, 4))):
            k = int(rng.choice([3, 3, 5])) if s else int(rng.choice([3, 5, 7]))
            x = _conv_block(b, x, f"s{s}c{j}", hw, c, width, k, rng, norm, act)
            c = width
        if hw >= 4:
            hw //= 2
            x = b.add(f"s{s}_pool", "pool", [x], flops=4 * hw * hw * c, out_elems=hw * hw * c)
        width = min(int(width * rng.choice([1.5, 2, 2])), 1024)
    x = b.add("flatten", "reshape", [x], out_elems=hw * hw * c)
    widths = [int(rng.choice([256, 512, 1024, 2048, 4096]))] * int(rng.integers(0, 3))
    _dense_head(b, x, hw * hw * c, widths, int(rng.choice([10, 100, 1000])))


def _resnet(b: _Builder, rng: np.random.Generator, blocks: Sequence[int] | None = None) -> None:
    """Residual stages; ``blocks``: residual blocks per stage (default 2-4 stages of 1-3)."""
    hw = int(rng.choice([32, 32, 56]))
    c = int(rng.choice([16, 32, 64]))
    x = b.add("image", "input", [], out_elems=hw * hw * 3)
    x = _conv_block(b, x, "stem", hw, 3, c, 3, rng, True, True)
    for s in range(len(blocks) if blocks is not None else int(rng.integers(2, 5))):
        for j in range(int(blocks[s]) if blocks is not None else int(rng.integers(1, 4))):
            cout, down = (c * 2, True) if (s and j == 0) else (c, False)
            if down:
                hw //= 2
            skip = x
            y = _conv_block(b, x, f"s{s}b{j}a", hw, c, cout, 3, rng, True, True)
            y = _conv_block(b, y, f"s{s}b{j}b", hw, cout, cout, 3, rng, True, False)
            if down:
                skip = b.add(f"s{s}b{j}_proj", "conv", [x], params=c * cout + cout, flops=2 * c * cout * hw * hw,
                             out_elems=hw * hw * cout)
            x = b.add(f"s{s}b{j}_add", "activation", [skip, y], flops=hw * hw * cout, out_elems=hw * hw * cout,
                      class_name="Add")
            x = b.add(f"s{s}b{j}_out", "activation", [x], flops=hw * hw * cout, out_elems=hw * hw * cout)
            c = cout
    x = b.add("gap", "pool", [x], flops=hw * hw * c, out_elems=c)
    _dense_head(b, x, c, [], int(rng.choice([10, 100, 1000])))


def _embedding(b: _Builder, name: str, ids: str, vocab: int, dim: int, seq: int) -> str:
    return b.add(name, "embedding", [ids], params=vocab * dim, flops=seq * dim, out_elems=seq * dim)


def _ctr(b: _Builder, rng: np.random.Generator, fields: int | None = None) -> None:
    """Embedding fields (default 2-26), concatenated with dense features, then an MLP."""
    fields = int(rng.integers(2, 27)) if fields is None else int(fields)
    dim = int(rng.choice([8, 16, 32, 64]))
    flats = []
    for f in range(fields):
        ids = b.add(f"slot{f}", "input", [], out_elems=1)
        vocab = int(10 ** rng.uniform(4, 7))
        e = _embedding(b, f"emb{f}", ids, vocab, dim, 1)
        flats.append(b.add(f"flat{f}", "reshape", [e], out_elems=dim))
    dense_in = int(rng.integers(0, 64))
    if dense_in:
        flats.append(b.add("dense_features", "input", [], out_elems=dense_in))
    n_in = fields * dim + dense_in
    x = b.add("concat", "reshape", flats, out_elems=n_in)
    widths = [int(rng.choice([64, 128, 256, 512, 1024])) for _ in range(int(rng.integers(2, 6)))]
    _dense_head(b, x, n_in, sorted(widths, reverse=True), 1)


def _two_tower(b: _Builder, rng: np.random.Generator) -> None:
    vocab = int(10 ** rng.uniform(4, 6.5))
    dim, seq = int(rng.choice([32, 64, 128])), int(rng.choice([8, 16, 32, 64]))
    filters, hidden = int(rng.choice([64, 128, 256])), int(rng.choice([128, 256, 512]))
    conv = rng.random() < 0.7
    towers = []
    for side in ("query", "doc"):
        ids = b.add(f"{side}_ids", "input", [], out_elems=seq)
        x = _embedding(b, f"{side}_emb", ids, vocab, dim, seq)
        if conv:
            x = b.add(f"{side}_conv", "conv", [x], params=3 * dim * filters + filters,
                      flops=2 * 3 * dim * filters * seq, out_elems=seq * filters)
            x = b.add(f"{side}_pool", "pool", [x], flops=seq * filters, out_elems=filters)
            n_in = filters
        else:
            x = b.add(f"{side}_pool", "pool", [x], flops=seq * dim, out_elems=dim)
            n_in = dim
        towers.append(b.add(f"{side}_fc", "dense", [x], params=n_in * hidden + hidden, flops=2 * n_in * hidden,
                            out_elems=hidden))
    x = b.add("pair", "reshape", towers, out_elems=2 * hidden)
    _dense_head(b, x, 2 * hidden, [hidden] * int(rng.integers(0, 3)), 1)


def _embedding_model(b: _Builder, rng: np.random.Generator) -> None:
    vocab = int(10 ** rng.uniform(5, 6.5))
    dim, neg = int(rng.choice([64, 128, 256])), int(rng.choice([16, 32, 64, 128]))
    targets = b.add("target_ids", "input", [], out_elems=1 + neg)
    center = b.add("center_id", "input", [], out_elems=1)
    c = _embedding(b, "in_emb", center, vocab, dim, 1)
    w = _embedding(b, "out_weights", targets, vocab, dim, 1 + neg)
    bias = _embedding(b, "out_biases", targets, vocab, 1, 1 + neg)
    dot = b.add("dot", "other", [c, w], flops=2 * dim * (1 + neg), out_elems=1 + neg, class_name="Dot")
    dot = b.add("dot_flat", "reshape", [dot], out_elems=1 + neg)
    bias = b.add("bias_flat", "reshape", [bias], out_elems=1 + neg)
    b.add("logits", "activation", [dot, bias], flops=1 + neg, out_elems=1 + neg, class_name="Add")


def _transformer(b: _Builder, rng: np.random.Generator, blocks: int | None = None) -> None:
    """BERT-like encoder: token embedding, ``blocks`` (default 1-4) blocks of (QKV projection, attention, output
    projection, residual add, norm, FFN up, activation, FFN down, residual add, norm) over
    ``seq`` tokens, then pooling and a classifier. Per-token dense FLOPs ``2 seq n_in n_out``;
    attention ``4 seq^2 d`` (scores and weighted sum)."""
    vocab = int(10 ** rng.uniform(4, 5.5))
    d = int(rng.choice([128, 256, 512, 768]))
    seq = int(rng.choice([32, 64, 128, 256]))
    ff = 4 * d
    ids = b.add("token_ids", "input", [], out_elems=seq)
    x = _embedding(b, "tok_emb", ids, vocab, d, seq)
    for k in range(int(rng.integers(1, 5)) if blocks is None else int(blocks)):
        t = f"blk{k}"
        qkv = b.add(f"{t}_qkv", "dense", [x], params=3 * (d * d + d), flops=2 * seq * d * 3 * d, out_elems=3 * seq * d)
        att = b.add(f"{t}_attention", "other", [qkv], flops=4 * seq * seq * d, out_elems=seq * d,
                    class_name="MultiHeadAttention")
        o = b.add(f"{t}_attn_out", "dense", [att], params=d * d + d, flops=2 * seq * d * d, out_elems=seq * d)
        y = b.add(f"{t}_add1", "activation", [x, o], flops=seq * d, out_elems=seq * d, class_name="Add")
        y = b.add(f"{t}_ln1", "normalization", [y], params=2 * d, flops=8 * seq * d, out_elems=seq * d,
                  class_name="LayerNormalization")
        h = b.add(f"{t}_ffn_up", "dense", [y], params=d * ff + ff, flops=2 * seq * d * ff, out_elems=seq * ff)
        h = b.add(f"{t}_gelu", "activation", [h], flops=8 * seq * ff, out_elems=seq * ff)
        h = b.add(f"{t}_ffn_down", "dense", [h], params=ff * d + d, flops=2 * seq * ff * d, out_elems=seq * d)
        z = b.add(f"{t}_add2", "activation", [y, h], flops=seq * d, out_elems=seq * d, class_name="Add")
        x = b.add(f"{t}_ln2", "normalization", [z], params=2 * d, flops=8 * seq * d, out_elems=seq * d,
                  class_name="LayerNormalization")
    x = b.add("pool", "pool", [x], flops=seq * d, out_elems=d)
    _dense_head(b, x, d, [], int(rng.choice([2, 10, 100])))


_BUILD = {"cnn": _cnn, "resnet": _resnet, "ctr": _ctr, "two_tower": _two_tower, "embedding": _embedding_model,
          "transformer": _transformer}
#: Families beyond :data:`FAMILIES` (not in the default cycle, so the paper-LSTM baseline's
#: training set stays as it was); :mod:`scheduler.evaluation.generalise` trains on both.
EXTRA_FAMILIES: tuple[str, ...] = ("transformer",)


def random_profile(rng: np.random.Generator, family: str | None = None, name: str | None = None,
                   **size: Any) -> ModelProfile:
    """One random layer graph of ``family`` (a random one of :data:`FAMILIES` when ``None``);
    ``size`` fixes a family's depth (``blocks`` of ``transformer``, ``blocks`` per stage of
    ``resnet``, ``fields`` of ``ctr``) instead of drawing it.

    Contract: the result is a valid ModelProfile (topological order, unique names, every
    ``inbound`` earlier, non-negative sizes) with at least one non-input layer.
    """
    fam = str(rng.choice(FAMILIES)) if family is None else family
    if fam not in _BUILD:
        raise WorkloadError(f"unknown generated family {family!r}; use one of {', '.join(FAMILIES + EXTRA_FAMILIES)}")
    b = _Builder(name or f"gen_{fam}")
    _BUILD[fam](b, rng, **size)
    return b.profile()


def generated_problems(count: int, seed: int = 0, *, families: Sequence[str] | None = None,
                       fraction: tuple[float, float] = (0.15, 0.35), catalog: object | None = None,
                       max_layers: int = 48) -> list:
    """``count`` HeterPS problems over random profiles (families cycled in order), each with a
    throughput constraint of a random ``fraction`` of its best achievable throughput.

    Draws that no unit can hold (memory) or with more than ``max_layers`` decisions (keeps the
    exact solver, used for imitation targets, fast) are redrawn, at most 20 times per problem.
    """
    from scheduler.core.catalogs import CLOUD
    from scheduler.core.problem import Problem
    from scheduler.core.resources import Constraints

    if count < 0:
        raise WorkloadError(f"count must be >= 0, got {count}")
    lo, hi = fraction
    if not 0 < lo <= hi <= 1:
        raise WorkloadError(f"fraction must be 0 < low <= high <= 1, got {fraction}; e.g. (0.15, 0.35)")
    fams = list(families or FAMILIES)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        fam = fams[i % len(fams)]
        for _ in range(20):
            prof = random_profile(rng, fam, name=f"gen{seed}_{i}_{fam}")
            if len(prof.compute_layers) > max_layers:
                continue
            try:
                free = Problem.from_profile(prof, catalog or CLOUD, Constraints(0.0, None), check=True)
            except SchedulerError:
                continue
            x = float(rng.uniform(lo, hi)) * free.best_throughput()
            out.append(free.with_constraints(Constraints(x, None)))
            break
        else:
            raise WorkloadError(f"could not draw a feasible {fam!r} workload in 20 tries; use a catalog with more "
                                "memory per unit")
    return out
