"""A rerun with nothing left to do: ``ralp-tf run --checkpoint-dir D --steps N`` when D's checkpoint
is already at the run's last step, or beyond.

A run's step counter (what a checkpoint holds) counts its warm-up too: the last step is
:func:`~ralp_tf.run.training.warmup_steps_for` ``(--warmup-steps, workers) + --steps``. When every
policy's checkpoint (``D``, or ``D/<policy>`` with ``--compare``) is there already, ``ralp-tf run``
says so and exits 0 without starting a local cluster or connecting to ``--cluster``'s
(:func:`finished_runs`, :func:`report_finished`): the text output prints, per policy,
``<policy>: already at step N of N; nothing to do (...)``; ``--json`` prints
``{<policy> | "baseline": {"nothing_to_do": true, "message": ..., "total_steps": N,
"resumed_from_step": N, "steps": 0, "losses": [], "final_loss": null, "bytes_per_step": null,
"checkpoint_dir": ...}}``. A ``--compare`` rerun where only one policy is done trains the other;
the done one's entry then says ``"nothing_to_do": true`` (:func:`nothing_was_left`).
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Sequence

__all__ = ["policy_name", "checkpoint_dirs", "last_step", "finished_message", "finished_runs", "report_finished",
           "nothing_was_left"]


def policy_name(policy: Any) -> str:
    """The name a run's results are keyed by (as :func:`ralp_tf.run.training.compare` names them)."""
    return str(policy if isinstance(policy, str) else getattr(policy, "policy", type(policy).__name__))


def checkpoint_dirs(checkpoint_dir: str, policies: Sequence[Any]) -> dict[str, str]:
    """``{policy name: its checkpoint folder}``: ``checkpoint_dir`` for one policy, else
    ``checkpoint_dir/<policy>`` each (as the training loops of ``run`` and ``run --cluster`` put them)."""
    names = [policy_name(p) for p in policies]
    return {n: (os.path.join(checkpoint_dir, n) if len(names) > 1 else checkpoint_dir) for n in names}


def last_step(args: argparse.Namespace) -> int:
    """The step counter at the end of ``run``'s arguments' run: warm-up plus ``--steps``."""
    from ralp_tf.run.training import warmup_steps_for

    return warmup_steps_for(args.warmup_steps, args.workers) + args.steps


def finished_message(step: int, total: int, warmup: int, checkpoint_dir: str) -> str:
    """``already at step N of N; nothing to do (...)``: the one line of a policy with nothing left."""
    where = f"step {step} of {total}" if step == total else f"step {step}, past the last step {total}"
    counted = f"{warmup} warm-up + {total - warmup} steps, " if warmup else ""
    return (f"already at {where}; nothing to do ({counted}checkpoint in {checkpoint_dir}; pass a larger --steps "
            "to train on, or another --checkpoint-dir to start afresh)")


def finished_runs(args: argparse.Namespace, policies: Sequence[Any]) -> dict[str, dict[str, Any]] | None:
    """When ``--checkpoint-dir`` holds, for every policy, a checkpoint at or past :func:`last_step`:
    ``{result key: entry}`` (the module docstring's JSON entries; the key is ``baseline`` for stock
    PS, as ``run --json`` keys it); else None (something to train). Reads the checkpoints' step
    counters only (:func:`ralp_tf.faults.coordinator.checkpoint_step`); ``args.workers`` must be the
    cluster's."""
    if not getattr(args, "checkpoint_dir", None):
        return None
    from ralp_tf.faults.coordinator import checkpoint_step

    total = last_step(args)
    warmup = total - args.steps
    entries = {}
    for name, folder in checkpoint_dirs(args.checkpoint_dir, policies).items():
        step = checkpoint_step(folder)
        if step < total:
            return None
        entries["baseline" if name == "ps" else name] = {
            "nothing_to_do": True, "message": finished_message(step, total, warmup, folder), "total_steps": step,
            "resumed_from_step": step, "steps": 0, "losses": [], "final_loss": None, "bytes_per_step": None,
            "checkpoint_dir": folder}
    return entries


def report_finished(args: argparse.Namespace, entries: dict[str, dict[str, Any]]) -> int:
    """Print :func:`finished_runs`' entries (``--json``: one object; else a line per policy) and
    return exit code 0."""
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        for key, entry in entries.items():
            print(f"{key}: {entry['message']}")
    return 0


def nothing_was_left(result: Any) -> bool:
    """Whether a :class:`~ralp_tf.run.training.RunResult` resumed at or past its last step and so
    ran no step (its ``final_loss`` is NaN: there is no loss to report)."""
    resumed = result.resumed_from_step
    return resumed is not None and not result.losses and resumed >= result.total_steps
