"""Scale on paper: predicted samples/s and bytes per host link for stock PSS, colocated RALP and
the ring all-reduce, from 2 to 64 GPU hosts, with the one cost model (:mod:`ralp_tf.plan.costmodel`).

Every figure here is **predicted**, never measured. The cluster of a grid point is
``Cluster.local(N, N, layout="colocated")``: N hosts, each with one GPU worker and one PS task,
one link of the given rate per host, and:

* **GPU rate** ``gpu_flops`` (default :data:`GPU_FLOPS` = 100 TFLOP/s sustained). An H100's
  dense TF32 peak is about 400 TFLOP/s (990 bf16), but whole models sustain far less: ResNet-50
  training at the ~4,000 images/s per H100 that MLPerf-class runs reach is about 100 TFLOP/s
  (24.6 GFLOP per image forward+backward). Assuming the peak would make every model look
  compute-free and overstate the network's share.
* **Host CPU** ``host_cpu_flops`` (default :data:`HOST_CPU_FLOPS` = 1 TFLOP/s, a two-socket
  server's sustained fp32 GEMM rate) for the PS task's compute (RALP's head runs on the PS CPU).

Strategies, on the same N hosts and links:

* ``stock PSS``: nothing placed, variables round-robin over the N PS tasks;
* ``colocated RALP``: the analyzer's choice (:func:`ralp_tf.plan.analyzer.analyze`), which may be a
  cut, balanced storage, or both;
* ``ring all-reduce``: :func:`ralp_tf.plan.costmodel.estimate_allreduce` over the N workers (dense
  all-reduce of every trainable byte, embedding tables included, as MultiWorkerMirroredStrategy
  does).

Profiles: the built-in models (:func:`builtin_profiles`, profiled with TensorFlow) and two
built as data, without TensorFlow: :func:`resnet50_profile` (ImageNet ResNet-50 size: 25.5 M
parameters, 8 GFLOP per image forward, one layer per bottleneck block) and
:func:`bert_base_profile` (BERT-base size: 110 M parameters, a 93.8 MB word-embedding table,
12 encoder layers as an attention and a feed-forward layer each, sequence length 128).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Sequence

from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.cluster import Cluster, format_bandwidth
from ralp_tf.plan.costmodel import StepEstimate, estimate, estimate_allreduce
from ralp_tf.model.profiler import ModelProfile

__all__ = ["GPU_FLOPS", "HOST_CPU_FLOPS", "HOSTS", "BANDWIDTHS_BPS", "STRATEGIES", "COMMAND", "ProjectionRow",
           "projection_cluster", "project", "to_markdown", "builtin_profiles", "resnet50_profile",
           "bert_base_profile", "main_table"]

GPU_FLOPS = 100e12
HOST_CPU_FLOPS = 1e12
HOSTS = (2, 4, 8, 16, 32, 64)
BANDWIDTHS_BPS = (10e9, 25e9, 100e9)
STRATEGIES = ("stock PSS", "colocated RALP", "ring all-reduce")
#: The command that writes benchmarks/projection.md (named in its header).
COMMAND = ("python -c \"import ralp_tf.plan.projection as p; "
           "open('benchmarks/projection.md', 'w').write(p.main_table(p.COMMAND))\"")
_F32 = 4


@dataclasses.dataclass(frozen=True)
class ProjectionRow:
    """One predicted figure: ``strategy`` training ``model`` on ``hosts`` colocated hosts with
    links of ``bandwidth_bps``. ``samples_per_s`` is over all workers; ``max_link_bytes`` is the
    busiest host link's busier direction per synchronous step (one step of every worker)."""

    model: str
    hosts: int
    bandwidth_bps: float
    gpu_flops: float
    host_cpu_flops: float
    batch_size: int
    strategy: str
    plan: str
    samples_per_s: float
    step_s: float
    max_link_bytes: float
    bottleneck: str


def projection_cluster(hosts: int, bandwidth_bps: float, gpu_flops: float = GPU_FLOPS,
                       host_cpu_flops: float = HOST_CPU_FLOPS) -> Cluster:
    """``hosts`` colocated hosts, each a GPU worker and a CPU PS task (module docstring)."""
    return Cluster.local(hosts, hosts, layout="colocated", bandwidth=bandwidth_bps, gpus={"worker": 1},
                         flops={"worker": gpu_flops, "ps": host_cpu_flops})


