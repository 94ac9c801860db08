"""``ralp-tf explain``: a plan in a picture (PNG, and SVG beside it), from the one cost model.

:func:`explain_data` gathers, for a model, a cluster shape and a policy (default ``ralp``), what
the picture shows, as JSON-ready data (``--json`` prints it):

* ``layers``: every layer in order, with its kind, parameter bytes, where it computes
  (``worker`` or ``ps:K``: :func:`ralp_tf.plan.costmodel.resolve_placements`) and which PS tasks store
  its variables (:func:`ralp_tf.plan.costmodel.variable_homes`: the plan's task, its ``storage``, or
  ParameterServerStrategy's round-robin);
* ``links``: predicted bytes per worker step between the worker and each PS task, each way
  (``StepEstimate.bytes_between``), for stock PSS and the plan; with a run's JSON
  (``ralp-tf run --json``), the measured bytes of the same pairs: ``bytes_between`` of the run
  (``"workerN->psK"`` per worker step) summed over workers N;
* ``step``: for stock PSS, the plan and the ring all-reduce, the predicted step time and what
  each resource is busy per synchronous step: worker compute, PS compute (``N *`` a worker
  step's), and each host link (``StepEstimate.link_s``). Resources work in parallel, so the step
  time is set by the busiest (the ``bottleneck``), not by the sum of the segments.

:func:`draw` turns that data into a three-panel figure with matplotlib (Agg backend).
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, Mapping

from ralp_tf.cli.args import add_cluster_args, add_output_arg, add_policy_args, cluster_rates, policy_options
from ralp_tf.cli.calibrate import add_calibration_arg, given_counts, read_calibration, tensorflow_version
from ralp_tf.errors import ValidationError, read_json_file, writable_file
from ralp_tf.plan.cluster import TaskRef

__all__ = ["WORKER_COLOR", "PS_COLORS", "measured_links", "explain_data", "step_resources", "draw", "register", "cmd_explain"]

_RUN_PAIR = re.compile(r"^(worker|ps)(\d+)->(worker|ps)(\d+)$")
WORKER_COLOR = "#9e9e9e"
PS_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _ps_color(loc: str) -> str:
    ref = TaskRef.parse(loc)
    return WORKER_COLOR if not ref.is_ps else PS_COLORS[(ref.index or 0) % len(PS_COLORS)]


def _pair_key(src: str, dst: str) -> str:
    return f"{src}->{dst}"


def measured_links(run: Mapping[str, Any]) -> dict[str, float]:
    """One run entry of ``ralp-tf run --json`` -> ``{"worker->ps:K": bytes per worker step, ...}``
    (its ``bytes_between`` summed over workers); ValidationError when it has none."""
    between = run.get("bytes_between") if isinstance(run, Mapping) else None
    if not between:
        raise ValidationError("the run JSON has no measured bytes_between (a run with --cluster and no agents, or "
                              "not `ralp-tf run --json` output); pass a run that measured bytes")
    out: dict[str, float] = {}
    for key, nbytes in between.items():
        m = _RUN_PAIR.match(key)
        if not m or {m.group(1), m.group(3)} != {"worker", "ps"}:
            continue
        src = "worker" if m.group(1) == "worker" else f"ps:{m.group(2)}"
        dst = "worker" if m.group(3) == "worker" else f"ps:{m.group(4)}"
        out[_pair_key(src, dst)] = out.get(_pair_key(src, dst), 0.0) + float(nbytes)
    return out


def _step_entry(est: Any, n: int) -> dict[str, Any]:
    return {"step_s": est.step_s, "samples_per_s": est.samples_per_s, "bottleneck": est.bottleneck,
            "bytes_per_step": est.bytes_per_step, "worker_compute_s": est.worker_compute_s,
            "ps_compute_s": n * sum(est.ps_compute_s.values()), "link_s": dict(est.link_s)}


def explain_data(model: Any, workers: int = 2, ps: int = 1, *, policy: Any = "ralp", batch_size: int = 32,
                 run_json: Mapping[str, Any] | None = None, compression: Any = None, calibration: Any = None,
                 **rates: Any) -> dict[str, Any]:
    """The data of the picture (module docstring) for ``model`` (a name, ``pkg.mod:fn`` or a
    builder) on ``Cluster.local(workers, ps, **rates)``, or with ``calibration``
    (:class:`ralp_tf.plan.calibration.Calibration`) on the calibrated cluster, priced with what it
    measured (:func:`ralp_tf.plan.calibration.priced`; ``rates`` still win)."""
    from ralp_tf.place.policies import plan_with_policy
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.plan.costmodel import estimate, estimate_allreduce, resolve_placements, variable_homes
    from ralp_tf.plan.strategies import rank_strategies
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.place.applier import prepare

    builder = resolve_model(model) if isinstance(model, str) else model
    prof = prepare(builder, batch_size).profile
    if calibration is not None:
        from ralp_tf.plan.calibration import priced

        prof, cluster = priced(calibration, prof, rates=rates)
    else:
        cluster = Cluster.local(workers, ps, **rates)
    plan, analysis = plan_with_policy(policy, prof, cluster, compression=compression)
    where = resolve_placements(prof, plan)
    homes = variable_homes(prof, where, cluster.num_ps, plan.stored_on()) if cluster.num_ps else {}
    layers = [{"name": l.name, "kind": l.kind, "param_bytes": l.param_bytes, "compute": where[l.name],
               "storage": sorted({f"ps:{k}" for _, k in homes.get(l.name, [])})} for l in prof.layers]
    stock, chosen = estimate(prof, cluster, None), estimate(prof, cluster, plan)
    ring = estimate_allreduce(prof, cluster)
    pairs = [_pair_key(s, d) for k in range(cluster.num_ps) for s, d in (("worker", f"ps:{k}"), (f"ps:{k}", "worker"))]
    links: dict[str, dict[str, float]] = {
        name: {p: float(est.bytes_between.get(tuple(p.split("->")), 0.0)) for p in pairs}  # type: ignore[arg-type]
        for name, est in (("stock PSS", stock), ("plan", chosen))}
    if run_json is not None:
        entries = {k: v for k, v in run_json.items() if isinstance(v, Mapping)}
        if not entries:
            raise ValidationError("the run JSON is not `ralp-tf run --json` output ({policy: {...}})")
        planned = [v for k, v in entries.items() if k != "baseline"]
        if planned:
            links["plan (measured)"] = measured_links(planned[0])
        if "baseline" in entries:
            links["stock PSS (measured)"] = measured_links(entries["baseline"])
    n = cluster.num_workers
    strategies = rank_strategies(prof, cluster, plan, horovod=True)
    return {"model": prof.model_name, "batch_size": batch_size, "cluster": cluster.describe(),
            "strategies": strategies.to_dict(), "strategies_report": strategies.report(),
            "policy": policy if isinstance(policy, str) else type(policy).__name__, "plan": plan.to_dict(),
            "decision": analysis.report() if analysis else None, "layers": layers, "links": links,
            "step": {"stock PSS": _step_entry(stock, n), "plan": _step_entry(chosen, n),
                     "ring all-reduce": _step_entry(ring, n)}}


def draw(data: Mapping[str, Any], png: str | Path) -> list[Path]:
    """Draw ``data`` (:func:`explain_data`) to ``png`` and an SVG beside it; return both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = data["layers"]
    fig = plt.figure(figsize=(max(11.0, 0.42 * len(layers) + 3), 10.5))
    grid = fig.add_gridspec(3, 2, height_ratios=[1.25, 1.0, 1.0], width_ratios=[1.15, 1.0])
    _draw_layers(fig.add_subplot(grid[0, :]), data)
    _draw_links(fig.add_subplot(grid[1:, 0]), data)
    _draw_step(fig.add_subplot(grid[1:, 1]), data)
    fig.tight_layout()
    out = Path(png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    svg = out.with_suffix(".svg")
    fig.savefig(svg)
    plt.close(fig)
    return [out, svg]


def _draw_layers(ax: Any, data: Mapping[str, Any]) -> None:
    """Top panel: one column per layer, where it computes (top) and where its variables live."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    layers = data["layers"]
    locations = sorted({l["compute"] for l in layers} | {s for l in layers for s in l["storage"]},
                       key=lambda s: (s != "worker", s))
    for i, layer in enumerate(layers):
        ax.add_patch(plt.Rectangle((i, 1.05), 0.92, 0.9, color=_ps_color(layer["compute"])))
        stores = layer["storage"] or []
        for j, s in enumerate(stores):
            h = 0.9 / len(stores)
            ax.add_patch(plt.Rectangle((i, j * h), 0.92, h, color=_ps_color(s)))
        if not stores:
            ax.add_patch(plt.Rectangle((i, 0), 0.92, 0.9, fill=False, ec="#cccccc", hatch="//"))
    ax.set_xlim(-0.1, len(layers))
    ax.set_ylim(0, 2.0)
    ax.set_yticks([0.45, 1.5])
    ax.set_yticklabels(["variables on", "computes on"])
    ax.set_xticks([i + 0.46 for i in range(len(layers))])
    ax.set_xticklabels([f"{l['name']} ({l['param_bytes'] / 1e6:.1f} MB)" if l["param_bytes"] >= 1e5 else l["name"]
                        for l in layers], rotation=60, ha="right", fontsize=7)
    ax.legend(handles=[Patch(color=_ps_color(s), label=s) for s in locations]
              + [Patch(fill=False, hatch="//", ec="#cccccc", label="no variables")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(f"{data['model']}: layers in order (policy {data['policy']}; {data['cluster']})", fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def _draw_links(ax: Any, data: Mapping[str, Any]) -> None:
    """Bottom left: bytes per worker<->PS link per worker step, predicted and (when given) measured."""
    series = list(data["links"])
    pairs = list(next(iter(data["links"].values())))
    width = 0.8 / len(series)
    styles = {"stock PSS": ("#bdbdbd", None), "plan": ("#1f77b4", None), "stock PSS (measured)": ("#bdbdbd", "xx"),
              "plan (measured)": ("#1f77b4", "xx")}
    positive = [v / 1e6 for d in data["links"].values() for v in d.values() if v > 0] or [1.0]
    floor = min(positive) / 3  # a pair with no bytes gets a stub at the floor, labelled 0
    for k, name in enumerate(series):
        color, hatch = styles.get(name, ("#777777", None))
        values = [data["links"][name].get(p, 0.0) / 1e6 for p in pairs]
        bars = ax.bar([i + (k - (len(series) - 1) / 2) * width for i in range(len(pairs))],
                      [max(v, floor) for v in values], width, color=color, hatch=hatch,
                      edgecolor="black" if hatch else color, lw=0.4, label=name)
        for bar, v in zip(bars, values):
            ax.text(bar.get_x() + bar.get_width() / 2, max(v, floor) * 1.08, f"{v:.2f}" if v else "0", ha="center",
                    va="bottom", fontsize=6, rotation=90)
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor)
    ax.set_xticks(range(len(pairs)))
    ax.set_xticklabels(pairs, fontsize=8)
    ax.set_ylabel("MB per worker step (log)")
    ax.set_title("bytes crossing each worker<->PS link per worker step", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def step_resources(entry: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Each resource's busy time in one step of ``entry`` (an item of ``explain_data()["step"]``):
    worker compute, PS compute, then every link. The resources work in parallel, so the step is at
    least the largest of them, not their sum."""
    busy = [("worker compute", float(entry["worker_compute_s"])), ("PS compute", float(entry["ps_compute_s"]))]
    return busy + [(f"link {h}", float(s)) for h, s in sorted(entry["link_s"].items())]


def _draw_step(ax: Any, data: Mapping[str, Any]) -> None:
    """Bottom right: per strategy, every resource's busy time side by side (they run in parallel),
    the busiest one outlined, and the predicted step as a black tick over the group."""
    names = list(data["step"])
    resources = sorted({r for e in data["step"].values() for r, _ in step_resources(e)},
                       key=lambda r: (not r.endswith("compute"), r))
    colors = {r: PS_COLORS[(i + 2) % len(PS_COLORS)] for i, r in enumerate(resources)}
    colors.update({"worker compute": "#7f7f7f", "PS compute": "#bcbd22"})
    scale, unit = (1.0, "s") if max(e["step_s"] for e in data["step"].values()) >= 10 else (1e3, "ms")
    width = 0.8 / max(1, len(resources))
    labelled: set[str] = set()
    for i, name in enumerate(names):
        entry = data["step"][name]
        busy = dict(step_resources(entry))
        top = max(busy, key=busy.get) if busy else None  # type: ignore[arg-type]
        for k, r in enumerate(resources):
            value = busy.get(r, 0.0) * scale
            ax.bar(i + (k - (len(resources) - 1) / 2) * width, value, width, color=colors[r], alpha=0.85,
                   edgecolor="black" if r == top else colors[r], lw=1.2 if r == top else 0.3,
                   label=None if r in labelled else r)
            labelled.add(r)
        step = entry["step_s"] * scale
        ax.hlines(step, i - 0.45, i + 0.45, colors="black", lw=2, zorder=3,
                  label=None if "predicted step" in labelled else "predicted step")
        labelled.add("predicted step")
        ax.annotate(f"{step:.1f} {unit}\n{entry['bottleneck'][:28]}", (i, step), textcoords="offset points",
                    xytext=(0, 4), fontsize=6, ha="center", va="bottom")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel(f"{unit} per synchronous step ({data['batch_size']} samples per worker)")
    ax.set_title("each resource's busy time in one step (side by side: they work in parallel)", fontsize=10)
    ax.legend(fontsize=6, loc="upper right")
    ax.grid(axis="y", alpha=0.3)


def register(subparsers: Any) -> None:
    """Add ``explain`` to an argparse subparsers object."""
    e = subparsers.add_parser("explain", help="draw a model's plan on a cluster shape as a PNG (and SVG): layers, "
                                              "bytes per link, predicted step time of stock PSS, the plan and ring")
    e.add_argument("--model", required=True, help="built-in name or package.module:function (runs that code)")
    add_cluster_args(e)
    add_policy_args(e, plan_files=False)
    add_calibration_arg(e)
    add_output_arg(e, "--png", help="write the picture here (an SVG is written beside it)")
    e.add_argument("--json", action="store_true", help="print the picture's data as one JSON object")
    e.add_argument("--run-json", metavar="FILE", help="`ralp-tf run --json` output: draw its measured bytes too")
    e.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    """Compute the data, draw ``--png`` and/or print ``--json``."""
    from ralp_tf.place.policies import policy_from_spec

    if not args.png and not args.json:
        raise ValidationError("say what to produce: --png PATH (a picture) and/or --json (its data)")
    if args.png:  # --png itself is checked by run_command
        writable_file(Path(args.png).with_suffix(".svg"), "--png's SVG")
    run = read_json_file(args.run_json, ValidationError, f"run JSON {args.run_json}") if args.run_json else None
    cal = read_calibration(args)
    if cal is not None:
        cal.check_counts(**given_counts(args))
        cal.check(cal.cluster(), tensorflow_version=tensorflow_version(), match_hosts=False)
    data = explain_data(args.model, args.workers, args.ps, policy=policy_from_spec(args.policy, policy_options(args)),
                        batch_size=args.batch_size, run_json=run, calibration=cal, **cluster_rates(args))
    data["policy"] = args.policy
    if args.png:
        data["files"] = [str(p) for p in draw(data, args.png)]
    if args.json:
        print(json.dumps(data, indent=2, default=float))
    else:
        print(data["strategies_report"])
        print(f"wrote {', '.join(data['files'])}")
    return 0
