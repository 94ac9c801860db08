"""Real clusters from TF_CONFIG: cluster files, `ralp-tf server`/`agent`, `run --cluster`.

The fast tests check the cluster-file forms and every bad input (nothing starts TensorFlow). The
integration test starts one `ralp-tf server` per task inside the namespace testbed (3 hosts, each
its own IP: the chief; worker0 + ps0; worker1 + ps1), an agent per worker/PS host, and
`ralp-tf run --cluster` from the chief's namespace, as docs/multihost.md tells a user to, and
compares its bytes per step with `ralp-tf run` of the same plan on a LocalCluster.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ralp_tf.cli.main import main
from ralp_tf.errors import ClusterConfigError
from ralp_tf.run.tfconfig import load_cluster_config, parse_task

RALP_TF = [sys.executable, "-m", "ralp_tf.cli.main"]
SPEC = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}


def _write(tmp_path: Path, doc: object, name: str = "cluster.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_both_file_forms_and_task_override(tmp_path: Path) -> None:
    bare = load_cluster_config(_write(tmp_path, SPEC), task="ps:0")
    full = load_cluster_config(_write(tmp_path, {"cluster": SPEC, "task": {"type": "worker", "index": 1}}, "tf.json"))
    assert bare.spec == full.spec == SPEC
    assert bare.task == ("ps", 0) and full.task == ("worker", 1)
    assert load_cluster_config(json.dumps({"cluster": SPEC}), task="worker:0").task == ("worker", 0)
    env = {"TF_CONFIG": json.dumps({"cluster": SPEC, "task": {"type": "ps", "index": 0}})}
    assert load_cluster_config(None, env=env).task == ("ps", 0)
    assert full.tf_config("worker", 0) == {"cluster": SPEC, "task": {"type": "worker", "index": 0}}


@pytest.mark.parametrize("doc, task, message", [
    (None, None, "TF_CONFIG is not set"),
    ("{not json", None, "not valid JSON"),
    ({"cluster": SPEC}, "worker:2", "job 'worker' has 2 task(s)"),
    ({"cluster": SPEC}, "gpu:0", "no job 'gpu'"),
    ({"cluster": SPEC}, "worker-0", "is not JOB:INDEX"),
    ({"worker": ["no-port"]}, None, "is not 'host:port'"),
])
def test_bad_cluster_input_is_named(tmp_path: Path, doc: object, task: str | None, message: str) -> None:
    env = {} if doc is None else {"TF_CONFIG": doc if isinstance(doc, str) else json.dumps(doc)}
    with pytest.raises(ClusterConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_cluster_config(None, task=task, env=env)
    with pytest.raises(ClusterConfigError, match="does not exist"):
        load_cluster_config(str(tmp_path / "missing.json"))
    assert parse_task("ps:3") == ("ps", 3)


def test_server_refuses_bad_tasks_and_a_taken_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    path = _write(tmp_path, {"worker": [f"127.0.0.1:{port}"], "ps": ["127.0.0.1:1"], "chief": ["127.0.0.1:2"]})
    assert main(["server", "--cluster-spec", path]) == 2
    assert "names no task" in capsys.readouterr().err
    assert main(["server", "--cluster-spec", path, "--task", "chief:0"]) == 2
    assert "the chief is the coordinator" in capsys.readouterr().err
    assert main(["server", "--cluster-spec", path, "--task", "worker:0", "--bind", "192.0.2.1"]) == 2
    assert "not an address of this machine" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert main(["server", "--cluster-spec", path, "--task", "worker:0"]) == 3
    assert f"port {port} on 127.0.0.1 is already in use" in capsys.readouterr().err


def test_run_cluster_names_tasks_that_do_not_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"worker": [f"127.0.0.1:{_free_port()}"], "ps": [f"127.0.0.1:{_free_port()}"]}
    t0 = time.monotonic()
    assert main(["run", "--cluster", _write(tmp_path, spec), "--connect-timeout", "1"]) == 3
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 25  # the default --connect-timeout alone is 30 s
    assert f"worker:0 ({spec['worker'][0]})" in err and f"ps:0 ({spec['ps'][0]})" in err and "did not answer" in err


# ------------------------------------------------------------------------------------------
# across hosts: the namespace testbed


def _netns_ok() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "needs root (network namespaces)"
    from ralp_tf.testbed import netns_support

    return netns_support()


_NETNS_OK, _NETNS_WHY = _netns_ok()
HOSTS = {"h0": ["chief"], "h1": ["worker0", "ps0"], "h2": ["worker1", "ps1"]}
#: Without head splits: the analyzer weighs them per cluster, and the two clusters compared below
#: (three hosts, and one LocalCluster) must get the same plan.
STEPS = ["--model", "small_cnn", "--steps", "8", "--warmup-steps", "2", "--batch-size", "32", "--json",
         "--policy-option", "split=false"]


def _wait_for(path: Path, text: str, procs: list[subprocess.Popen], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text(errors="replace"):
        dead = [p.args for p in procs if p.poll() is not None]
        assert not dead, f"exited early: {dead}; {path} ends: {path.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"no {text!r} in {path} after {timeout_s} s: {path.read_text()[-2000:]}"
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_root
@pytest.mark.skipif(not _NETNS_OK, reason=f"namespace testbed unavailable: {_NETNS_WHY}")
def test_servers_on_three_hosts_train_like_a_local_cluster(tmp_path: Path) -> None:
    from ralp_tf.testbed import Testbed

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with Testbed(["chief", "worker0", "ps0", "worker1", "ps1"], None, prefix="tbtmh", hosts=HOSTS) as tb:
        port = {"chief": 2222, "worker0": 2222, "ps0": 2223, "worker1": 2222, "ps1": 2223}
        spec = {"chief": [tb.address("chief", 2222)],
                "worker": [tb.address(f"worker{i}", port[f"worker{i}"]) for i in range(2)],
                "ps": [tb.address(f"ps{i}", port[f"ps{i}"]) for i in range(2)]}
        cluster_file = _write(tmp_path, {"cluster": spec})
        servers, agents = {}, []
        for name in ("worker0", "ps0", "worker1", "ps1"):
            job, index = name.rstrip("01"), name[-1]
            log = tmp_path / f"{name}.log"
            with open(log, "wb") as out:
                servers[name] = (tb.popen(name, RALP_TF + ["server", "--cluster-spec", cluster_file, "--task",
                                                           f"{job}:{index}"], env=env, stdout=out,
                                          stderr=subprocess.STDOUT), log)
        for name in ("worker0", "worker1"):  # one agent per worker/PS host
            with open(tmp_path / f"agent-{name}.log", "wb") as out:
                agents.append(tb.popen(name, RALP_TF + ["agent", "--cluster-spec", cluster_file, "--task",
                                                        f"worker:{name[-1]}"], env=env, stdout=out,
                                       stderr=subprocess.STDOUT))
        # The same plan on a LocalCluster (public CLI), while the servers start.
        local = subprocess.run(RALP_TF + ["run", "--workers", "2", "--ps", "2"] + STEPS, capture_output=True,
                               text=True, timeout=300, env=dict(os.environ))
        assert local.returncode == 0, local.stderr[-3000:]
        for name, (proc, log) in servers.items():
            _wait_for(log, "RALP_TF_TASK_READY", [proc], 180)
        board = tmp_path / "board"
        run = tb.run("chief", RALP_TF + ["run", "--cluster", cluster_file, "--agent-port", "2230",
                                         "--checkpoint-dir", str(tmp_path / "ckpt"), "--tensorboard-dir", str(board),
                                         "--tensorboard-trace"] + STEPS, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        remote, here = json.loads(run.stdout)["ralp"], json.loads(local.stdout)["ralp"]

        # placed devices: the plan computes the head on PS tasks of this cluster (verified when placed)
        placed = {layer: dev for layer, dev in remote["plan"]["placements"].items() if "/job:ps/" in dev}
        assert placed and all(any(f"/task:{i}/" in d for i in range(2)) for d in placed.values()), remote["plan"]
        assert {k: v for k, v in remote["plan"].items() if k != "notes"} == \
            {k: v for k, v in here["plan"].items() if k != "notes"}  # notes: predictions for other hosts
        for w in ("worker0", "worker1"):
            assert any(remote["bytes_between"].get(f"{w}->ps{i}", 0) > 0 for i in range(2)), remote["bytes_between"]
        # the loss falls
        assert remote["losses"][-1] < remote["losses"][0], remote["losses"]
        # bytes per step across hosts match the LocalCluster run of the same plan within 5%
        print(f"bytes per step: across hosts {remote['bytes_per_step']:.0f}, LocalCluster {here['bytes_per_step']:.0f}")
        assert remote["bytes_per_step"] == pytest.approx(here["bytes_per_step"], rel=0.05)
        assert remote["total_steps"] == 10 and os.listdir(tmp_path / "ckpt")
        # TensorBoard: the run's events read back, and a profiler trace of the measured steps
        from test_summaries import events

        board_events = events(board / "ralp")
        assert [v for _, v in board_events["loss"]] == pytest.approx(remote["losses"])
        assert board_events["bytes_per_step"][0][1] == pytest.approx(remote["bytes_per_step"])
        assert any(tag.startswith("bytes_per_step/worker0->ps") for tag in board_events)
        assert list(board.glob("plugins/profile/*/*.xplane.pb"))

        # calibrate the running cluster (issue 41): links across hosts, the tasks' CPU from the agents;
        # written beside the cluster file, where `run --cluster` finds it, and accepted for this cluster
        cal_run = tb.run("chief", RALP_TF + ["calibrate", "--cluster", cluster_file, "--agent-port", "2230", "--quick",
                                             "--models", "small_cnn", "--transfers", "1", "--steps", "2",
                                             "--closures", "4"], env=env, timeout=300)
        assert cal_run.returncode == 0, cal_run.stderr[-3000:]
        from ralp_tf.cli.calibrate import default_path, run_calibration

        cal = run_calibration(argparse.Namespace(cluster=cluster_file, calibration=None, workers=2, ps=2),
                              load_cluster_config(cluster_file))
        assert cal is not None and cal.path.startswith(f"calibration file {default_path(cluster_file)}")
        assert {(l.src, l.dst) for l in cal.links} >= {("worker:0", "ps:1"), ("ps:1", "worker:0")}
        assert cal.serving is not None and [c.task for c in cal.compute] == ["worker:0", "ps:0"]

        # clean shutdown: SIGTERM ends every server and agent with exit 0
        _stop_all_with_sigterm(servers, agents)


def _stop_all_with_sigterm(servers: dict[str, tuple[subprocess.Popen, Path]], agents: list[subprocess.Popen]) -> None:
    """SIGTERM to every server and agent: each exits 0, every server saying it was stopped by SIGTERM."""
    for proc, _ in servers.values():
        proc.send_signal(signal.SIGTERM)
    for proc in agents:
        proc.send_signal(signal.SIGTERM)
    for name, (proc, log) in servers.items():
        assert proc.wait(timeout=60) == 0, log.read_text()[-2000:]
        assert "stopped by SIGTERM" in log.read_text()
    assert [p.wait(timeout=30) for p in agents] == [0] * len(agents)


RING_HOSTS = {"h0": ["chief"], "h1": ["worker0", "ps0"], "h2": ["worker1"]}


def _no_process_names(text: str) -> list[str]:
    """Processes whose command line holds ``text`` (what a test must not leave behind)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_root
