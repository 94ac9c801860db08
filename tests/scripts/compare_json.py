"""Run ``ralp_tf.run.training.compare`` in a process of its own and print its results as one JSON object.

``python compare_json.py SPEC`` where SPEC is a JSON object: ``{"model": NAME, "policies": [policy
name or plan object, ...], "kwargs": {...}}``, or ``{"workers": N, "ps": M, "runs": [{"model": ...,
"policies": [...], "kwargs": {...}}, ...]}``: every run on one LocalCluster, one after the other (as
``compare`` runs its policies), printed as a list of result objects in the order of ``runs``. Tests
that start a LocalCluster use it so that their ParameterServerStrategy never replaces the test
process's own eager cluster.
"""
import json
import sys

from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import compare


def _policies(spec: dict) -> list:
    return [p if isinstance(p, str) else Plan.from_dict(p) for p in spec["policies"]]


def _runs_on_one_cluster(spec: dict) -> list[dict]:
    import tensorflow as tf

    from ralp_tf.plan.cluster import Rates
    from ralp_tf.run.launch import LocalCluster
    from ralp_tf.run.traffic import cluster_endpoints
    from ralp_tf.run.training import train

    out = []
    with LocalCluster(workers=spec["workers"], ps=spec["ps"]) as lc:
        strategy = lc.strategy()
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        for run in spec["runs"]:
            kwargs = dict(run.get("kwargs", {}))
            cluster = lc.cluster(**Rates(kwargs.pop("bandwidth", None), kwargs.pop("flops", None)).kwargs())
            results = {}
            for policy in _policies(run):
                name = policy if isinstance(policy, str) else policy.policy
                results[name] = train(strategy, run["model"], policy=policy, endpoints=cluster_endpoints(lc),
                                      cluster=cluster, coordinator=coordinator, **kwargs).to_dict()
            out.append(results)
        lc.check_alive()
    return out


spec = json.loads(sys.argv[1])
if "runs" in spec:
    print("RESULTS " + json.dumps(_runs_on_one_cluster(spec)), flush=True)
else:
    results = compare(spec["model"], policies=_policies(spec), **spec.get("kwargs", {}))
    print("RESULTS " + json.dumps({name: r.to_dict() for name, r in results.items()}), flush=True)
