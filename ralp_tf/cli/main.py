"""The ``ralp-tf`` command: a registry of command modules (one per group of subcommands).

=============================  ===============================================================
module                         commands
=============================  ===============================================================
:mod:`ralp_tf.cli.commands`    ``plan``, ``run`` (profile, plan with a policy, train on a LocalCluster or ``--cluster``)
:mod:`ralp_tf.cli.explain`     ``explain`` (a plan as a picture: layers, bytes per link, step time)
:mod:`ralp_tf.cli.server`      ``server``, ``agent`` (a task of a real cluster from TF_CONFIG; its host's byte counts)
:mod:`ralp_tf.cli.manifest`    ``manifest`` (a Kubernetes Job/TFJob manifest for a cluster shape)
:mod:`ralp_tf.cli.schedule`    ``schedule``, ``compare-schedulers``, ``execute-schedule`` (the HeterPS-style solvers)
:mod:`ralp_tf.cli.soak`        ``soak`` (a long placed run, task resources sampled)
:mod:`ralp_tf.cli.bench`       ``bench`` (the emulated-network benchmark; namespaces need root)
:mod:`ralp_tf.cli.floor`       ``floor`` (PSS's fixed cost per closure and per step, measured here)
:mod:`ralp_tf.cli.calibrate`   ``calibrate`` (a cluster's links, serving CPU, floor and per-layer compute, for --calibration)
:mod:`ralp_tf.cli.faults`      ``chaos`` (training while a seeded schedule of faults plays; needs root)
:mod:`ralp_tf.cli.zoo`         ``zoo`` (every tf_keras.applications model and the zoo's shapes, placed and measured)
:mod:`ralp_tf.cli.project`     ``project``, ``provision`` (scale on paper; CPU-only PS hosts to add)
=============================  ===============================================================

Each module exposes ``register(subparsers)``, which adds its subcommands with
``set_defaults(func=handler)`` (and ``needs_loopback_shim=True``, or a predicate of the parsed
arguments, for commands that start a local cluster; or ``reexec_env``, a function of the parsed
arguments returning the environment to restart the command with, or None). The modules are imported plainly: an import error is an import error, never a
missing subcommand. Shared argparse types, the exit-code table and the one error path are in
:mod:`ralp_tf.cli.args` (exit 0 ok, 1 unexpected failure, 2 bad input, 3 could not be done,
130 interrupted).

Only modules of this package name the ``scheduler`` package (:mod:`ralp_tf.cli.schedule`): nothing below the
command line imports it (docs/architecture.md, ``.importlinter``).
"""
from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
from types import ModuleType
from typing import NoReturn, Sequence

# ralp-tf trains tf_keras models: with tf.keras as tf_keras, a model reference written against tf.keras
# is a tf_keras model, and importing TensorFlow skips Keras 3 (1.4 s here). Set before anything imports TF.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from ralp_tf.cli import bench as bench_cli
from ralp_tf.cli import calibrate as calibrate_cli
from ralp_tf.cli import commands, explain, manifest, project, server, soak, zoo
from ralp_tf.cli import faults as faults_cli
from ralp_tf.cli import schedule as scheduler_cli
from ralp_tf.cli import floor as floor_cli
from ralp_tf.cli.args import run_command
from ralp_tf.errors import RalpError

__all__ = ["COMMAND_MODULES", "build_parser", "main", "console_main"]

#: The command modules of ``ralp-tf``, in the order their subcommands are listed.
COMMAND_MODULES: tuple[ModuleType, ...] = (commands, explain, server, manifest, scheduler_cli, soak, bench_cli,
                                           floor_cli, calibrate_cli, faults_cli, project, zoo)

_SHIM_FLAG = "RALP_TF_CLI_REEXEC"


def build_parser() -> argparse.ArgumentParser:
    """The ``ralp-tf`` parser with every subcommand of :data:`COMMAND_MODULES`."""
    parser = argparse.ArgumentParser(prog="ralp-tf", description="Resource-aware layer placement for TF PS training")
    parser.add_argument("-v", "--verbose", action="store_true")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def _reexec_with_loopback_shim(argv: Sequence[str]) -> None:
    """Restart this command with the loopback bind shim preloaded, so the coordinator's own
    gRPC server (ParameterServerStrategy starts one) listens on 127.0.0.1 only."""
    if os.environ.get(_SHIM_FLAG) or os.environ.get("RALP_TF_NO_REEXEC"):
        return
    try:
        from ralp_tf.run.launch import loopback_env

        env = loopback_env()
    except RalpError:
        return
    _restart_with_env(argv, env)


def _restart_with_env(argv: Sequence[str], env: dict[str, str]) -> None:
    """Restart this command with ``env`` (once: not when already restarted, nor under
    ``RALP_TF_NO_REEXEC``)."""
    if os.environ.get(_SHIM_FLAG) or os.environ.get("RALP_TF_NO_REEXEC"):
        return
    env[_SHIM_FLAG] = "1"
    os.execve(sys.executable, [sys.executable, "-m", "ralp_tf.cli.main", *argv], env)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the command through
    :func:`ralp_tf.cli.args.run_command`; return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    needs_shim = getattr(args, "needs_loopback_shim", False)
    if needs_shim(args) if callable(needs_shim) else needs_shim:
        _reexec_with_loopback_shim(argv)
    reexec_env = getattr(args, "reexec_env", None)  # e.g. run --cluster: bind the coordinator to the chief
    env = reexec_env(args) if reexec_env else None
    if env:
        _restart_with_env(argv, env)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return run_command(args.func, args)


def console_main() -> NoReturn:
    """The ``ralp-tf`` program: :func:`main`, with SIGINT/SIGTERM ending it within seconds
    (:func:`ralp_tf.run.launch.exit_promptly_on_signals`) however deep in TensorFlow it is, and
    TensorFlow's start-up noise dropped from stderr unless ``--verbose`` (:mod:`ralp_tf.cli.quiet`)."""
    from ralp_tf.run.launch import exit_promptly_on_signals
    from ralp_tf.cli.quiet import filter_stderr

    if not _verbose(sys.argv[1:]):
        filter_stderr()  # TF's start-up noise (absl banner, cudart stub, cuInit 303) off stderr
    exit_promptly_on_signals()
    _exit_without_teardown(main())


def _exit_without_teardown(code: int) -> NoReturn:
    """Exit with ``code`` after what a normal exit runs (the ``atexit`` handlers: local clusters
    stopped, testbeds removed), but without interpreter teardown. At teardown the garbage collector
    finalises any ClusterCoordinator still alive, and once its tasks are gone (Ctrl-C) its
    ``__del__`` waits forever on its preemption handler's lock, while the watchdog of
    :func:`~ralp_tf.run.launch.exit_promptly_on_signals`, a daemon thread, no longer runs
    (seen: Ctrl-C during ``bench --floor measure`` left the process waiting)."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _verbose(argv: Sequence[str]) -> bool:
    """Whether ``-v``/``--verbose`` comes before the command name."""
    for arg in argv:
        if not arg.startswith("-"):
            return False
        if arg in ("-v", "--verbose"):
            return True
    return False


if __name__ == "__main__":
    sys.exit(console_main())
