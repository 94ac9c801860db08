"""A tiny iperf: one TCP stream, bounded in bytes and time, to check a testbed's links.

Command line (run inside namespaces by :func:`measure`)::

    python -m ralp_tf.testbed.netperf server --port 5201 [--timeout 30]
    python -m ralp_tf.testbed.netperf client --host 10.231.0.2 --port 5201 --bytes 20000000 [--seconds 10]

Each side prints one JSON line. The server reports the payload it received, the wall-clock times
of its first and last byte (``first_t``/``last_t``) and the time between them (``mbit_s`` is payload goodput, so about 4-5% below the link rate because
of TCP/IP/Ethernet headers).
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from typing import Any, Sequence

__all__ = ["CHUNK", "serve", "send", "measure", "measure_concurrent", "main"]

CHUNK = 1 << 16


def serve(port: int, timeout: float, host: str = "0.0.0.0") -> dict[str, Any]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(1)
        print(json.dumps({"listening": port}), flush=True)
        srv.settimeout(timeout)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(timeout)
            total, first, last = 0, None, None
            while True:
                data = conn.recv(CHUNK)
                if not data:
                    break
                now = time.monotonic()
                if first is None:
                    first = now
                total += len(data)
                last = now
    secs = (last - first) if first is not None and last is not None else 0.0
    now_wall, now_mono = time.time(), time.monotonic()
    first_t, last_t = ((now_wall - (now_mono - t)) if t is not None else None for t in (first, last))
    return {"bytes": total, "seconds": secs, "mbit_s": (total * 8 / secs / 1e6) if secs > 0 else None,
            "first_t": first_t, "last_t": last_t}


def send(host: str, port: int, nbytes: int, seconds: float, connect_timeout: float = 10.0) -> dict[str, Any]:
    payload = b"\0" * CHUNK
    deadline = time.monotonic() + connect_timeout
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
            break
        except (ConnectionRefusedError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        sent, start = 0, time.monotonic()
        stop = start + seconds
        while sent < nbytes and time.monotonic() < stop:
            sent += sock.send(payload[: min(CHUNK, nbytes - sent)])
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # wait for the server to close: everything was delivered
    secs = time.monotonic() - start
    return {"bytes": sent, "seconds": secs, "mbit_s": sent * 8 / secs / 1e6 if secs > 0 else None}


def measure(tb: Any, src: str, dst: str, nbytes: int = 20_000_000, seconds: float = 10.0,
            port: int = 5201) -> dict[str, Any]:
    """Send up to ``nbytes`` (or for at most ``seconds``) from task ``src`` to task ``dst`` of testbed
    ``tb``; returns the server's figures plus ``client`` and ``link`` (:func:`bytes_delta` of
    ``tb.link_bytes()`` over the transfer, keyed by host, or None where the testbed cannot count)."""
    both = measure_concurrent(tb, [(src, dst)], nbytes, seconds, port)
    return {**both["streams"][0], "link": both["link"]}


def measure_concurrent(tb: Any, pairs: Sequence[tuple[str, str]], nbytes: int = 20_000_000, seconds: float = 10.0,
                       port: int = 5201) -> dict[str, Any]:
    """One stream per ``(src, dst)`` task pair, all at once (stream *i*'s server on ``port + i``):
    ``{"streams": [server figures + "client", ...], "link": per-host bytes_delta or None,
    "seconds": first byte to last byte over all streams, "mbit_s": total payload goodput}``. Two
    tasks of one host sending at once share that host's capped link."""
    from ralp_tf.testbed.base import TestbedError, bytes_delta

    ports = [port + i if tb.emulated else tb.free_port() for i in range(len(pairs))]
    before = tb.link_bytes() if tb.emulated else None
    servers = []
    try:
        for (src, dst), p in zip(pairs, ports):
            server = tb.popen(dst, [sys.executable, "-m", "ralp_tf.testbed.netperf", "server", "--port", str(p),
                                    "--timeout", str(seconds + 20)], stdout=-1, stderr=-1, text=True)
            servers.append(server)
            line = server.stdout.readline()
            if not line.startswith("{"):
                raise TestbedError(f"netperf server on {dst} failed: {line}{server.stderr.read()[-1000:]}")
        clients = [tb.popen(src, [sys.executable, "-m", "ralp_tf.testbed.netperf", "client", "--host", tb.host(dst),
                                  "--port", str(p), "--bytes", str(nbytes), "--seconds", str(seconds)],
                            stdout=-1, stderr=-1, text=True) for (src, dst), p in zip(pairs, ports)]
        streams = []
        for (src, dst), client, server in zip(pairs, clients, servers):
            c_out, c_err = client.communicate(timeout=seconds + 30)
            if client.returncode != 0:
                raise TestbedError(f"netperf client on {src} exited {client.returncode}: {c_err[-1000:]}")
            out, err = server.communicate(timeout=30)
            if server.returncode != 0:
                raise TestbedError(f"netperf server on {dst} exited {server.returncode}: {err[-1000:]}")
            streams.append({**json.loads(out.strip().splitlines()[-1]),
                            "client": json.loads(c_out.strip().splitlines()[-1])})
    finally:
        for server in servers:
            if server.poll() is None:
                server.kill()
                server.wait()
    timed = [st for st in streams if st["first_t"] is not None]
    span = max(st["last_t"] for st in timed) - min(st["first_t"] for st in timed) if timed else 0.0
    total = sum(st["bytes"] for st in streams)
    return {"streams": streams, "link": bytes_delta(tb.link_bytes(), before) if before is not None else None,
            "seconds": span, "mbit_s": total * 8 / span / 1e6 if span > 0 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=5201)
    s.add_argument("--timeout", type=float, default=30.0)
    c = sub.add_parser("client")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=int, default=5201)
    c.add_argument("--bytes", type=int, default=20_000_000)
    c.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args(argv)
    if a.cmd == "server":
        print(json.dumps(serve(a.port, a.timeout)), flush=True)
    else:
        print(json.dumps(send(a.host, a.port, a.bytes, a.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
