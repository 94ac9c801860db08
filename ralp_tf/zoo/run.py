"""The zoo run: every ``tf_keras.applications`` model and every user shape of :mod:`ralp_tf.zoo.shapes`,
each in a process of its own (:mod:`ralp_tf.zoo.job`), one after the other, into one results file
and one Markdown table.

:func:`zoo_models` lists them (``applications``, ``shapes``, or names); :func:`run_zoo` runs them,
rewriting the results JSON after every model (``resume`` skips the models it already holds), with
a time cap per model (a model over it gets a row saying so; its processes are killed);
:func:`markdown` is the table of ``benchmarks/zoo.md``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ralp_tf.errors import ValidationError
from ralp_tf.zoo.applications import APPLICATIONS
from ralp_tf.zoo.expect import EXPECT

__all__ = ["ZooModel", "SAMPLE", "zoo_models", "ZooConfig", "run_zoo", "markdown", "summary"]

#: The zoo's fast sample (``--sample``, and ``make test``): a user shape that is subclassed without
#: layer names, one with custom layers that hold layers, and one application.
SAMPLE = ("subclassed_cnn", "text_transformer", "MobileNet")


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """One zoo entry: its name, its model reference and where it comes from."""

    name: str
    reference: str
    source: str


def zoo_models(which: Sequence[str] = ("applications", "shapes")) -> list[ZooModel]:
    """The zoo entries ``which`` names: ``applications``, ``shapes``, ``sample`` or model names."""
    from ralp_tf.zoo.shapes import SHAPES

    shapes = [ZooModel(n, f"{SHAPES[n].__module__}:{SHAPES[n].__name__}", "Keras examples and guides") for n in EXPECT]
    apps = [ZooModel(n, f"ralp_tf.zoo.applications:{n}", "tf_keras.applications") for n in APPLICATIONS]
    by_name = {m.name: m for m in [*apps, *shapes]}
    out: list[ZooModel] = []
    for item in which:
        group = {"applications": apps, "shapes": shapes, "sample": [by_name[n] for n in SAMPLE]}.get(item)
        if group is None:
            if item not in by_name:
                raise ValidationError(f"the zoo has no model {item!r}; name applications, shapes, sample or models of "
                                      f"{', '.join(by_name)}")
            group = [by_name[item]]
        out.extend(m for m in group if m not in out)
    return out


@dataclasses.dataclass(frozen=True)
class ZooConfig:
    """How each model runs: the cluster shape and link the plan assumes, the batch per worker, the
    length of inputs of variable length, the measured steps, and the time cap per model."""

    workers: int = 2
    ps: int = 1
    bandwidth: str = "100mbit"
    batch_size: int = 16
    sequence_length: int = 32
    steps: int = 2
    timeout_s: float = 900.0


def _run_job(model: ZooModel, config: ZooConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ralp-zoo-") as tmp:
        out = Path(tmp) / "row.json"
        argv = [sys.executable, "-m", "ralp_tf.zoo.job", model.reference, str(out), str(config.workers),
                str(config.ps), config.bandwidth, str(config.batch_size), str(config.sequence_length), str(config.steps)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        try:
            _, err = proc.communicate(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"reference": model.reference, "stage": "timeout", "exit": 3,
                    "error": f"did not finish within {config.timeout_s:.0f} s (its processes were killed)"}
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if out.is_file():
            return json.loads(out.read_text())
        tail = [l for l in (err or "").splitlines() if l.strip()][-3:]
        return {"reference": model.reference, "stage": "crashed", "exit": 1,
                "error": f"the job process exited {proc.returncode} without a row: {' | '.join(tail)[-400:]}"}


def run_zoo(models: Sequence[ZooModel], config: ZooConfig, results: Path, *, resume: bool = False,
            progress: Callable[[str], None] | None = None, command: str = "") -> dict[str, Any]:
    """Run every model (module docstring) and return the results document, also written to ``results``."""
    doc: dict[str, Any] = {"command": command, "config": dataclasses.asdict(config), "rows": []}
    if resume and results.is_file():
        doc["rows"] = json.loads(results.read_text()).get("rows", [])
    done = {r["name"] for r in doc["rows"]}
    for i, model in enumerate(models):
        if model.name in done:
            continue
        if progress:
            progress(f"zoo {i + 1}/{len(models)}: {model.name}")
        t0 = time.perf_counter()
        row = {"name": model.name, "source": model.source, **_run_job(model, config)}
        row.setdefault("seconds", time.perf_counter() - t0)
        doc["rows"].append(row)
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(doc, indent=1, default=str))
    doc["summary"] = summary(doc["rows"])
    results.write_text(json.dumps(doc, indent=1, default=str))
    return doc


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts: trained and verified, refused before a cluster started, failed after, bytes within 10%."""
    trained = [r for r in rows if r.get("stage") == "trained"]
    within = [r for r in trained if r.get("bytes_error") is not None and abs(r["bytes_error"]) <= 0.10]
    return {"models": len(rows), "trained": len(trained), "bytes_within_10pct": len(within),
            "refused_before_cluster": sum(1 for r in rows if r.get("stage") in ("profile", "plan") and r.get("error")),
            "failed_after_start": sum(1 for r in rows if r.get("stage") not in ("trained", "profile", "plan")),
            "tracebacks": sum(1 for r in rows if r.get("exit") == 1)}


