"""The role switch of ``ralp-tf server --roles``: its control protocol, and the chief's side of it.

A worker host of a real cluster runs ``ralp-tf server --roles`` (:mod:`ralp_tf.run.role_server`): its
ParameterServerStrategy task as a child process, and a **control port** (the task's port +
:data:`CONTROL_PORT_OFFSET`, on the task's address) where the chief's ``ralp-tf run --cluster
--strategy mwms|auto`` asks it to become a worker of a MultiWorkerMirroredStrategy ring for one run:
the server stops its PSS task (freeing the port), runs ``python -m ralp_tf.run._ring_task`` with a
``TF_CONFIG`` of the spec's workers on their task addresses, streams the ring chief's protocol lines
back, reports the exit status, restarts the PSS task and says so. The ring thus runs over the same
hosts and ports as the cluster's TF_CONFIG (no mpirun, no ssh).

**The protocol** (TCP, one JSON object per line, UTF-8, at most :data:`MAX_REQUEST_BYTES` a line).
The chief sends one request:

* ``{"format": FORMAT, "op": "status"}``: the server answers ``{"event": "status", "task": "worker:0",
  "workers": [...], "role": "pss" | "ring"}`` and closes;
* ``{"format": FORMAT, "op": "ring", "workers": [...], "args": {...}}``: ``workers`` must be the
  server's own spec's worker addresses (the two sides read the same cluster); ``args`` holds exactly
  the ring worker's arguments (:class:`RingArgs`: model, batch, steps, warm-up, seed, learning rate,
  optimizer, checkpoint folder and interval, sequence length), each checked; nothing else reaches a
  command line. The server answers ``{"event": "started", "pid": ..., "log": ...}``, then (the ring's
  rank 0 only) ``{"event": "line", "text": "step 4 2.30"}`` for each ``RALP_RING`` line, then
  ``{"event": "exit", "code": c, "log_tail": ...}``, then ``{"event": "serving"}`` once its PSS task
  is back (or ``{"event": "error", ...}``). While it runs, the chief sends ``{"op": "ack"}`` to rank 0
  after each measure mark (the parent's answer of :mod:`ralp_tf.run._ring_task`); closing the
  connection stops the ring worker.

A request that is not exactly this is answered ``{"event": "error", "message": ...}`` (one line naming
what is wrong) and the connection is closed; so is a ring request while a ring runs (``busy``).
:func:`parse_request` is the one check (pure: the server and the tests use it).

**Model references**: built-in model names always; a ``module:function`` reference (which the ring
worker imports and calls) only when its module is under a prefix the server was started with
(``--ring-modules``): a request names code already installed on the host, never sends code.

**The chief's side**: :class:`RoleRingJob` runs one ring over every worker's control port with the
interface of :class:`ralp_tf.run.ring.RingJob` (``lines``, ``answer``, ``meter``, ``wait``, ``stop``);
:func:`ring_unavailable_reason` asks every worker's status (``--strategy auto`` marks the ring
unavailable with the reason when one does not answer).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import queue
import re
import socket
import threading
import time
from typing import Any, Iterator, Mapping, Sequence

from ralp_tf.errors import ClusterRuntimeError, ValidationError
from ralp_tf.model.builtin import BUILTIN_MODELS, MODEL_REFERENCE
from ralp_tf.run.remote import AgentMeter, task_name
from ralp_tf.run.tfconfig import ClusterConfig
from ralp_tf.run.traffic import split_address

__all__ = ["FORMAT", "CONTROL_PORT_OFFSET", "MAX_REQUEST_BYTES", "RING_FIELDS", "RingArgs", "Request",
           "parse_request", "control_port", "control_address", "control_spec", "role_status", "ring_unavailable_reason",
           "RoleRingJob", "encode"]

FORMAT = "ralp_tf.roles/1"
#: A worker's control port is its task port plus this (``--control-port-offset`` on both sides).
CONTROL_PORT_OFFSET = 1000
#: The longest line either side accepts.
MAX_REQUEST_BYTES = 64 * 1024
#: Seconds to wait for each worker's PSS task to be back after a ring.
SERVING_TIMEOUT_S = 180.0
_MAX_STEPS = 10**9
_MAX_PATH = 4096


@dataclasses.dataclass(frozen=True)
class RingArgs:
    """The arguments of one ring worker (``python -m ralp_tf.run._ring_task``): everything a ring
    request may carry. ``steps`` and ``warmup`` are worker steps (warm-up included in ``steps``);
    ``checkpoint_dir`` ``""`` for none, ``sequence_length`` 0 for the model's own."""

    model: str
    steps: int
    warmup: int = 0
    batch: int = 32
    seed: int = 0
    lr: float = 0.01
    optimizer: str = "sgd"
    checkpoint_dir: str = ""
    checkpoint_every: int = 10
    sequence_length: int = 0

    def argv(self) -> list[str]:
        """The ring worker's command-line arguments (``--ack`` included: the parent answers measure marks)."""
        return ["--model", self.model, "--batch", str(self.batch), "--steps", str(self.steps), "--warmup",
                str(self.warmup), "--seed", str(self.seed), "--lr", repr(float(self.lr)), "--optimizer",
                self.optimizer, "--checkpoint-every", str(self.checkpoint_every), "--ack",
                *(["--checkpoint-dir", self.checkpoint_dir] if self.checkpoint_dir else []),
                *(["--sequence-length", str(self.sequence_length)] if self.sequence_length else [])]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


