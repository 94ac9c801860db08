"""``ralp-tf plan`` and ``ralp-tf run``: the commands of the core (profile, plan, train).

:func:`register` adds both to the ``ralp-tf`` parser (:mod:`ralp_tf.cli.main`). Both take
``--policy NAME`` for any placement policy of :mod:`ralp_tf.place.policies` (``ralp``, ``ps``, a
scheduler solver such as ``rl`` or ``exact``) with repeatable ``--policy-option KEY=VALUE``;
``run`` also takes a plan JSON file.

``plan --json`` prints, for ``ralp``, the analyzer's decision (``Analysis.to_dict()``) plus
``"profile"``; for any other policy ``{"model", "batch_size", "policy", "plan",
"estimate", "baseline", "profile"}`` (the plan, and the cost model's estimate of it and of stock
PSS). ``run --json`` prints ``{"baseline" | <policy>: {bytes_per_step, ..., "plan"}}``. A rerun whose
``--checkpoint-dir`` is already at the last step says so and exits 0 without starting a cluster
(:mod:`ralp_tf.cli.finished`).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ralp_tf.cli.args import (add_cluster_args, add_output_arg, add_policy_args, cluster_rates, fault_spec,
                             non_negative_int, policy_options, positive_int, steps_per_closure)
from ralp_tf.cli.calibrate import add_calibration_arg, cluster_bind_env, planning_inputs, run_calibration
from ralp_tf.model.optimizers import SPARSE_UPDATES
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE, MEASURED_FLOOR
from ralp_tf.run.training import LOOP_OPTIMIZER, OPTIMIZERS

__all__ = ["register", "cmd_plan", "cmd_run"]


def register(subparsers: Any) -> None:
    """Add ``plan`` and ``run`` to an argparse subparsers object."""
    p = subparsers.add_parser("plan", help="profile a model, plan its placement with a policy and print the plan")
    p.add_argument("--model", required=True, help="built-in name or package.module:function (runs that code)")
    add_cluster_args(p)
    add_policy_args(p, plan_files=False)
    add_calibration_arg(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_output_arg(p, "--out", help="also write the plan JSON to this file")
    p.add_argument("--optimizer", choices=tuple(SPARSE_UPDATES), default=LOOP_OPTIMIZER,
                   help="the optimizer the job trains with, whose sparse embedding updates are priced "
                        f"(ralp_tf.model.optimizers; default {LOOP_OPTIMIZER}, what ralp-tf run trains with)")
    _compression_arg(p)
    p.set_defaults(func=cmd_plan)

    r = subparsers.add_parser("run", help="train on a local cluster (stock PS and/or a placement policy) and "
                                          "measure it")
    r.add_argument("--model", default="alexnet_cifar")
    add_cluster_args(r)
    r.add_argument("--steps", type=positive_int, default=30)
    add_policy_args(r)
    r.add_argument("--compare", action="store_true", help="run stock PS and RALP side by side")
    _compression_arg(r)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    add_output_arg(r, "--log-dir", kind="dir", help="where task logs go (default: a temporary folder)")
    add_output_arg(r, "--tensorboard-dir", kind="dir", metavar="DIR",
                   help="write TensorBoard event files here, one folder per run: loss per step, samples/s, bytes "
                        "per step per link when measured, the plan as text (not the task logs: see --log-dir)")
    r.add_argument("--tensorboard-trace", action="store_true",
                   help="with --tensorboard-dir: also record a TF profiler trace of the measured steps (keep "
                        "--steps small)")
    r.add_argument("--warmup-steps", type=non_negative_int, default=3,
                   help="unmeasured steps first (default 3; when not 0, at least one per worker)")
    add_output_arg(r, "--checkpoint-dir", kind="dir",
                   help="save model, optimizer and step here; a rerun resumes from it")
    r.add_argument("--checkpoint-every", type=positive_int, default=10, help="steps between checkpoints")
    r.add_argument("--steps-per-closure", type=steps_per_closure, default=AUTO_STEPS_PER_CLOSURE, metavar="K",
                   help="steps run in each closure the coordinator schedules (a loop inside the step's "
                        "tf.function): its fixed cost per closure is paid once per K steps; losses, checkpoints "
                        "and the measured window stay per step. Default auto: the smallest K whose predicted "
                        "step is within 5%% of the fastest of 1, 2, 4, ..., 64 (docs/costmodel.md, \"The step floor\")")
    r.add_argument("--optimizer", choices=OPTIMIZERS, default=LOOP_OPTIMIZER,
                   help="the loop's SGD: tf_keras.optimizers.SGD (sgd, the default) or "
                        "tf_keras.optimizers.legacy.SGD (legacy-sgd), the same update; the legacy one's sparse "
                        "(embedding) updates touch only the batch's rows")
    r.add_argument("--fuse-transfers", action="store_true",
                   help="each step moves the variables the workers compute with as one pull and one push per PS "
                        "task instead of a message per variable (ralp_tf.place.fusion): for models of many small "
                        "variables; planned and priced so")
    r.add_argument("--check-gradients", action="store_true",
                   help="before training, compare the placed model's first-step loss and gradients with the "
                        "unplaced model's on the same batch (exit 2 naming the variable that differs; a model whose "
                        "eager and traced evaluations already differ is not compared); local runs only")
    r.add_argument("--cluster", metavar="TF_CONFIG|FILE",
                   help="train on a running cluster (tasks started with `ralp-tf server`) from TF_CONFIG or a "
                        "TF_CONFIG-style/bare cluster-spec file, instead of starting a local one; "
                        "--workers/--ps come from it (docs/multihost.md)")
    r.add_argument("--agent-port", type=positive_int, default=None,
                   help="with --cluster: read bytes per step from `ralp-tf agent` on every worker/PS host at "
                        "this port (without it, bytes are reported as unavailable)")
    r.add_argument("--connect-timeout", type=float, default=30.0,
                   help="with --cluster: seconds to wait for every task to answer (default 30)")
    add_calibration_arg(r, default_note="; with --cluster FILE, FILE's <name>.calibration.json is read when it "
                                        "exists (--calibration none: not)")
    from ralp_tf.cli.strategies import add_strategy_args

    add_strategy_args(r)
    r.add_argument("--inject-fault", type=fault_spec, default=None, metavar="JOB:INDEX:STEP",
                   help="testing: kill task JOB:INDEX after scheduling step STEP (e.g. ps:0:17)")
    from ralp_tf.cli.faults import add_run_args

    add_run_args(r)
    r.set_defaults(func=cmd_run, needs_loopback_shim=lambda a: not a.cluster, reexec_env=cluster_bind_env)


def _compression_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compression", default=None, metavar="SETTING",
                   help="compress traffic on the wire: fp16 or bf16 (activations at the cut and weights pulled, "
                        "with their gradients); int8 or topk:<fraction>[:no-feedback] (gradients pushed); "
                        "kind=codec items joined by commas (e.g. weights=fp16,gradients=int8); or auto (the "
                        "analyzer weighs fp16); see ralp_tf.plan.compression")


def cmd_plan(args: argparse.Namespace) -> int:
    """Profile ``--model``, plan it with ``--policy`` on the local cluster of the arguments, print
    the plan (``--json``: one object) and write it to ``--out``."""
    from ralp_tf.place.policies import plan_with_policy
    from ralp_tf.plan.costmodel import estimate
    from ralp_tf.plan.strategies import rank_strategies
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.place.policies import policy_from_spec
    from ralp_tf.place.applier import prepare

    policy = policy_from_spec(args.policy, policy_options(args))
    builder = resolve_model(args.model)
    prof = prepare(builder, args.batch_size, sequence_length=args.sequence_length).profile
    prof, cluster = planning_inputs(args, prof.with_optimizer(args.optimizer))
    cluster = cluster.with_closures(1, cluster.floor or MEASURED_FLOOR)
    plan, analysis = plan_with_policy(policy, prof, cluster, compression=args.compression)
    strategies = rank_strategies(prof, cluster, plan, horovod=True)
    if args.out:
        plan.save(args.out)
    if analysis is not None:
        out = analysis.to_dict()
        report = analysis.report()
    else:
        chosen, baseline = estimate(prof, cluster, plan), estimate(prof, cluster, None)
        out = {"model": prof.model_name, "batch_size": prof.batch_size, "policy": args.policy,
               "plan": plan.to_dict(), "estimate": chosen.to_dict(), "baseline": baseline.to_dict()}
        report = (f"Policy {args.policy}: {len(plan.ps_layers())} layer(s) on the PS; predicted "
                  f"{chosen.step_s * 1e3:.1f} ms and {chosen.bytes_per_step / 1e6:.2f} MB per worker step "
                  f"(stock PS: {baseline.step_s * 1e3:.1f} ms, {baseline.bytes_per_step / 1e6:.2f} MB)")
    out["strategies"] = strategies.to_dict()
    if args.json:
        out["profile"] = prof.to_dict()
        print(json.dumps(out, indent=2))
    else:
        print(prof.summary())
        print()
        print(report)
        print()
        print(strategies.report())
        print("  (ralp-tf run --strategy auto trains with the fastest, checked by a short measured probe)")
        print()
        print(plan.to_json())
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Train ``--model`` on a LocalCluster with ``--policy`` (or stock PS and RALP with
    ``--compare``) and print the measurements (``--json``: one object)."""
    from ralp_tf.cli.faults import run_supervised, supervised_requested
    from ralp_tf.cli.finished import finished_runs, nothing_was_left, report_finished
    from ralp_tf.cli.progress import StepProgress
    from ralp_tf.cli.strategies import check_strategy_args, run_with_strategy
    from ralp_tf.errors import ValidationError
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.place.policies import policy_from_spec
    from ralp_tf.run.training import warmup_steps_for

    resolve_model(args.model)  # a bad --model is refused before any task starts or is reached
    check_strategy_args(args, supervised_requested(args))
    if supervised_requested(args):
        if args.check_gradients:
            raise ValidationError("--check-gradients is not supported by the supervised runs (--restart-failed, "
                                  "--add-worker-at, --fault, --fault-plan, --host-cpu); check the model with a plain "
                                  "`ralp-tf run --check-gradients` first")
        if args.calibration not in (None, "none"):
            raise ValidationError("--calibration is not supported by the supervised runs (--restart-failed, "
                                  "--add-worker-at, --fault, --fault-plan, --host-cpu); drop it there")
        return run_supervised(args)  # --restart-failed, --add-worker-at, --fault: see ralp_tf.faults
    if args.compare:
        policies: list[Any] = ["ps", "ralp"]
    else:
        policies = [policy_from_spec(args.policy, policy_options(args))]
    config = _cluster_config(args) if args.cluster else None  # --workers/--ps are the cluster's
    args.calibrated = run_calibration(args, config)  # refused here, before a cluster starts or is reached
    finished = finished_runs(args, policies if args.strategy == "pss" else [args.strategy])
    if finished is not None:  # every checkpoint at the last step already: no cluster, nothing to train
        return report_finished(args, finished)
    progress = StepProgress("run", warmup_steps_for(args.warmup_steps, args.workers) + args.steps,
                            enabled=None if not args.json else False)
    args.step_callback = progress.update
    decision = None
    try:
        if args.strategy != "pss":
            results, decision = run_with_strategy(args, policies[0], config)
        else:
            results = _run_on_cluster(args, policies, config) if config else _run_local(args, policies)
    finally:
        progress.close()
    if args.tensorboard_dir:
        from ralp_tf.run.summaries import write_run_summaries

        for name, r in results.items():
            if nothing_was_left(r):
                continue
            write_run_summaries(args.tensorboard_dir, r, "baseline" if name == "ps" else name)
    out = {}
    for name, r in results.items():
        key = "baseline" if name == "ps" else name
        entry = {"bytes_per_step": r.bytes_per_step, "predicted_bytes_per_step": r.predicted_bytes_per_step,
                 "steps_per_s": r.steps_per_s, "final_loss": None if nothing_was_left(r) else r.final_loss,
                 "nothing_to_do": nothing_was_left(r),
                 "samples_per_s": r.samples_per_s, "predicted_step_s": r.predicted_step_s,
                 "measured_step_s": r.measured_step_s, "bytes_between": r.bytes_between,
                 "total_steps": r.total_steps, "resumed_from_step": r.resumed_from_step,
                 "restored_weights_checksum": r.restored_weights_checksum,
                 "restored_weights_digest": r.restored_weights_digest,
                 "final_weights_checksum": r.final_weights_checksum, "steps_per_closure": r.steps_per_closure,
                 "optimizer": r.optimizer, "fuse_transfers": r.fuse_transfers,
                 "gradients_checked": r.gradients_checked, "losses": r.losses}
        entry["strategy"] = r.strategy
        if name != "ps" and r.plan is not None:
            entry["plan"] = r.plan.to_dict()
        out[key] = entry
    if decision is not None:
        out["auto"] = decision.to_dict()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_comparison(args, results)
    return 0


