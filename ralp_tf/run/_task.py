"""Entry point of one LocalCluster task process: ``python -m ralp_tf.run._task --cluster JSON --job J --index I``.

Dies with its parent (PR_SET_PDEATHSIG; not with ``--standalone``), prints ``RALP_TF_TASK_READY`` once its server listens,
then serves until killed; SIGTERM or SIGINT end it with exit 0 (``ralp-tf server`` runs as this
program). A server that cannot start (its port taken) prints one ``error:`` line and exits 3.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from ralp_tf.run._procutil import die_with_parent

__all__ = ["main"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--inter-op-threads", type=int, default=0)
    parser.add_argument("--standalone", action="store_true",
                        help="outlive the parent (ralp-tf server): no PR_SET_PDEATHSIG")
    args = parser.parse_args()
    if not args.standalone:
        die_with_parent(args.parent_pid)
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # before TF starts threads: all inherit it, sigwait gets them
    import tensorflow as tf

    config = None
    if args.inter_op_threads:
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=args.inter_op_threads)
    try:
        server = tf.distribute.Server(tf.train.ClusterSpec(json.loads(args.cluster)), job_name=args.job,
                                      task_index=args.index, protocol="grpc", config=config, start=True)
    except tf.errors.OpError as exc:
        print(f"error: task {args.job}:{args.index} could not start its gRPC server ({exc.message}): its port is "
              "taken by another process, or the address is not one of this machine's", file=sys.stderr, flush=True)
        sys.exit(3)
    print(f"RALP_TF_TASK_READY {args.job}:{args.index} {server.target}", flush=True)
    signum = signal.sigwait(stop)
    print(f"task {args.job}:{args.index} stopped by {signal.Signals(signum).name}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: TF's server threads would otherwise keep it waiting


if __name__ == "__main__":
    main()
