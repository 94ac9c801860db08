"""Training on a cluster that is already running (``ralp-tf run --cluster``), and its byte counts.

**Coordinator side.** :func:`train_on_cluster` connects a ``ParameterServerStrategy`` to the
worker and PS tasks of a :class:`~ralp_tf.run.tfconfig.ClusterConfig` (the chief's address, when the
spec has one, is where this process's own gRPC server listens), first waiting up to
``connect_timeout`` s for every task to accept TCP connections and naming the tasks that did not
(:func:`wait_reachable`). It then runs :func:`ralp_tf.run.training.train` once per policy with the same
coordinator, so steps/s, samples/s, loss, checkpoints and resume are exactly those of a
LocalCluster run.

**Bytes per step** cannot be seen from the coordinator (worker<->PS traffic never passes through
it). They come from a small per-host agent, ``ralp-tf agent`` (:func:`serve_agent`), when the user
runs one on every host that holds a worker or PS task; without ``agent_port`` they are reported
as unavailable (``bytes_per_step: null``). The agent reads the kernel's per-socket counters the way
:mod:`ralp_tf.run.traffic` does on one machine: a connection between tasks A and B is counted once,
from the end that opened it (owner A, peer = B's listening address), ``bytes_acked`` as A -> B and
``bytes_received`` as B -> A; only sockets owned by a process listening on a port of one of this
host's tasks, and connecting to a task's address, are counted. :class:`AgentMeter` sums the agents'
cumulative counters at the start and end of the measured window, so a remote run's bytes per step
equal a LocalCluster run's of the same plan (TCP payload, gRPC framing included, headers not).

The agent answers ``GET /pairs`` with ``{"host": H, "tasks": [...], "pairs": {"worker0->ps0": n,
...}}`` and ``GET /cpu`` with ``{"host": H, "tasks": [...], "cpu_s": {"worker:0": s, ...}}`` (each
task's CPU seconds so far, for ``ralp-tf calibrate``'s serving CPU): read-only counters, no
commands. It listens on its host's address from the spec.
"""
from __future__ import annotations

import http.server
import ipaddress
import json
import logging
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.plan.cluster import Cluster
from ralp_tf.errors import ClusterConfigError, ClusterRuntimeError
from ralp_tf.run.tfconfig import ClusterConfig
from ralp_tf.run.traffic import _PID, TrafficMeter, read_sockets, split_address

__all__ = ["AGENT_PORT", "CONNECT_TIMEOUT_S", "task_name", "resolve_host", "listening_ports", "host_pairs", "host_cpu",
           "serve_agent", "AgentMeter", "wait_reachable", "coordinator_strategy", "train_on_cluster"]

log = logging.getLogger(__name__)
#: Default port of ``ralp-tf agent`` on every host.
AGENT_PORT = 2230
#: Seconds ``run --cluster`` waits for every task to accept connections.
CONNECT_TIMEOUT_S = 30.0
_SS_LINE = re.compile(r"^\S*\s*\d+\s+\d+\s+(?P<local>\S+)\s+(?P<peer>\S+)")


def task_name(job: str, index: int) -> str:
    """``worker0``, ``ps1``: the names :mod:`ralp_tf.run.traffic` keys bytes by."""
    return f"{job}{index}"


