"""Binding a real cluster's processes to their addresses: what ``ralp-tf server`` and ``run
--cluster`` need before TensorFlow starts.

* :func:`bind_ip`: the IP a task's spec address means on this machine;
* :func:`check_can_listen`: the port is free and the address is this machine's (errors name
  the address and the fix);
* :func:`bind_env`: the environment that preloads ``ralp_tf/run/_native/bind_address.c``, which
  rewrites TensorFlow's wildcard bind to the chosen address;
* :func:`coordinator_bind_env`: the coordinator's own gRPC server on the chief's address.

The commands themselves are :mod:`ralp_tf.cli.server`.
"""
from __future__ import annotations

import errno
import ipaddress
import os
import socket

from ralp_tf.errors import CommandFailed, ClusterConfigError
from ralp_tf.run.tfconfig import ClusterConfig

__all__ = ["WILDCARDS", "bind_ip", "check_can_listen", "bind_env", "coordinator_bind_env"]

#: Listen addresses that mean every interface.
WILDCARDS = ("0.0.0.0", "::")


def bind_ip(address: str) -> str:
    """The IP to listen on for ``address`` (a host name is resolved); ClusterConfigError if it cannot be."""
    from ralp_tf.run.remote import resolve_host, split_address

    host = split_address(address)[0] if address.count(":") == 1 or address.startswith("[") else address
    return resolve_host(host)


def check_can_listen(ip: str, port: int, what: str) -> None:
    """Bind ``ip:port`` once (then let go): CommandFailed when the port is taken,
    ClusterConfigError when ``ip`` is not an address of this machine."""
    family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as gRPC binds: connections of an earlier task (or ring worker) in TIME_WAIT do not take the port;
        # a process listening on it still does
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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

    from ralp_tf.run.launch import build_native

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
    from ralp_tf.run.remote import split_address

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
