"""``ralp-tf server`` and ``ralp-tf agent``: what a user runs on each machine of a real cluster.

``ralp-tf server`` starts this host's task (a worker or PS) from ``TF_CONFIG``, or from
``--cluster-spec FILE --task worker:0`` (a ``TF_CONFIG``-style file or a bare cluster spec; see
:mod:`ralp_tf.run.tfconfig`), and serves until stopped. Contract:

* it prints the unauthenticated-server warning, then listens on the host of this task's address
  in the spec (resolved to an IP), or on ``--bind ADDRESS`` (``0.0.0.0``: every interface, e.g.
  in a container whose service name resolves to another address). TensorFlow always binds the
  wildcard address; the task runs with ``ralp_tf/run/_native/bind_address.c`` preloaded, which
  rewrites that bind to the chosen address;
* before TensorFlow starts it checks that the port is free and the address is this machine's
  (errors name the address and the fix), and that the task is a worker or PS task of the spec;
* the process then *becomes* the task (``exec`` of ``python -m ralp_tf.run._task``, the entry point
  LocalCluster's tasks use), so a supervisor's SIGTERM reaches it directly: SIGTERM or Ctrl-C end
  it with exit 0.

``ralp-tf server --roles`` (worker tasks) instead stays a small control process
(:class:`ralp_tf.run.role_server.RoleServer`): the same task as its child, plus a control port (the
task's port + ``--control-port-offset``, default 1000, on the same address; one-line error, exit 3,
when it is taken) where the chief's ``ralp-tf run --cluster --strategy mwms|auto`` has it run a
MultiWorkerMirroredStrategy ring worker in the task's place for one run (:mod:`ralp_tf.run.roles`).
SIGTERM or Ctrl-C still end it with exit 0 and the same ``stopped by`` line.

``ralp-tf agent`` serves this host's byte counters to ``ralp-tf run --cluster ... --agent-port``
(:func:`ralp_tf.run.remote.serve_agent`); one per host that runs a worker or PS task.

The address checks and the bind shim are :mod:`ralp_tf.run.server`.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from typing import Any

from ralp_tf.cli.args import non_negative_int, positive_int
from ralp_tf.errors import ClusterConfigError
from ralp_tf.run.server import WILDCARDS, bind_env, bind_ip, check_can_listen
from ralp_tf.run.tfconfig import ClusterConfig, load_cluster_config

__all__ = ["add_cluster_file_args", "register", "cmd_server", "cmd_agent"]


def add_cluster_file_args(p: argparse.ArgumentParser) -> None:
    """``--cluster-spec FILE`` and ``--task JOB:INDEX`` (default: ``TF_CONFIG``'s)."""
    p.add_argument("--cluster-spec", metavar="FILE",
                   help="TF_CONFIG-style JSON file or a bare cluster spec {job: [host:port, ...]} "
                        "(default: the TF_CONFIG environment variable)")
    p.add_argument("--task", metavar="JOB:INDEX", help="this process's task, e.g. worker:0 or ps:1 (overrides "
                                                      "the file's or TF_CONFIG's task)")


def register(subparsers: Any) -> None:
    """Add ``server`` and ``agent`` to an argparse subparsers object."""
    s = subparsers.add_parser("server", help="start this host's worker or PS task from TF_CONFIG or a cluster file "
                                             "and serve until stopped")
    add_cluster_file_args(s)
    s.add_argument("--bind", metavar="ADDRESS", help="listen on this address instead of the task's address in the "
                                                     "spec (0.0.0.0: every interface)")
    from ralp_tf.run.roles import CONTROL_PORT_OFFSET

    s.add_argument("--roles", action="store_true",
                   help="worker tasks: also listen on a control port where the chief's `ralp-tf run --cluster "
                        "--strategy mwms|auto` has this host run a ring (MultiWorkerMirroredStrategy) worker in the "
                        "task's place for one run (docs/multihost.md)")
    s.add_argument("--control-port-offset", type=positive_int, default=CONTROL_PORT_OFFSET, metavar="N",
                   help=f"with --roles: the control port is the task's port + N (default {CONTROL_PORT_OFFSET}; "
                        "the chief's run takes the same option)")
    s.add_argument("--ring-modules", type=_module_prefixes, default=(), metavar="PKG[,PKG...]",
                   help="with --roles: the ring may build 'module:function' models of modules under these packages "
                        "(default: built-in models only)")
    s.set_defaults(func=cmd_server)
    a = subparsers.add_parser("agent", help="serve this host's worker<->PS byte counters to `ralp-tf run --cluster "
                                            "--agent-port`")
    add_cluster_file_args(a)
    from ralp_tf.run.remote import AGENT_PORT

    a.add_argument("--port", type=non_negative_int, default=AGENT_PORT, help=f"port (default {AGENT_PORT})")
    a.add_argument("--bind", metavar="ADDRESS", help="listen address (default: this host's address in the spec)")
    a.set_defaults(func=cmd_agent)


def _module_prefixes(text: str) -> tuple[str, ...]:
    """``--ring-modules``: comma-separated dotted package names."""
    import re

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", n)]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"--ring-modules takes package names separated by commas (e.g. mypkg,"
                                         f"team.models), got {text!r}")
    return names


def _this_task(args: argparse.Namespace, roles: tuple[str, ...]) -> tuple[ClusterConfig, str, int]:
    config = load_cluster_config(args.cluster_spec, task=args.task)
    if config.task is None:
        raise ClusterConfigError(f"{config.source} names no task for this process; pass --task worker:0 (or ps:0), "
                                 "or set TF_CONFIG's \"task\"")
    job, index = config.task
    if job not in roles:
        raise ClusterConfigError(f"task {job}:{index} does not run a server: the chief is the coordinator (run "
                                 "`ralp-tf run --cluster` there) and ralp-tf has no evaluator; start servers for "
                                 "the worker and ps tasks")
    return config, job, index


def cmd_server(args: argparse.Namespace) -> int:
    """Check the task and its address, warn, then exec the task process (see the module docstring)."""
    from ralp_tf.run.launch import UNAUTHENTICATED_WARNING
    from ralp_tf.run.remote import split_address

    config, job, index = _this_task(args, ("worker", "ps"))
    if args.roles and job != "worker":
        raise ClusterConfigError(f"--roles is for worker tasks (the ring runs on the workers); start task {job}:{index} "
                                 "without it")
    address = config.address(job, index)
    port = split_address(address)[1]
    ip = bind_ip(args.bind) if args.bind else bind_ip(address)
    if not ipaddress.ip_address(ip).is_loopback:
        print("ralp-tf server: warning: " + UNAUTHENTICATED_WARNING.format(addr=f"{ip}:{port}"), file=sys.stderr)
    check_can_listen(ip, port, f"task {job}:{index}")
    env = bind_env(ip) if ip not in WILDCARDS else dict(os.environ)
    env.pop("TF_CONFIG", None)  # the task gets the spec on its command line
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    roles = _role_server(args, config, job, index, ip, env) if args.roles else None
    print(f"ralp-tf server: task {job}:{index} of {config.source} listening on {ip}:{port} "
          f"(spec address {address}); stop it with SIGTERM or Ctrl-C", file=sys.stderr, flush=True)
    sys.stdout.flush()
    if roles is not None:
        return roles.serve()
    argv = [sys.executable, "-m", "ralp_tf.run._task", "--cluster", json.dumps(config.spec), "--job", job,
            "--index", str(index), "--standalone"]
    os.execve(sys.executable, argv, env)
    return 0  # not reached


def _role_server(args: argparse.Namespace, config: ClusterConfig, job: str, index: int, ip: str,
                 env: dict[str, str]) -> Any:
    """``--roles``: the control process (its children get ``env``), its control port bound
    (CommandFailed, exit 3, when taken)."""
    from ralp_tf.run.role_server import RoleServer
    from ralp_tf.run.roles import control_port

    cport = control_port(config.address(job, index), args.control_port_offset)
    server = RoleServer(config, job, index, ip=ip, control_port=cport, task_env=env, ring_modules=args.ring_modules)
    server.listen()
    if not ipaddress.ip_address(ip).is_loopback:
        print(f"ralp-tf server: warning: the control port {ip}:{cport} (--roles) is unauthenticated too: anyone who "
              "reaches it can have this host stop its task and train a ring worker of a built-in model"
              + (f" or of a module under {', '.join(args.ring_modules)}" if args.ring_modules else "")
              + ", writing checkpoints where the request says. Open it only to the cluster's own hosts.",
              file=sys.stderr)
    return server


def cmd_agent(args: argparse.Namespace) -> int:
    """Serve this host's byte counters until stopped (SIGTERM / Ctrl-C: exit 0)."""
    import signal

    from ralp_tf.plan.cluster import address_host
    from ralp_tf.run.remote import serve_agent

    config, job, index = _this_task(args, ("worker", "ps", "chief"))
    address = config.address(job, index)
    ip = bind_ip(args.bind) if args.bind else bind_ip(address)
    if not ipaddress.ip_address(ip).is_loopback:
        print(f"ralp-tf agent: serves read-only byte counters of this host's sockets on {ip}:{args.port} to anyone "
              "who reaches it", file=sys.stderr)
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        serve_agent(config, address_host(address), (ip, args.port),
                    ready=lambda where: print(f"ralp-tf agent: serving byte counts of host {address_host(address)} "
                                              f"on http://{where}/pairs", file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        return 0
    return 0
