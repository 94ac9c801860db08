"""Measured runs on a LocalCluster, each in a process of its own (see scripts/compare_json.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from ralp_tf.plan.plans import Plan

REPO = Path(__file__).resolve().parents[1]


def compare_in_subprocess(model: str, policies: Sequence[str | Plan], timeout_s: float = 600,
                          **kwargs: Any) -> dict[str, SimpleNamespace]:
    """``ralp_tf.run.training.compare(model, policies=policies, **kwargs)`` run in a fresh process; each
    result's fields (those of ``RunResult``) as attributes."""
    spec = {"model": model, "policies": _policies(policies), "kwargs": kwargs}
    return {name: SimpleNamespace(**r) for name, r in _run_script(spec, timeout_s).items()}


def _policies(policies: Sequence[str | Plan]) -> list[Any]:
    return [p if isinstance(p, str) else p.to_dict() for p in policies]


def _run_script(spec: dict[str, Any], timeout_s: float) -> Any:
    """Run scripts/compare_json.py on ``spec``; its ``RESULTS`` JSON (exit 0 asserted)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "scripts" / "compare_json.py"), json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout_s, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS "):])


def compare_many_in_subprocess(runs: Sequence[tuple[str, Sequence[str | Plan], dict[str, Any]]], workers: int = 2,
                               ps: int = 1, timeout_s: float = 900) -> list[dict[str, SimpleNamespace]]:
    """Each ``(model, policies, train kwargs)`` of ``runs`` trained on one LocalCluster in one fresh
    process, one after the other (as ``compare`` runs its policies): one cluster start and one
    TensorFlow import for them all. Results in the order of ``runs``, as :func:`compare_in_subprocess`'s."""
    spec = {"workers": workers, "ps": ps, "runs": [{"model": model, "policies": _policies(policies), "kwargs": kwargs}
                                                   for model, policies, kwargs in runs]}
    return [{name: SimpleNamespace(**r) for name, r in results.items()} for results in _run_script(spec, timeout_s)]