def _run_local(args: argparse.Namespace, policies: list[Any]) -> dict[str, Any]:
    """``run``: train on a LocalCluster (:func:`ralp_tf.run.training.compare`)."""
    from ralp_tf.run.training import compare

    return compare(args.model, workers=args.workers, ps=args.ps, steps=args.steps, batch_size=args.batch_size,
                   policies=policies, seed=args.seed, log_dir=args.log_dir, checkpoint_dir=args.checkpoint_dir,
                   checkpoint_every=args.checkpoint_every, warmup_steps=args.warmup_steps, fault=args.inject_fault,
                   compression=args.compression, on_measure=_trace_hook(args), step_callback=args.step_callback,
                   sequence_length=args.sequence_length, steps_per_closure=args.steps_per_closure,
                   optimizer=args.optimizer, check_gradients=args.check_gradients,
                   fuse_transfers=args.fuse_transfers, calibration=args.calibrated, **cluster_rates(args))


def _cluster_config(args: argparse.Namespace) -> Any:
    """``run --cluster``'s cluster (:func:`ralp_tf.run.tfconfig.load_cluster_config` of the file or
    TF_CONFIG), its worker and PS counts set as ``args.workers``/``args.ps``; the options a running
    cluster cannot take are refused first."""
    from ralp_tf.errors import ValidationError
    from ralp_tf.run.tfconfig import load_cluster_config

    if args.inject_fault:
        raise ValidationError("--inject-fault kills local task processes; it cannot be used with --cluster")
    if args.check_gradients:
        raise ValidationError("--check-gradients compares with the unplaced model on this machine before a local "
                              "cluster starts; it cannot be used with --cluster (run it locally first)")
    config = load_cluster_config(None if args.cluster == "TF_CONFIG" else args.cluster)
    args.workers, args.ps = len(config.spec.get("worker", [])), len(config.spec.get("ps", []))
    return config


