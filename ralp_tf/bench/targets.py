"""The benchmark's pass/fail goals: loaded from a JSON file (``benchmarks/targets.json``), not
written into the code, and evaluated on whatever cells a results document holds.

A targets file is ``{"targets": [TARGET, ...]}`` (other top-level keys, such as ``"about"``,
are free text). Each ``TARGET`` has a ``kind``, a ``goal`` (a positive number, or null: the
value is reported, never judged) and, except ``analyzer_choice``, a ``label``:

=======================  ===========================================================================
``ratio``                ``value = samples/s of strategy / samples/s of baseline`` in the cell
                         (``model``, ``workers``, ``bandwidth``); met if ``value >= goal``
``traffic_bound_share``  ``value = ratio / bound`` with ``bound = bytes_per_step of baseline /
                         bytes_per_step of strategy`` (measured); met if ``value >= goal``
``analyzer_choice``      in every cell with the analyzer's choice (``ralp``) and the alternative it
                         rejected (``ps`` when it split, else ``rejected``) measured:
                         ``value = choice / rejected`` samples/s; met if ``value >= goal`` or the
                         repetitions' ranges overlap (noise)
``step_time_error``      ``value`` = share of measured strategy-cells with ``|step_error| <=
                         tolerance``; met if ``value >= goal``
``bytes_error``          the same with ``bytes_error``
=======================  ===========================================================================

A target whose cells were not measured is left out. Each evaluated item is
``{"target", "value", "goal", "met": True|False|None (no goal), "note"}``.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping

from ralp_tf.bench.config import STRATEGIES
from ralp_tf.errors import ValidationError, read_json_file

__all__ = ["REPO_TARGETS_PATH", "TARGETS_FILE_NAME", "KINDS", "TargetsError", "Target", "parse_target",
           "load_targets", "default_targets_path", "evaluate_targets", "targets"]

#: The repository's targets file (used when the output folder has none).
REPO_TARGETS_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "targets.json"
TARGETS_FILE_NAME = "targets.json"

_CELL_KEYS = {"model": str, "workers": int, "bandwidth": str, "strategy": str, "baseline": str}
#: kind -> the keys it needs besides ``kind`` and ``goal`` (with their types)
KINDS: dict[str, dict[str, type]] = {
    "ratio": {"label": str, **_CELL_KEYS},
    "traffic_bound_share": {"label": str, **_CELL_KEYS},
    "analyzer_choice": {},
    "step_time_error": {"label": str, "tolerance": float},
    "bytes_error": {"label": str, "tolerance": float},
}


class TargetsError(ValidationError):
    """A targets file is missing, not JSON, or has a malformed target."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One goal of a targets file (see the module doc for each ``kind``)."""

    kind: str
    goal: float | None
    label: str = ""
    model: str = ""
    workers: int = 0
    bandwidth: str = ""
    strategy: str = ""
    baseline: str = ""
    tolerance: float = 0.0


def _check_type(value: Any, want: type, where: str) -> None:
    if want is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        what = "a positive number"
    elif want is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        what = "a positive integer"
    else:
        ok = isinstance(value, str) and bool(value.strip())
        what = "a non-empty string"
    if not ok:
        raise TargetsError(f"{where} must be {what}, got {value!r}")


