"""``ralp-tf run --strategy pss|mwms|auto``: which distributed strategy a local run trains with.

* ``pss`` (default): ParameterServerStrategy with ``--policy``'s plan (``--policy ps``: stock PSS), as
  ``ralp-tf run`` always did;
* ``mwms`` (alias ``ring``): MultiWorkerMirroredStrategy's ring all-reduce on ``--workers`` local
  processes (:func:`ralp_tf.run.ring.train_ring`; ``--ps`` is not used);
* ``auto``: the cost model ranks the PSS plan, stock PSS and the ring; a probe of ``--probe-steps``
  measured steps of the top two decides; the job trains with the winner and records it in
  ``--checkpoint-dir`` so a rerun resumes under the same strategy (:mod:`ralp_tf.run.auto`).

With ``--cluster`` both run on the running cluster: the ring on the worker hosts' ``ralp-tf server
--roles`` (:func:`ralp_tf.run.ring.train_ring_on_cluster`, control ports at each task's port +
``--control-port-offset``), ``auto`` ranking and probing there (:func:`ralp_tf.run.auto.train_auto_on_cluster`).
Horovod is ranked, never run: unavailable because it is not installed on this machine, or because
``ralp-tf run`` trains the ring as MultiWorkerMirroredStrategy (:func:`horovod_reason`).

Options only one strategy has are refused with the others (one line naming both).
"""
from __future__ import annotations

import argparse
from typing import Any

from ralp_tf.errors import ValidationError

__all__ = ["STRATEGY_CHOICES", "add_strategy_args", "strategy_arg", "check_strategy_args", "horovod_reason",
           "run_with_strategy"]

STRATEGY_CHOICES = ("pss", "mwms", "auto")
_ALIASES = {"ring": "mwms", "ps": "pss", "allreduce": "mwms"}


def strategy_arg(text: str) -> str:
    """``--strategy``'s value: ``pss``, ``mwms`` (``ring``) or ``auto``; horovod is refused with why."""
    from ralp_tf.run.auto import HOROVOD_IN_RUN

    key = _ALIASES.get(text.strip().lower(), text.strip().lower())
    if key == "horovod":
        raise argparse.ArgumentTypeError(HOROVOD_IN_RUN + "; use --strategy mwms for the ring here")
    if key not in STRATEGY_CHOICES:
        raise argparse.ArgumentTypeError(f"unknown strategy {text!r}; use pss (ParameterServerStrategy with "
                                         "--policy), mwms (the ring; also: ring) or auto")
    return key


def add_strategy_args(parser: argparse.ArgumentParser) -> None:
    from ralp_tf.cli.args import non_negative_int, positive_int
    from ralp_tf.run.auto import PROBE_MAX_STEPS, PROBE_PREDICTED_S, PROBE_STEPS
    from ralp_tf.run.roles import CONTROL_PORT_OFFSET

    parser.add_argument("--strategy", type=strategy_arg, default="pss",
                        help="pss: ParameterServerStrategy with --policy's plan (default); mwms (or ring): "
                             "MultiWorkerMirroredStrategy's ring all-reduce on --workers processes; auto: the cost "
                             "model ranks both (and stock PSS), a short measured probe of the top two decides, the "
                             "job trains with the winner (recorded in --checkpoint-dir for reruns)")
    parser.add_argument("--probe-steps", type=non_negative_int, default=PROBE_STEPS,
                        help=f"with --strategy auto: the fewest measured steps per probed strategy (default "
                             f"{PROBE_STEPS}; more where the cost model predicts the probe under {PROBE_PREDICTED_S:g} s, "
                             f"at most {PROBE_MAX_STEPS}); 0 trusts the cost model's ranking")
    parser.add_argument("--control-port-offset", type=positive_int, default=CONTROL_PORT_OFFSET, metavar="N",
                        help="with --cluster and --strategy mwms or auto: each worker's `ralp-tf server --roles` "
                             f"control port is its task's port + N (default {CONTROL_PORT_OFFSET}, the server's)")


