"""``ralp-tf server`` and ``ralp-tf agent``: what a user runs on each machine of a real cluster.

``ralp-tf server`` starts this host's task (a worker or PS) from ``TF_CONFIG``, or from
``--cluster-spec FILE --task worker:0`` (a ``TF_CONFIG``-style file or a bare cluster spec; see
:mod:`ralp_tf.tfconfig`), and serves until stopped. Contract:

* it prints the unauthenticated-server warning, then listens on the host of this task's address
  in the spec (resolved to an IP), or on ``--bind ADDRESS`` (``0.0.0.0``: every interface, e.g.
  in a container whose service name resolves to another address). TensorFlow always binds the
  wildcard address; the task runs with ``ralp_tf/_native/bind_address.c`` preloaded, which
  rewrites that bind to the chosen address;
* before TensorFlow starts it checks that the port is free and the address is this machine's
  (errors name the address and the fix), and that the task is a worker or PS task of the spec;
* the process then *becomes* the task (``exec`` of ``python -m ralp_tf._task``, the entry point
  LocalCluster's tasks use), so a supervisor's SIGTERM reaches it directly: SIGTERM or Ctrl-C end
  it with exit 0.

``ralp-tf agent`` serves this host's byte counters to ``ralp-tf run --cluster ... --agent-port``
(:func:`ralp_tf.remote.serve_agent`); one per host that runs a worker or PS task.
"""
from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import socket
import sys
from typing import Any

from ralp_tf.cliargs import CommandFailed, non_negative_int
from ralp_tf.errors import ClusterConfigError
from ralp_tf.tfconfig import ClusterConfig, load_cluster_config

WILDCARDS = ("0.0.0.0", "::")


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
    s.set_defaults(func=cmd_server)
    a = subparsers.add_parser("agent", help="serve this host's worker<->PS byte counters to `ralp-tf run --cluster "
                                            "--agent-port`")
    add_cluster_file_args(a)
    from ralp_tf.remote import AGENT_PORT

    a.add_argument("--port", type=non_negative_int, default=AGENT_PORT, help=f"port (default {AGENT_PORT})")
    a.add_argument("--bind", metavar="ADDRESS", help="listen address (default: this host's address in the spec)")
    a.set_defaults(func=cmd_agent)


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


def bind_ip(address: str) -> str:
    """The IP to listen on for ``address`` (a host name is resolved); ClusterConfigError if it cannot be."""
    from ralp_tf.remote import resolve_host, split_address

    host = split_address(address)[0] if address.count(":") == 1 or address.startswith("[") else address
    return resolve_host(host)


def check_can_listen(ip: str, port: int, what: str) -> None:
    """Bind ``ip:port`` once (then let go): CommandFailed when the port is taken,
    ClusterConfigError when ``ip`` is not an address of this machine."""
    family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandFailed(f"{what}: port {port} on {ip} is already in use by another process; stop it, or "
                                    "give this task another port in the cluster spec") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ClusterConfigError(f"{what}: {ip} is not an address of this machine; run this on the host the "
                                         "spec names, or pass --bind with this machine's address (0.0.0.0: every "
                                         "interface)") from None
            raise CommandFailed(f"{what}: cannot listen on {ip}:{port} ({exc.strerror})") from None


def bind_env(ip: str) -> dict[str, str]:
    """This process's environment with ``_native/bind_address.c`` preloaded, rewriting TensorFlow's
    wildcard binds to ``ip`` (the shim is built with ``cc`` when missing)."""
    from pathlib import Path

    from ralp_tf.launch import build_native

    native = Path(__file__).resolve().parent / "_native"
    shim = build_native(native / "bind_address.c", native / "libbind_address.so", "the bind-address shim",
                        "pass --bind 0.0.0.0 to listen on every interface")
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(shim)
    env["RALP_TF_BIND_ADDRESS"] = ip
    return env


def coordinator_bind_env(config: ClusterConfig) -> dict[str, str] | None:
    """For ``run --cluster``: the environment that makes the coordinator's own gRPC server listen
    on the chief's address of the spec (:func:`bind_env`), or None (listen where TensorFlow puts it,
    every interface) when the spec names no chief or this machine cannot listen there (a warning
    says why)."""
    import logging

    from ralp_tf.errors import RalpError
    from ralp_tf.remote import split_address

    chief = config.spec.get("chief")
    if not chief:
        return None
    try:
        ip = bind_ip(chief[0])
        check_can_listen(ip, split_address(chief[0])[1], "the chief (this coordinator)")
        return bind_env(ip)
    except RalpError as exc:
        logging.getLogger(__name__).warning("%s; the coordinator's gRPC server listens on every interface", exc)
        return None


def cmd_server(args: argparse.Namespace) -> int:
    """Check the task and its address, warn, then exec the task process (see the module docstring)."""
    from ralp_tf.launch import UNAUTHENTICATED_WARNING
    from ralp_tf.remote import split_address

    config, job, index = _this_task(args, ("worker", "ps"))
    address = config.address(job, index)
    port = split_address(address)[1]
    ip = bind_ip(args.bind) if args.bind else bind_ip(address)
    if not ipaddress.ip_address(ip).is_loopback:
        print("ralp-tf server: warning: " + UNAUTHENTICATED_WARNING.format(addr=f"{ip}:{port}"), file=sys.stderr)
    check_can_listen(ip, port, f"task {job}:{index}")
    env = bind_env(ip) if ip not in WILDCARDS else dict(os.environ)
    env.pop("TF_CONFIG", None)  # the task gets the spec on its command line
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    print(f"ralp-tf server: task {job}:{index} of {config.source} listening on {ip}:{port} "
          f"(spec address {address}); stop it with SIGTERM or Ctrl-C", file=sys.stderr, flush=True)
    sys.stdout.flush()
    argv = [sys.executable, "-m", "ralp_tf._task", "--cluster", json.dumps(config.spec), "--job", job,
            "--index", str(index), "--standalone"]
    os.execve(sys.executable, argv, env)
    return 0  # not reached


def cmd_agent(args: argparse.Namespace) -> int:
    """Serve this host's byte counters until stopped (SIGTERM / Ctrl-C: exit 0)."""
    import signal

    from ralp_tf.cluster import address_host
    from ralp_tf.remote import serve_agent

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