RING_FIELDS = tuple(f.name for f in dataclasses.fields(RingArgs))


@dataclasses.dataclass(frozen=True)
class Request:
    """A checked request: ``op`` ``"status"`` or ``"ring"`` (then ``args``)."""

    op: str
    args: RingArgs | None = None


def _whole(doc: Mapping[str, Any], key: str, low: int, high: int) -> int:
    v = doc[key]
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValidationError(f"args.{key} must be a whole number from {low} to {high}, got {v!r}")
    return v


def _model(ref: Any, modules: Sequence[str]) -> str:
    if not isinstance(ref, str) or not ref or len(ref) > 200:
        raise ValidationError("args.model must be a built-in model name or 'module:function' (at most 200 "
                              "characters)")
    if ref in BUILTIN_MODELS:
        return ref
    if not MODEL_REFERENCE.match(ref) or ".." in ref or ref.split(":")[0].endswith("."):
        raise ValidationError(f"args.model {ref!r} is neither a built-in model ({', '.join(sorted(BUILTIN_MODELS))})"
                              " nor a 'module:function' reference")
    module = ref.split(":")[0]
    if not any(module == p or module.startswith(p + ".") for p in modules):
        allowed = f" (this server allows modules under {', '.join(modules)})" if modules else ""
        raise ValidationError(f"model reference {ref!r} is not allowed here{allowed}: a role server builds "
                              f"built-in models, and references under the prefixes of its --ring-modules only; "
                              f"restart it with --ring-modules {module.split('.')[0]}")
    return ref