def resolve_host(host: str) -> str:
    """The IP address ``host`` resolves to (itself when it is one); ClusterConfigError otherwise."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, IndexError) as exc:
        raise ClusterConfigError(f"cannot resolve host {host!r} ({exc}); fix the cluster spec or the name "
                                 "service") from None


def _ss(args: list[str]) -> str:
    if shutil.which("ss") is None:
        raise ClusterRuntimeError("the byte-count agent needs `ss` (apt-get install iproute2)")
    return subprocess.run(["ss", *args], capture_output=True, text=True, check=True).stdout


def listening_ports() -> dict[int, set[int]]:
    """``{pid: {port, ...}}``: the TCP ports each process listens on (``ss -tlnpH``)."""
    out: dict[int, set[int]] = {}
    for line in _ss(["-tlnpH"]).splitlines():
        m, pids = _SS_LINE.match(line), _PID.findall(line)
        if m:
            for pid in pids:
                out.setdefault(int(pid), set()).add(split_address(m.group("local"))[1])
    return out


def host_pairs(config: ClusterConfig, host: str) -> dict[str, int]:
    """Cumulative bytes ``{"worker0->ps0": n}`` of the sockets of host ``host``'s tasks (see the
    module docstring), read on that host."""
    cluster = Cluster.from_dict(config.spec)
    local = {t.address: t for t in cluster.tasks if t.host == host}
    if not local:
        raise ClusterConfigError(f"no task of {config.source} runs on host {host!r}; hosts: "
                                 f"{', '.join(sorted({t.host for t in cluster.tasks}))}")
    by_peer = {(resolve_host(split_address(t.address)[0]), split_address(t.address)[1]): t for t in cluster.tasks}
    owner_of = {}
    for pid, ports in listening_ports().items():
        for t in local.values():
            if split_address(t.address)[1] in ports:
                owner_of[pid] = t
    pairs: dict[str, int] = {}
    for sock in read_sockets():
        a, b = owner_of.get(sock.pid), by_peer.get((sock.peer_host, sock.peer_port))
        if a is None or b is None or a is b:
            continue
        ab, ba = f"{task_name(a.job, a.index)}->{task_name(b.job, b.index)}", \
            f"{task_name(b.job, b.index)}->{task_name(a.job, a.index)}"
        pairs[ab] = pairs.get(ab, 0) + sock.sent
        pairs[ba] = pairs.get(ba, 0) + sock.received
    return pairs


def host_cpu(config: ClusterConfig, host: str) -> dict[str, float]:
    """CPU seconds so far (user + system, every thread) of each task of host ``host``, by task key
    (``"worker:0"``): the processes listening on its port, read on that host."""
    from ralp_tf.run.floor import task_cpu_s

    local = [t for t in Cluster.from_dict(config.spec).tasks if t.host == host]
    out: dict[str, float] = {}
    for pid, ports in listening_ports().items():
        for t in local:
            if split_address(t.address)[1] in ports:
                out[t.key] = out.get(t.key, 0.0) + task_cpu_s(pid)
    return out


def serve_agent(config: ClusterConfig, host: str, bind: tuple[str, int],
                ready: Callable[[str], None] | None = None) -> None:
    """Serve ``GET /pairs`` (:func:`host_pairs` of ``host``) and ``GET /cpu`` (:func:`host_cpu`) on
    ``bind`` until interrupted."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.rstrip("/")
            if path not in ("/pairs", "/cpu"):
                self.send_error(404, "only GET /pairs and GET /cpu")
                return
            try:
                tasks = [t.key for t in Cluster.from_dict(config.spec).tasks if t.host == host]
                body = {"host": host, "tasks": tasks}
                body.update({"pairs": host_pairs(config, host)} if path == "/pairs" else
                            {"cpu_s": host_cpu(config, host)})
                code = 200
            except Exception as exc:  # the coordinator reports it, naming this host
                body, code = {"error": str(exc)}, 500
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug("agent: " + fmt, *args)

    family = socket.AF_INET6 if ":" in bind[0] else socket.AF_INET

    class Server(http.server.ThreadingHTTPServer):
        address_family = family

    try:
        server = Server(bind, Handler)
    except OSError as exc:
        raise ClusterRuntimeError(f"the agent cannot listen on {bind[0]}:{bind[1]} ({exc.strerror}): the port is "
                                  "taken or the address is not this machine's; pass --port or --bind") from None
    if ready:
        ready(f"{bind[0]}:{server.server_address[1]}")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


