"""How far the exact max-load solvers reach, beside the dnn-partitioning authors' reference DP.

``python -m scheduler.exact_reach --reference-dp /tmp/dp [--milp-seconds 60] [--out DIR]``

For every shared dnn-partitioning workload and a fixed set of generated layer graphs (branchy
ones, :func:`scheduler.workloads.layer_graphs.branchy_graph`, 100-210 nodes; and leafy ones,
:func:`~scheduler.workloads.layer_graphs.leafy_graph`, 100-300 nodes whose constants give them
far more than :data:`scheduler.core.maxload.IDEALS_LIMIT` ideals before contraction), it runs, each
in a process of its own so that peak memory is that solver's alone (``os.wait4``'s ``ru_maxrss``):

* the reference DP (the authors' C++ programme, built from ``../shared/tools/dnn-partitioning-dp``
  as its README says; not part of this project), if ``--reference-dp`` is given;
* this package's contiguous DP (:func:`scheduler.solvers.exact.solve_maxload`: the graph contracted as
  the reference contracts it, :mod:`scheduler.solvers.contraction`, then the ideal DP);
* the non-contiguous MILP (:class:`scheduler.solvers.milp.MILP`), with its node budget and the time
  cap ``--milp-seconds``, reporting the best placement and the gap it proved.

Writes ``DIR/results/exact_reach.json`` and prints a Markdown table. The ideals of a graph before
contraction (:func:`ideals_before_contraction`) are counted exactly when every merged class is a
constant (a source with one consumer): ``sum_J 2^{#constants whose consumer is not in J}`` over
the contracted graph's ideals ``J``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.core.maxload import MaxLoadProblem
from scheduler.workloads import dnn_partitioning
from scheduler.workloads.layer_graphs import branchy_graph, leafy_graph

__all__ = ["GRAPHS", "LEAFY_GRAPHS", "ideals_before_contraction", "run", "markdown", "main"]

#: (blocks, branches, branch_len, training) of the generated branchy graphs, seed 1.
GRAPHS = ((16, 3, 3, False), (12, 4, 3, False), (10, 5, 3, False), (12, 4, 4, False), (8, 6, 3, True))
#: (blocks, branches, branch_len, constants per op at most, training) of the leafy graphs, seed 1.
LEAFY_GRAPHS = ((10, 3, 3, 1, False), (14, 2, 3, 2, False), (12, 4, 3, 1, False), (10, 5, 3, 1, False),
                (8, 6, 3, 1, True))


def ideals_before_contraction(problem: MaxLoadProblem) -> float | None:
    """The ideal count of ``problem``'s class graph (module docstring); ``None`` when a merged class
    is not a constant."""
    from scheduler.solvers.contraction import contract

    c = contract(problem)
    if c.merged == 0:
        return float(len(problem.ideals()[0]))
    merged = [g for g in range(problem.num_decisions)
              if (c.group_map == c.group_map[g]).sum() > 1 and problem.group_fpga[g] == 0 and problem.group_cpu[g] == 0]
    constants = [g for g in merged if not problem.group_pred[g]]
    if len(constants) != c.merged:
        return None
    consumer = np.array([c.group_map[g] for g in constants])
    _, mat = c.problem.ideals()
    return float(np.sum(2.0 ** (~mat[:, consumer]).sum(axis=1)))

_OURS = """
import json, sys, time
from scheduler.workloads.dnn_partitioning import load
from scheduler.solvers.exact import solve_maxload
p = load(sys.argv[1])
t = time.perf_counter()
a, notes = solve_maxload(p)
print(json.dumps({"max_load": p.objective(a), "seconds": time.perf_counter() - t, "ideals": notes["ideals"],
                  "pairs": notes["ideal_pairs"], "pruned": notes["pairs_pruned_by_bound"],
                  "classes": notes["classes"], "contracted_classes": notes["contracted_classes"]}))
"""

_MILP = """
import json, sys, warnings
warnings.simplefilter("ignore")
from scheduler.workloads.dnn_partitioning import load
from scheduler.solvers.milp import MILP
s = MILP(time_limit=float(sys.argv[2])).solve(load(sys.argv[1]))
n = s.notes
print(json.dumps({"max_load": s.objective, "dual_bound": n["dual_bound"], "gap": n["gap"],
                  "proven_optimal": n["proven_optimal"], "nodes": n["nodes"], "seconds": n["milp_seconds"],
                  "time_cap_cut": bool(n.get("time_cap_cut"))}))
