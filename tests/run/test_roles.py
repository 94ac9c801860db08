"""The role switch of ``ralp-tf server --roles`` (ralp_tf/run/roles.py, role_server.py): the control
protocol's checks (every bad request refused in one line), the server's arguments, and a whole ring
session against role servers whose PSS task and ring worker are stand-ins (no TensorFlow: fast).
The real thing, on the namespace testbed, is tests/run/test_multihost.py."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ralp_tf.errors import ValidationError
from ralp_tf.run.roles import FORMAT, MAX_REQUEST_BYTES, RingArgs, parse_request

WORKERS = ["10.0.0.2:2222", "10.0.0.3:2222"]
ARGS = RingArgs(model="small_cnn", steps=9, warmup=3, checkpoint_dir="/shared/ckpt").to_dict()


def _ring(**changes: Any) -> str:
    doc: dict[str, Any] = {"format": FORMAT, "op": "ring", "workers": WORKERS, "args": dict(ARGS)}
    for key, value in changes.items():
        if key.startswith("args_"):
            doc["args"][key[5:]] = value
        elif value is None:
            doc.pop(key)
        else:
            doc[key] = value
    return json.dumps(doc)


def test_a_good_request_gives_the_ring_workers_arguments_and_nothing_else() -> None:
    from ralp_tf.run._ring_task import _args

    request = parse_request(_ring(), WORKERS)
    assert request.op == "ring" and request.args == RingArgs(**ARGS)
    parsed = _args(request.args.argv())  # the worker parses exactly what was checked
    assert (parsed.model, parsed.steps, parsed.warmup, parsed.checkpoint_dir, parsed.ack) == \
        ("small_cnn", 9, 3, "/shared/ckpt", True)
    assert parse_request(json.dumps({"format": FORMAT, "op": "status"}), WORKERS).op == "status"
    allowed = parse_request(_ring(args_model="team.models:build"), WORKERS, modules=("team",))
    assert allowed.args is not None and allowed.args.model == "team.models:build"


@pytest.mark.parametrize("line, says", [
    ("not json", "not one line of JSON"),
    ("[1, 2]", "must be a JSON object"),
    (_ring(format="ralp_tf.roles/0"), "different ralp-tf versions"),
    (_ring(op="exec"), "unknown op 'exec'"),
    (_ring(argv=["--evil"]), "holds exactly args, format, op, workers"),
    (_ring(workers=["10.9.9.9:2222", "10.0.0.3:2222"]), "are not this server's"),
    (_ring(args_argv="x"), "unknown: argv"),
    (json.dumps({"format": FORMAT, "op": "ring", "workers": WORKERS, "args": {"model": "small_cnn"}}), "missing: steps"),
    (_ring(args_steps=0), "args.steps must be a whole number from 1"),
    (_ring(args_steps=True), "args.steps must be a whole number"),
    (_ring(args_batch="32"), "args.batch must be a whole number"),
    (_ring(args_warmup=10), "must not exceed args.steps"),
    (_ring(args_lr=float("nan")), "args.lr must be a number"),
    (_ring(args_lr="0.1"), "args.lr must be a number"),
    (_ring(args_optimizer="adam; rm -rf /"), "args.optimizer must be one of"),
    (_ring(args_checkpoint_dir="ckpt"), "absolute path"),
    (_ring(args_checkpoint_dir="/shared/../etc"), "without '..'"),
    (_ring(args_checkpoint_dir="/shared/ck\npt"), "absolute path"),
    (_ring(args_model="os:system"), "not allowed here"),
    (_ring(args_model="--help"), "neither a built-in model"),
    (_ring(args_model="team.models:build"), "restart it with --ring-modules team"),
    (_ring(args_model=["small_cnn"]), "args.model must be"),
    ("{" + " " * MAX_REQUEST_BYTES + "}", "longer than"),
])
def test_bad_requests_are_refused_in_one_line(line: str, says: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_request(line, WORKERS, modules=("teamx",) if "teamx" in says else ())
    message = str(info.value)
    assert says in message and "\n" not in message, message


# ------------------------------------------------------------------------------------------ the server
def _free_ports(n: int) -> list[int]:
    """``n`` free loopback ports whose control ports (+1000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 1000 < 65536 and port not in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 1000))
                except OSError:
                    continue
            ports.append(port)
    return ports