class AgentMeter(TrafficMeter):
    """Bytes between tasks over an interval, from the ``ralp-tf agent`` of every worker/PS host:
    the same interface as :class:`ralp_tf.run.traffic.TrafficMeter` (``start``, ``stop``, ``total``)."""

    def __init__(self, config: ClusterConfig, agent_port: int = AGENT_PORT, timeout_s: float = 10.0) -> None:
        super().__init__([])
        cluster = config.cost_cluster()
        self.hosts = sorted({(t.host, t.address) for t in cluster.tasks})
        self.urls = {}
        for host, address in self.hosts:
            name = split_address(address)[0]
            self.urls[host] = f"http://{'[' + name + ']' if ':' in name else name}:{agent_port}/pairs"
        self.timeout_s = timeout_s

    def _ask(self, what: str, unavailable: str) -> list[dict[str, Any]]:
        """Every host agent's answer to ``GET /<what>``; ClusterRuntimeError naming the silent ones."""
        docs, failed = [], []
        for host, url in self.urls.items():
            url = url.rsplit("/", 1)[0] + "/" + what
            try:
                with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                    docs.append(json.loads(resp.read()))
            except (OSError, urllib.error.URLError, ValueError) as exc:
                failed.append(f"{host} ({url}: {getattr(exc, 'reason', exc)})")
        if failed:
            raise ClusterRuntimeError(f"no {what} from the agent of " + ", ".join(failed) + ": start "
                                      f"`ralp-tf agent` on every worker and PS host, or run without --agent-port "
                                      f"({unavailable})")
        return docs

    def pairs(self) -> dict[tuple[str, str], int]:
        """Cumulative bytes ``{(src, dst): n}`` summed over every host's agent."""
        out: dict[tuple[str, str], int] = {}
        for doc in self._ask("pairs", "bytes are then reported as unavailable"):
            for key, n in doc.get("pairs", {}).items():
                a, _, b = key.partition("->")
                out[(a, b)] = out.get((a, b), 0) + int(n)
        return out

    def cpu(self) -> dict[str, float]:
        """Cumulative CPU seconds of every task, ``{"worker:0": s, ...}``, from every host's agent."""
        out: dict[str, float] = {}
        for doc in self._ask("cpu", "the serving CPU is then not measured"):
            out.update({k: float(v) for k, v in doc.get("cpu_s", {}).items()})
        return out

    def start(self) -> None:
        self._start = self.pairs()

    def stop(self) -> dict[tuple[str, str], int]:
        end = self.pairs()
        self.delta = {k: v - self._start.get(k, 0) for k, v in end.items() if v - self._start.get(k, 0) > 0}
        return self.delta


def wait_reachable(spec: Mapping[str, Sequence[str]], timeout_s: float = CONNECT_TIMEOUT_S,
                   jobs: Sequence[str] = ("worker", "ps")) -> None:
    """Return once every task of ``jobs`` accepts TCP connections; after ``timeout_s`` s raise
    ClusterRuntimeError naming the tasks that did not."""
    pending = {f"{job}:{i}": a for job in jobs for i, a in enumerate(spec.get(job, []))}
    deadline = time.monotonic() + timeout_s
    while pending:
        for key, address in list(pending.items()):
            host, port = split_address(address)
            try:
                with socket.create_connection((host, port), timeout=min(2.0, max(timeout_s, 0.1))):
                    del pending[key]
            except OSError:
                pass
        if pending and time.monotonic() >= deadline:
            raise ClusterRuntimeError(
                f"{len(pending)} task(s) did not answer within {timeout_s:g} s: "
                + ", ".join(f"{k} ({a})" for k, a in pending.items())
                + ". Start `ralp-tf server` on those hosts (with this cluster file and their --task), check the "
                  "addresses and firewalls, or raise --connect-timeout")
        if pending:
            time.sleep(0.5)


