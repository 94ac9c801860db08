r"""The shipped placement policies: pretrained weights, the feature set that reads them, and the one
command that makes them.

``python -m scheduler.shipped --out scheduler/weights [--kind all|heterps|maxload] [--seed 0]``

One policy per problem kind, both DAgger-trained (:func:`scheduler.evaluation.generalise.train_dagger`)
with exact experts, never on an evaluated workload:

* ``heterps`` (features ``"slots"``, :mod:`scheduler.evaluation.type_slots`): HeterPS problems of 2-6
  resource types. Training set: :data:`RECIPES` ``["heterps"]["generated"]`` generated layer
  graphs (:mod:`scheduler.workloads.generated`, all six families, at most ``max_layers``
  layers), each on its own random catalog of 2-6 types
  (:func:`scheduler.evaluation.type_slots.training_problems`), plus ``cluster_views`` generated graphs on
  the HeterPS view of a random small PSS cluster (:func:`scheduler.core.pss.heterps_view`: one
  worker and one PS type, 1-4 workers, 1-3 PS tasks, 0.1-10 Gbit/s), the problem the policy
  reads when it plans for a cluster, plus ``large`` (0 in the shipped recipe: 16 made the
  policy worse on the HeterPS-scale tables, docs/scheduler.md) generated graphs of 60-230 layers (deep
  ``transformer``, ``resnet`` and ``ctr`` draws on random catalogs, constrained to 30-70% of their
  best single-type throughput; those whose optimum the threshold-interval search,
  :func:`scheduler.solvers.bounds.heterps_bound`, does not prove are skipped); all labelled by the exact optimum.
  No built-in or HeterPS-scale workload of the tables is in it (their seeds and names differ),
  so each is held out.
* ``maxload`` (features ``"lookahead"``, :mod:`scheduler.policy.policy_features`): max-load problems.
  Training set: generated branchy layer graphs
  (:func:`scheduler.workloads.layer_graphs.training_layer_graphs`), labelled by the exact
  optimum-to-go of the linear-order split. No shared dnn-partitioning workload is in it.

Budgets are gradient steps (:data:`RECIPES`); TensorFlow's op determinism is switched on while
training, so the same seed and recipe give the same weights bit for bit
(``tests/scheduler/test_shipped.py`` trains a small recipe twice and compares the bytes).

**File format** (``.npz``): ``w0 .. w{k-1}``, the weights in :attr:`LSTMPolicy.variables` order,
and ``__meta__``, a JSON object: ``format`` (:data:`FORMAT`), ``kind``, ``features``,
``signature`` (:func:`feature_signature`), ``hidden``, ``feature_dim``, ``num_actions``, ``seed``,
``recipe``, ``training`` (work counts and seconds) and ``sha256`` of the weights.
:func:`load_policy` refuses a file whose format or signature differs from the running code's
(:class:`PolicyMismatchError`, naming both and the command that retrains).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ralp_tf.model import LAYER_KINDS
from scheduler.core.errors import PolicyMismatchError, ProblemError

__all__ = ["FORMAT", "WEIGHTS_DIR", "FILES", "KIND_FEATURES", "RECIPES", "QUICK_RECIPES", "problem_kind",
           "feature_signature", "weights_digest", "save_policy", "load_policy", "shipped_policy", "train_policy",
           "main"]

#: Format tag of a saved policy file.
FORMAT = "scheduler.policy/1"
#: Where the shipped policies live (package data).
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
#: The shipped file of each problem kind.
FILES = {"heterps": "heterps_slots.npz", "maxload": "maxload_lookahead.npz"}
#: The feature set each kind's shipped policy reads.
KIND_FEATURES = {"heterps": "slots", "maxload": "lookahead"}
#: The training recipe of each kind (work budgets; the command's defaults).
RECIPES: dict[str, dict[str, int]] = {
    "heterps": {"generated": 80, "cluster_views": 24, "large": 0, "max_layers": 40, "imitation_steps": 1500,
                "dagger_steps": 1000, "dagger_batch": 8},
    "maxload": {"graphs": 24, "min_nodes": 20, "max_nodes": 200, "imitation_steps": 600, "dagger_steps": 300,
                "dagger_batch": 8},
}
#: Tiny recipes (a smoke run and the reproducibility test; not a policy to ship).
QUICK_RECIPES: dict[str, dict[str, int]] = {
    "heterps": {"generated": 3, "cluster_views": 1, "large": 0, "max_layers": 12, "imitation_steps": 6,
                "dagger_steps": 3, "dagger_batch": 2},
    "maxload": {"graphs": 2, "min_nodes": 10, "max_nodes": 30, "imitation_steps": 6, "dagger_steps": 3,
                "dagger_batch": 2},
}

_LOADED: dict[str, tuple[Any, str, bytes]] = {}  # kind -> (policy, features, eager context key)


def problem_kind(problem: Any) -> str:
    """``"maxload"`` or ``"heterps"`` (HeterPS problems, their slot views, and PSS problems,
    which the policy reads through their HeterPS view)."""
    from scheduler.core.maxload import MaxLoadProblem
    from scheduler.core.problem import Problem
    from scheduler.core.pss import PSSProblem
    from scheduler.evaluation.type_slots import SlotView

    if isinstance(problem, MaxLoadProblem):
        return "maxload"
    if isinstance(problem, (Problem, SlotView, PSSProblem)):
        return "heterps"
    raise ProblemError(f"no shipped policy reads {type(problem).__name__}; give RL(policy=...) or RL(train=True)")


def feature_signature(features: str) -> dict[str, Any]:
    """What a policy of feature set ``features`` was trained to read: the set's name and code
    version (:data:`scheduler.policy.policy_features.FEATURE_VERSIONS`), the layer kinds of its one-hot
    columns and, for type slots, the slot count."""
    from scheduler.policy.policy_features import FEATURE_SETS, FEATURE_VERSIONS

    if features not in FEATURE_SETS:
        raise ProblemError(f"unknown feature set {features!r}; use one of {', '.join(FEATURE_SETS)}")
    sig: dict[str, Any] = {"features": features, "version": FEATURE_VERSIONS[features],
                           "layer_kinds": list(LAYER_KINDS)}
    if features == "slots":
        from scheduler.evaluation.type_slots import MAX_TYPES

        sig["max_types"] = MAX_TYPES
    return sig


def weights_digest(arrays: list[np.ndarray]) -> str:
    """SHA-256 of the weights' bytes (shapes and dtypes included), in order."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_policy(policy: Any, path: str | Path, *, kind: str, features: str, seed: int = 0,
                recipe: dict[str, Any] | None = None, training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``policy`` with its metadata (module docstring); returns the metadata."""
    arrays = policy.get_weights()
    meta = {"format": FORMAT, "kind": kind, "features": features, "signature": feature_signature(features),
            "hidden": policy.hidden, "feature_dim": policy.feature_dim, "num_actions": policy.num_actions,
            "seed": int(seed), "recipe": dict(recipe or {}), "training": dict(training or {}),
            "sha256": weights_digest(arrays)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.savez(f, __meta__=np.array(json.dumps(meta, sort_keys=True)), **{f"w{i}": a for i, a in enumerate(arrays)})
    return meta


def load_policy(path: str | Path, *, features: str | None = None) -> tuple[Any, dict[str, Any]]:
    """The policy saved at ``path`` and its metadata. Refuses (:class:`PolicyMismatchError`) a file
    that is not a saved policy, whose format, signature or weights digest is not what this code
    reads, or (``features`` given) that reads another feature set."""
    from scheduler.policy.lstm_policy import LSTMPolicy

    path = Path(path)
    retrain = "retrain it with `python -m scheduler.shipped --out DIR` (or load a file saved by this version)"
    try:
        data = np.load(path, allow_pickle=False)
        meta = json.loads(str(data["__meta__"]))
    except (OSError, KeyError, ValueError) as exc:
        raise PolicyMismatchError(f"{path} is not a saved scheduler policy ({exc}); {retrain}") from None
    if meta.get("format") != FORMAT:
        raise PolicyMismatchError(f"{path} has format {meta.get('format')!r}, this code reads {FORMAT!r}; {retrain}")
    if features is not None and meta.get("features") != features:
        raise PolicyMismatchError(f"{path} holds a policy for feature set {meta.get('features')!r}, not {features!r}")
    want = feature_signature(meta["features"])
    if meta.get("signature") != want:
        diff = sorted(k for k in set(want) | set(meta.get("signature", {}))
                      if want.get(k) != meta.get("signature", {}).get(k))
        raise PolicyMismatchError(
            f"{path} was trained for feature set {meta.get('signature')} but this code computes {want} "
            f"(they differ in {', '.join(diff)}): its inputs would be misread; {retrain}")
    arrays = [data[f"w{i}"] for i in range(sum(1 for k in data.files if k.startswith("w")))]
    if weights_digest(arrays) != meta.get("sha256"):
        raise PolicyMismatchError(f"{path}: the weights do not match their recorded SHA-256 (a damaged file); {retrain}")
    policy = LSTMPolicy(int(meta["feature_dim"]), int(meta["num_actions"]), hidden=int(meta["hidden"]),
                        seed=int(meta.get("seed", 0)))
    policy.set_weights(arrays)
    return policy, meta


def _eager_context_key() -> bytes:
    """What the process's TensorFlow context is connected to: a policy's variables made before the
    process connected to a cluster live on ``/job:localhost``, which the connection removes (reading
    them fails: "Client for target /job:localhost/replica:0/task:0 not found").

    Private: ``tensorflow.python.eager.context.context().get_server_def()``. Public stand-in: none."""
    from tensorflow.python.eager import context

    server_def = context.context().get_server_def()
    return server_def.SerializeToString() if server_def is not None else b""


def shipped_policy(kind: str) -> tuple[Any, str]:
    """``(policy, feature set)`` of the shipped policy of ``kind`` (loaded once per process and per
    cluster the process connects to)."""
    if kind not in FILES:
        raise ProblemError(f"no shipped policy for problem kind {kind!r}; kinds: {', '.join(FILES)}")
    key = _eager_context_key()
    if kind not in _LOADED or _LOADED[kind][2] != key:
        path = WEIGHTS_DIR / FILES[kind]
        if not path.is_file():
            raise PolicyMismatchError(f"the shipped {kind} policy {path} is missing; make it with "
                                      f"`python -m scheduler.shipped --out {WEIGHTS_DIR} --kind {kind}`")
        policy, meta = load_policy(path, features=KIND_FEATURES[kind])
        _LOADED[kind] = (policy, meta["features"], key)
    policy, features, _ = _LOADED[kind]
    return policy, features


def _training_set(kind: str, recipe: dict[str, int], seed: int) -> tuple[list[Any], list[Any]]:
    """The training problems and their expert optima (``None``: the expert derives it)."""
    if kind == "heterps":
        from scheduler.evaluation.type_slots import training_problems

        views, optima, _ = training_problems(recipe["generated"], seed=seed, max_layers=recipe["max_layers"])
        more, more_optima = _cluster_views(recipe["cluster_views"], seed, recipe["max_layers"])
        big, big_optima = _large_views(recipe.get("large", 0), seed)
        return views + more + big, optima + more_optima + big_optima
    from scheduler.workloads.dnn_partitioning import from_dict
    from scheduler.workloads.layer_graphs import training_layer_graphs

    graphs = training_layer_graphs(recipe["graphs"], seed=seed + 2000, min_nodes=recipe["min_nodes"],
                                   max_nodes=recipe["max_nodes"])
    return [from_dict(g, g["name"]) for g in graphs], [None] * len(graphs)


def _cluster_views(count: int, seed: int, max_layers: int) -> tuple[list[Any], list[Any]]:
    """``count`` generated graphs on the HeterPS views of random small PSS clusters (module
    docstring), at random slot injections, with their exact optima as slot placements."""
    from ralp_tf.plan import Cluster
    from scheduler.core.errors import SchedulerError
    from scheduler.solvers.exact import Exact
    from scheduler.core.pss import PSSProblem, heterps_view
    from scheduler.evaluation.type_slots import MAX_TYPES, SlotView
    from scheduler.workloads.generated import EXTRA_FAMILIES, FAMILIES, random_profile

    rng = np.random.default_rng(seed + 30_000)
    fams = FAMILIES + EXTRA_FAMILIES
    views, optima = [], []
    attempts = 0
    while len(views) < count and attempts < 20 * max(count, 1):
        attempts += 1
        prof = random_profile(rng, fams[attempts % len(fams)], name=f"cluster_view{seed}_{attempts}")
        cluster = Cluster.local(int(rng.integers(1, 5)), int(rng.integers(1, 4)),
                                bandwidth=float(rng.choice([1e8, 1e9, 1e10])))
        if len(prof.compute_layers) > max_layers:
            continue
        try:
            problem = heterps_view(PSSProblem(prof, cluster))
            problem.check_feasible()
            optimum = Exact().solve(problem).assignment
        except SchedulerError:
            continue
        view = SlotView(problem, [int(x) for x in rng.permutation(MAX_TYPES)[:problem.num_choices]])
        views.append(view)
        optima.append(view.slots(optimum))
    return views, optima


def _large_views(count: int, seed: int) -> tuple[list[Any], list[Any]]:
    """``count`` deep generated graphs (module docstring) on random catalogs of 2-6 types, at
    random slot injections, with their exact optima as slot placements."""
    from scheduler.solvers.bounds import heterps_bound
    from scheduler.core.errors import SchedulerError
    from scheduler.core.problem import Problem
    from scheduler.core.resources import Constraints
    from scheduler.evaluation.type_slots import MAX_TYPES, MIN_TYPES, SlotView, random_catalog
    from scheduler.workloads.generated import random_profile

    rng = np.random.default_rng(seed + 40_000)
    views, optima = [], []
    attempts = 0
    while len(views) < count and attempts < 10 * max(count, 1):
        attempts += 1
        family = ("transformer", "resnet", "ctr")[attempts % 3]
        size = {"transformer": {"blocks": int(rng.integers(6, 23))},
                "resnet": {"blocks": [int(x) for x in rng.integers(1, 10, size=4)]},
                "ctr": {"fields": int(rng.integers(30, 111))}}[family]
        prof = random_profile(rng, family, name=f"large{seed}_{attempts}_{family}", **size)
        cat = random_catalog(rng, int(rng.integers(MIN_TYPES, MAX_TYPES + 1)), name=f"large{seed}_{attempts}")
        try:
            free = Problem.from_profile(prof, cat, Constraints(0.0, None))
            n = free.num_decisions
            single = max(float(free.seg_max_rate[0, n - 1, r]) for r in range(free.num_choices))
            problem = free.with_constraints(Constraints(float(rng.uniform(0.3, 0.7)) * single, None))
            bound = heterps_bound(problem)
        except SchedulerError:
            continue
        if not bound.exact:  # the optimum is not known within the bound's budget: not a labelled example
            continue
        optimum = bound.assignment
        view = SlotView(problem, [int(x) for x in rng.permutation(MAX_TYPES)[:problem.num_choices]])
        views.append(view)
        optima.append(view.slots(optimum))
    return views, optima


def train_policy(kind: str, *, seed: int = 0, recipe: dict[str, int] | None = None,
                 log: Callable[[str], Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """Train the policy of ``kind`` by ``recipe`` (default :data:`RECIPES`), deterministic ops on;
    returns the policy and the training record (work counts, seconds, training set names)."""
    import tensorflow as tf

    from scheduler.evaluation.generalise import train_dagger
    from scheduler.policy.rl import RL

    if kind not in RECIPES:
        raise ProblemError(f"unknown policy kind {kind!r}; use one of {', '.join(RECIPES)}")
    r = {**RECIPES[kind], **(recipe or {})}
    tf.config.experimental.enable_op_determinism()
    t0 = time.perf_counter()
    problems, optima = _training_set(kind, r, seed)
    if not problems:
        raise ProblemError(f"the {kind} recipe {r} produced no training problem")
    set_s = time.perf_counter() - t0
    solver = RL(seed=seed, iterations=0, polish=False, features=KIND_FEATURES[kind])
    info = train_dagger(solver, problems, optima=optima, imitation_steps=r["imitation_steps"],
                        dagger_steps=r["dagger_steps"], dagger_batch=r["dagger_batch"], log=log)
    info.update(training_set_seconds=set_s, problems=len(problems))
    return solver.policy, info


def main(argv: list[str] | None = None) -> int:
    """The training command (module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m scheduler.shipped", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for the .npz files (the package's: scheduler/weights)")
    ap.add_argument("--kind", choices=("all", *RECIPES), default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="the tiny recipes (a smoke run, not a policy to ship)")
    args = ap.parse_args(argv)
    for kind in (RECIPES if args.kind == "all" else [args.kind]):
        recipe = (QUICK_RECIPES if args.quick else RECIPES)[kind]
        policy, info = train_policy(kind, seed=args.seed, recipe=recipe, log=print)
        meta = save_policy(policy, Path(args.out) / FILES[kind], kind=kind, features=KIND_FEATURES[kind],
                           seed=args.seed, recipe=recipe, training=info)
        print(f"{kind}: {info['problems']} training problems, {info['train_seconds']:.0f} s; wrote "
              f"{Path(args.out) / FILES[kind]} (sha256 {meta['sha256'][:16]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
