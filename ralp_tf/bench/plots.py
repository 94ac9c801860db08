"""PNG plots of a ``ralp-tf bench`` results document (matplotlib, Agg backend: no display needed).

:func:`plot_all` writes, into the output folder, whichever of these the document has data for:

* ``bench_speedup_vs_bandwidth.png``: samples/s of each strategy divided by stock PSS's, against
  the link rate, one panel per model (the largest worker count measured at more than one rate);
* ``bench_scaling_vs_workers.png``: samples/s against the number of workers, one panel per
  (model, link rate) measured at more than one worker count;
* ``bench_bytes_per_step.png``: measured wire MB per global step per strategy and cell (bars, log
  scale) with the cost model's prediction as a black tick;
* ``bench_predicted_vs_measured.png``: predicted against measured seconds per global step
  (log-log), the y = x line and the +-25% band.

Every plot has a title, axis labels with units, and a legend.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ralp_tf.bench.config import workers_per_host

__all__ = ["STRATEGY_COLORS", "STRATEGY_LABELS", "plot_speedup_vs_bandwidth", "plot_scaling_vs_workers",
           "plot_bytes_per_step", "plot_predicted_vs_measured", "plot_all"]

STRATEGY_COLORS = {"ps": "#7f7f7f", "ralp": "#d62728", "scheduler": "#9467bd", "allreduce": "#1f77b4",
                   "horovod": "#2ca02c", "rejected": "#ff7f0e", "ralp_fp16": "#e377c2", "ralp_bf16": "#8c564b",
                   "ralp_nosplit": "#17becf",
                   "horovod_fp16": "#bcbd22", "auto": "#000000", "ralp_x2": "#ff9896", "ralp_fused": "#c49c94",
                   "ralp_x2_fused": "#f7b6d2"}
STRATEGY_LABELS = {"ps": "stock PSS", "ralp": "RALP (analyzer plan)", "scheduler": "scheduler plan",
                   "allreduce": "MWMS ring all-reduce", "horovod": "Horovod (gloo ring)",
                   "rejected": "analyzer's rejected alternative", "ralp_fp16": "RALP + fp16 on the wire",
                   "ralp_bf16": "RALP + bf16 on the wire",
                   "ralp_nosplit": "RALP without head splits", "horovod_fp16": "Horovod + hvd.Compression.fp16",
                   "auto": "--strategy auto (probed, then the faster)",
                   "ralp_x2": "RALP, two workers per host", "ralp_fused": "RALP, fused transfers",
                   "ralp_x2_fused": "RALP, two workers per host, fused"}


def _bw_value(text: str) -> float:
    from ralp_tf.plan.cluster import parse_bandwidth

    v = parse_bandwidth(text)
    return v if math.isfinite(v) else math.nan


def _ok(st: dict[str, Any]) -> bool:
    return st.get("status") in ("ok", "partial") and bool(st.get("samples_per_s"))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bw_positions(bws: list[str]) -> dict[str, float]:
    """x positions: finite rates in Mbit/s; 'uncapped' placed one decade above the largest."""
    finite = [_bw_value(b) for b in bws if not math.isnan(_bw_value(b))]
    top = max(finite) if finite else 1e9
    return {b: (_bw_value(b) / 1e6 if not math.isnan(_bw_value(b)) else top * 10 / 1e6) for b in bws}


def plot_speedup_vs_bandwidth(doc: dict[str, Any], path: Path) -> bool:
    cells = doc.get("cells", [])
    models = sorted({c["model"] for c in cells})
    panels = []
    for m in models:
        by_w: dict[int, list[dict[str, Any]]] = {}
        for c in cells:
            if c["model"] == m:
                by_w.setdefault(c["workers"], []).append(c)
        ws = [w for w, cs in by_w.items() if len(cs) > 1] or list(by_w)
        w = max(ws, key=lambda w: (len(by_w[w]), w == 2, w))
        panels.append((m, w, sorted(by_w[w], key=lambda c: _bw_positions([c["bandwidth"]])[c["bandwidth"]])))
    panels = [p for p in panels if any(_ok(c["strategies"].get("ps", {})) for c in p[2])]
    if not panels:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for ax, (m, w, cs) in zip(axes[0], panels):
        pos = _bw_positions([c["bandwidth"] for c in cs])
        strategies = [s for s in STRATEGY_COLORS if any(s in c["strategies"] for c in cs)]
        for s in strategies:
            xs, ys = [], []
            for c in cs:
                st, base = c["strategies"].get(s, {}), c["strategies"].get("ps", {})
                if _ok(st) and _ok(base):
                    xs.append(pos[c["bandwidth"]])
                    ys.append(st["samples_per_s"] / base["samples_per_s"])
            if xs:
                ax.plot(xs, ys, marker="o", color=STRATEGY_COLORS[s], label=STRATEGY_LABELS[s])
        ax.set_xscale("log")
        ax.set_xticks([pos[c["bandwidth"]] for c in cs])
        ax.set_xticklabels([c["bandwidth"] for c in cs])
        ax.axhline(1.0, color="black", lw=0.6, ls=":")
        ax.set_title(f"{m}, {w} worker(s), 1 PS", fontsize=9)
        ax.set_xlabel("link rate per task (each direction)")
        ax.set_ylabel("speed-up vs stock PSS (samples/s ratio)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Speed-up over stock ParameterServerStrategy vs link bandwidth\n(median of repetitions)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_scaling_vs_workers(doc: dict[str, Any], path: Path) -> bool:
    """Measured samples/s (points, solid) and the cost model's (dashed, ``workers x batch /
    predicted_step_s``) against the worker count, one panel per model and link rate."""
    batch = (doc.get("config") or {}).get("batch_per_worker")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in doc.get("cells", []):
        groups.setdefault((c["model"], c["bandwidth"]), []).append(c)
    panels = [(k, sorted(v, key=lambda c: c["workers"])) for k, v in sorted(groups.items())
              if len({c["workers"] for c in v}) > 1]
    if not panels:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.8 * len(panels), 4.4), squeeze=False)
    for ax, ((m, bw), cs) in zip(axes[0], panels):
        for s in STRATEGY_COLORS:
            pts = [(c["workers"], c["strategies"][s]["samples_per_s"]) for c in cs
                   if s in c["strategies"] and _ok(c["strategies"][s])]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=STRATEGY_COLORS[s],
                        label=STRATEGY_LABELS[s])
            predicted = [(c["workers"], workers_per_host(s) * c["workers"] * batch / c["strategies"][s]["predicted_step_s"])
                         for c in cs
                         if batch and s in c["strategies"] and _ok(c["strategies"][s])
                         and (c["strategies"][s].get("predicted_step_s") or 0) > 0]
            if predicted:
                ax.plot([p[0] for p in predicted], [p[1] for p in predicted], linestyle="--", linewidth=1,
                        color=STRATEGY_COLORS[s])
        ax.set_xticks(sorted({c["workers"] for c in cs}))
        layout = cs[0].get("layout") or "dedicated"
        where = "1 PS" if layout == "dedicated" else "a worker and a PS per host"
        budget = sorted(set((cs[0].get("host_cpu") or {}).values()))
        ax.set_title(f"{m}, {bw} links, {where}" + (f", {budget[0]:g} core/host" if len(budget) == 1 else ""),
                     fontsize=9)
        ax.set_xlabel("workers")
        ax.set_ylabel("throughput (samples/s, global)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Samples/s against workers: measured (median, solid) and predicted (dashed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_bytes_per_step(doc: dict[str, Any], path: Path) -> bool:
    cells = [c for c in doc.get("cells", []) if any(_ok(st) for st in c["strategies"].values())]
    if not cells:
        return False
    plt = _plt()
    strategies = [s for s in STRATEGY_COLORS if any(s in c["strategies"] for c in cells)]
    width = 0.8 / max(len(strategies), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(cells) + 2), 4.8))
    pred_labelled = False
    for i, s in enumerate(strategies):
        xs, ys, preds = [], [], []
        for j, c in enumerate(cells):
            st = c["strategies"].get(s, {})
            if _ok(st) and st.get("bytes_per_step"):
                xs.append(j + (i - (len(strategies) - 1) / 2) * width)
                ys.append(st["bytes_per_step"] / 1e6)
                preds.append((st.get("predicted_bytes_per_step") or math.nan) / 1e6)
        if xs:
            ax.bar(xs, ys, width=width, color=STRATEGY_COLORS[s], label=STRATEGY_LABELS[s])
            ax.scatter(xs, preds, marker="_", s=160, color="black", zorder=3,
                       label=None if pred_labelled else "cost-model prediction")
            pred_labelled = True
    ax.set_yscale("log")
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels([f"{c['model']}\n{c['workers']}w {c['bandwidth']}" for c in cells], fontsize=7)
    ax.set_ylabel("MB on the wire per global step (all links)")
    ax.set_title("Traffic per global step (workers x batch samples):\nmeasured (bars) vs cost model (ticks)",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_predicted_vs_measured(doc: dict[str, Any], path: Path) -> bool:
    pts: dict[str, list[tuple[float, float]]] = {}
    for c in doc.get("cells", []):
        for s, st in c["strategies"].items():
            if _ok(st) and st.get("predicted_step_s") and st.get("measured_step_s"):
                pts.setdefault(s, []).append((st["predicted_step_s"], st["measured_step_s"]))
    if not pts:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 5.4))
    allv = [v for p in pts.values() for xy in p for v in xy]
    lo, hi = min(allv) / 1.5, max(allv) * 1.5
    grid = [lo, hi]
    ax.plot(grid, grid, color="black", lw=0.8, label="measured = predicted")
    ax.fill_between(grid, [g * 0.75 for g in grid], [g * 1.25 for g in grid], color="gray", alpha=0.2,
                    label="+-25% band")
    for s, p in pts.items():
        ax.scatter([x for x, _ in p], [y for _, y in p], color=STRATEGY_COLORS.get(s, "k"),
                   label=STRATEGY_LABELS.get(s, s), s=28)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted time per global step (s)")
    ax.set_ylabel("measured time per global step (s)")
    ax.set_title("Cost model: predicted vs measured time per global step\n(one point per strategy and cell)",
                 fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_all(doc: dict[str, Any], out_dir: Path) -> list[str]:
    """Write every plot the document has data for into ``out_dir``; return the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fn in (("bench_speedup_vs_bandwidth.png", plot_speedup_vs_bandwidth),
                     ("bench_scaling_vs_workers.png", plot_scaling_vs_workers),
                     ("bench_bytes_per_step.png", plot_bytes_per_step),
                     ("bench_predicted_vs_measured.png", plot_predicted_vs_measured)):
        if fn(doc, out_dir / name):
            written.append(str(out_dir / name))
    return written