def parse_target(item: Any, where: str) -> Target:
    """Validate one target object and return it as a :class:`Target`."""
    if not isinstance(item, dict):
        raise TargetsError(f"{where} must be an object, got {type(item).__name__}")
    kind = item.get("kind")
    if kind not in KINDS:
        raise TargetsError(f"{where}: unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    needed = KINDS[kind]
    unknown = sorted(set(item) - set(needed) - {"kind", "goal"})
    if unknown:
        raise TargetsError(f"{where} ({kind}): unknown key(s) {', '.join(unknown)}; a {kind} target has "
                           f"{', '.join(['kind', 'goal', *needed])}")
    for key, want in needed.items():
        if key not in item:
            raise TargetsError(f"{where} ({kind}): missing {key!r}")
        _check_type(item[key], want, f"{where}.{key}")
    for key in ("strategy", "baseline"):
        if key in item and item[key] not in STRATEGIES:
            raise TargetsError(f"{where}.{key}: unknown strategy {item[key]!r}; use one of {', '.join(STRATEGIES)}")
    if "goal" not in item:
        raise TargetsError(f"{where} ({kind}): missing 'goal' (a positive number, or null to only report)")
    if item["goal"] is not None:
        _check_type(item["goal"], float, f"{where}.goal")
    return Target(**item)


def load_targets(path: str | Path) -> list[Target]:
    """Read and validate a targets file; raises :class:`TargetsError` naming the bad entry."""
    path = Path(path)
    data = read_json_file(path, TargetsError, "targets file")
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise TargetsError(f"targets file {path} must be an object with a 'targets' list")
    return [parse_target(item, f"{path.name}: targets[{i}]") for i, item in enumerate(data["targets"])]


def default_targets_path(out_dir: str | Path | None = None) -> Path | None:
    """``<out_dir>/targets.json`` if it exists, else the repository's ``benchmarks/targets.json``
    if it exists, else None (no targets)."""
    for path in ([Path(out_dir) / TARGETS_FILE_NAME] if out_dir is not None else []) + [REPO_TARGETS_PATH]:
        if path.is_file():
            return path
    return None


def _cell(doc: Mapping[str, Any], model: str, workers: int, bw: str) -> Mapping[str, Any] | None:
    for c in doc.get("cells", []):
        if c["model"] == model and c["workers"] == workers and c["bandwidth"] == bw:
            return c
    return None


def _sps(cell: Mapping[str, Any] | None, s: str) -> float | None:
    if not cell:
        return None
    st = cell["strategies"].get(s, {})
    return st.get("samples_per_s") if st.get("status") in ("ok", "partial") else None


def _range(cell: Mapping[str, Any], s: str) -> tuple[float, float] | None:
    xs = cell["strategies"].get(s, {}).get("samples_per_s_all") or []
    return (min(xs), max(xs)) if xs else None


def _item(label: str, value: float, goal: float | None, note: str = "", met: bool | None = None) -> dict[str, Any]:
    if met is None and goal is not None:
        met = value >= goal
    return {"target": label, "value": value, "goal": goal, "met": met, "note": note}


def _ratio(doc: Mapping[str, Any], t: Target) -> list[dict[str, Any]]:
    c = _cell(doc, t.model, t.workers, t.bandwidth)
    x, y = _sps(c, t.strategy), _sps(c, t.baseline)
    return [] if x is None or y is None else [_item(t.label, x / y, t.goal)]


def _traffic_bound_share(doc: Mapping[str, Any], t: Target) -> list[dict[str, Any]]:
    c = _cell(doc, t.model, t.workers, t.bandwidth)
    x, y = _sps(c, t.strategy), _sps(c, t.baseline)
    if c is None or not x or not y:
        return []
    base_b = c["strategies"][t.baseline].get("bytes_per_step")
    own_b = c["strategies"][t.strategy].get("bytes_per_step")
    bound = base_b / own_b if base_b and own_b else None
    if not bound:
        return []
    r = x / y
    return [_item(t.label, r / bound, t.goal, f"speed-up {r:.2f}x, traffic bound (measured bytes ratio) {bound:.2f}x")]


def _analyzer_choice(doc: Mapping[str, Any], t: Target) -> list[dict[str, Any]]:
    out = []
    for cell in doc.get("cells", []):
        split = (cell.get("bench_predictions") or {}).get("analysis", {}).get("split")
        rejected = "ps" if split else "rejected"
        if split is None or _sps(cell, "ralp") is None or _sps(cell, rejected) is None:
            continue
        ch, rj = _range(cell, "ralp"), _range(cell, rejected)
        value = _sps(cell, "ralp") / _sps(cell, rejected)
        within_noise = ch is not None and rj is not None and ch[1] >= rj[0]
        beaten = t.goal is not None and value < t.goal
        out.append(_item(f"{cell['key']}: analyzer's choice ({'split' if split else 'no split'}) not slower "
                         f"than the rejected {'stock PS' if split else 'best split'}", value, t.goal,
                         "ranges of the repetitions overlap" if beaten and within_noise else "",
                         met=None if t.goal is None else (not beaten or within_noise)))
    return out


def _error_share(doc: Mapping[str, Any], t: Target) -> list[dict[str, Any]]:
    key = "step_error" if t.kind == "step_time_error" else "bytes_error"
    errors = [st[key] for cell in doc.get("cells", []) for st in cell["strategies"].values()
              if st.get("status") in ("ok", "partial") and st.get(key) is not None]
    if not errors:
        return []
    n_ok = sum(abs(e) <= t.tolerance for e in errors)
    return [_item(t.label, n_ok / len(errors), t.goal, f"{n_ok} of {len(errors)}")]


_EVALUATE = {"ratio": _ratio, "traffic_bound_share": _traffic_bound_share, "analyzer_choice": _analyzer_choice,
             "step_time_error": _error_share, "bytes_error": _error_share}


def evaluate_targets(doc: Mapping[str, Any], spec: list[Target]) -> list[dict[str, Any]]:
    """Every target of ``spec``, in order, evaluated on the results document ``doc``."""
    return [item for t in spec for item in _EVALUATE[t.kind](doc, t)]


def targets(doc: Mapping[str, Any], spec: list[Target] | None = None, *,
            out_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The targets of ``spec`` (default: the file :func:`default_targets_path` finds; none if
    there is none) evaluated on ``doc``."""
    if spec is None:
        path = default_targets_path(out_dir)
        spec = load_targets(path) if path is not None else []
    return evaluate_targets(doc, spec)
