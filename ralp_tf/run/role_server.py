"""``ralp-tf server --roles``: a worker host's task that switches between PSS and the ring on request.

:class:`RoleServer` is a small control process (it never imports TensorFlow). It

* starts the host's ParameterServerStrategy task as its child (``python -m ralp_tf.run._task
  --standalone``, exactly what plain ``ralp-tf server`` execs), copying the child's output to its own
  (``RALP_TF_TASK_READY ...``, ``task worker:0 stopped by SIGTERM``), the child dying with it
  (``PR_SET_PDEATHSIG``);
* listens on the control port (:mod:`ralp_tf.run.roles`: the task's port + 1000 by default, on the
  task's address) for the chief's requests, one connection at a time serving a ring;
* on a ring request (checked by :func:`ralp_tf.run.roles.parse_request`): stops the PSS task (SIGTERM,
  so its port is free), starts ``python -m ralp_tf.run._ring_task`` with the request's arguments and a
  ``TF_CONFIG`` of the spec's workers on their task addresses (this task's bind address preloaded,
  as for the PSS task), streams the ring chief's ``RALP_RING`` lines back and passes the chief's
  acknowledgements to its stdin, reports the exit status, restarts the PSS task and reports
  ``serving`` once it listens again. A chief that goes away (its connection closes) stops the ring
  worker; the PSS task comes back either way;
* SIGTERM or SIGINT: stops the ring worker if one runs, passes the signal to the PSS task (which
  prints ``task worker:0 stopped by SIGTERM``; the server prints it when no PSS task runs) and exits 0.
  A PSS task that exits on its own (e.g. its port taken) ends the server with the task's exit code.

Single-threaded: one ``selectors`` loop owns every socket and child, so children are spawned by the
thread that lives as long as the server (``PR_SET_PDEATHSIG`` follows the spawning thread).
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.errors import CommandFailed, ValidationError
from ralp_tf.run._procutil import die_with_parent
from ralp_tf.run._ring_task import MARK
from ralp_tf.run.roles import FORMAT, MAX_REQUEST_BYTES, Request, encode, parse_request
from ralp_tf.run.tfconfig import ClusterConfig

__all__ = ["READY", "REQUEST_TIMEOUT_S", "RoleServer"]

READY = "RALP_TF_TASK_READY"
#: Seconds a connection has to send its request line.
REQUEST_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 60.0


class _Conn:
    """A control connection: its socket, what it has sent so far, when it came."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer, self.buf, self.since = sock, peer, b"", time.monotonic()
        self.closed = False

    def send(self, doc: Mapping[str, Any]) -> bool:
        """Send one line (blocking, 10 s at most); False when the peer is gone."""
        if self.closed:
            return False
        try:
            self.sock.settimeout(10.0)
            self.sock.sendall(encode(doc))
            self.sock.setblocking(False)
            return True
        except OSError:
            self.closed = True
            return False