def _ring_args(doc: Any, modules: Sequence[str]) -> RingArgs:
    from ralp_tf.run.training import OPTIMIZERS

    if not isinstance(doc, Mapping):
        raise ValidationError("'args' must be an object of the ring worker's arguments")
    unknown, missing = sorted(set(doc) - set(RING_FIELDS)), [k for k in RING_FIELDS if k not in doc]
    if unknown or missing:
        raise ValidationError(f"'args' must hold exactly {', '.join(RING_FIELDS)}"
                              + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else "")
                              + (f"; missing: {', '.join(missing)}" if missing else ""))
    lr = doc["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or not 0 < lr <= 1e3:
        raise ValidationError(f"args.lr must be a number above 0 and at most 1000, got {lr!r}")
    if doc["optimizer"] not in OPTIMIZERS:
        raise ValidationError(f"args.optimizer must be one of {', '.join(OPTIMIZERS)}, got {doc['optimizer']!r}")
    folder = doc["checkpoint_dir"]
    if not isinstance(folder, str) or len(folder) > _MAX_PATH or (folder and not os.path.isabs(folder)) \
            or not folder.isprintable() or "/../" in folder + "/":
        raise ValidationError(f"args.checkpoint_dir must be \"\" or an absolute path (the same shared folder on every "
                              f"host) without '..', got {folder!r}"[:300])
    args = RingArgs(model=_model(doc["model"], modules), steps=_whole(doc, "steps", 1, _MAX_STEPS),
                    warmup=_whole(doc, "warmup", 0, _MAX_STEPS), batch=_whole(doc, "batch", 1, 1 << 20),
                    seed=_whole(doc, "seed", -(2**31), 2**31 - 1), lr=float(lr), optimizer=doc["optimizer"],
                    checkpoint_dir=os.path.normpath(folder) if folder else "",
                    checkpoint_every=_whole(doc, "checkpoint_every", 1, _MAX_STEPS),
                    sequence_length=_whole(doc, "sequence_length", 0, 1 << 20))
    if args.warmup > args.steps:
        raise ValidationError(f"args.warmup ({args.warmup}) must not exceed args.steps ({args.steps}), which counts "
                              "the warm-up")
    return args


def parse_request(line: bytes | str, workers: Sequence[str], modules: Sequence[str] = ()) -> Request:
    """Check one request line (module docstring) against this server's ``workers`` (its spec's
    addresses) and ``modules`` (``--ring-modules``); ValidationError naming the first thing wrong."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ValidationError(f"the request is longer than {MAX_REQUEST_BYTES} bytes")
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("the request is not one line of JSON") from None
    if not isinstance(doc, dict):
        raise ValidationError("the request must be a JSON object")
    if doc.get("format") != FORMAT:
        raise ValidationError(f"the request's format must be {FORMAT!r} (got {doc.get('format')!r}): the chief and this "
                              "server run different ralp-tf versions")
    op = doc.get("op")
    allowed = {"status": {"format", "op"}, "ring": {"format", "op", "workers", "args"}}
    if op not in allowed:
        raise ValidationError(f"unknown op {op!r}; the ops are status and ring")
    if set(doc) != allowed[op]:
        raise ValidationError(f"a {op} request holds exactly {', '.join(sorted(allowed[op]))}")
    if op == "status":
        return Request("status")
    if doc["workers"] != list(workers):
        raise ValidationError(f"the chief's workers {doc['workers']!r} are not this server's {list(workers)!r}: start "
                              "both with the same cluster file"[:400])
    return Request("ring", _ring_args(doc["args"], modules))


def encode(doc: Mapping[str, Any]) -> bytes:
    """One protocol line."""
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode()


# ------------------------------------------------------------------------------------------
# the chief's side


def control_port(task_address: str, offset: int = CONTROL_PORT_OFFSET) -> int:
    """The control port of the task at ``task_address``: its port + ``offset``; ValidationError past 65535."""
    port = split_address(task_address)[1] + offset
    if not 0 < port < 65536:
        raise ValidationError(f"the control port of {task_address} would be {port} (its port + {offset}); pass a "
                              "--control-port-offset that keeps it within 1-65535")
    return port


def control_address(config: ClusterConfig, index: int, offset: int = CONTROL_PORT_OFFSET) -> tuple[str, int]:
    """``(host, port)`` of worker ``index``'s control port (its task host, its port + ``offset``)."""
    address = config.address("worker", index)
    return split_address(address)[0], control_port(address, offset)


def control_spec(config: ClusterConfig, offset: int = CONTROL_PORT_OFFSET) -> dict[str, list[str]]:
    """``{"worker": ["host:port", ...]}``: every worker's control address (for :func:`~ralp_tf.run.remote.wait_reachable`)."""
    return {"worker": [_where(control_address(config, i, offset)) for i in range(len(config.spec.get("worker", [])))]}


class _Conn:
    """One control connection: line-framed JSON both ways."""

    def __init__(self, where: tuple[str, int], timeout_s: float) -> None:
        self.where = where
        self.sock = socket.create_connection(where, timeout=timeout_s)
        self.file = self.sock.makefile("rb")

    def send(self, doc: Mapping[str, Any]) -> None:
        self.sock.sendall(encode(doc))

    def receive(self) -> dict[str, Any] | None:
        """The next event, None at end of stream."""
        line = self.file.readline(MAX_REQUEST_BYTES + 1)
        if not line:
            return None
        try:
            doc = json.loads(line)
        except ValueError:
            return {"event": "error", "message": f"not a protocol line: {line[:200]!r}"}
        return doc if isinstance(doc, dict) else {"event": "error", "message": "not a protocol object"}

    def close(self) -> None:
        # shutdown first: it wakes a thread blocked reading (closing the file first would wait for that thread)
        for closing in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.file.close, self.sock.close):
            try:
                closing()
            except OSError:
                pass