def test_server_arguments_are_checked_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from cli_exit import exit_code

    w, p = _free_ports(2)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker": [f"127.0.0.1:{w}"], "ps": [f"127.0.0.1:{p}"]}))
    base = ["server", "--cluster-spec", str(path), "--roles"]
    assert exit_code(base + ["--task", "ps:0"], monkeypatch) == 2
    assert "--roles is for worker tasks" in capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_code(base + ["--task", "worker:0", "--ring-modules", "a b"], monkeypatch) == 2
    assert "--ring-modules takes package names" in capsys.readouterr().err
    assert exit_code(base + ["--task", "worker:0", "--control-port-offset", "70000"], monkeypatch) == 2
    assert "within 1-65535" in capsys.readouterr().err.strip().splitlines()[-1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", w + 1000))
        taken.listen()
        assert exit_code(base + ["--task", "worker:0"], monkeypatch) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert f"control port {w + 1000} on 127.0.0.1 cannot be used" in err[-1] and err[-1].startswith("ralp-tf")


def test_run_cluster_names_the_control_ports_that_do_not_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from cli_exit import exit_code

    w0, w1, p = _free_ports(3)
    spec = {"worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"], "ps": [f"127.0.0.1:{p}"]}
    argv = ["run", "--cluster", json.dumps(spec), "--strategy", "mwms", "--model", "small_cnn", "--connect-timeout", "1"]
    assert exit_code(argv, monkeypatch) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"worker:0 (127.0.0.1:{w0 + 1000})" in err and "ralp-tf server --roles" in err


# A PSS task stand-in: says it is ready, stops on SIGTERM as ralp_tf.run._task does.
_FAKE_TASK = textwrap.dedent("""
    import signal, sys
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    print("RALP_TF_TASK_READY worker:%(index)d fake", flush=True)
    signum = signal.sigwait({signal.SIGTERM, signal.SIGINT})
    print("task worker:%(index)d stopped by " + signal.Signals(signum).name, flush=True)
""")
# A ring worker stand-in: rank 0 speaks the protocol of ralp_tf.run._ring_task, echoing its arguments.
_FAKE_RING = textwrap.dedent("""
    import json, os, sys
    rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    argv = sys.argv[1:]
    if rank == 0:
        print("some TensorFlow noise", flush=True)
        print("RALP_RING step 2 2.5", flush=True)
        print("RALP_RING measure start", flush=True); sys.stdin.readline()
        print("RALP_RING step 4 2.0", flush=True)
        print("RALP_RING measure end", flush=True); sys.stdin.readline()
        print("RALP_RING result " + json.dumps({"losses": [2.5, 2.0], "elapsed": 0.5, "sync_steps": 1,
              "measured_worker_steps": 2, "done": 4, "workers": 2, "resumed_from_step": None,
              "restored_weights_checksum": None, "restored_weights_digest": None, "final_weights_checksum": 1.0,
              "argv": argv}), flush=True)
    sys.exit(int(os.environ.get("FAKE_RING_EXIT", "0")) if rank == 1 else 0)
""")
_SERVER = textwrap.dedent("""
    import json, sys
    from ralp_tf.run.role_server import RoleServer
    from ralp_tf.run.tfconfig import load_cluster_config
    config = load_cluster_config(sys.argv[1], task=sys.argv[2])
    index = config.task[1]
    port = int(config.address("worker", index).rsplit(":", 1)[1])
    server = RoleServer(config, "worker", index, ip="127.0.0.1", control_port=port + 1000, task_env=dict(__import__("os").environ))
    server.task_argv = [sys.executable, "-c", sys.argv[3] % {"index": index}]
    server.ring_program = [sys.executable, "-c", sys.argv[4]]
    server.listen()
    sys.exit(server.serve())
""")


def _start_servers(tmp_path: Path, spec: dict, env: dict, name: str) -> list[tuple[subprocess.Popen, Path]]:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"cluster": spec}))
    servers = []
    for i in range(len(spec["worker"])):
        log = tmp_path / f"{name}-worker{i}.log"
        with open(log, "wb") as out:
            servers.append((subprocess.Popen([sys.executable, "-c", _SERVER, str(path), f"worker:{i}", _FAKE_TASK,
                                              _FAKE_RING], env=env, stdout=out, stderr=subprocess.STDOUT), log))
    deadline = time.monotonic() + 30
    for proc, log in servers:
        while log.read_text().count("RALP_TF_TASK_READY") < 1:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    return servers


