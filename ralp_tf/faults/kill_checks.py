"""The checks of a kill trial (:mod:`ralp_tf.faults.kills`) and the kill table.

After a kill: :func:`what_was_left` says what the checkpoint directory holds of the write in
progress; :func:`whole_checkpoints` finds every checkpoint under a final name (not a temporary
one) that TensorFlow reads whole, every tensor with its CRC32C checked, with its step and
:func:`ralp_tf.run.checkpoints.variables_digest` of its model variables: the newest of them is the
step a rerun must resume from. Then the same command runs again; :func:`run_trial` records the step it
resumed from, whether its restored model's digest equals that checkpoint's, its final loss, and
:func:`leftovers` once it ended: processes of either run's session or task processes still alive,
their ports still listening, names in the checkpoint directory other than ``checkpoint`` and
``ckpt-N``. :func:`kill_table` runs the seeded trials; :func:`markdown` is its table.
"""
from __future__ import annotations

import math
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

from ralp_tf.faults.kills import RunWatch, kill_in_write, kill_ps_busy, run_command
from ralp_tf.run.checkpoints import MAX_TO_KEEP, variables_digest

__all__ = ["MID_SHARD", "what_was_left", "whole_checkpoints", "leftovers", "listening", "run_trial", "instants", "kill_table",
           "markdown"]

_TEMP_PART = re.compile(r"(\.tmp-|\.old-|_temp$)")
_FINAL = re.compile(r"^(checkpoint|ckpt-\d+)$")