def _where(where: tuple[str, int]) -> str:
    host, port = where
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def role_status(config: ClusterConfig, offset: int = CONTROL_PORT_OFFSET, timeout_s: float = 5.0
                ) -> dict[int, dict[str, Any] | str]:
    """Every worker's status answer, by index; a string (what went wrong) where there is none."""
    out: dict[int, dict[str, Any] | str] = {}
    for i in range(len(config.spec.get("worker", []))):
        where = control_address(config, i, offset)
        try:
            conn = _Conn(where, timeout_s)
            try:
                conn.send({"format": FORMAT, "op": "status"})
                doc = conn.receive()
            finally:
                conn.close()
        except OSError as exc:
            out[i] = f"worker:{i}'s control port {_where(where)} does not answer ({exc.strerror or exc})"
            continue
        if not doc or doc.get("event") != "status":
            out[i] = f"worker:{i} ({_where(where)}) answered {doc!r}"[:300]
        elif doc.get("workers") != config.spec["worker"]:
            out[i] = f"worker:{i} ({_where(where)}) serves another cluster (workers {doc.get('workers')!r})"[:300]
        else:
            out[i] = doc
    return out


def ring_unavailable_reason(config: ClusterConfig, offset: int = CONTROL_PORT_OFFSET, timeout_s: float = 5.0) -> str:
    """``""`` when every worker's role switch answers for this cluster; else why the ring cannot run here."""
    problems = [v for v in role_status(config, offset, timeout_s).values() if isinstance(v, str)]
    if not problems:
        return ""
    return ("; ".join(problems) + ": the ring needs `ralp-tf server --roles` on every worker host (the same "
            "--control-port-offset)")