def _ask(port: int, line: bytes) -> list[dict]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(line)
        return [json.loads(x) for x in s.makefile("rb").read().splitlines()]


@pytest.mark.slow  # a dozen small Python processes (no TensorFlow): 3-5 s
@pytest.mark.integration  # processes talking over sockets: make test's pass for subprocesses, not the SCHED_IDLE one
def test_a_ring_session_runs_on_role_servers_and_each_serves_its_task_again(tmp_path: Path) -> None:
    """Two role servers (stand-in task and ring programs): bad requests refused on the wire, status,
    a whole ring through train_ring's RoleRingJob (lines, acks, exit, serving), a failing ring
    worker named with its log, a chief that goes away; SIGTERM ends each server with exit 0."""
    from ralp_tf.errors import ClusterRuntimeError
    from ralp_tf.run.ring import train_ring
    from ralp_tf.run.roles import RoleRingJob, ring_unavailable_reason
    from ralp_tf.run.tfconfig import load_cluster_config

    w0, w1, p = _free_ports(3)
    spec = {"worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"], "ps": [f"127.0.0.1:{p}"]}
    config = load_cluster_config(json.dumps({"cluster": spec}))
    assert "worker:0's control port 127.0.0.1:" in ring_unavailable_reason(config, timeout_s=1)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    servers = _start_servers(tmp_path, spec, env, "first")
    try:
        assert ring_unavailable_reason(config) == ""
        (bad,) = _ask(w0 + 1000, b'{"format": "' + FORMAT.encode() + b'", "op": "exec"}\n')
        assert bad["event"] == "error" and "unknown op" in bad["message"]
        (status,) = _ask(w1 + 1000, json.dumps({"format": FORMAT, "op": "status"}).encode() + b"\n")
        assert status == {"event": "status", "format": FORMAT, "task": "worker:1", "workers": spec["worker"],
                          "role": "pss"}

        def launcher(n: int, args: RingArgs, log_dir: Any) -> RoleRingJob:
            return RoleRingJob(config, n, args, log_dir, timeout_s=10)

        seen: list[int] = []
        r = train_ring("small_cnn", workers=2, steps=2, warmup_steps=2, checkpoint_dir=str(tmp_path / "ck"),
                       launcher=launcher, on_step=seen.append)
        assert r.strategy == "mwms" and r.losses == [2.5, 2.0] and r.total_steps == 4 and seen == [0, 1, 2, 3]
        assert r.bytes_per_step is None  # no agents: unavailable
        for _, log in servers:  # each stopped its task, ran the ring, restarted the task
            text = log.read_text()
            assert text.count("RALP_TF_TASK_READY") == 2 and "serves its PSS task again" in text, text

        env_fail = dict(env, FAKE_RING_EXIT="7")
        for proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        servers = _start_servers(tmp_path, spec, env_fail, "failing")
        with pytest.raises(ClusterRuntimeError, match="ring worker 1 on worker:1 .* exited with code 7"):
            train_ring("small_cnn", workers=2, steps=2, warmup_steps=2, launcher=launcher)
        # a chief that goes away mid-ring: the server stops its ring worker and serves its task again
        log = servers[0][1]
        while any(f.read_text().count("RALP_TF_TASK_READY") < 2 for _, f in servers):
            time.sleep(0.1)
        with RoleRingJob(config, 2, RingArgs(model="small_cnn", steps=4), timeout_s=10) as job:
            assert next(iter(job.lines())) == "step 2 2.5"
        deadline = time.monotonic() + 20
        while log.read_text().count("RALP_TF_TASK_READY") < 3:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "went away; stopping the ring worker" in log.read_text()
    finally:
        for proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
        codes = []
        for proc, _ in servers:
            try:
                codes.append(proc.wait(timeout=20))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
    assert codes == [0, 0], [log.read_text() for _, log in servers]
    assert all("stopped by SIGTERM" in log.read_text().splitlines()[-1] for _, log in servers)
