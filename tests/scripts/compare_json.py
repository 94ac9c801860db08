"""Run ``ralp_tf.run.training.compare`` in a process of its own and print its results as one JSON object.

``python compare_json.py SPEC`` where SPEC is a JSON object: ``{"model": NAME, "policies": [policy
name or plan object, ...], "kwargs": {...}}``. Tests that start a LocalCluster use it so that
their ParameterServerStrategy never replaces the test process's own eager cluster.
"""
import json
import sys

from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import compare

spec = json.loads(sys.argv[1])
policies = [p if isinstance(p, str) else Plan.from_dict(p) for p in spec["policies"]]
results = compare(spec["model"], policies=policies, **spec.get("kwargs", {}))
print("RESULTS " + json.dumps({name: r.to_dict() for name, r in results.items()}), flush=True)
