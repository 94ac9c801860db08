"""How far the exact max-load solvers reach, beside the dnn-partitioning authors' reference DP.

``python -m scheduler.exact_reach --reference-dp /tmp/dp [--milp-seconds 60] [--out DIR]``

For every shared dnn-partitioning workload and a fixed set of generated branchy layer graphs
(:func:`scheduler.workloads.layer_graphs.branchy_graph`, 100-210 nodes), it runs, each in a
process of its own so that peak memory is that solver's alone (``os.wait4``'s ``ru_maxrss``):

* the reference DP (the authors' C++ programme, built from ``../shared/tools/dnn-partitioning-dp``
  as its README says; not part of this project), if ``--reference-dp`` is given;
* this package's contiguous DP (:func:`scheduler.exact.solve_maxload`);
* the non-contiguous MILP (:class:`scheduler.milp.MILP`), with its node budget and the time
  cap ``--milp-seconds``, reporting the best placement and the gap it proved.

Writes ``DIR/results/exact_reach.json`` and prints a Markdown table.
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

from scheduler.workloads import dnn_partitioning
from scheduler.workloads.layer_graphs import branchy_graph

__all__ = ["GRAPHS", "run", "markdown", "main"]

#: (blocks, branches, branch_len, training) of the generated graphs, seed 1.
GRAPHS = ((16, 3, 3, False), (12, 4, 3, False), (10, 5, 3, False), (12, 4, 4, False), (8, 6, 3, True))

_OURS = """
import json, sys, time
from scheduler.workloads.dnn_partitioning import load
from scheduler.exact import solve_maxload
p = load(sys.argv[1])
t = time.perf_counter()
a, notes = solve_maxload(p)
print(json.dumps({"max_load": p.objective(a), "seconds": time.perf_counter() - t, "ideals": notes["ideals"],
                  "pairs": notes["ideal_pairs"], "pruned": notes["pairs_pruned_by_bound"]}))
"""

_MILP = """
import json, sys, warnings
warnings.simplefilter("ignore")
from scheduler.workloads.dnn_partitioning import load
from scheduler.milp import MILP
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


def run(reference_dp: str | None, milp_seconds: float, out_dir: Path) -> list[dict[str, Any]]:
    """Measure every workload (module docstring); returns the rows."""
    work = Path(tempfile.mkdtemp(prefix="exact_reach_"))
    files = dict(dnn_partitioning.shared_workloads())
    for bl, br, ln, tr in GRAPHS:
        d = branchy_graph(blocks=bl, branches=br, branch_len=ln, training=tr, seed=1)
        path = work / f"{d['name']}.json"
        path.write_text(json.dumps(d))
        files[d["name"]] = path
    rows = []
    for name, path in files.items():
        nodes = len(json.loads(Path(path).read_text())["nodes"])
        row: dict[str, Any] = {"workload": name, "nodes": nodes}
        if reference_dp:
            out, wall, rss, rc = _run([reference_dp], stdin_path=str(path))
            try:
                row["reference"] = {"max_load": json.loads(out)["maxLoad"], "seconds": wall, "peak_mib": rss}
            except (ValueError, KeyError):
                row["reference"] = {"failed": out.strip()[:200] or f"exit {rc}", "seconds": wall, "peak_mib": rss}
        out, wall, rss, rc = _run([sys.executable, "-c", _OURS, str(path)])
        row["ours"] = {**json.loads(out), "peak_mib": rss} if rc == 0 else {"failed": f"exit {rc}"}
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

    lines = ["| workload | nodes | ideals | pairs (pruned) | reference DP max-load | s | MiB | our DP max-load | s | "
             "MiB | MILP max-load | proven lower bound | gap | MILP s |", "|" + "---|" * 14]
    for r in rows:
        ref, ours, milp = r.get("reference", {}), r["ours"], r["milp"]
        lines.append(f"| {r['workload']} | {r['nodes']} | {f(ours.get('ideals'))} | {f(ours.get('pairs'))} "
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
    args = ap.parse_args(argv)
    print(markdown(run(args.reference_dp, args.milp_seconds, Path(args.out))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
