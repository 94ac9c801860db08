"""The building blocks every command line of ralp_tf shares: argparse types, argument groups, the
exit-code table and the one error path (:func:`run_command`).

Used by ``ralp-tf`` and each of its command modules (:mod:`ralp_tf.cli.main`, :mod:`ralp_tf.cli.soak`,
:mod:`ralp_tf.cli.bench`, :mod:`ralp_tf.cli.schedule`) and by the testbed's job runners
(``python -m ralp_tf.run.training``). It imports nothing from those, so any of them may import it.

**Exit codes** (:class:`ExitCode`), the same for every command:

====  ====================================================================================
0     success
1     unexpected failure (a bug: the traceback is printed), or ``bench``: some runs failed
2     bad input: a usage error (argparse) or a :class:`~ralp_tf.errors.ValidationError`
3     valid input that could not be carried out: a cluster task failed or became unreachable
      (:class:`~ralp_tf.errors.ClusterRuntimeError`), no schedule meets the constraints
      (:class:`CommandFailed`)
130   interrupted (Ctrl-C); local cluster tasks are stopped
====  ====================================================================================

Errors print one line, ``<prog>: error: <message>``, on stderr. Options that name an output path
are added with :func:`add_output_arg`; :func:`run_command` checks them all before the command runs.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from ralp_tf.errors import ExitCode, RalpError, ValidationError, exit_code_for, parse_json

__all__ = ["ExitCode", "exit_code_for", "run_command", "int_at_least", "positive_int", "non_negative_int",
           "steps_per_closure",
           "bandwidth", "fault_spec", "policy_option", "add_cluster_args", "cluster_rates", "add_policy_args",
           "policy_options", "add_output_arg", "check_outputs"]


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace,
                prog: str = "ralp-tf") -> int:
    """Run one parsed command, the one error path of every ralp_tf command line: return its exit
    code (``None`` means 0); a :class:`~ralp_tf.errors.RalpError` prints ``<prog>: error:
    <message>`` and returns its :func:`exit_code_for` (the output paths of :func:`add_output_arg`
    are checked first, before the command does any work); Ctrl-C prints that the run was interrupted
    and returns 130; any failure after SIGINT/SIGTERM killed the local tasks
    (:func:`ralp_tf.run.launch.stopped_by_signal`) returns 128 + that signal. Any other exception
    propagates (Python prints the traceback, exit 1)."""
    from ralp_tf.run.launch import stopped_by_signal

    try:
        check_outputs(args)
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; local cluster tasks were stopped", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        signum = stopped_by_signal()
        if signum is not None:  # the failure is the signal's doing: its tasks were killed
            print(f"{prog}: stopped by signal {signum}; local cluster tasks were stopped", file=sys.stderr)
            return 128 + signum
        if isinstance(exc, RalpError):
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return int(exit_code_for(exc))
        raise


# ------------------------------------------------------------------------------------------
# argparse types: each turns text into a value or raises ArgumentTypeError (argparse prints
# "<prog> <command>: error: argument --flag: <message>" and exits 2)


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number ``>= low`` ("'x' is not an integer", "must be >= 1, got 0")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = f"int_at_least_{low}"
    return parse


#: An argparse type: a whole number >= 1.
positive_int = int_at_least(1)
#: An argparse type: a whole number >= 0.
non_negative_int = int_at_least(0)


def steps_per_closure(text: str) -> int:
    """An argparse type: ``auto`` (the cost model's choice, :data:`ralp_tf.plan.closures.AUTO_STEPS_PER_CLOSURE`)
    or a whole number >= 1."""
    from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE

    if text.strip().lower() == "auto":
        return AUTO_STEPS_PER_CLOSURE
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; give a step count such as 8, or auto") from None


def bandwidth(text: str) -> float:
    """An argparse type: a link rate (``100mbit``, ``1gbit``, ``uncapped``) in bits/s."""
    from ralp_tf.plan.cluster import parse_bandwidth

    try:
        return parse_bandwidth(text)
    except RalpError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def flops(text: str) -> float | dict[str, float]:
    """An argparse type: FLOP/s, one rate (``5e10``, ``100t``) or per job (``worker=100t,ps=1t``)."""
    from ralp_tf.plan.cluster import parse_flops

    try:
        return parse_flops(text)
    except RalpError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fault_spec(text: str) -> tuple[str, int, int]:
    """An argparse type: ``JOB:INDEX:STEP`` (``worker:1:10``, ``ps:0:17``) -> ``(job, index, step)``."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("worker", "ps") or not parts[1].isdigit() or not parts[2].isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not JOB:INDEX:STEP, e.g. worker:1:10 or ps:0:17")
    return parts[0], int(parts[1]), int(parts[2])


