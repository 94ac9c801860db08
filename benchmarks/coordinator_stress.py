"""The coordinator SIGSEGV stress loop of issue 42, item 6: N short ``ralp-tf run`` jobs with faults,
each watched for a crash.

    nice -n 19 .venv/bin/python benchmarks/coordinator_stress.py --seed 0 --jobs 50 \\
        --out benchmarks/results/coordinator-stress.json --md benchmarks/results/coordinator-stress.md

A PSS coordinator once died of SIGSEGV 7 s into the quick bench's ``ralp`` run of small_cnn in CI
(BUILD_NOTES.md). Each job here is one ``python -m ralp_tf.cli -v run ... --json`` on a local cluster
of real processes on loopback (2 workers, 1 PS), its settings drawn from ``--seed`` before the first
job starts (the first jobs take each fault once): the model (small_cnn, or alexnet_cifar one time in
five), the policy (ps or ralp, or ``--compare``), ``--steps-per-closure`` (1 or auto) and one fault:

* ``none``;
* ``worker``: ``--inject-fault worker:1:K`` (the run goes on with one worker);
* ``ps``: ``--restart-failed --inject-fault ps:0:K --checkpoint-dir D`` (supervised: the PS comes back,
  a fresh coordinator resumes from the last checkpoint);
* ``join``: ``--restart-failed --add-worker-at K --checkpoint-dir D`` (supervised: a third worker);
* ``sigint``: SIGINT to the run's process at a seeded instant, or (``sigint-group``) to its whole
  process group, as Ctrl-C in a terminal does.

Every job runs in its own session and folder with ``PYTHONFAULTHANDLER=1``, core dumps allowed
(``RLIMIT_CORE`` unlimited; a core found is read with ``gdb -batch``), its own ``--log-dir``, and a
safety timeout (default 300 s: a hang; its processes get SIGABRT, so that the fault handler prints
their Python stacks, then SIGKILL). Recorded per job: the argv, the exit status (negative: killed by
that signal), the wall time, every crash marker in the run's stderr and its tasks' and coordinators'
logs (``Fatal Python error``, ``Segmentation fault``, a TensorFlow ``F`` log line or ``Check failed``,
``terminate called``) with the lines after it (the fault handler's stacks), the Python tracebacks
printed, the final loss, and what was left behind once it ended: live processes of its session or
task processes naming it as their parent, and its tasks' ports still listening (anything left is
then killed, by PID, so the next job starts clean). Prints a line per job; writes the JSON and a
Markdown summary (counts per outcome; with no crash, the 95% upper bound on the per-run crash rate).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ralp_tf.faults.kill_checks import _session_processes, listening  # noqa: E402
from ralp_tf.faults.kills import _task_processes  # noqa: E402

FAULTS = ("none", "worker", "ps", "join", "sigint", "sigint-group")
#: How often each is drawn: the two SIGINTs share one share.
WEIGHTS = {"none": 2, "worker": 2, "ps": 2, "join": 2, "sigint": 1, "sigint-group": 1}
#: Signals whose death is a crash (not one this loop or a fault sends): SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE.
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}
_MARKER = re.compile(r"Fatal Python error|Segmentation fault|Bus error|Floating point exception|Illegal instruction"
                     r"|^F\d{4} \d\d:\d\d|Check failed|terminate called|core dumped")
_TRACEBACK = "Traceback (most recent call last):"


def draw_jobs(seed: int, jobs: int, faults: tuple[str, ...] = FAULTS) -> list[dict[str, Any]]:
    """The settings of every job, drawn from ``seed`` before any runs (the same list for the same seed)."""
    rng = random.Random(seed)
    out = []
    for i in range(jobs):
        model = "alexnet_cifar" if rng.random() < 0.2 else "small_cnn"
        steps = rng.randint(20, 60) if model == "alexnet_cifar" else rng.randint(100, 500)
        drawn = rng.choices(faults, weights=[WEIGHTS[f] for f in faults])[0]
        fault = faults[i] if i < len(faults) else drawn  # every fault once first
        policy = rng.choice(("ps", "ralp"))
        closure = rng.choice(("1", "auto"))
        supervised = fault in ("ps", "join")
        compare = not supervised and rng.random() < 0.3
        at = rng.randint(max(2, steps // 5), steps * 4 // 5)
        every = max(5, steps // rng.choice((3, 4, 5)))
        instant = round(rng.uniform(0.5, 45.0 if model == "alexnet_cifar" else 25.0), 2)
        out.append({"index": i, "model": model, "steps": steps, "policy": "compare" if compare else policy,
                    "steps_per_closure": closure, "fault": fault, "fault_step": at if fault in ("worker", "ps", "join")
                    else None, "checkpoint_every": every if supervised else None,
                    "sigint_after_s": instant if fault.startswith("sigint") else None})
    return out


def job_argv(job: dict[str, Any], folder: Path) -> list[str]:
    """``python -m ralp_tf.cli -v run ...`` for ``job`` (its logs and checkpoints under ``folder``)."""
    argv = [sys.executable, "-m", "ralp_tf.cli", "-v", "run", "--model", job["model"], "--workers", "2", "--ps", "1",
            "--steps", str(job["steps"]), "--steps-per-closure", job["steps_per_closure"],
            "--log-dir", str(folder / "logs"), "--json"]
    argv += ["--compare"] if job["policy"] == "compare" else ["--policy", job["policy"]]
    if job["fault"] == "worker":
        argv += ["--inject-fault", f"worker:1:{job['fault_step']}"]
    elif job["fault"] == "ps":
        argv += ["--restart-failed", "--inject-fault", f"ps:0:{job['fault_step']}"]
    elif job["fault"] == "join":
        argv += ["--restart-failed", "--add-worker-at", str(job["fault_step"])]
    if job["checkpoint_every"]:
        argv += ["--checkpoint-dir", str(folder / "ckpt"), "--checkpoint-every", str(job["checkpoint_every"])]
    return argv


def _signal_name(status: int | None) -> str | None:
    """The signal a process with exit ``status`` died of: ``-N`` (killed), ``128 + N`` (a shell's
    or this program's way of saying so)."""
    if status is None:
        return None
    n = -status if status < 0 else status - 128 if 128 < status < 160 else None
    try:
        return signal.Signals(n).name if n else None
    except ValueError:
        return None


def _blocks(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The crash markers of a log (each with the 120 lines from it on: the fault handler's stacks)
    and its Python tracebacks (each with its last line, the exception)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return [], []
    markers, tracebacks = [], []
    skip_to = -1
    for i, line in enumerate(lines):
        if i > skip_to and _MARKER.search(line):
            markers.append({"file": path.name, "line": i + 1, "text": "\n".join(lines[i:i + 120])[:12000]})
            skip_to = i + 120
        if line.strip() == _TRACEBACK:
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                j += 1
            exc = lines[j] if j < len(lines) else ""
            tracebacks.append({"file": path.name, "line": i + 1, "exception": exc[:300],
                               "text": "\n".join(lines[i:j + 1])[-4000:]})
    return markers, tracebacks


def _port_owners(ports: list[int]) -> dict[int, list[int]]:
    """The PIDs holding a listening socket on each of ``ports`` (read from /proc)."""
    inodes: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            port = int(cols[1].rsplit(":", 1)[1], 16)
            if cols[3] == "0A" and port in ports:
                inodes[f"socket:[{cols[9]}]"] = port
    owners: dict[int, list[int]] = {p: [] for p in ports}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                for fd in (entry / "fd").iterdir():
                    link = os.readlink(fd)
                    if link in inodes:
                        owners[inodes[link]].append(int(entry.name))
            except OSError:
                continue
    return owners


def _argv_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return "?"


def _core_backtraces(folder: Path) -> list[dict[str, Any]]:
    """``gdb -batch`` backtraces (every thread, 25 frames) of each core file under ``folder``."""
    out = []
    for core in sorted(p for p in folder.rglob("core*") if p.is_file() and p.name.split(".")[0] == "core"):
        try:
            bt = subprocess.run(["gdb", "-batch", "-ex", "thread apply all bt 25", os.path.realpath(sys.executable),
                                 str(core)], capture_output=True, text=True, timeout=300).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            bt = f"gdb failed: {exc}"
        out.append({"core": str(core), "bytes": core.stat().st_size, "gdb": bt[-30000:]})
    return out


class Job:
    """One job running: its process (own session), the PIDs and ports of its tasks as they appear."""

    def __init__(self, job: dict[str, Any], folder: Path) -> None:
        self.job, self.folder = job, folder
        folder.mkdir(parents=True, exist_ok=True)
        self.argv = job_argv(job, folder)
        env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(REPO)}
        self.stdout = open(folder / "stdout.json", "wb")
        self.stderr = open(folder / "stderr.txt", "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=self.stdout, stderr=self.stderr, stdin=subprocess.DEVNULL,
                                     env=env, cwd=folder, start_new_session=True)
        self.tasks: dict[int, str] = {}
        self.ports: set[int] = set()

    def watch(self) -> None:
        """Note the run's task processes and their ports (from their ``--cluster`` argument)."""
        for pid, argv in _task_processes(self.proc.pid):
            if pid not in self.tasks:
                self.tasks[pid] = argv[argv.index("--job") + 1] + argv[argv.index("--index") + 1]
                spec = json.loads(argv[argv.index("--cluster") + 1])
                self.ports |= {int(a.rsplit(":", 1)[1]) for addrs in spec.values() for a in addrs}

    def stderr_tail(self) -> str:
        lines = (self.folder / "stderr.txt").read_text(errors="replace").splitlines()
        useful = [l for l in lines if not l.startswith(("I0000", "W0000", "E0000"))]
        return useful[-1][:300] if useful else ""


def run_job(job: dict[str, Any], folder: Path, timeout_s: float) -> dict[str, Any]:
    """Run one job to its end (or its timeout) and return its record."""
    run = Job(job, folder)
    sigint = job["sigint_after_s"]
    sent: dict[str, Any] | None = None
    hung = False
    while run.proc.poll() is None:
        elapsed = time.monotonic() - run.t0
        run.watch()
        if sigint is not None and sent is None and elapsed >= sigint:
            sent = {"at_s": round(elapsed, 2), "to": "group" if job["fault"] == "sigint-group" else "process",
                    "stderr_before": run.stderr_tail(), "tasks_seen": len(run.tasks)}
            try:
                (os.killpg if sent["to"] == "group" else os.kill)(run.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                sent["note"] = "the run had just exited"
        if elapsed > timeout_s:
            hung = True
            _abort_for_stacks(run.proc.pid)
            break
        time.sleep(0.2)
    try:
        code = run.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        code = run.proc.wait()
    wall = time.monotonic() - run.t0
    run.stdout.close()
    run.stderr.close()
    left = _left_behind(run)
    files = [folder / "stderr.txt", *sorted((folder / "logs").glob("*"))]
    markers, tracebacks = [], []
    for f in files:
        m, t = _blocks(f)
        markers += m
        tracebacks += t
    record = {**job, "argv": ["ralp-tf", *run.argv[3:]], "exit": code, "signal": _signal_name(code),
              "wall_s": round(wall, 1), "hung": hung, "sigint": sent, "tasks_seen": sorted(run.tasks.values()),
              "log_files": [f.name for f in files[1:]], "crash_markers": markers,
              "tracebacks": tracebacks, "cores": _core_backtraces(folder), "left_behind": left,
              **_result(folder / "stdout.json")}
    record["outcome"] = outcome(record)
    return record


def _abort_for_stacks(session: int) -> None:
    """A hung job: every process of its session gets SIGABRT (no core dumps: RLIMIT_CORE 0 first), so
    Python's fault handler prints each one's stacks into its log; SIGKILL 5 s later."""
    pids = _session_processes([session])
    for pid in pids:
        try:
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            os.kill(pid, signal.SIGABRT)
        except (ProcessLookupError, PermissionError):
            pass
    time.sleep(5)
    for pid in _session_processes([session]):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _left_behind(run: Job) -> dict[str, Any]:
    """What the ended job left: live processes of its session or naming it their parent (10 s
    allowed for SIGKILLed tasks to be reaped), its tasks' ports still listening (with their
    holders); every such process is then SIGKILLed by PID."""
    deadline = time.monotonic() + 10
    while _session_processes([run.proc.pid]) and time.monotonic() < deadline:
        time.sleep(0.2)
    procs = _session_processes([run.proc.pid])
    ports = listening(sorted(run.ports))
    owners = _port_owners(ports) if ports else {}
    out = {"processes": [{"pid": p, "argv": _argv_of(p)} for p in procs], "ports": ports,
           "port_owners": {str(k): [{"pid": p, "argv": _argv_of(p)} for p in v] for k, v in owners.items()}}
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return out


def _result(path: Path) -> dict[str, Any]:
    """The final loss(es), steps and supervised details from the run's ``--json`` output."""
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"final_loss": None, "stdout_parsed": False}
    if "steps_completed" in out:  # supervised mode: the fault report
        return {"stdout_parsed": True, "final_loss": out.get("final_loss"), "steps_completed": out["steps_completed"],
                "coordinator_runs": out.get("coordinator_runs"), "restarts": out.get("restarts"),
                "faults": [{k: f.get(k) for k in ("kind", "target", "planned", "step_at_start", "note")}
                           for f in out.get("faults", [])],
                "unplanned_deaths": [f for f in out.get("faults", []) if f.get("kind") == "died"]}
    return {"stdout_parsed": True, "final_loss": {k: v.get("final_loss") for k, v in out.items()},
            "steps_completed": {k: v.get("total_steps") for k, v in out.items()}}


def outcome(rec: dict[str, Any]) -> str:
    """``crash`` (a crash signal's exit, a crash marker in any log, or a core), ``hang`` (the timeout),
    ``completed`` / ``interrupted`` (the exit expected: 0, or after SIGINT 130 or -2), ``failed``
    (another exit), each ``+ left behind`` when something was."""
    sig = rec["signal"]
    crashed = (sig is not None and signal.Signals[sig] in CRASH_SIGNALS) or rec["crash_markers"] or rec["cores"]
    if rec["hung"]:
        kind = "hang"
    elif crashed:
        kind = "crash"
    elif rec["exit"] == 0:
        kind = "completed"
    elif rec["sigint"] and rec["exit"] in (130, -2):
        kind = "interrupted"
    else:
        kind = "failed"
    left = rec["left_behind"]
    return kind + (" + left behind" if left["processes"] or left["ports"] else "")


def upper_bound(crashes: int, runs: int) -> dict[str, float | None]:
    """The 95% upper bounds on the per-run crash rate with ``crashes`` = 0 in ``runs``: the rule of
    three (3/N) and the exact one-sided Clopper-Pearson bound (1 - 0.05^(1/N))."""
    if crashes or not runs:
        return {"rule_of_three": None, "exact": None}
    return {"rule_of_three": round(3 / runs, 4), "exact": round(1 - 0.05 ** (1 / runs), 4)}


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per outcome and per fault, crashes, hangs, findings and the bound."""
    counts: dict[str, int] = {}
    by_fault: dict[str, dict[str, int]] = {}
    for r in records:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        row = by_fault.setdefault(r["fault"], {})
        row[r["outcome"]] = row.get(r["outcome"], 0) + 1
    crashes = sum(r["outcome"].startswith("crash") for r in records)
    coordinators = sum((r.get("coordinator_runs") or 1) * (2 if r["policy"] == "compare" else 1) for r in records)
    return {"jobs": len(records), "outcomes": counts, "by_fault": by_fault, "crashes": crashes,
            "hangs": sum(r["hung"] for r in records),
            "left_behind": sum(" + left behind" in r["outcome"] for r in records),
            "with_tracebacks": sum(bool(r["tracebacks"]) for r in records),
            "coordinator_runs": coordinators, "coordinator_wall_s": round(sum(r["wall_s"] for r in records), 1),
            "crash_rate_upper_95": upper_bound(crashes, len(records))}


def _fault_text(r: dict[str, Any]) -> str:
    if r["fault"] in ("worker", "ps", "join"):
        return {"worker": "worker:1:{}", "ps": "ps:0:{} (restart)", "join": "add worker at {}"}[r["fault"]].format(
            r["fault_step"])
    if r["fault"].startswith("sigint"):
        s = r["sigint"]
        return f"{r['fault']} at {s['at_s']} s" if s else f"{r['fault']} (run ended at {r['wall_s']} s, not sent)"
    return "none"


def _loss_text(loss: Any) -> str:
    if isinstance(loss, dict):
        return ", ".join(f"{k} {_loss_text(v)}" for k, v in loss.items())
    return f"{loss:.4f}" if isinstance(loss, float) else str(loss)


def markdown(table: dict[str, Any]) -> str:
    """The summary (outcomes; the bound) and a row per job."""
    s = table["summary"]
    rows = [f"`{table['command']}` ({table['started']}, {s['jobs']} jobs, {table['wall_s']:.0f} s)", "",
            "| outcome | jobs |", "|---|---|"]
    rows += [f"| {k} | {v} |" for k, v in sorted(s["outcomes"].items())]
    rows += ["", "| fault | " + " | ".join(sorted(s["outcomes"])) + " |",
             "|---|" + "---|" * len(s["outcomes"])]
    for fault, row in sorted(s["by_fault"].items()):
        rows.append(f"| {fault} | " + " | ".join(str(row.get(k, 0)) for k in sorted(s["outcomes"])) + " |")
    b = s["crash_rate_upper_95"]
    rows.append("")
    if s["crashes"]:
        rows.append(f"**{s['crashes']} crash(es) in {s['jobs']} jobs**: see the jobs marked crash.")
    else:
        rows.append(f"**0 crashes in {s['jobs']} jobs** ({s['coordinator_runs']} coordinator runs, "
                    f"{s['coordinator_wall_s']:.0f} s of jobs): per-run crash rate below {b['rule_of_three']:.1%} "
                    f"at 95% "
                    f"(3/N; exact bound {b['exact']:.1%}).")
    rows.append(f"Hangs: {s['hangs']}. Jobs that left something behind: {s['left_behind']}. "
                f"Jobs with a Python traceback in a log: {s['with_tracebacks']}.")
    rows += ["", "| # | model | policy | K | steps | fault | exit | wall (s) | outcome | final loss | tracebacks |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table["jobs"]:
        tb = "; ".join(sorted({f"{t['file']}: {t['exception'][:80]}" for t in r["tracebacks"]})) or "none"
        rows.append(f"| {r['index']} | {r['model']} | {r['policy']} | {r['steps_per_closure']} | {r['steps']} | "
                    f"{_fault_text(r)} | {r['exit']}{' (' + r['signal'] + ')' if r['signal'] else ''} | "
                    f"{r['wall_s']} | {r['outcome']} | {_loss_text(r['final_loss'])} | {tb} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the jobs; exit 0 when none crashed, hung, failed or left anything behind, 1 otherwise."""
    p = argparse.ArgumentParser(prog="benchmarks/coordinator_stress.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--faults", default=",".join(FAULTS), help=f"the faults drawn from (default {','.join(FAULTS)})")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per job before it counts as a hang")
    p.add_argument("--workdir", default=None, help="the jobs' folders (default: a temporary folder, removed "
                                                   "after unless a job crashed, hung or failed)")
    p.add_argument("--out", default=None, help="JSON of every job")
    p.add_argument("--md", default=None, help="the Markdown summary")
    args = p.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        p.error(f"unknown fault(s) {bad}; choose from {','.join(FAULTS)}")
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # ulimit -c unlimited, for every job's processes
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ralp_tf_stress_"))
    t0 = time.time()
    records = []
    for job in draw_jobs(args.seed, args.jobs, faults):
        rec = run_job(job, workdir / f"job-{job['index']:02d}", args.timeout)
        records.append(rec)
        left = rec["left_behind"]
        print(f"[{time.time() - t0:6.0f} s] job {rec['index']:2d} {rec['model']} {rec['policy']} "
              f"K={rec['steps_per_closure']} steps={rec['steps']} fault={_fault_text(rec)}: exit {rec['exit']}"
              f"{' (' + rec['signal'] + ')' if rec['signal'] else ''} in {rec['wall_s']} s, "
              f"crash markers {len(rec['crash_markers'])}, tracebacks {len(rec['tracebacks'])}, "
              f"left {len(left['processes'])} processes {left['ports']} ports, loss {_loss_text(rec['final_loss'])}: "
              f"{rec['outcome']}", flush=True)
    table = {"command": " ".join(["benchmarks/coordinator_stress.py", *(argv if argv is not None else sys.argv[1:])]),
             "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)), "seed": args.seed,
             "timeout_s": args.timeout, "wall_s": round(time.time() - t0, 1), "workdir": str(workdir),
             "summary": summary(records), "jobs": records}
    if args.out:
        Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
    text = markdown(table)
    if args.md:
        Path(args.md).write_text(text + "\n")
    print(text)
    clean = all(r["outcome"] in ("completed", "interrupted") for r in records)
    if not args.workdir and clean:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