def project(profiles: Iterable[ModelProfile], hosts: Sequence[int] = HOSTS,
            bandwidths_bps: Sequence[float] = BANDWIDTHS_BPS, *, gpu_flops: float = GPU_FLOPS,
            host_cpu_flops: float = HOST_CPU_FLOPS) -> list[ProjectionRow]:
    """Predicted rows for every profile x host count x link rate x strategy (module docstring)."""
    rows = []
    for prof in profiles:
        for n in hosts:
            for bw in bandwidths_bps:
                cluster = projection_cluster(n, bw, gpu_flops, host_cpu_flops)
                analysis = analyze(prof, cluster)
                picks: list[tuple[str, str, StepEstimate]] = [
                    ("stock PSS", "no split, round-robin storage", estimate(prof, cluster)),
                    ("colocated RALP", analysis.chosen.label, analysis.chosen.estimate),
                    ("ring all-reduce", "dense all-reduce", estimate_allreduce(prof, cluster))]
                for strategy, plan, e in picks:
                    rows.append(ProjectionRow(model=prof.model_name, hosts=n, bandwidth_bps=bw, gpu_flops=gpu_flops,
                                              host_cpu_flops=host_cpu_flops, batch_size=prof.batch_size, strategy=strategy, plan=plan,
                                              samples_per_s=e.samples_per_s, step_s=e.step_s,
                                              max_link_bytes=e.max_link_bytes, bottleneck=e.bottleneck))
    return rows


def to_markdown(rows: Sequence[ProjectionRow], command: str) -> str:
    """A Markdown table per model, headed by ``command`` (what produced it); every figure is
    labelled predicted."""
    by_point: dict[tuple[str, int, float], dict[str, ProjectionRow]] = {}
    for r in rows:
        by_point.setdefault((r.model, r.hosts, r.bandwidth_bps), {})[r.strategy] = r
    out = ["# Scale on paper: predicted, not measured", "",
           f"Produced by `{command}`.", "",
           "Every number below is a **prediction** of ralp_tf's cost model (`ralp_tf/plan/costmodel.py`, "
           "`docs/costmodel.md`); none was measured. Each host runs one GPU worker and one PS task "
           "(colocated layout) and has one link of the rate shown. "
           f"GPU rate {rows[0].gpu_flops / 1e12:g} TFLOP/s sustained per worker; PS compute on the host CPU "
           f"at {rows[0].host_cpu_flops / 1e12:g} TFLOP/s (see `ralp_tf/plan/projection.py` for why). "
           "MB/link is the busiest host link's busier direction per synchronous step (one step of every worker). "
           "\"RALP plan\" is the analyzer's choice.", ""]
    model = None
    for (name, n, bw), point in by_point.items():
        if name != model:
            model = name
            batch = next(iter(point.values())).batch_size
            out += ["", f"## {name} (batch {batch} per worker)", "",
                    "| hosts | link | predicted samples/s: stock PSS | colocated RALP | ring | "
                    "predicted MB/link: stock PSS | colocated RALP | ring | fastest (predicted) | RALP plan |",
                    "|---|---|---|---|---|---|---|---|---|---|"]
        cells = [point[s] for s in STRATEGIES]
        best = max(cells, key=lambda r: r.samples_per_s)
        out.append(f"| {n} | {format_bandwidth(bw)} | "
                   + " | ".join(f"{r.samples_per_s:,.0f}" for r in cells) + " | "
                   + " | ".join(f"{r.max_link_bytes / 1e6:,.1f}" for r in cells)
                   + f" | {best.strategy} | {cells[1].plan} |")
    return "\n".join(out) + "\n"


def builtin_profiles(names: Sequence[str] = ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn"),
                     batch_size: int = 32) -> list[ModelProfile]:
    """Profiles of built-in models (imports TensorFlow)."""
    from ralp_tf.model import builtin as models
    from ralp_tf.model.profiler import profile

    return [profile(models.BUILTIN_MODELS[n](), batch_size=batch_size) for n in names]


def _layer(name: str, kind: str, params: int, flops: float, out_elems: int, inbound: list[str],
           var_elems: Sequence[int] | None = None, shape: Sequence[int] = ()) -> dict[str, Any]:
    return {"name": name, "kind": kind, "param_bytes": params * _F32, "flops": flops, "output_bytes": out_elems * _F32,
            "inbound": inbound, "var_bytes": [v * _F32 for v in (var_elems if var_elems is not None else
                                                                  ([params] if params else []))],
            "output_shape": list(shape)}