class RoleRingJob:
    """One ring on the role servers of ``config``'s workers (module docstring), with
    :class:`ralp_tf.run.ring.RingJob`'s interface. ``agent_port`` makes :meth:`meter` read the
    worker<->worker bytes from ``ralp-tf agent`` on every host (else None: bytes unavailable)."""

    def __init__(self, config: ClusterConfig, workers: int, args: RingArgs, log_dir: Any = None, *,
                 offset: int = CONTROL_PORT_OFFSET, agent_port: int | None = None, timeout_s: float = 30.0) -> None:
        if workers != len(config.spec.get("worker", [])):
            raise ValidationError(f"the ring on {config.source} runs on its {len(config.spec.get('worker', []))} "
                                  f"worker(s), not {workers}")
        self.config, self.num_workers, self.args = config, workers, args
        self.offset, self.agent_port, self.timeout_s = offset, agent_port, timeout_s
        self.conns: list[_Conn] = []
        self._events: "queue.Queue[tuple[int, dict[str, Any] | None]]" = queue.Queue()
        self.exits: dict[int, int] = {}
        self.serving: set[int] = set()
        self.logs: dict[int, str] = {}

    def __enter__(self) -> "RoleRingJob":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _name(self, i: int) -> str:
        return f"worker:{i} ({_where(control_address(self.config, i, self.offset))})"

    def start(self) -> "RoleRingJob":
        request = {"format": FORMAT, "op": "ring", "workers": self.config.spec["worker"], "args": self.args.to_dict()}
        try:
            for i in range(self.num_workers):
                where = control_address(self.config, i, self.offset)
                try:
                    conn = _Conn(where, self.timeout_s)
                except OSError as exc:
                    raise ClusterRuntimeError(f"worker:{i}'s control port {_where(where)} does not answer "
                                              f"({exc.strerror or exc}): start `ralp-tf server --roles` there") from None
                self.conns.append(conn)
                conn.send(request)
            for i, conn in enumerate(self.conns):  # each stops its PSS task and starts its ring worker
                conn.sock.settimeout(self.timeout_s + 30.0)
                doc = conn.receive()
                if not doc or doc.get("event") != "started":
                    why = doc.get("message", doc) if doc else "it closed the connection"
                    raise ClusterRuntimeError(f"{self._name(i)} did not start its ring worker: {why}")
                self.logs[i] = str(doc.get("log", ""))
                conn.sock.settimeout(None)
        except BaseException:
            self.stop()
            raise
        for i, conn in enumerate(self.conns):
            threading.Thread(target=self._read, args=(i, conn), name=f"ralp-roles-{i}", daemon=True).start()
        return self

    def _read(self, i: int, conn: _Conn) -> None:
        try:
            while True:
                doc = conn.receive()
                self._events.put((i, doc))
                if doc is None or doc.get("event") in ("serving", "error"):
                    return
        except (OSError, ValueError):
            self._events.put((i, None))

    def _event(self, timeout_s: float) -> tuple[int, dict[str, Any]] | None:
        """The next event (None on timeout); ClusterRuntimeError when a worker fails or goes silent."""
        try:
            i, doc = self._events.get(timeout=timeout_s)
        except queue.Empty:
            return None
        kind = doc.get("event") if doc else None
        if kind == "exit":
            self.exits[i] = int(doc.get("code", -1))
            if self.exits[i] != 0:
                raise ClusterRuntimeError(f"ring worker {i} on {self._name(i)} exited with code {self.exits[i]}; "
                                          f"its log ({self.logs.get(i, '?')} there) ends:\n{doc.get('log_tail', '')}")
        elif kind == "serving":
            self.serving.add(i)
        elif kind != "line":
            why = doc.get("message", doc) if doc else "the connection closed"
            state = "before its ring worker ended" if i not in self.exits else "while restarting its PSS task"
            raise ClusterRuntimeError(f"{self._name(i)} failed {state}: {why}")
        return i, doc

    def lines(self, poll_s: float = 0.5) -> Iterator[str]:
        """The ring chief's protocol lines (``kind rest``) as they come; ends when rank 0 exits with 0."""
        while 0 not in self.exits:
            got = self._event(poll_s)
            if got and got[1].get("event") == "line" and got[0] == 0:
                yield str(got[1].get("text", ""))

    def answer(self) -> None:
        """Let the ring's chief go on after a measure mark."""
        self.conns[0].send({"op": "ack"})

    def meter(self) -> Any:
        """Worker<->worker bytes from the agents (``agent_port``), else None."""
        return _WorkerPairs(self.config, self.agent_port) if self.agent_port else None

    def wait(self, timeout_s: float = SERVING_TIMEOUT_S) -> None:
        """Wait for every ring worker's exit and every PSS task to be serving again."""
        deadline = time.monotonic() + timeout_s
        while len(self.serving) < self.num_workers:
            if time.monotonic() > deadline:
                late = [self._name(i) for i in range(self.num_workers) if i not in self.serving]
                raise ClusterRuntimeError(f"{', '.join(late)} did not report its PSS task back within {timeout_s:g} s")
            self._event(0.5)

    def stop(self, release: bool = True) -> None:
        """Close every control connection (a server stops its ring worker when its connection closes)."""
        conns, self.conns = self.conns, []
        for conn in conns:
            conn.close()


class _WorkerPairs(AgentMeter):
    """:class:`~ralp_tf.run.remote.AgentMeter` counting only the pairs between two workers (the ring's)."""

    def __init__(self, config: ClusterConfig, agent_port: int) -> None:
        super().__init__(config, agent_port)
        self.workers = {task_name("worker", i) for i in range(len(config.spec.get("worker", [])))}

    def stop(self) -> dict[tuple[str, str], int]:
        delta = super().stop()
        self.delta = {k: v for k, v in delta.items() if k[0] in self.workers and k[1] in self.workers}
        return self.delta