@pytest.mark.skipif(not _NETNS_OK, reason=f"namespace testbed unavailable: {_NETNS_WHY}")
def test_the_ring_and_auto_run_on_role_servers_across_hosts(tmp_path: Path) -> None:
    """`ralp-tf server --roles` on two worker hosts (and a PS): `run --cluster --strategy mwms` trains
    the ring on the workers' task addresses (bytes from the agents, against the cost model; worker 0
    checkpoints into the shared folder); `--strategy auto` on that folder ranks, probes the top two,
    records its choice and trains the winner from the ring's checkpoint; a rerun resumes under the
    recorded strategy. SIGTERM ends every server and agent with exit 0; nothing is left behind."""
    from ralp_tf.testbed import Testbed

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    prefix = "tbring"
    with Testbed(["chief", "worker0", "ps0", "worker1"], None, prefix=prefix, hosts=RING_HOSTS) as tb:
        spec = {"chief": [tb.address("chief", 2222)], "worker": [tb.address(f"worker{i}", 2222) for i in range(2)],
                "ps": [tb.address("ps0", 2223)]}
        cluster_file = _write(tmp_path, {"cluster": spec})
        servers, agents = {}, []
        for name, task, extra in (("worker0", "worker:0", ["--roles"]), ("worker1", "worker:1", ["--roles"]),
                                  ("ps0", "ps:0", [])):
            log = tmp_path / f"{name}.log"
            with open(log, "wb") as out:
                servers[name] = (tb.popen(name, RALP_TF + ["server", "--cluster-spec", cluster_file, "--task", task,
                                                           *extra], env=env, stdout=out, stderr=subprocess.STDOUT), log)
        for name in ("worker0", "worker1"):
            with open(tmp_path / f"agent-{name}.log", "wb") as out:
                agents.append(tb.popen(name, RALP_TF + ["agent", "--cluster-spec", cluster_file, "--task",
                                                        f"worker:{name[-1]}"], env=env, stdout=out,
                                       stderr=subprocess.STDOUT))
        for name, (proc, log) in servers.items():
            _wait_for(log, "RALP_TF_TASK_READY", [proc], 180)
        base = RALP_TF + ["run", "--cluster", cluster_file, "--model", "small_cnn", "--agent-port", "2230", "--json"]

        # the ring on the workers' task addresses
        ckpt = tmp_path / "ckpt"
        t0 = time.monotonic()
        run = tb.run("chief", base + ["--strategy", "mwms", "--steps", "6", "--checkpoint-dir", str(ckpt)], env=env,
                     timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        ring = json.loads(run.stdout)["mwms"]
        print(f"ring: {ring['bytes_per_step']:.0f} bytes per worker step measured, "
              f"{ring['predicted_bytes_per_step']:.0f} predicted ({time.monotonic() - t0:.0f} s)")
        assert ring["strategy"] == "mwms" and ring["total_steps"] == 10 and ring["losses"][-1] < ring["losses"][0]
        assert set(ring["bytes_between"]) == {"worker0->worker1", "worker1->worker0"}
        assert ring["bytes_per_step"] == pytest.approx(ring["predicted_bytes_per_step"], rel=0.05)
        for name in ("worker0", "worker1"):  # each ran its ring worker and serves its PSS task again
            text = servers[name][1].read_text()
            assert "ring worker" in text and text.count("RALP_TF_TASK_READY") == 2, text[-2000:]

        # auto: rank, probe the top two, record, train the winner (from the ring's checkpoint); a rerun
        # resumes under the recorded strategy
        t0 = time.monotonic()
        run = tb.run("chief", base + ["--strategy", "auto", "--steps", "12", "--checkpoint-dir", str(ckpt)], env=env,
                     timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        first = json.loads(run.stdout)
        decision = first["auto"]
        print(f"auto: {decision['probe_samples_per_s']} -> {decision['strategy']} ({time.monotonic() - t0:.0f} s)")
        ranked = {c["strategy"]: c for c in decision["ranking"]}
        assert ranked["mwms"]["available"] and not ranked["horovod"]["available"] and ranked["horovod"]["reason"]
        assert decision["source"] == "probe" and len(decision["probe_samples_per_s"]) == 2
        assert json.loads((ckpt / "strategy.json").read_text())["strategy"] == decision["strategy"]
        (trained,) = [v for k, v in first.items() if k != "auto"]
        assert trained["strategy"] == decision["strategy"] and trained["resumed_from_step"] == ring["total_steps"]
        assert trained["total_steps"] >= 15
        t0 = time.monotonic()
        run = tb.run("chief", base + ["--strategy", "auto", "--steps", "18", "--checkpoint-dir", str(ckpt)], env=env,
                     timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        again = json.loads(run.stdout)
        print(f"rerun: {again['auto']['source']} {again['auto']['strategy']} ({time.monotonic() - t0:.0f} s)")
        assert again["auto"]["source"] == "checkpoint" and again["auto"]["strategy"] == decision["strategy"]
        (resumed,) = [v for k, v in again.items() if k != "auto"]
        assert resumed["strategy"] == decision["strategy"]
        assert resumed["resumed_from_step"] == trained["total_steps"] and resumed["total_steps"] >= 21
        assert not list(tmp_path.glob(".ralp_ring_worker*"))  # the ring's private checkpoint folders are gone
        _stop_all_with_sigterm(servers, agents)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-" not in namespaces
    assert not _no_process_names(cluster_file)


@pytest.mark.parametrize("kind", ["job", "tfjob"])
def test_manifest_is_json_with_tf_config_per_replica(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "--workers", "3", "--ps", "2", "--image", "example/ralp:1", "--kind", kind,
                 "--model", "vgg16_cifar"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "List" and doc["items"][-1]["kind"] == "NetworkPolicy"
    if kind == "tfjob":  # the operator sets TF_CONFIG per replica: the counts and commands are what we set
        (tfjob,) = [i for i in doc["items"] if i["kind"] == "TFJob"]
        replicas = tfjob["spec"]["tfReplicaSpecs"]
        assert {k: v["replicas"] for k, v in replicas.items()} == {"Chief": 1, "Worker": 3, "PS": 2}
        assert replicas["Chief"]["template"]["spec"]["containers"][0]["args"][:3] == ["run", "--cluster", "TF_CONFIG"]
        return
    jobs = [i for i in doc["items"] if i["kind"] == "Job"]
    services = {i["metadata"]["name"] for i in doc["items"] if i["kind"] == "Service"}
    configs = []
    for job in jobs:
        containers = job["spec"]["template"]["spec"]["containers"]
        config = json.loads(next(e["value"] for e in containers[0]["env"] if e["name"] == "TF_CONFIG"))
        configs.append(config)
        task = config["task"]
        assert job["metadata"]["name"] == f"ralp-{task['type']}-{task['index']}"
        assert job["metadata"]["name"] in services
        assert containers[0]["args"][0] == ("run" if task["type"] == "chief" else "server")
        assert ("--roles" in containers[0]["args"]) == (task["type"] == "worker")  # the ring's role switch
        assert config["cluster"] == configs[0]["cluster"]
        load_cluster_config(json.dumps(config))  # every replica's TF_CONFIG is a valid cluster file
    assert sorted((c["task"]["type"], c["task"]["index"]) for c in configs) == \
        [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1), ("worker", 2)]
    assert configs[0]["cluster"]["worker"][2] == "ralp-worker-2.default.svc:2222"


def test_manifest_refuses_a_bad_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "--image", "x", "--name", "Bad_Name"]) == 2
    assert "Kubernetes name" in capsys.readouterr().err


# ------------------------------------------------------------------------ the manifest's NetworkPolicy
def _pods(doc: dict) -> list[tuple[dict, dict]]:
    """``(pod labels, pod spec)`` of every pod template in a manifest: a Job's, each TFJob replica's."""
    pods = []
    for item in doc["items"]:
        if item["kind"] == "Job":
            templates = [item["spec"]["template"]]
        elif item["kind"] == "TFJob":
            templates = [r["template"] for r in item["spec"]["tfReplicaSpecs"].values()]
        else:
            continue
        pods += [(t.get("metadata", {}).get("labels", {}), t["spec"]) for t in templates]
    return pods


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _check_network_policy(policy: dict) -> None:
    """The structure Kubernetes' networking.k8s.io/v1 NetworkPolicy takes (the fields we use), with
    their types: a label selector is {"matchLabels": {str: str}}, a port {"port": int, "protocol": TCP|UDP|SCTP}."""
    def selector(sel: object, where: str) -> None:
        assert isinstance(sel, dict) and set(sel) == {"matchLabels"}, where
        labels = sel["matchLabels"]
        assert isinstance(labels, dict) and labels, f"{where}: an empty selector selects every pod"
        assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in labels.items()), where

    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["kind"] == "NetworkPolicy"
    meta, spec = policy["metadata"], policy["spec"]
    assert isinstance(meta["name"], str) and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta["name"])
    assert isinstance(meta["namespace"], str)
    assert set(spec) == {"podSelector", "policyTypes", "ingress"}
    selector(spec["podSelector"], "spec.podSelector")
    assert spec["policyTypes"] == ["Ingress"]
    assert isinstance(spec["ingress"], list) and spec["ingress"]
    for i, rule in enumerate(spec["ingress"]):
        assert set(rule) == {"from", "ports"}, f"ingress[{i}]: a rule without 'from' admits every source"
        assert isinstance(rule["from"], list) and rule["from"]
        for j, peer in enumerate(rule["from"]):
            assert set(peer) == {"podSelector"}, f"ingress[{i}].from[{j}]: a pod of this namespace only"
            selector(peer["podSelector"], f"ingress[{i}].from[{j}].podSelector")
        assert isinstance(rule["ports"], list) and rule["ports"], f"ingress[{i}]: no 'ports' opens every port"
        for port in rule["ports"]:
            assert set(port) == {"port", "protocol"}
            assert isinstance(port["port"], int) and not isinstance(port["port"], bool) and 0 < port["port"] < 65536
            assert port["protocol"] in ("TCP", "UDP", "SCTP")