class RoleServer:
    """The control process of one worker task (module docstring); :meth:`serve` returns the exit code."""

    def __init__(self, config: ClusterConfig, job: str, index: int, *, ip: str, control_port: int,
                 task_env: Mapping[str, str], ring_modules: Sequence[str] = ()) -> None:
        self.config, self.job, self.index = config, job, index
        self.task = f"{job}:{index}"
        self.workers = list(config.spec.get("worker", []))
        self.ip, self.control_port, self.env = ip, control_port, dict(task_env)
        self.ring_modules = tuple(ring_modules)
        #: the PSS task's command, and the ring worker's program (its checked arguments follow)
        self.task_argv = [sys.executable, "-m", "ralp_tf.run._task", "--cluster", json.dumps(config.spec), "--job",
                          job, "--index", str(index), "--standalone"]
        self.ring_program = [sys.executable, "-m", "ralp_tf.run._ring_task"]
        self.sel = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.pss: subprocess.Popen | None = None
        self.pss_ready = False
        self.ring: subprocess.Popen | None = None
        self.ring_log: Path | None = None
        self.ring_out_open = False
        self.session: _Conn | None = None
        self.pending: dict[socket.socket, _Conn] = {}
        self.stop_signal: int | None = None
        self.log_dir: Path | None = None  # the ring workers' logs, made by serve()
        self._partial: dict[str, bytes] = {"pss": b"", "ring": b""}

    # ------------------------------------------------------------------ life cycle
    def listen(self) -> None:
        """Bind the control port (before anything starts): CommandFailed in one line when it is taken."""
        family = socket.AF_INET6 if ":" in self.ip else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.ip, self.control_port))
        except OSError as exc:
            sock.close()
            raise CommandFailed(f"task {self.task}: its control port {self.control_port} on {self.ip} cannot be used "
                                f"({exc.strerror}); stop what holds it, or pass --control-port-offset (the same on "
                                "the chief)") from None
        sock.listen(8)
        sock.setblocking(False)
        self.listener = sock
        self.sel.register(sock, selectors.EVENT_READ, self._accept)

    def serve(self) -> int:
        """Run until SIGTERM/SIGINT (exit 0) or the PSS task ends on its own (its exit code)."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        old_fd = signal.set_wakeup_fd(wake_w)
        self.sel.register(wake_r, selectors.EVENT_READ, lambda fd: os.read(fd, 512))
        try:
            if self.listener is None:
                self.listen()
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"ralp_tf_roles_{self.job}{self.index}_"))
            self._say(f"control port of task {self.task} listening on {self._where()} (role switch: the PSS task, "
                      "or a ring worker on the chief's request)")
            self._start_pss()
            while True:
                if self.stop_signal is not None:
                    return self._shutdown(self.stop_signal)
                for key, _ in self.sel.select(timeout=0.2):
                    if self._registered(key.fileobj):  # not dropped by an earlier event of this round
                        key.data(key.fileobj)
                code = self._check_children()
                if code is not None:
                    return code
                self._expire_requests()
        finally:
            signal.set_wakeup_fd(old_fd)
            for s, handler in old.items():
                signal.signal(s, handler)
            self._close_all()
            os.close(wake_r)
            os.close(wake_w)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_signal = signum

    def _shutdown(self, signum: int) -> int:
        name = signal.Signals(signum).name
        if self.ring is not None:
            self._kill(self.ring)
            self.ring = None
        if self.session is not None:
            self.session.send({"event": "error", "message": f"the server of task {self.task} was stopped by {name}"})
        if self.pss is not None and self.pss.poll() is None and self.pss_ready:
            self.pss.send_signal(signum)  # it says it was stopped (a Ctrl-C may have reached it already)
            self._wait_pss()
        elif self.pss is not None and self.pss.poll() is not None:
            self._wait_pss()
        else:  # no task, or one still starting (it would finish importing TensorFlow first)
            if self.pss is not None:
                self._kill(self.pss)
                self._wait_pss()
            print(f"task {self.task} stopped by {name}", flush=True)
        return 0

    def _close_all(self) -> None:
        try:
            for proc in (self.ring, self.pss):
                if proc is not None and proc.poll() is None:
                    self._kill(proc)
            for conn in [*self.pending.values(), *([self.session] if self.session else [])]:
                self._drop(conn)
            if self.listener is not None:
                self.listener.close()
            self.sel.close()
        finally:
            if self.log_dir is not None:
                shutil.rmtree(self.log_dir, ignore_errors=True)

    # ------------------------------------------------------------------ the PSS task
    def _start_pss(self) -> None:
        self.pss_ready = False
        self.pss = subprocess.Popen(self.task_argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    preexec_fn=die_with_parent)
        assert self.pss.stdout is not None
        os.set_blocking(self.pss.stdout.fileno(), False)
        self.sel.register(self.pss.stdout, selectors.EVENT_READ, self._on_pss_output)

    def _on_pss_output(self, pipe: Any) -> None:
        data = self._read(pipe)
        if data is None:
            return
        if data:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        for line in self._lines("pss", data):
            if line.startswith(READY) and not self.pss_ready:
                self.pss_ready = True
                self._serving()

    def _serving(self) -> None:
        """The PSS task listens again: tell the ring's chief, end the session."""
        if self.session is not None and self.ring is None:
            self._say(f"task {self.task} serves its PSS task again")
            self.session.send({"event": "serving", "task": self.task})
            self._drop(self.session)
            self.session = None

    def _stop_pss(self) -> None:
        if self.pss is None:
            return
        if self.pss.poll() is None and not self.pss_ready:
            self._kill(self.pss)  # still starting (serving nothing): its TensorFlow import need not finish first
        elif self.pss.poll() is None:
            self.pss.send_signal(signal.SIGTERM)
        self._wait_pss()

    def _wait_pss(self) -> None:
        """Wait for the PSS task to exit (SIGKILL after a minute), copying the rest of its output."""
        assert self.pss is not None
        try:
            self.pss.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill(self.pss)
        if self.pss.stdout is not None:
            if self._registered(self.pss.stdout):
                self.sel.unregister(self.pss.stdout)
            os.set_blocking(self.pss.stdout.fileno(), True)
            rest = self.pss.stdout.read()
            if rest:
                sys.stdout.buffer.write(rest)
                sys.stdout.flush()
            self.pss.stdout.close()
        self.pss, self.pss_ready = None, False

    def _registered(self, fileobj: Any) -> bool:
        try:
            self.sel.get_key(fileobj)
            return True
        except (KeyError, ValueError):  # ValueError: already closed
            return False

    # ------------------------------------------------------------------ requests
    def _where(self) -> str:
        return f"[{self.ip}]:{self.control_port}" if ":" in self.ip else f"{self.ip}:{self.control_port}"

    def _say(self, text: str) -> None:
        print(f"ralp-tf server: {text}", file=sys.stderr, flush=True)

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, peer = listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        conn = _Conn(sock, f"{peer[0]}:{peer[1]}")
        self.pending[sock] = conn
        self.sel.register(sock, selectors.EVENT_READ, self._on_request_data)

    def _on_request_data(self, sock: socket.socket) -> None:
        conn = self.pending[sock]
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.buf += data
        if b"\n" not in conn.buf:
            if len(conn.buf) > MAX_REQUEST_BYTES:
                self._refuse(conn, f"the request is longer than {MAX_REQUEST_BYTES} bytes")
            return
        line = conn.buf.split(b"\n", 1)[0]
        try:
            request = parse_request(line, self.workers, self.ring_modules)
        except ValidationError as exc:
            self._refuse(conn, str(exc))
            return
        if request.op == "status":
            conn.send({"event": "status", "format": FORMAT, "task": self.task, "workers": self.workers,
                       "role": "ring" if self.session is not None else "pss"})
            self._drop(conn)
        elif self.ring is not None or (self.session is not None and not self.session.closed):
            peer = self.session.peer if self.session is not None else "a chief that went away"
            self._refuse(conn, f"busy: task {self.task} is serving a ring for {peer}")
        else:
            self._begin_ring(conn, request)

    def _refuse(self, conn: _Conn, message: str) -> None:
        self._say(f"refused a request from {conn.peer}: {message}")
        conn.send({"event": "error", "message": message})
        self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        self.pending.pop(conn.sock, None)
        if self._registered(conn.sock):
            self.sel.unregister(conn.sock)
        conn.closed = True
        try:
            conn.sock.close()
        except OSError:
            pass

    def _expire_requests(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self.pending.values() if now - c.since > REQUEST_TIMEOUT_S]:
            self._refuse(conn, f"no request line within {REQUEST_TIMEOUT_S:g} s")

    # ------------------------------------------------------------------ the ring
    def _ring_env(self) -> dict[str, str]:
        tf_config = {"cluster": {"worker": self.workers}, "task": {"type": "worker", "index": self.index}}
        env = {**self.env, "TF_CONFIG": json.dumps(tf_config), "TF_USE_LEGACY_KERAS": "1", "PYTHONFAULTHANDLER": "1"}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        return env

    def _begin_ring(self, conn: _Conn, request: Request) -> None:
        """Stop the PSS task, start the ring worker, answer ``started``."""
        assert request.args is not None
        self.pending.pop(conn.sock, None)
        self.sel.unregister(conn.sock)
        self._say(f"the chief {conn.peer} asks for a ring: stopping the PSS task {self.task}")
        self._stop_pss()
        assert self.log_dir is not None
        self.ring_log = self.log_dir / f"ring-worker{self.index}.log"
        chief = self.index == 0
        argv = [*self.ring_program, *request.args.argv(), "--parent-pid", str(os.getpid())]
        try:
            with open(self.ring_log, "wb") as log:
                self.ring = subprocess.Popen(argv, env=self._ring_env(), stdout=subprocess.PIPE if chief else log,
                                             stdin=subprocess.PIPE if chief else subprocess.DEVNULL, stderr=log)
        except OSError as exc:
            self._refuse(conn, f"task {self.task} cannot start a ring worker ({exc})")
            self._start_pss()
            return
        self.ring_out_open = chief
        if chief:
            assert self.ring.stdout is not None
            os.set_blocking(self.ring.stdout.fileno(), False)
            self.sel.register(self.ring.stdout, selectors.EVENT_READ, self._on_ring_output)
        self.session = conn
        self.sel.register(conn.sock, selectors.EVENT_READ, self._on_session_input)
        self._say(f"ring worker {self.index} of {len(self.workers)} for {conn.peer} ({request.args.model}, "
                  f"{request.args.steps} worker steps): pid {self.ring.pid}, log {self.ring_log}")
        conn.send({"event": "started", "task": self.task, "pid": self.ring.pid, "log": str(self.ring_log)})

    def _on_ring_output(self, pipe: Any) -> None:
        data = self._read(pipe)
        if data is None:
            return
        if data and self.ring_log is not None:
            with open(self.ring_log, "ab") as log:
                log.write(data)
        self.ring_out_open = bool(data)
        for line in self._lines("ring", data):
            if line.startswith(MARK + " ") and self.session is not None:
                if not self.session.send({"event": "line", "text": line[len(MARK) + 1:]}):
                    self._chief_gone()

    def _on_session_input(self, sock: socket.socket) -> None:
        if self.session is None or self.session.sock is not sock:
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._chief_gone()
            return
        self.session.buf += data
        while b"\n" in self.session.buf:
            line, self.session.buf = self.session.buf.split(b"\n", 1)
            if line.strip() == encode({"op": "ack"}).strip() and self.ring is not None and self.ring.stdin:
                try:
                    self.ring.stdin.write(b"\n")
                    self.ring.stdin.flush()
                except OSError:
                    pass
        if len(self.session.buf) > MAX_REQUEST_BYTES:
            self._chief_gone()

    def _chief_gone(self) -> None:
        """The chief closed its connection: stop the ring worker; the PSS task comes back."""
        if self.session is None or self.session.closed:
            return
        running = self.ring is not None and self.ring.poll() is None
        self._say(f"the chief {self.session.peer} went away" + ("; stopping the ring worker" if running else ""))
        self._drop(self.session)
        if running:
            assert self.ring is not None
            self._kill(self.ring)
        elif self.ring is None:  # the PSS task is coming back: nobody waits for it any more
            self.session = None

    def _check_children(self) -> int | None:
        """Finish a ring that ended; the PSS task's exit code when it ended on its own."""
        if self.stop_signal is not None:  # a Ctrl-C reaches the children too: the loop shuts down next
            return None
        if self.ring is not None and self.ring.poll() is not None and not self.ring_out_open:
            self._end_ring()
        if self.pss is not None and self.pss.poll() is not None:
            code = self.pss.returncode
            self._wait_pss()
            self._say(f"task {self.task} exited with code {code}")
            if self.session is not None:
                self.session.send({"event": "error", "message": f"the PSS task {self.task} exited with code {code} "
                                                                "when restarted"})
            return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as a shell says
        return None

    def _end_ring(self) -> None:
        assert self.ring is not None
        code = self.ring.returncode
        if self.ring.stdin is not None:
            try:
                self.ring.stdin.close()
            except OSError:
                pass
        self.ring = None
        tail = _tail(self.ring_log) if self.ring_log else ""
        self._say(f"ring worker {self.index} exited with code {code}; restarting task {self.task}")
        if self.session is not None and not self.session.closed:
            self.session.send({"event": "exit", "code": code, "log_tail": tail if code else ""})
        self._start_pss()
        if self.session is not None and self.session.closed:
            self.session = None

    # ------------------------------------------------------------------ helpers
    def _read(self, pipe: Any) -> bytes | None:
        """What ``pipe`` holds: None when nothing is there yet; b"" at its end (then it is unregistered)."""
        try:
            data = os.read(pipe.fileno(), 65536)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data and self._registered(pipe):
            self.sel.unregister(pipe)
        return data

    def _lines(self, which: str, data: bytes) -> list[str]:
        """The whole lines of ``which``'s output so far (``data`` b"": its end, the last piece included)."""
        buf = self._partial[which] + data
        *lines, self._partial[which] = buf.split(b"\n")
        if not data:  # end of stream: the last piece is a line too
            lines.append(self._partial[which])
            self._partial[which] = b""
        return [raw.decode(errors="replace").strip() for raw in lines if raw.strip()]

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            proc.kill()
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


def _tail(path: Path, size: int = 3000) -> str:
    """The last ``size`` bytes of ``path``, as text."""
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - size))
        return f.read().decode(errors="replace")
