"""``ralp-tf manifest``: a Kubernetes manifest, as JSON, that runs a cluster shape with ralp-tf.

Two kinds (``--kind``):

* ``job`` (default, plain Kubernetes): a ``v1/List`` holding, per task, a headless ``Service``
  (stable DNS name ``<name>-<job>-<index>``) and a ``batch/v1`` ``Job`` whose pod runs ``ralp-tf
  server`` (workers and PS tasks, with ``ralp-tf agent`` beside it so bytes per step can be
  counted) or ``ralp-tf run --cluster TF_CONFIG`` (the chief). Every pod gets its own
  ``TF_CONFIG`` environment variable: the one cluster spec, and its own task. Workers run
  ``ralp-tf server --roles`` and declare its control port (:data:`CONTROL_PORT`, the task's port +
  1000), so the chief's ``--strategy mwms|auto`` can run the ring there (docs/multihost.md).
* ``tfjob`` (Kubeflow training operator): one ``kubeflow.org/v1`` ``TFJob`` with ``Chief``,
  ``Worker`` and ``PS`` replica specs; the operator sets ``TF_CONFIG`` per replica itself (and its
  services are ``<name>-<replica type>-<index>``), so the containers only name the command.

Both kinds end with a ``networking.k8s.io/v1`` ``NetworkPolicy`` (:func:`network_policy`, named
``<name>-tf-ports``): it selects the job's pods by the label ``app: <name>`` they all carry and lets
in, on the ports their containers declare only (TCP), traffic from pods with that same label. The
gRPC servers and the agent are unauthenticated, and a pod a NetworkPolicy selects takes no ingress
it does not allow, so no other pod of the namespace reaches them. It takes effect where the
cluster's network plugin enforces NetworkPolicy (Calico, Cilium, ...); without one it is ignored.
The ``tfjob`` kind is then a ``v1/List`` of the ``TFJob`` and the policy, its replicas' pod
templates labelled ``app: <name>``.

Servers listen on ``0.0.0.0`` inside their pod (``--bind``): a service name resolves to the
service's address, not the pod's.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ralp_tf.cli.args import add_output_arg, positive_int
from ralp_tf.errors import ValidationError
from ralp_tf.run.remote import AGENT_PORT
from ralp_tf.run.roles import CONTROL_PORT_OFFSET

__all__ = ["PORT", "CONTROL_PORT", "cluster_spec", "network_policy", "job_manifest", "tfjob_manifest", "register", "cmd_manifest"]

PORT = 2222
#: The control port of a worker's ``ralp-tf server --roles`` (its task port + the default offset).
CONTROL_PORT = PORT + CONTROL_PORT_OFFSET
#: What a worker's and a PS task's server run (``--bind 0.0.0.0``: a service name is not the pod's address).
_WORKER_SERVER, _PS_SERVER = ["server", "--bind", "0.0.0.0", "--roles"], ["server", "--bind", "0.0.0.0"]
_NAME_FIX = "use 1-40 lowercase letters, digits or '-', starting with a letter (a Kubernetes name)"


def _check_name(name: str) -> str:
    import re

    if not re.fullmatch(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?", name):
        raise ValidationError(f"job name {name!r} is not valid: {_NAME_FIX}")
    return name


def cluster_spec(name: str, workers: int, ps: int, namespace: str = "default", port: int = PORT) -> dict[str, list[str]]:
    """``{"chief": [...], "worker": [...], "ps": [...]}`` of service DNS names ``<name>-<job>-<i>``."""
    host = "{name}-{job}-{i}.{namespace}.svc:{port}"
    return {job: [host.format(name=name, job=job, i=i, namespace=namespace, port=port) for i in range(n)]
            for job, n in (("chief", 1), ("worker", workers), ("ps", ps))}


def _container(image: str, args: list[str], env: list[dict[str, str]], ports: list[int]) -> dict[str, Any]:
    return {"name": "ralp-tf", "image": image, "command": ["ralp-tf"], "args": args, "env": env,
            "ports": [{"containerPort": p} for p in ports]}


def network_policy(name: str, namespace: str, labels: dict[str, str], ports: list[int]) -> dict[str, Any]:
    """The ``NetworkPolicy`` ``<name>-tf-ports``: the pods matching ``labels`` take ingress only from
    pods matching ``labels``, and only on ``ports`` (TCP); egress is left alone."""
    selector = {"matchLabels": dict(labels)}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{name}-tf-ports", "namespace": namespace, "labels": dict(labels)},
            "spec": {"podSelector": selector, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": {"matchLabels": dict(labels)}}],
                                  "ports": [{"port": p, "protocol": "TCP"} for p in sorted(set(ports))]}]}}


def job_manifest(name: str, workers: int, ps: int, *, image: str, model: str, steps: int,
                 namespace: str = "default", run_args: list[str] | None = None) -> dict[str, Any]:
    """A ``v1/List`` of a headless Service and a Job per task, then the job's NetworkPolicy (see the
    module docstring)."""
    spec = cluster_spec(name, workers, ps, namespace)
    items: list[dict[str, Any]] = []
    for job, addrs in spec.items():
        for i in range(len(addrs)):
            task = f"{name}-{job}-{i}"
            labels = {"app": name, "ralp-tf/task": f"{job}-{i}"}
            tf_config = json.dumps({"cluster": spec, "task": {"type": job, "index": i}}, sort_keys=True)
            env = [{"name": "TF_CONFIG", "value": tf_config}]
            if job == "chief":
                containers = [_container(image, ["run", "--cluster", "TF_CONFIG", "--model", model, "--steps",
                                                 str(steps), "--agent-port", str(AGENT_PORT), "--json",
                                                 *(run_args or [])], env, [PORT])]
            else:
                worker = job == "worker"
                containers = [_container(image, _WORKER_SERVER if worker else _PS_SERVER, env,
                                         [PORT, CONTROL_PORT] if worker else [PORT]),
                              dict(_container(image, ["agent", "--bind", "0.0.0.0"], env, [AGENT_PORT]),
                                   name="ralp-tf-agent")]
            ports = [{"name": "grpc", "port": PORT}, {"name": "agent", "port": AGENT_PORT}]
            if job == "worker":
                ports.append({"name": "control", "port": CONTROL_PORT})
            items.append({"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": task, "namespace": namespace, "labels": labels},
                          "spec": {"clusterIP": "None", "selector": labels, "ports": ports}})
            items.append({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": task, "namespace": namespace, "labels": labels},
                          "spec": {"backoffLimit": 0 if job == "chief" else 3,
                                   "template": {"metadata": {"labels": labels},
                                                "spec": {"restartPolicy": "Never" if job == "chief" else "OnFailure",
                                                         "containers": containers}}}})
    items.append(network_policy(name, namespace, {"app": name}, [PORT, AGENT_PORT, CONTROL_PORT]))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def tfjob_manifest(name: str, workers: int, ps: int, *, image: str, model: str, steps: int,
                   namespace: str = "default", run_args: list[str] | None = None) -> dict[str, Any]:
    """A ``v1/List`` of a Kubeflow ``TFJob`` (the operator sets ``TF_CONFIG`` per replica) and its
    NetworkPolicy (see the module docstring)."""
    labels = {"app": name}

    def replica(count: int, args: list[str], policy: str, control: bool = False) -> dict[str, Any]:
        ports = [{"name": "tfjob-port", "containerPort": PORT}]
        if control:
            ports.append({"name": "control", "containerPort": CONTROL_PORT})
        return {"replicas": count, "restartPolicy": policy,
                "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [
                    {"name": "tensorflow", "image": image, "command": ["ralp-tf"], "args": args, "ports": ports}]}}}

    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name, "namespace": namespace},
             "spec": {"tfReplicaSpecs": {
                 "Chief": replica(1, ["run", "--cluster", "TF_CONFIG", "--model", model, "--steps", str(steps),
                                      "--json", *(run_args or [])], "Never"),
                 "Worker": replica(workers, _WORKER_SERVER, "OnFailure", control=True),
                 "PS": replica(ps, _PS_SERVER, "OnFailure")}}}
    return {"apiVersion": "v1", "kind": "List",
            "items": [tfjob, network_policy(name, namespace, labels, [PORT, CONTROL_PORT])]}


def register(subparsers: Any) -> None:
    """Add ``manifest`` to an argparse subparsers object."""
    m = subparsers.add_parser("manifest", help="print a Kubernetes Job/TFJob manifest (JSON) that runs a cluster "
                                               "shape with ralp-tf server and run --cluster, and a NetworkPolicy "
                                               "that opens its ports to its own pods only")
    m.add_argument("--workers", type=positive_int, default=2, help="worker tasks (default 2)")
    m.add_argument("--ps", type=positive_int, default=1, help="PS tasks (default 1)")
    m.add_argument("--name", default="ralp", help="job name, prefix of every object (default ralp)")
    m.add_argument("--namespace", default="default")
    m.add_argument("--image", required=True, help="container image with ralp_tf installed")
    m.add_argument("--model", default="alexnet_cifar")
    m.add_argument("--steps", type=positive_int, default=100)
    m.add_argument("--kind", choices=("job", "tfjob"), default="job",
                   help="job: Services + batch/v1 Jobs with TF_CONFIG per pod; tfjob: a Kubeflow TFJob "
                        "(either with the NetworkPolicy)")
    add_output_arg(m, "--out", help="write the JSON here instead of stdout")
    m.set_defaults(func=cmd_manifest)


def cmd_manifest(args: argparse.Namespace) -> int:
    """Print (or write to ``--out``) the manifest as JSON."""
    build = tfjob_manifest if args.kind == "tfjob" else job_manifest
    doc = build(_check_name(args.name), args.workers, args.ps, image=args.image, model=args.model, steps=args.steps,
                namespace=_check_name(args.namespace))
    text = json.dumps(doc, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0