def _names(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.is_dir() else []


def _state_names(directory: Path) -> str:
    try:
        return (directory / "checkpoint").read_text()
    except OSError:
        return ""


def what_was_left(directory: str, step: int) -> str:
    """What ``directory`` holds of the write of checkpoint ``step`` (the layout of
    :mod:`ralp_tf.run.checkpoints`), in words."""
    d = Path(directory)
    tmp = sorted(d.glob(f".ckpt-{step}.tmp-*"))
    if tmp:
        names = _names(tmp[0])
        if any(".tempstate" in n for n in names):
            return "temporary folder, shards being written"
        if any(n.endswith("_temp") for n in names):
            return "temporary folder, shards written, not merged"
        if f"ckpt-{step}.index" in names and "manifest.json" not in names:
            return "temporary folder, merged, no manifest yet"
        if "manifest.json" in names:
            return "temporary folder whole, not renamed"
        return "temporary folder, empty"
    if (d / f"ckpt-{step}").is_dir():
        if f'"ckpt-{step}/ckpt-{step}"' not in _state_names(d):
            return "renamed, state file not yet naming it"
        folders = [p for p in d.glob("ckpt-*") if p.is_dir()]
        if list(d.glob(".ckpt-*.old-*")) or len(folders) > MAX_TO_KEEP:
            return "state file written, oldest not yet removed"
        return "write complete"
    return "nothing of the write yet"


def whole_checkpoints(directory: str) -> dict[int, dict[str, Any]]:
    """``{step: {"prefix", "digest", "variables"}}`` of every checkpoint under a final name in
    ``directory`` that TensorFlow reads whole (each tensor read, its CRC32C checked)."""
    import tensorflow as tf

    found: dict[int, dict[str, Any]] = {}
    for index in sorted(Path(directory).rglob("*.index")):
        if any(_TEMP_PART.search(part) for part in index.relative_to(directory).parts):
            continue
        prefix = str(index)[:-len(".index")]
        try:
            reader = tf.train.load_checkpoint(prefix)
            keys = sorted(reader.get_variable_to_shape_map())
            values = {k: reader.get_tensor(k) for k in keys}
        except (tf.errors.OpError, ValueError):
            continue
        step = int(values["step/.ATTRIBUTES/VARIABLE_VALUE"])
        model = [v for k, v in values.items() if k.startswith("model/") and k.endswith("/.ATTRIBUTES/VARIABLE_VALUE")
                 and ".OPTIMIZER_SLOT" not in k]
        found[step] = {"prefix": prefix, "digest": variables_digest(model), "variables": len(model)}
    return found


def listening(ports: list[int]) -> list[int]:
    """Which of ``ports`` have a listening TCP socket on this machine (/proc/net/tcp, tcp6)."""
    live = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 3 and cols[3] == "0A":
                live.add(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(set(ports) & live)


def _session_processes(sessions: list[int]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[1].split()
        parent = argv[argv.index(b"--parent-pid") + 1] if b"--parent-pid" in argv[:-1] else b""
        if fields[0] != "Z" and (int(fields[2]) in sessions or int(fields[3]) in sessions
                                 or parent in {str(s).encode() for s in sessions}):
            found.append(int(entry.name))
    return sorted(found)


def leftovers(directory: str, runs: list[RunWatch]) -> dict[str, list[Any]]:
    """What ``runs`` (ended) left: live processes of their sessions and their task processes, their
    tasks' ports still listening, and names in ``directory`` other than the state file and
    ``ckpt-N`` folders (temporary ones)."""
    pids = [w.proc.pid for w in runs]
    deadline = time.monotonic() + 10  # SIGKILLed tasks (PR_SET_PDEATHSIG) are reaped within moments
    while _session_processes(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    ports = sorted({p for w in runs for p in w.ports})
    names = sorted(n for n in os.listdir(directory) if not _FINAL.match(n)) if os.path.isdir(directory) else []
    return {"processes": _session_processes(pids), "ports": listening(ports), "files": names}


def _rerun_json(watch: RunWatch) -> dict[str, Any]:
    import json

    try:
        out = json.loads(watch.stdout)
    except ValueError:
        return {}
    return out.get("ralp", {})


#: What a ``bytes`` kill, meant to land while the shards are written, leaves when it landed there.
MID_SHARD = "temporary folder, shards being written"


def run_trial(trial: dict[str, Any], workdir: Path, *, model: str, steps: int, every: int,
              target: int, keep: bool = False) -> dict[str, Any]:
    """One trial (``trial``: ``kind`` and ``value``, see :mod:`ralp_tf.faults.kills`) in a fresh
    folder under ``workdir``: the run killed at checkpoint ``target``'s write (``ps``: after it),
    what it left, the rerun and its checks. The folder is removed after (``keep``: kept).

    A ``bytes`` kill decides on the shard's size as the watcher last polled it; on a starved machine
    that reading can be stale, and the kill then lands after the shards were written (measured once
    in a CI run: "write complete", its record still saying half the shard). Such a trial is not the
    one asked for, so it is run once more; the record's ``attempts`` and ``missed`` say so."""
    missed: list[str] = []
    while True:
        record = _trial_once(trial, workdir, model=model, steps=steps, every=every, target=target, keep=keep)
        if trial["kind"] != "bytes" or record["left_by_kill"] == MID_SHARD or missed:
            return {**record, "attempts": len(missed) + 1, "missed": missed}
        missed.append(record["left_by_kill"])


def _trial_once(trial: dict[str, Any], workdir: Path, *, model: str, steps: int, every: int,
                target: int, keep: bool) -> dict[str, Any]:
    folder = workdir / f"{trial['kind']}-{trial['index']:02d}"
    shutil.rmtree(folder, ignore_errors=True)
    ckpt = str(folder / "ckpt")
    first = RunWatch(run_command(model, ckpt, str(folder / "logs-1"), steps=steps, checkpoint_every=every), ckpt)
    try:
        if trial["kind"] == "ps":
            landed = kill_ps_busy(first, target, trial["value"])
        else:
            landed = kill_in_write(first, target, trial["kind"], trial["value"])
        code = first.finish(timeout=300)
    finally:
        if first.proc.poll() is None:
            first.kill_group()
            first.finish()
    stopped = [l for _, l in first.lines if "Last checkpoint" in l]
    next_write = target + every if trial["kind"] == "ps" else target
    left = what_was_left(ckpt, next_write)
    whole = whole_checkpoints(ckpt)
    expected = max(whole, default=0)
    second = RunWatch(run_command(model, ckpt, str(folder / "logs-2"), steps=steps, checkpoint_every=every), ckpt)
    rerun_code = second.finish()
    out = _rerun_json(second)
    resumed = out.get("resumed_from_step") or 0
    restored = out.get("restored_weights_digest")
    loss = out.get("final_loss")
    record = {**trial, **landed, "first_exit": code, "first_stop": stopped[-1][-300:] if stopped else None,
              "left_by_kill": left, "whole_after_kill": sorted(whole), "expected_resume": expected,
              "rerun_exit": rerun_code, "resumed_from": resumed,
              "warnings": [l.split("WARNING ", 1)[-1] for _, l in second.lines if "WARNING" in l and "checkpoint" in l],
              "variables_equal": bool(whole.get(resumed) and restored == whole[resumed]["digest"]) if resumed else None,
              "variables_compared": whole.get(resumed, {}).get("variables"),
              "final_loss": loss, "loss_finite": isinstance(loss, float) and math.isfinite(loss),
              "total_steps": out.get("total_steps"), "left_behind": leftovers(ckpt, [first, second])}
    record["ok"] = bool(rerun_code == 0 and resumed == expected and record["variables_equal"] is not False
                        and record["loss_finite"] and not any(record["left_behind"].values()))
    if not record["ok"]:
        record["rerun_stderr_tail"] = [l for _, l in second.lines[-20:]]
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return record


def instants(seed: int, write_kills: int, ps_kills: int, tail_share: float = 0.4) -> list[dict[str, Any]]:
    """The seeded instants: ``write_kills`` split into ``bytes`` fractions stratified over (0, 1) and
    ``tail`` fractions stratified over (0, 1.1) (``tail_share`` of them), and ``ps_kills`` fractions
    of the gap between writes stratified over (0, 0.8)."""
    rng = random.Random(seed)
    tails = round(write_kills * tail_share)
    out = [{"kind": "bytes", "value": (i + rng.random()) / (write_kills - tails)} for i in range(write_kills - tails)]
    out += [{"kind": "tail", "value": 1.1 * (i + rng.random()) / tails} for i in range(tails)]
    out += [{"kind": "ps", "value": 0.8 * (i + rng.random()) / ps_kills} for i in range(ps_kills)]
    for i, t in enumerate(out):
        t["index"] = i
    return out


def kill_table(seed: int, write_kills: int, ps_kills: int, workdir: Path, *, model: str = "alexnet_cifar",
               steps: int = 17, every: int = 5, target: int = 15, ps_after: int = 10,
               on_trial: Any = None) -> dict[str, Any]:
    """Run every trial of :func:`instants` and return the table (its settings, the trials, a summary);
    ``on_trial(record)`` after each."""
    trials = []
    for trial in instants(seed, write_kills, ps_kills):
        rec = run_trial(trial, workdir, model=model, steps=steps, every=every,
                        target=ps_after if trial["kind"] == "ps" else target)
        trials.append(rec)
        if on_trial:
            on_trial(rec)
    return {"seed": seed, "model": model, "steps": steps, "checkpoint_every": every, "write_target": target,
            "ps_after": ps_after, "trials": trials,
            "summary": {"trials": len(trials), "ok": sum(t["ok"] for t in trials),
                        "resumed_as_expected": sum(t["resumed_from"] == t["expected_resume"] for t in trials),
                        "variables_equal": sum(bool(t["variables_equal"]) for t in trials),
                        "losses_finite": sum(t["loss_finite"] for t in trials),
                        "nothing_left": sum(not any(t["left_behind"].values()) for t in trials)}}


def _loss(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def markdown(table: dict[str, Any]) -> str:
    """The kill table in Markdown, a row per trial."""
    rows = ["| # | killed | instant | landed | left by the kill | whole after | resumed from | variables equal "
            "| final loss | left behind |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in table["trials"]:
        if t["kind"] == "ps":
            what, inst = "ps0", f"{t['value']:.3f} of the gap after ckpt-{table['ps_after']}"
            landed = (f"+{t['s_after_write_end']:.3f} s after the write, ps0 {t['ps_ticks_last_20ms']} ticks/20 ms, "
                      f"{t['ps_threads_running']} threads running")
        else:
            what = "run (group)"
            inst = f"{t['kind']} {t['value']:.3f}"
            landed = f"+{t['s_after_write_start']:.3f} s, shard {t['shard_bytes_at_kill'] / 1e6:.1f}/" \
                     f"{t['full_shard_bytes'] / 1e6:.1f} MB"
        left = t["left_behind"]
        rows.append(f"| {t['index']} | {what} | {inst} | {landed} | {t['left_by_kill']} | "
                    f"{', '.join(map(str, t['whole_after_kill'])) or 'none'} | {t['resumed_from']}"
                    f"{'' if t['resumed_from'] == t['expected_resume'] else ' (expected ' + str(t['expected_resume']) + ')'}"
                    f" | {'yes' if t['variables_equal'] else t['variables_equal']} ({t['variables_compared']} variables)"
                    f" | {_loss(t['final_loss'])} | {'nothing' if not any(left.values()) else left} |")
    s = table["summary"]
    rows.append(f"\n{s['trials']} trials: {s['resumed_as_expected']} resumed from the newest whole checkpoint, "
                f"{s['variables_equal']} with variables equal to it, {s['losses_finite']} finite final losses, "
                f"{s['nothing_left']} with nothing left behind.")
    return "\n".join(rows)
