"""``python -m ralp_tf.cli.train_job``: one measured training job as the coordinator of a cluster
that is already running (the testbed's PSS runs start it inside a network namespace).

It prints the job's :class:`~ralp_tf.run.training.RunResult` as one JSON object, or, with
``--emit-marks``, the testbed's job protocol lines ``RALP_JOB start|end|result <json>``. Bytes are
not measured here: the caller counts them on the links.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from ralp_tf.cli.args import add_policy_args, flops, non_negative_int, policy_options, positive_int, steps_per_closure
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE
from ralp_tf.run.training import LOOP_OPTIMIZER, OPTIMIZERS

__all__ = ["main", "prepared_with_profile"]


def prepared_with_profile(model: str, path: str, *, batch_size: int, seed: int, optimizer: str,
                          compute_scale: float) -> Any:
    """``model`` prepared (:func:`ralp_tf.run.training.prepare_model`) to plan and predict with the
    profile at ``path`` (a ModelProfile JSON of the same model and batch with measured layer times,
    e.g. the bench's, calibrated under its hosts' CPU budget) times ``compute_scale``, instead of
    layer times measured in this process. Raises ValidationError when it is not that model's."""
    from pathlib import Path

    from ralp_tf.errors import ValidationError
    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.profiles import ModelProfile
    from ralp_tf.run.training import TrainConfig, prepare_model

    try:
        given = ModelProfile.from_json(Path(path).read_text())
    except (OSError, ValueError, KeyError) as exc:
        raise ValidationError(f"--profile {path}: cannot read a model profile ({exc}); pass the JSON that "
                              f"ralp_tf.model.profiler.profile(...).to_json() writes") from None
    prepared = prepare_model(resolve_model(model), TrainConfig(batch_size=batch_size, seed=seed, optimizer=optimizer))
    names, own = [l.name for l in given.layers], [l.name for l in prepared.profile.layers]
    if given.batch_size != batch_size or names != own:
        what = (f"batch {given.batch_size}, not {batch_size}" if given.batch_size != batch_size else
                f"layers {sorted(set(names) ^ set(own))[:5]} differ")
        raise ValidationError(f"--profile {path} is not {model}'s profile at this batch ({what}); profile the "
                              f"same model at --batch-size {batch_size}")
    prepared.profile = given.with_optimizer(optimizer).scaled_compute(compute_scale)
    return prepared