def _mb(x: Any) -> str:
    return f"{x / 1e6:.3f}" if isinstance(x, (int, float)) else ""


def _speedup(x: Any) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else ""


def _gradients(checked: bool | None) -> str:
    return {True: "yes", False: "not comparable"}.get(checked, "")


def markdown(doc: dict[str, Any]) -> str:
    """The zoo table (one row per model) with the command and the summary."""
    s = doc.get("summary") or summary(doc["rows"])
    c = doc["config"]
    lines = [f"Command: `{doc['command']}`", "",
             f"Each model: {c['workers']} workers, {c['ps']} PS, planned for {c['bandwidth']}, batch {c['batch_size']} "
             f"per worker, inputs of variable length at {c['sequence_length']}, {c['steps']} measured steps after a "
             "warm-up step on each worker, on a LocalCluster of real processes (bytes from the kernel's per-socket "
             "counters). *Gradients*: the placed model's first-step loss and gradients against the unplaced "
             "model's on the same batch and weights (`yes`: equal within 1e-4; `not comparable`: the unplaced model's "
             "eager and traced evaluations already differ, because it samples or because it is so ill-conditioned "
             "at its initial weights that the order of float32 sums decides its output).", "",
             f"**{s['trained']} of {s['models']} trained with their placement verified; {s['bytes_within_10pct']} of "
             f"those within 10% of the predicted bytes; {s['refused_before_cluster']} refused before a cluster "
             f"started; {s['failed_after_start']} failed after; {s['tracebacks']} with a traceback.**", "",
             "| model | source | parameters | plan (ralp) | predicted speed-up | MB/step measured | MB/step predicted | "
             "error | verified | gradients | s | refused or failed: why |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        err = f"{100 * r['bytes_error']:+.1f}%" if r.get("bytes_error") is not None else ""
        why = (r.get("error") or "").replace("|", "/")[:220]
        lines.append(f"| {r['name']} | {r.get('source', '')} | {r.get('parameters', ''):,} | {r.get('plan', '')} | "
                     f"{_speedup(r.get('predicted_speedup'))} | {_mb(r.get('bytes_per_step'))} | "
                     f"{_mb(r.get('predicted_bytes_per_step'))} | {err} | "
                     f"{'yes' if r.get('verified') else 'no'} | {_gradients(r.get('gradients'))} | "
                     f"{r.get('seconds', 0):.0f} | "
                     f"{(r.get('stage', '') + ': ' + why) if why else ''} |"
                     if isinstance(r.get("parameters"), int) else
                     f"| {r['name']} | {r.get('source', '')} |  | {r.get('plan', '')} |  |  |  |  | no |  | "
                     f"{r.get('seconds', 0):.0f} | {r.get('stage', '')}: {why} |")
    refused = [(r["name"], unit, why) for r in doc["rows"] for unit, why in (r.get("refusals") or {}).items()]
    if refused:
        lines += ["", "Where the best cut holds a unit that cannot compute on a PS (it stays on the workers):", ""]
        lines += [f"- {name}: `{unit}`: {why}" for name, unit, why in refused]
    return "\n".join(lines) + "\n"
