r"""The shipped placement policies: their weights (``scheduler/weights/*.npz``, one per problem kind),
the feature set that reads them, the file format and loading.

``heterps`` (features ``"slots"``, :mod:`scheduler.policy.slots`) and ``maxload`` (features
``"lookahead"``, :mod:`scheduler.policy.policy_features`). How they are trained, and the command
that makes them (``python -m scheduler.shipped``): :mod:`scheduler.evaluation.recipes`.

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
from pathlib import Path
from typing import Any

import numpy as np

from ralp_tf.model import LAYER_KINDS
from scheduler.core.errors import PolicyMismatchError, ProblemError

__all__ = ["FORMAT", "WEIGHTS_DIR", "FILES", "KIND_FEATURES", "problem_kind", "feature_signature", "weights_digest",
           "save_policy", "load_policy", "shipped_policy"]

#: Format tag of a saved policy file.
FORMAT = "scheduler.policy/1"
#: Where the shipped policies live (package data).
WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
#: The shipped file of each problem kind.
FILES = {"heterps": "heterps_slots.npz", "maxload": "maxload_lookahead.npz"}
#: The feature set each kind's shipped policy reads.
KIND_FEATURES = {"heterps": "slots", "maxload": "lookahead"}
_LOADED: dict[str, tuple[Any, str, bytes]] = {}  # kind -> (policy, features, eager context key)


def problem_kind(problem: Any) -> str:
    """``"maxload"`` or ``"heterps"`` (HeterPS problems, their slot views, and PSS problems,
    which the policy reads through their HeterPS view)."""
    from scheduler.core.maxload import MaxLoadProblem
    from scheduler.core.problem import Problem
    from scheduler.core.pss import PSSProblem
    from scheduler.policy.slots import SlotView

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
        from scheduler.policy.slots import MAX_TYPES

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