def resnet50_profile(batch_size: int = 64, num_classes: int = 1000) -> ModelProfile:
    """An ImageNet ResNet-50-size profile: stem, 16 bottleneck blocks (one conv layer each, with
    the block's parameters and ``2 x MACs`` FLOPs at its output resolution), global pooling and
    the ``2048 x classes`` dense head."""
    layers = [_layer("image", "input", 0, 0, 224 * 224 * 3, []),
              _layer("stem", "conv", 9_408, 2 * 9_408 * 112 * 112, 56 * 56 * 64, ["image"])]
    stages = ((64, 256, 3, 56), (128, 512, 4, 28), (256, 1024, 6, 14), (512, 2048, 3, 7))
    prev, c_in = "stem", 64
    for s, (width, c_out, blocks, side) in enumerate(stages, start=1):
        for b in range(1, blocks + 1):
            params = c_in * width + 9 * width * width + width * c_out + (c_in * c_out if b == 1 else 0)
            name = f"stage{s}_block{b}"
            layers.append(_layer(name, "conv", params, 2.0 * params * side * side, side * side * c_out, [prev]))
            prev, c_in = name, c_out
    layers.append(_layer("avg_pool", "pool", 0, 7 * 7 * 2048, 2048, [prev], shape=[2048]))
    fc = 2048 * num_classes + num_classes
    layers.append(_layer("fc", "dense", fc, 2.0 * 2048 * num_classes, num_classes, ["avg_pool"],
                         var_elems=[2048 * num_classes, num_classes], shape=[num_classes]))
    return ModelProfile.from_dict({"model_name": "resnet50_size", "batch_size": batch_size, "outputs": ["fc"],
                                   "layers": layers})


def bert_base_profile(batch_size: int = 32, seq_len: int = 128, vocab: int = 30_522) -> ModelProfile:
    """A BERT-base-size profile: word-embedding table (``vocab x 768``), position/type
    embeddings with layer norm, 12 encoder layers (attention: ``4 x 768^2`` weights, FLOPs
    ``2 x weights x seq + 4 x seq^2 x 768``; feed-forward: ``2 x 768 x 3072`` weights), pooler
    and a 2-way classifier, for ``seq_len`` tokens per sample."""
    d, ff = 768, 3072
    tokens = seq_len * d
    layers = [_layer("token_ids", "input", 0, 0, seq_len, []),
              _layer("word_embeddings", "embedding", vocab * d, tokens, tokens, ["token_ids"], shape=[seq_len, d]),
              _layer("embeddings_norm", "normalization", (512 + 2) * d + 2 * d, 6.0 * tokens, tokens,
                     ["word_embeddings"], var_elems=[512 * d, 2 * d, d, d], shape=[seq_len, d])]
    prev = "embeddings_norm"
    for i in range(12):
        attn = 4 * (d * d + d) + 2 * d
        ffn = 2 * d * ff + ff + d + 2 * d
        layers.append(_layer(f"encoder{i}_attention", "dense", attn, 2.0 * attn * seq_len + 4.0 * seq_len ** 2 * d,
                             tokens, [prev], var_elems=[3 * d * d, 3 * d, d * d, d, d, d], shape=[seq_len, d]))
        layers.append(_layer(f"encoder{i}_ffn", "dense", ffn, 2.0 * ffn * seq_len, tokens, [f"encoder{i}_attention"],
                             var_elems=[d * ff, ff, ff * d, d, d, d], shape=[seq_len, d]))
        prev = f"encoder{i}_ffn"
    layers.append(_layer("pooler", "dense", d * d + d, 2.0 * d * d, d, [prev], var_elems=[d * d, d], shape=[d]))
    layers.append(_layer("classifier", "dense", 2 * d + 2, 4.0 * d, 2, ["pooler"], var_elems=[2 * d, 2], shape=[2]))
    return ModelProfile.from_dict({"model_name": "bert_base_size", "batch_size": batch_size,
                                   "outputs": ["classifier"], "layers": layers})


def main_table(command: str, profiles: Iterable[ModelProfile] | None = None) -> str:
    """The table of ``benchmarks/projection.md``: the built-in models (TensorFlow needed) and the
    two data profiles, on the default grid."""
    profs = list(profiles) if profiles is not None else [*builtin_profiles(), resnet50_profile(), bert_base_profile()]
    return to_markdown(project(profs), command)
