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
from typing import Any

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
    server_lib, errors, config_pb2 = _tensorflow_server(light=not args.standalone)
    config = None
    if args.inter_op_threads:
        config = config_pb2.ConfigProto(inter_op_parallelism_threads=args.inter_op_threads)
    try:
        server = server_lib.Server(server_lib.ClusterSpec(json.loads(args.cluster)), job_name=args.job,
                                   task_index=args.index, protocol="grpc", config=config, start=True)
    except errors.OpError as exc:
        print(f"error: task {args.job}:{args.index} could not start its gRPC server ({exc.message}): its port is "
              "taken by another process, or the address is not one of this machine's", file=sys.stderr, flush=True)
        sys.exit(3)
    print(f"RALP_TF_TASK_READY {args.job}:{args.index} {server.target}", flush=True)
    signum = signal.sigwait(stop)
    print(f"task {args.job}:{args.index} stopped by {signal.Signals(signum).name}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: TF's server threads would otherwise keep it waiting


def _tensorflow_server(light: bool) -> tuple[Any, Any, Any]:
    """``(server_lib, errors, config_pb2)``. A LocalCluster task (``light``) imports only TensorFlow's
    server library (:func:`ralp_tf.model.keras_compat.server_lib_alone`), so a cluster starts in
    a fraction of the CPU time; ``ralp-tf server`` on a real machine, or any task with
    ``RALP_TF_TASK_FULL_IMPORT=1``, imports all of TensorFlow (with tf.keras as tf_keras: a task builds no
    Keras model, and the import then skips Keras 3)."""
    if light and os.environ.get("RALP_TF_TASK_FULL_IMPORT") != "1":
        from ralp_tf.model.keras_compat import server_lib_alone

        server_lib = server_lib_alone()
    else:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        from tensorflow.python.training import server_lib
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.framework import errors

    return server_lib, errors, config_pb2


if __name__ == "__main__":
    main()