def _run_on_cluster(args: argparse.Namespace, policies: list[Any], config: Any) -> dict[str, Any]:
    """``run --cluster``: train on the running cluster ``config`` (:func:`_cluster_config`; :mod:`ralp_tf.run.remote`)."""
    from ralp_tf.run.remote import train_on_cluster

    return train_on_cluster(config, args.model, policies=policies, agent_port=args.agent_port,
                            connect_timeout=args.connect_timeout, checkpoint_dir=args.checkpoint_dir,
                            rates=cluster_rates(args), steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                            calibration=args.calibrated,
                            checkpoint_every=args.checkpoint_every, warmup_steps=args.warmup_steps,
                            compression=args.compression, on_measure=_trace_hook(args),
                            step_callback=args.step_callback, sequence_length=args.sequence_length,
                            steps_per_closure=args.steps_per_closure, optimizer=args.optimizer,
                            fuse_transfers=args.fuse_transfers)


def _trace_hook(args: argparse.Namespace) -> Any:
    """``--tensorboard-trace``: a profiler trace of the measured window into ``--tensorboard-dir``."""
    from ralp_tf.errors import ValidationError

    if not getattr(args, "tensorboard_trace", False):
        return None
    if not args.tensorboard_dir:
        raise ValidationError("--tensorboard-trace writes into --tensorboard-dir DIR; pass both")
    from ralp_tf.run.summaries import profiler_hook

    return profiler_hook(args.tensorboard_dir)