def policy_option(text: str) -> tuple[str, Any]:
    """An argparse type: ``KEY=VALUE`` -> ``(key, value)``; ``VALUE`` is read as a JSON scalar
    when it is one (``30``, ``2.5``, ``true``, ``null``, ``"dp"``), else kept as text (``dp``)."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. train_seconds=30 or method=dp")
    try:
        value = parse_json(raw, ValidationError, f"--policy-option {key}")
    except ValidationError:
        return key, raw
    if isinstance(value, (dict, list)):
        raise argparse.ArgumentTypeError(f"{text!r}: VALUE must be a number, true/false/null or text, not JSON "
                                         f"{type(value).__name__}")
    return key, value


# ------------------------------------------------------------------------------------------
# argument groups


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    """``--workers --ps --bandwidth --flops --batch-size --sequence-length``: the local cluster a command
    plans for, and the batch it is planned at."""
    parser.add_argument("--workers", type=positive_int, default=2, help="worker tasks (default 2)")
    parser.add_argument("--ps", type=non_negative_int, default=1, help="parameter-server tasks (default 1)")
    parser.add_argument("--bandwidth", type=bandwidth, default=None,
                        help="link rate for the cost model, e.g. 100mbit, 1gbit, uncapped (default 1gbit)")
    parser.add_argument("--flops", type=flops, default=None,
                        help="FLOP/s of each task for the cost model: one rate (5e10, 100t) or per job "
                             "(worker=100t,ps=1t: GPU workers, CPU PS tasks)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="batch per worker step (default 32)")
    parser.add_argument("--sequence-length", type=positive_int, default=None,
                        help="length given to model inputs of variable length, e.g. keras.Input(shape=(None,)) "
                             "(default: the input_length its Embedding layers declare)")


def cluster_rates(args: argparse.Namespace) -> dict[str, Any]:
    """The ``bandwidth``/``flops`` keyword arguments of :meth:`ralp_tf.plan.cluster.Cluster.local` given
    on the command line (absent ones left out, so the defaults apply)."""
    from ralp_tf.plan.cluster import Rates

    return Rates(getattr(args, "bandwidth", None), getattr(args, "flops", None)).kwargs()


def add_policy_args(parser: argparse.ArgumentParser, *, default: str = "ralp", plan_files: bool = True) -> None:
    """``--policy NAME`` (any name of :mod:`ralp_tf.place.policies`, or with ``plan_files`` a plan JSON
    file) and the repeatable ``--policy-option KEY=VALUE`` passed to the policy's constructor;
    :func:`policy_options` collects them."""
    parser.add_argument("--policy", default=default,
                        help="placement policy: ralp, ps (also none, stock), a scheduler solver (rl, exact, "
                             "greedy, random, bo, scheduler.ralp)" + (", or a plan JSON file" if plan_files else "")
                             + f" (default {default})")
    parser.add_argument("--policy-option", dest="policy_options", type=policy_option, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="option of the policy's constructor, e.g. train_seconds=30 or seed=1 (repeatable); "
                             "an option the policy does not take is refused with the ones it takes")


def policy_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--policy-option`` pairs as a dict (the last one of a key wins)."""
    return dict(getattr(args, "policy_options", None) or [])


# ------------------------------------------------------------------------------------------
# output paths: checked by run_command before the command starts

#: The parsed arguments' attribute listing the output options of the command (``add_output_arg``).
_OUTPUTS = "output_options"


def add_output_arg(parser: argparse.ArgumentParser | Any, *flags: str, kind: str = "file", parents: bool = False,
                   **kwargs: Any) -> argparse.Action:
    """``parser.add_argument(*flags, **kwargs)`` for an option that names an output path, which
    :func:`run_command` checks before the command runs (:func:`check_outputs`). ``kind`` is
    ``"file"`` (its folder must exist, unless ``parents``: the command creates it) or ``"dir"`` (a
    folder the command writes in, created with its parents if missing). ``parser`` may be an
    argument group."""
    if kind not in ("file", "dir"):
        raise ValueError(f"kind must be 'file' or 'dir', got {kind!r}")
    action = parser.add_argument(*flags, **kwargs)
    known = tuple(parser.get_default(_OUTPUTS) or ())
    parser.set_defaults(**{_OUTPUTS: known + ((action.option_strings[0], action.dest, kind, parents),)})
    return action


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output path the command was given or defaults to (:func:`add_output_arg`) with
    :func:`ralp_tf.errors.writable_file` / :func:`~ralp_tf.errors.writable_dir`: a missing or
    unwritable folder, a folder where a file is expected or a file where a folder is, raises
    ValidationError naming the option, the path, why and the fix (exit 2). Creates nothing."""
    from ralp_tf.errors import writable_dir, writable_file

    for flag, dest, kind, parents in getattr(args, _OUTPUTS, None) or ():
        value = getattr(args, dest, None)
        for path in value if isinstance(value, list) else [value]:
            if path is None:
                continue
            if kind == "dir":
                writable_dir(path, flag)
            else:
                writable_file(path, flag, parents=parents)