"""


def _run(cmd: list[str], stdin_path: str | None = None, timeout: float = 1800) -> tuple[str, float, int, int]:
    """Run ``cmd``; returns (stdout, wall seconds, peak RSS in MiB, exit status)."""
    with tempfile.TemporaryFile() as out, open(stdin_path or os.devnull, "rb") as inp:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=inp, stdout=out, stderr=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        return out.read().decode(), wall, int(usage.ru_maxrss // 1024), proc.returncode


def run(reference_dp: str | None, milp_seconds: float, out_dir: Path,
        only: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure every workload (module docstring; ``only``: these names; ``milp_seconds`` 0: no
    MILP); returns the rows."""
    work = Path(tempfile.mkdtemp(prefix="exact_reach_"))
    files = dict(dnn_partitioning.shared_workloads())
    graphs = [branchy_graph(blocks=bl, branches=br, branch_len=ln, training=tr, seed=1) for bl, br, ln, tr in GRAPHS]
    graphs += [leafy_graph(blocks=bl, branches=br, branch_len=ln, leaves=lv, training=tr, seed=1)
               for bl, br, ln, lv, tr in LEAFY_GRAPHS]
    for d in graphs:
        path = work / f"{d['name']}.json"
        path.write_text(json.dumps(d))
        files[d["name"]] = path
    rows = []
    for name, path in files.items():
        if only and name not in only:
            continue
        nodes = len(json.loads(Path(path).read_text())["nodes"])
        row: dict[str, Any] = {"workload": name, "nodes": nodes,
                               "ideals_before_contraction": ideals_before_contraction(dnn_partitioning.load(path))}
        if reference_dp:
            out, wall, rss, rc = _run([reference_dp], stdin_path=str(path))
            try:
                row["reference"] = {"max_load": json.loads(out)["maxLoad"], "seconds": wall, "peak_mib": rss}
            except (ValueError, KeyError):
                row["reference"] = {"failed": out.strip()[:200] or f"exit {rc}", "seconds": wall, "peak_mib": rss}
        out, wall, rss, rc = _run([sys.executable, "-c", _OURS, str(path)])
        row["ours"] = {**json.loads(out), "peak_mib": rss} if rc == 0 else {"failed": f"exit {rc}"}
        row["milp"] = {}
        if milp_seconds > 0:
            out, wall, rss, rc = _run([sys.executable, "-c", _MILP, str(path), str(milp_seconds)])
            row["milp"] = {**json.loads(out), "peak_mib": rss} if rc == 0 else {"failed": f"exit {rc}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out_dir / "results").mkdir(parents=True, exist_ok=True)
    (out_dir / "results" / "exact_reach.json").write_text(json.dumps(rows, indent=1))
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`run`'s rows."""
    def f(x: Any, d: int = 6) -> str:
        return "—" if x is None else f"{x:.{d}g}" if isinstance(x, float) else str(x)

    lines = ["| workload | nodes | ideals | after contraction | pairs (pruned) | reference DP max-load | s | MiB | "
             "our DP max-load | s | MiB | MILP max-load | proven lower bound | gap | MILP s |", "|" + "---|" * 15]
    for r in rows:
        ref, ours, milp = r.get("reference", {}), r["ours"], r["milp"]
        before = r.get("ideals_before_contraction")
        lines.append(f"| {r['workload']} | {r['nodes']} | {f(before, 3)} | {f(ours.get('ideals'))} | {f(ours.get('pairs'))} "
                     f"({f(ours.get('pruned'))}) | {f(ref.get('max_load', ref.get('failed')))} | "
                     f"{f(ref.get('seconds'), 3)} | {f(ref.get('peak_mib'))} | {f(ours.get('max_load'))} | "
                     f"{f(ours.get('seconds'), 3)} | {f(ours.get('peak_mib'))} | {f(milp.get('max_load'))} | "
                     f"{f(milp.get('dual_bound'))} | {f(milp.get('gap'), 3)} | {f(milp.get('seconds'), 3)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduler.exact_reach", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference-dp", default=None, help="path of the built reference DP binary (optional)")
    ap.add_argument("--milp-seconds", type=float, default=60.0, help="MILP safety cap per workload")
    ap.add_argument("--out", default="benchmarks", help="folder for results/exact_reach.json")
    ap.add_argument("--workloads", nargs="*", default=None, help="only these workloads (default: all)")
    args = ap.parse_args(argv)
    print(markdown(run(args.reference_dp, args.milp_seconds, Path(args.out), args.workloads)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