@pytest.mark.parametrize("kind", ["job", "tfjob"])
def test_manifest_network_policy_admits_only_the_jobs_pods_on_their_ports(
        kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One NetworkPolicy per job, well formed; it selects every pod of the job and no pod of a
    second job in the same namespace, admits only the job's own pods, and opens exactly the ports
    the job's containers declare (TCP)."""
    docs = {}
    for name in ("ralp", "other"):
        assert main(["manifest", "--workers", "2", "--ps", "2", "--image", "example/ralp:1", "--kind", kind,
                     "--name", name, "--namespace", "team"]) == 0
        docs[name] = json.loads(capsys.readouterr().out)
    doc, other = docs["ralp"], docs["other"]
    (policy,) = [i for i in doc["items"] if i["kind"] == "NetworkPolicy"]
    _check_network_policy(policy)
    assert policy["metadata"] == {"name": "ralp-tf-ports", "namespace": "team", "labels": {"app": "ralp"}}
    pods = _pods(doc)
    assert len(pods) == (5 if kind == "job" else 3)  # a Job per task (chief, 2 workers, 2 PS); one per replica type
    spec = policy["spec"]
    (rule,) = spec["ingress"]
    assert all(_matches(spec["podSelector"], labels) for labels, _ in pods)
    assert all(any(_matches(peer["podSelector"], labels) for peer in rule["from"]) for labels, _ in pods)
    assert not any(_matches(spec["podSelector"], labels) for labels, _ in _pods(other))
    assert not any(_matches(peer["podSelector"], labels) for peer in rule["from"] for labels, _ in _pods(other))
    declared = {p["containerPort"] for _, pod in pods for c in pod["containers"] for p in c["ports"]}
    # 2222: the gRPC servers; 2230: the agents (--kind job); 3222: the workers' role-switch control ports
    assert {p["port"] for p in rule["ports"]} == declared == ({2222, 2230, 3222} if kind == "job" else {2222, 3222})
    assert {p["protocol"] for p in rule["ports"]} == {"TCP"}
    if kind == "job":  # the Services send to the same ports
        services = [i for i in doc["items"] if i["kind"] == "Service"]
        assert {p["port"] for s in services for p in s["spec"]["ports"]} == declared


@pytest.mark.parametrize("broken, why", [
    (lambda p: p["spec"].pop("policyTypes"), "policyTypes"),
    (lambda p: p["spec"]["ingress"][0].pop("from"), "every source"),
    (lambda p: p["spec"]["ingress"][0].pop("ports"), "ports"),
    (lambda p: p["spec"]["podSelector"].update(matchLabels={}), "every pod"),
    (lambda p: p["spec"]["ingress"][0]["ports"][0].update(port="2222"), "port"),
    (lambda p: p["spec"]["ingress"][0]["from"][0].update(namespaceSelector={}), "this namespace"),
])
def test_the_network_policy_check_refuses_what_would_open_the_ports(broken: Any, why: str) -> None:
    """The check above is not vacuous: each way of widening the policy fails it."""
    from ralp_tf.cli.manifest import network_policy

    policy = network_policy("ralp", "default", {"app": "ralp"}, [2222, 2230])
    _check_network_policy(policy)
    broken(policy)
    with pytest.raises((AssertionError, KeyError)):
        _check_network_policy(policy)