def _print_comparison(args: argparse.Namespace, results: dict[str, Any]) -> None:
    from ralp_tf.cli.finished import checkpoint_dirs, finished_message, last_step, nothing_was_left

    names = list(results)
    print(f"{args.model}: {args.workers} worker(s), {args.ps} PS, batch {args.batch_size}/worker, "
          f"{args.steps} measured steps each")
    rows = [("bytes/step (measured)", lambda r: f"{r.bytes_per_step / 1e6:.2f} MB" if r.bytes_per_step is not None
             else "unavailable"),
            ("bytes/step (predicted)", lambda r: f"{r.predicted_bytes_per_step / 1e6:.2f} MB"),
            ("steps/s (measured)", lambda r: f"{r.steps_per_s:.2f}"),
            ("samples/s (measured)", lambda r: f"{r.samples_per_s:.1f}"),
            ("final loss", lambda r: "nothing to do" if nothing_was_left(r) else f"{r.final_loss:.4f}")]
    print(f"{'':<24}" + "".join(f"{n:>16}" for n in names))
    for label, fmt in rows:
        print(f"{label:<24}" + "".join(f"{fmt(results[n]):>16}" for n in names))
    if "ps" in results and "ralp" in results and results["ralp"].bytes_per_step and results["ps"].bytes_per_step:
        a, b = results["ps"], results["ralp"]
        print(f"RALP moves {a.bytes_per_step / b.bytes_per_step:.1f}x fewer bytes per step and runs "
              f"{b.steps_per_s / a.steps_per_s:.2f}x the steps/s of stock PS.")
    for name, r in results.items():
        if nothing_was_left(r):
            total = last_step(args)
            print(f"{name}: " + finished_message(r.total_steps, total, total - args.steps,
                                                 checkpoint_dirs(args.checkpoint_dir, names)[name]))
        elif r.report:
            print(r.report)
    if getattr(args, "cluster", None):
        return
    print("The analyzer plans for the link rate given (--bandwidth, default 1gbit). This run is on loopback, where "
          "the network is not the bottleneck: compare the byte counts here, and use `ralp-tf bench` for "
          "capped links.")
