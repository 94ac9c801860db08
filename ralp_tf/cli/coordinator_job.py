"""``python -m ralp_tf.cli.coordinator_job``: the coordinator process of a supervised run.

It trains with a checkpoint directory against a running cluster and reports progress in the
testbed's job protocol; the protocol and the progress reader are :mod:`ralp_tf.faults.coordinator`,
the supervisor that starts it is :mod:`ralp_tf.faults.supervisor`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Sequence

from ralp_tf.cli.args import add_policy_args, policy_options, positive_int, steps_per_closure
from ralp_tf.plan.closures import AUTO_STEPS_PER_CLOSURE

__all__ = ["main"]

def main(argv: Sequence[str] | None = None) -> int:
    import tensorflow as tf

    from ralp_tf.faults.coordinator import ProgressCoordinator, StopRequested, checkpoint_step, emit
    from ralp_tf.plan.cluster import Cluster
    from ralp_tf.errors import ClusterRuntimeError, RalpError
    from ralp_tf.place.policies import policy_from_spec
    from ralp_tf.run.training import LOOP_OPTIMIZER, OPTIMIZERS, train

    p = argparse.ArgumentParser(prog="python -m ralp_tf.cli.coordinator_job")
    p.add_argument("--cluster", required=True, help='JSON: {"worker": ["ip:port", ...], "ps": [...]}')
    p.add_argument("--model", default="alexnet_cifar")
    add_policy_args(p)
    p.add_argument("--steps", type=positive_int, required=True, help="train until this step (all runs together)")
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--bandwidth", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--checkpoint-every", type=positive_int, default=10)
    p.add_argument("--stop-file", default=None)
    p.add_argument("--compression", default=None)
    p.add_argument("--steps-per-closure", type=steps_per_closure, default=AUTO_STEPS_PER_CLOSURE)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=LOOP_OPTIMIZER)
    p.add_argument("--start-file", default=None, help="after the imports, wait until this file exists")
    args = p.parse_args(argv)
    if args.start_file:
        emit("waiting", t=time.time())
        while not os.path.exists(args.start_file):
            time.sleep(0.05)
    start = checkpoint_step(args.checkpoint_dir)
    emit("resumed", step=start)
    try:
        spec = json.loads(args.cluster)
        cluster = Cluster.from_dict(spec, **({"bandwidth": args.bandwidth} if args.bandwidth else {}))
        policy = policy_from_spec(args.policy, policy_options(args))
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec(spec), rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        real = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        coord = ProgressCoordinator(real, lambda done, loss: emit("progress", done=done, t=time.time(), loss=loss),
                                    offset=start, stop_file=args.stop_file)
        try:
            result = train(strategy, args.model, policy=policy, steps=args.steps, warmup_steps=0,
                           batch_size=args.batch_size, seed=args.seed, cluster=cluster, coordinator=coord,
                           checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                           compression=args.compression, steps_per_closure=args.steps_per_closure,
                           optimizer=args.optimizer)
        except StopRequested:
            emit("stopped", done=coord.done)
            return 0
        finally:
            coord.close()
    except ClusterRuntimeError as exc:
        if exc.__context__ is not None:  # TF's own message (train() shortens it to its first line)
            print(f"cause: {type(exc.__context__).__name__}: {str(exc.__context__)[:3000]}", file=sys.stderr)
        emit("failed", error=str(exc))
        return 3
    except (RalpError, json.JSONDecodeError) as exc:
        print(f"ralp_tf.cli.coordinator_job: error: {exc}", file=sys.stderr)
        return 2
    emit("result", **result.to_dict())
    return 0


def _flushed(code: int) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    os._exit(_flushed(main()))  # no interpreter teardown, as ralp_tf.cli.train_job's __main__ explains