def _parser() -> Any:
    """The job's command line."""
    import argparse

    from ralp_tf.run.remote import CONNECT_TIMEOUT_S

    p = argparse.ArgumentParser(prog="python -m ralp_tf.cli.train_job")
    p.add_argument("--cluster", required=True, help='JSON: {"worker": ["ip:port", ...], "ps": [...]}')
    p.add_argument("--model", default="alexnet_cifar")
    add_policy_args(p)
    p.add_argument("--steps", type=positive_int, default=20)
    p.add_argument("--warmup-steps", type=non_negative_int, default=3)
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--bandwidth", default=None, help="link rate the planner assumes, e.g. 1gbit")
    p.add_argument("--host-cores", type=float, default=None,
                   help="every host's CPU budget in cores, as the testbed enforces it (priced: serving CPU, overlap)")
    p.add_argument("--shared-cores", type=float, default=None,
                   help="the cores of the one machine every host runs on, without budgets (priced: overlap)")
    p.add_argument("--flops", type=flops, default=None, help="FLOP/s per task the planner assumes (one rate or per job)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--measure-compute", action="store_true",
                   help="plan and predict with measured layer times instead of FLOP rates")
    p.add_argument("--compute-scale", type=float, default=1.0,
                   help="multiply measured layer times by this (tasks sharing the cores)")
    p.add_argument("--profile", default=None,
                   help="plan and predict with this profile's measured layer times (ModelProfile JSON of the "
                        "same model and batch, e.g. the bench's) times --compute-scale, not measured here")
    p.add_argument("--calibration", default=None,
                   help="price with this `ralp-tf calibrate` file of these hosts (rates, serving CPU, floor; the "
                        "profile's layer times come with --profile)")
    p.add_argument("--compression", default=None, help="compression setting for the planner, e.g. fp16 "
                                                        "(see ralp_tf.plan.compression)")
    p.add_argument("--steps-per-closure", type=steps_per_closure, default=AUTO_STEPS_PER_CLOSURE,
                   help="steps per scheduled closure (ralp_tf.run.training.train)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=LOOP_OPTIMIZER,
                   help="the loop's SGD (ralp_tf.run.training.OPTIMIZERS)")
    p.add_argument("--fuse-transfers", action="store_true",
                   help="one pull and one push per PS task for the worker's variables (ralp_tf.place.fusion)")
    p.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT_S,
                   help="seconds to wait for every task to accept connections")
    p.add_argument("--emit-marks", action="store_true",
                   help="print 'RALP_JOB start|end|result <json>' lines (the testbed's job protocol)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ralp_tf.cli.train_job --cluster JSON --model NAME --policy NAME|PLAN.json ...``

    Runs one measured job as the coordinator of an already running cluster (e.g. tasks started
    by a testbed inside network namespaces) and prints its RunResult as one JSON object.
    Bytes are not measured here (the caller counts them on the links).
    """
    import json
    import sys

    import tensorflow as tf

    from ralp_tf.errors import RalpError
    from ralp_tf.place.policies import policy_from_spec
    from ralp_tf.plan.cluster import Cluster, Rates
    from ralp_tf.run.remote import wait_reachable
    from ralp_tf.run.training import train
    from ralp_tf.testbed.jobs import emit

    args = _parser().parse_args(argv)

    def mark(kind: str, **data: Any) -> None:
        emit(kind, **data)  # with RALP_JOB_ACK set, returns once the launcher has read its counters

    try:
        spec = json.loads(args.cluster)
        cluster = Cluster.from_dict(spec, **Rates(args.bandwidth or None, args.flops or None).kwargs())
        cluster = cluster.with_host_cores(args.host_cores) if args.host_cores else cluster
        cluster = cluster.with_shared_cores(args.shared_cores) if args.shared_cores else cluster
        if args.calibration:
            import socket

            from ralp_tf.plan.calibration import calibrated_cluster, load_calibration

            cluster = calibrated_cluster(load_calibration(args.calibration), cluster,
                                         tensorflow_version=tf.__version__, machine=socket.gethostname())
        wait_reachable(spec, args.connect_timeout)  # the caller may start this job while its tasks start
        policy = policy_from_spec(args.policy, policy_options(args))
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec(spec), rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        prepared = (prepared_with_profile(args.model, args.profile, batch_size=args.batch_size, seed=args.seed,
                                          optimizer=args.optimizer, compute_scale=args.compute_scale)
                    if args.profile else None)
        result = train(strategy, args.model, policy=policy, steps=args.steps, warmup_steps=args.warmup_steps,
                       batch_size=args.batch_size, seed=args.seed, cluster=cluster,
                       on_measure=mark if args.emit_marks else None, measure_compute=args.measure_compute,
                       compute_scale=args.compute_scale, compression=args.compression,
                       steps_per_closure=args.steps_per_closure, optimizer=args.optimizer,
                       fuse_transfers=args.fuse_transfers, prepared=prepared)
    except (RalpError, json.JSONDecodeError) as exc:
        print(f"ralp_tf.cli.train_job: error: {exc}", file=sys.stderr)
        return 2
    if args.emit_marks:
        mark("result", **result.to_dict())
    else:
        print(json.dumps(result.to_dict()))
    return 0


if __name__ == "__main__":
    # A coordinator process whose result is printed ends here without interpreter teardown:
    # TensorFlow's PSS runtime (coordinator threads, remote contexts) has been seen to crash
    # with SIGSEGV while being torn down, which would turn a finished run into a failed one.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
