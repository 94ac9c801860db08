"""Entry point of one LocalCluster task process: ``python -m ralp_tf._task --cluster JSON --job J --index I``.

Dies with its parent (PR_SET_PDEATHSIG), prints ``RALP_TF_TASK_READY`` once its server listens,
then serves until killed.
"""
from __future__ import annotations

import argparse
import json

from ralp_tf._procutil import die_with_parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--inter-op-threads", type=int, default=0)
    args = parser.parse_args()
    die_with_parent(args.parent_pid)
    import tensorflow as tf

    config = None
    if args.inter_op_threads:
        config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=args.inter_op_threads)
    server = tf.distribute.Server(tf.train.ClusterSpec(json.loads(args.cluster)), job_name=args.job,
                                  task_index=args.index, protocol="grpc", config=config, start=True)
    print(f"RALP_TF_TASK_READY {args.job}:{args.index} {server.target}", flush=True)
    server.join()


if __name__ == "__main__":
    main()