def coordinator_strategy(config: ClusterConfig) -> Any:
    """A ``ParameterServerStrategy`` for the cluster's worker and PS tasks; with a chief in the
    spec, this process is that chief (its gRPC server takes the chief's port)."""
    import tensorflow as tf

    if not config.spec.get("ps"):
        raise ClusterConfigError(f"{config.source} has no 'ps' job: ParameterServerStrategy needs at least one PS "
                                 "task")
    if not config.spec.get("worker"):
        raise ClusterConfigError(f"{config.source} has no 'worker' job: training needs at least one worker")
    if config.spec.get("chief"):
        spec = {j: config.spec[j] for j in ("chief", "worker", "ps")}
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(spec), task_type="chief", task_id=0, rpc_layer="grpc")
    else:
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(config.training_spec()), rpc_layer="grpc")
    return tf.distribute.ParameterServerStrategy(resolver)


def train_on_cluster(config: ClusterConfig, model: Any, *, policies: Sequence[Any] = ("ralp",),
                     agent_port: int | None = None, connect_timeout: float = CONNECT_TIMEOUT_S,
                     checkpoint_dir: str | None = None, rates: Mapping[str, Any] | None = None,
                     calibration: Any = None,
                     step_callback: Callable[[str, int], None] | None = None, **train_kwargs: Any) -> dict[str, Any]:
    """Train ``model`` on the running cluster ``config`` once per policy (see the module docstring)
    and return ``{policy name: RunResult}``; ``bytes_per_step`` is None without ``agent_port``.

    With several policies each gets ``checkpoint_dir/<policy>``. ``step_callback(policy name, step)``
    is called after scheduling each step (progress). ``calibration`` (``ralp-tf calibrate``'s, of this
    cluster: refused otherwise) prices the plans and predictions. ``train_kwargs`` go to
    :func:`ralp_tf.run.training.train` (``steps``, ``batch_size``, ``warmup_steps``, ``seed``, ...)."""
    import os

    wait_reachable(config.spec, connect_timeout)  # before TF is imported: an unreachable cluster fails fast
    if checkpoint_dir and not config.spec.get("chief"):
        log.warning("%s names no chief: TensorFlow then gives this coordinator the address 127.0.0.1, which PS "
                    "tasks on other machines cannot reach to send it checkpoint tensors; add \"chief\": "
                    "[\"<this machine>:2222\"] to the cluster", config.source)
    import tensorflow as tf

    from ralp_tf.run.training import train

    strategy = coordinator_strategy(config)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    cluster = config.cost_cluster(**dict(rates or {}))
    if calibration is not None:  # its hosts, TF and devices checked against the live cluster's
        from ralp_tf.model.builtin import resolve_model
        from ralp_tf.run.calibrate import calibrated_job, device_kinds
        from ralp_tf.run.training import TrainConfig, prepare_model

        prepared = train_kwargs.get("prepared")
        if prepared is None:
            config_of = {k: train_kwargs[k] for k in ("batch_size", "seed", "sequence_length", "optimizer")
                         if k in train_kwargs}
            prepared = prepare_model(resolve_model(model) if isinstance(model, str) else model,
                                     TrainConfig(**config_of))
        prepared.profile, cluster = calibrated_job(calibration, cluster, prepared.profile, rates=rates,
                                                   device_kinds=device_kinds(config.spec))
        train_kwargs["prepared"] = prepared
    results: dict[str, Any] = {}
    for policy in policies:
        name = str(policy if isinstance(policy, str) else getattr(policy, "policy", type(policy).__name__))
        ckpt = os.path.join(checkpoint_dir, name) if checkpoint_dir and len(policies) > 1 else checkpoint_dir
        meter = AgentMeter(config, agent_port) if agent_port else None
        log.info("running %s on %s (bytes: %s)", name, cluster.describe(),
                 f"agents on port {agent_port}" if meter else "unavailable")
        results[name] = train(strategy, model, policy=policy, cluster=cluster, coordinator=coordinator,
                              checkpoint_dir=ckpt, meter=meter,
                              on_step=(lambda i, n=name: step_callback(n, i)) if step_callback else None,
                              **train_kwargs)
    return results