def check_strategy_args(args: argparse.Namespace, supervised: bool) -> None:
    """Refuse the options ``args.strategy`` cannot take (ValidationError, one line)."""
    strategy = getattr(args, "strategy", "pss")
    if strategy == "pss":
        return
    flags = [("--compare", args.compare), ("--check-gradients", args.check_gradients),
             ("--inject-fault", args.inject_fault),
             ("--restart-failed/--add-worker-at/--fault/--fault-plan/--host-cpu", supervised),
             ("--tensorboard-trace", getattr(args, "tensorboard_trace", False))]
    if strategy == "mwms":
        flags += [("--compression", args.compression), ("--fuse-transfers", args.fuse_transfers),
                  ("--policy " + str(args.policy), args.policy not in ("ralp",) or args.policy_options)]
    given = [name for name, value in flags if value]
    if given:
        raise ValidationError(f"--strategy {strategy} cannot be used with {given[0]} (ParameterServerStrategy runs "
                              "only); drop it, or train with --strategy pss")


def horovod_reason() -> str:
    """Why ``ralp-tf run`` does not train with Horovod here: not installed on this machine (the
    chief), or :data:`ralp_tf.run.auto.HOROVOD_IN_RUN`."""
    from ralp_tf.run.auto import HOROVOD_IN_RUN
    from ralp_tf.testbed.horovod_job import horovod_available

    installed, why = horovod_available()
    return HOROVOD_IN_RUN if installed else why


def run_with_strategy(args: argparse.Namespace, policy: Any, config: Any = None) -> tuple[dict[str, Any], Any]:
    """Train with ``args.strategy`` (``mwms`` or ``auto``), locally or on the running cluster ``config``:
    ``({strategy: RunResult}, AutoDecision or None)``."""
    from ralp_tf.cli.args import cluster_rates
    from ralp_tf.run.auto import train_auto

    if config is not None:
        return _run_on_cluster(args, policy, config)

    common = dict(workers=args.workers, steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                  log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                  warmup_steps=args.warmup_steps, sequence_length=args.sequence_length, optimizer=args.optimizer,
                  **cluster_rates(args))
    if args.strategy == "mwms":
        from ralp_tf.run.fit import fit

        fitted = fit(args.model, strategy="mwms", ps=args.ps, on_step=args.step_callback,
                     calibration=args.calibrated, **common)
        return {"mwms": fitted.result}, None

    def announce(decision: Any) -> None:
        if not args.json:
            print(decision.report(), flush=True)

    return train_auto(args.model, ps=args.ps, policy=policy, compression=args.compression,
                      steps_per_closure=args.steps_per_closure, fuse_transfers=args.fuse_transfers,
                      probe_steps=args.probe_steps, step_callback=args.step_callback, on_decision=announce,
                      horovod=horovod_reason(), calibration=args.calibrated, **common)


def _run_on_cluster(args: argparse.Namespace, policy: Any, config: Any) -> tuple[dict[str, Any], Any]:
    """``run --cluster --strategy mwms|auto``: the ring on the role servers, or auto on the cluster."""
    from ralp_tf.cli.args import cluster_rates
    from ralp_tf.run.auto import train_auto_on_cluster
    from ralp_tf.run.ring import train_ring_on_cluster

    common = dict(agent_port=args.agent_port, connect_timeout=args.connect_timeout,
                  control_offset=args.control_port_offset, rates=cluster_rates(args), steps=args.steps,
                  batch_size=args.batch_size, seed=args.seed, checkpoint_dir=args.checkpoint_dir,
                  checkpoint_every=args.checkpoint_every, warmup_steps=args.warmup_steps,
                  sequence_length=args.sequence_length, optimizer=args.optimizer)
    if args.strategy == "mwms":
        on_step = (lambda i: args.step_callback("mwms", i)) if args.step_callback else None
        return {"mwms": train_ring_on_cluster(config, args.model, on_step=on_step, calibration=args.calibrated,
                                              **common)}, None

    def announce(decision: Any) -> None:
        if not args.json:
            print(decision.report(), flush=True)

    return train_auto_on_cluster(config, args.model, policy=policy, compression=args.compression,
                                 steps_per_closure=args.steps_per_closure, fuse_transfers=args.fuse_transfers,
                                 probe_steps=args.probe_steps, horovod=horovod_reason(),
                                 step_callback=args.step_callback, on_decision=announce,
                                 calibration=args.calibrated, **common)
