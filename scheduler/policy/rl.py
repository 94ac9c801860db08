r"""RL solver (HeterPS): an LSTM policy (:mod:`scheduler.policy.lstm_policy`) that places layers.

**Which policy** (:meth:`RL._resolve`):

* ``RL()`` (the default, and the placement policy ``rl``): the **shipped** pretrained policy of
  the problem's kind (:mod:`scheduler.policy.shipped`: the type-slot lookahead policy for HeterPS
  problems of 2-6 types, the lookahead policy for max-load problems), applied with no training:
  its greedy decode, a beam search of width ``beam`` and ``samples`` sampled placements
  (default 64 each), the best by ``(objective, penalized)``;
* ``RL(iterations=N)``: a copy of the shipped policy fine-tuned by ``N`` REINFORCE iterations on
  the problem, then decoded the same way;
* ``RL(train=True)``: the paper's policy trained from scratch on the problem (REINFORCE,
  ``features="basic"`` unless given; ``iterations`` default :func:`default_iterations`);
* ``RL(policy=p)``: the given :class:`~scheduler.policy.lstm_policy.LSTMPolicy` (``features`` names its
  feature set), fine-tuned when ``iterations`` is given.

**REINFORCE** with a moving-average baseline: sample ``B`` placements, reward
``R = -penalized(a)`` (:meth:`scheduler.core.problem.Problem.penalized`), baseline
``b <- beta b + (1 - beta) mean(R)`` per problem, loss
``-mean((R - b) / std(R) * sum_t log pi(a_t)) - eta * entropy``. :meth:`RL.imitate` is the same
update with advantage 1 on given target placements (teacher forcing); DAgger training of the
generalising policies is :func:`scheduler.evaluation.generalise.train_dagger`.

**Polish** (``polish=True``; off by default): :func:`scheduler.solvers.polish.polish` of the policy's
result (and, after training, of its 5 best distinct samples), at most ``polish_evaluations``
evaluations (:data:`PSS_POLISH_EVALUATIONS` on a PSS problem, whose evaluations are cost-model
estimates). ``notes["policy_objective"]`` is the policy's result before it.

**PSS problems** (:class:`scheduler.core.pss.PSSProblem`): the policy decides on the cluster's
HeterPS view (:func:`scheduler.core.pss.heterps_view`), its PS-type layers go to the PS tasks
(:meth:`~scheduler.core.pss.PSSProblem.from_types`), and the polish, when on, works on the PSS cost
model itself; ``notes`` carry the HeterPS figures as ``heterps_*``.

**Work budget.** Training is counted in iterations (``batch`` episodes each) and the polish in
evaluations, so the same seed and budget give the same schedule on an idle or a loaded machine.
``train_seconds`` and ``max_solve_seconds`` (of which ``post_seconds`` are kept for decode,
polish and timing) are safety caps only: when one cuts a phase short, ``notes["time_cap_cut"]``
names it and a :class:`RuntimeWarning` says so. ``notes["decision_ms"]`` (a timing, never a
decision) is the median per-decision time of 15 greedy decodes, features included
(:meth:`RL.decision_ms`), measured after the solve; ``notes["solve_seconds"]`` is the solve's
time before that measurement.

**Isolation.** Policies, tf.functions and optimizers live outside any distribution strategy:
:meth:`RL.solve` / :meth:`RL.plan`, :meth:`RL.train`, :meth:`RL.imitate` and :meth:`RL.pretrain`
run in :func:`ralp_tf.place.isolation.outside_strategy`.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Sequence

import numpy as np

from ralp_tf.place import outside_strategy
from scheduler.solvers.base import Solver, time_cap_cut
from scheduler.policy.envs import actions_of
from scheduler.core.errors import ProblemError
from scheduler.policy.lstm_policy import LSTMPolicy
from scheduler.core.maxload import MaxLoadProblem
from scheduler.solvers.polish import DEFAULT_POLISH_EVALUATIONS, polish
from scheduler.core.pss import PSSProblem, heterps_view

__all__ = ["DEFAULT_DECISION_ITERATIONS", "APPLY_BEAM", "APPLY_SAMPLES", "PSS_POLISH_EVALUATIONS", "PSS_APPLY_BEAM",
           "PSS_APPLY_SAMPLES", "POOL_SIZE",
           "default_iterations", "RLNotes", "RL"]

#: Default REINFORCE work per solve, in decisions x iterations (see :func:`default_iterations`).
DEFAULT_DECISION_ITERATIONS = 24_000
#: Beam width and samples of a pretrained policy's decode (``RL()``'s defaults).
APPLY_BEAM = 64
APPLY_SAMPLES = 64
#: Polish budget on a PSS problem (each evaluation is a cost-model estimate, about a millisecond).
PSS_POLISH_EVALUATIONS = 2_000
#: Beam width and samples of the decode of a PSS cluster's HeterPS view (two types; a plan is wanted in seconds).
PSS_APPLY_BEAM = 16
PSS_APPLY_SAMPLES = 16
#: Best distinct training samples kept as extra polish starts.
POOL_SIZE = 5

Track = dict[int, dict[tuple[int, ...], tuple[float, float]]]


def default_iterations(num_decisions: int) -> int:
    """Default REINFORCE iterations from scratch for a problem of ``num_decisions`` decisions:
    ``min(2000, ceil(DEFAULT_DECISION_ITERATIONS / n))`` (work, not time)."""
    return int(min(2000, math.ceil(DEFAULT_DECISION_ITERATIONS / max(int(num_decisions), 1))))


@dataclasses.dataclass
class RLNotes:
    """What an RL solve did (``Schedule.notes``; :meth:`to_dict` drops the fields it did not set)."""

    policy: str = ""
    features: str = ""
    iterations: int | None = None
    iterations_budget: int | None = None
    episodes: int | None = None
    train_seconds: float | None = None
    final_mean_score: float | None = None
    greedy_decode_objective: float | None = None
    best_from: str | None = None
    policy_objective: float | None = None
    policy_assignment: list[int] | None = None
    polished: bool = False
    polish_evaluations: int | None = None
    polish_seconds: float | None = None
    decision_ms: float | None = None
    solve_seconds: float | None = None
    time_cap_cut: list[str] = dataclasses.field(default_factory=list)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "extra" and v is not None}
        if not self.time_cap_cut:
            out.pop("time_cap_cut")
        out.update(self.extra)
        return out


def _check_count(value: Any, what: str, low: int, none_ok: bool = False) -> int | None:
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)) or int(value) != value \
            or value < low:
        raise ProblemError(f"{what} must be an integer >= {low}{' (or None for the default)' if none_ok else ''}, "
                           f"got {value!r}")
    return int(value)


class RL(Solver):
    """The LSTM placement policy as a solver (module docstring).

    * ``policy`` / ``train`` / ``iterations``: which policy and how much training (module docstring);
      ``iterations=0`` applies the policy as it is.
    * ``features``: the feature set of a given or freshly trained policy (``"basic"``, the
      paper's; ``"lookahead"``; ``"slots"``, :mod:`scheduler.policy.policy_features`).
    * ``beam`` / ``samples``: the decode (``None``: 64 each for a pretrained policy, 0 after
      training from scratch).
    * ``polish`` / ``polish_evaluations``: the local polish (off by default) and its budget.
    * ``train_seconds`` / ``max_solve_seconds`` / ``post_seconds``: wall-clock safety caps.
    * ``batch``, ``hidden``, ``learning_rate``, ``entropy``, ``baseline_decay``: REINFORCE and
      the network of a fresh policy.
    """

    name = "rl"

    def __init__(self, policy: LSTMPolicy | None = None, *, train: bool = False, iterations: int | None = None,
                 train_seconds: float | None = 600.0, batch: int = 32, hidden: int = 64,
                 learning_rate: float = 3e-3, entropy: float = 0.01, baseline_decay: float = 0.9,
                 samples: int | None = None, beam: int | None = None, polish: bool = False,
                 polish_evaluations: int | None = None, max_solve_seconds: float | None = 900.0,
                 post_seconds: float = 8.0, features: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from scheduler.policy.policy_features import FEATURE_SETS

        if features is not None and features not in FEATURE_SETS:
            raise ProblemError(f"unknown feature set {features!r}; use one of {', '.join(FEATURE_SETS)}")
        if max_solve_seconds is not None and not max_solve_seconds > 0:
            raise ProblemError(f"max_solve_seconds must be > 0 or None (no cap), got {max_solve_seconds!r}")
        if train_seconds is not None and not train_seconds >= 0:
            raise ProblemError(f"train_seconds must be >= 0 or None (no cap), got {train_seconds!r}")
        if not post_seconds >= 0:
            raise ProblemError(f"post_seconds must be >= 0, got {post_seconds!r}")
        if train and policy is not None:
            raise ProblemError("RL(train=True) trains a fresh policy; drop policy=..., or drop train=True to "
                               "fine-tune the given policy with iterations=N")
        self.policy = policy
        self.train_from_scratch = bool(train)
        self.iterations = _check_count(iterations, "iterations", 0, none_ok=True)
        if train and (self.iterations == 0 or train_seconds == 0):
            raise ProblemError("RL(train=True) with a budget of 0 iterations (or train_seconds=0) trains nothing; "
                               "give iterations >= 1, or drop train=True to apply the shipped policy")
        self.train_seconds = None if train_seconds is None else float(train_seconds)
        self.batch = _check_count(batch, "batch", 1)
        self.hidden = int(hidden)
        self.learning_rate = float(learning_rate)
        self.entropy = float(entropy)
        self.baseline_decay = float(baseline_decay)
        self.samples = _check_count(samples, "samples", 0, none_ok=True)
        self.beam = _check_count(beam, "beam", 0, none_ok=True)
        self.polish = bool(polish)
        self.polish_evaluations = _check_count(polish_evaluations, "polish_evaluations", 0, none_ok=True)
        self.max_solve_seconds = None if max_solve_seconds is None else float(max_solve_seconds)
        self.post_seconds = float(post_seconds)
        self.features = features
        self.pool_size = POOL_SIZE
        self._source = "trained" if train else "given"

    # ----------------------------------------------------------------- policy and env
    def _pretrained(self) -> bool:
        return not self.train_from_scratch

    def _decode_widths(self) -> tuple[int, int]:
        """``(beam, samples)`` of the decode (class docstring)."""
        default = APPLY_BEAM if self._pretrained() else 0
        return (self.beam if self.beam is not None else default,
                self.samples if self.samples is not None else (APPLY_SAMPLES if self._pretrained() else 0))

    def _resolve(self, problem: Any) -> None:
        """Set ``self.policy`` and ``self.features`` for ``problem`` (module docstring): the shipped
        policy of its kind when none is given (a copy when it will be fine-tuned)."""
        if self.policy is not None or self.train_from_scratch:
            if self.features is None:
                self.features = "basic"
            return
        from scheduler.policy.shipped import problem_kind, shipped_policy

        kind = problem_kind(problem)
        policy, features = shipped_policy(kind)
        self.policy = policy.clone() if self.iterations else policy
        self.features = features
        self._source = f"shipped:{kind}"

    def _env(self, problem: Any) -> Any:
        """The decision env of ``problem`` for this solver's feature set."""
        from scheduler.policy.features import make_feature_env

        return make_feature_env(problem, self.features or "basic")

    def _new_policy(self, env: Any) -> LSTMPolicy:
        return LSTMPolicy(env.feature_dim, env.A, hidden=self.hidden, learning_rate=self.learning_rate,
                          entropy=self.entropy, seed=self.seed, initial_bias=getattr(env, "initial_bias", None))

    def _training_iterations(self, problem: Any) -> int:
        if self.train_seconds == 0:
            return 0
        if self.train_from_scratch:
            return self.iterations if self.iterations is not None else default_iterations(problem.num_decisions)
        return self.iterations or 0

    # ----------------------------------------------------------------- training
    def train(self, problems: Sequence[Any], *, iterations: int, seconds: float | None = None,
              track: Track | None = None, order: str = "round_robin") -> dict[str, Any]:
        """REINFORCE on ``problems`` for ``iterations`` updates (``batch`` episodes each);
        ``seconds`` is a safety cap (``time_cap_cut`` in the result when it cut training short).

        ``order``: ``"round_robin"`` (problem ``it % len``) or ``"random"`` (seeded). ``track``
        (optional) receives, per problem index, the best distinct placements sampled
        (placement -> (objective, penalised score)). The result names every problem trained on
        (``trained_on``). A fresh policy (features ``"basic"`` unless set) is created when there
        is none. Runs outside any distribution strategy (:mod:`ralp_tf.place.isolation`)."""
        return outside_strategy(self._train, problems, seconds=seconds, iterations=iterations, track=track,
                                order=order)

    def _train(self, problems: Sequence[Any], *, seconds: float | None, iterations: int, track: Track | None,
               order: str) -> dict[str, Any]:
        if not problems:
            raise ProblemError("RL.train needs at least one problem to train on")
        if order not in ("round_robin", "random"):
            raise ProblemError(f"order must be 'round_robin' or 'random', got {order!r}")
        if int(iterations) < 1:
            raise ProblemError(f"a training budget of {iterations!r} iterations trains nothing; give iterations >= 1 "
                               f"(each is {self.batch} episodes)")
        t0 = time.perf_counter()  # the cap counts building the envs and the policy too
        self.features = self.features or "basic"
        envs = [self._env(p) for p in problems]
        if self.policy is None:
            self.policy = self._new_policy(envs[0])
        baselines: list[float | None] = [None] * len(envs)
        rng = np.random.default_rng(self.seed)
        it, history, extra = 0, [], {}  # type: ignore[var-annotated]
        while it < iterations:
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                time_cap_cut(extra, "rl", "training", seconds)
                break
            k = it % len(envs) if order == "round_robin" else int(rng.integers(len(envs)))
            X, M, assign = self.policy.rollout(envs[k], self.batch, greedy=False)
            keys = [problems[k].scores(a) for a in assign]
            scores = np.array([pen for _, pen in keys])
            if track is not None:
                pool = track.setdefault(k, {})
                for a, key in zip(assign, keys):
                    pool.setdefault(tuple(int(x) for x in a), (float(key[0]), float(key[1])))
                if len(pool) > 4 * self.pool_size:  # keep the best distinct placements
                    track[k] = dict(sorted(pool.items(), key=lambda kv: kv[1])[: self.pool_size])
            rewards = -scores
            b = baselines[k]
            b = float(rewards.mean()) if b is None else self.baseline_decay * b + (1 - self.baseline_decay) * float(
                rewards.mean())
            baselines[k] = b
            self.policy.update(X, M, actions_of(envs[k], assign), (rewards - b) / (rewards.std() + 1e-6))
            history.append(float(scores.mean()))
            it += 1
        return {"iterations": it, "iterations_budget": int(iterations), "episodes": it * self.batch,
                "train_seconds": time.perf_counter() - t0, "final_mean_score": history[-1] if history else None,
                **extra, "trained_on": [getattr(p, "name", str(i)) for i, p in enumerate(problems)]}

    def imitate(self, problems: Sequence[Any], targets: Sequence[np.ndarray], *, iterations: int = 2000,
                seconds: float | None = None) -> dict[str, Any]:
        """Supervised warm start: maximise the log-likelihood of ``targets[i]`` (a placement of
        ``problems[i]``) under the policy, one problem per step in seeded random order, for
        ``iterations`` steps (``seconds``: a safety cap, reported as ``time_cap_cut``). Only the
        given problems are read; ``trained_on`` names them. Runs outside any distribution
        strategy (:mod:`ralp_tf.place.isolation`)."""
        return outside_strategy(self._imitate, problems, targets, seconds=seconds, iterations=iterations)

    def _imitate(self, problems: Sequence[Any], targets: Sequence[np.ndarray], *, seconds: float | None,
                 iterations: int) -> dict[str, Any]:
        if len(problems) != len(targets) or not problems:
            raise ProblemError("imitate needs one target placement per problem (and at least one problem)")
        if int(iterations) < 1:
            raise ProblemError(f"an imitation budget of {iterations!r} steps trains nothing; give iterations >= 1")
        self.features = self.features or "basic"
        envs = [self._env(p) for p in problems]
        if self.policy is None:
            self.policy = self._new_policy(envs[0])
        data = []
        for env, a in zip(envs, targets):
            acts = actions_of(env, np.asarray(a, dtype=np.int64))
            X, M = self.policy.teacher_forced(env, acts)
            data.append((X, M, acts[None, :]))
        rng = np.random.default_rng(self.seed + 1)
        t0 = time.perf_counter()
        it, extra = 0, {}  # type: ignore[var-annotated]
        while it < iterations:
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                time_cap_cut(extra, "rl", "imitation", seconds)
                break
            X, M, A = data[int(rng.integers(len(data)))]
            self.policy.update(X, M, A, np.ones(1))
            it += 1
        return {"imitation_iterations": it, "imitation_seconds": time.perf_counter() - t0, **extra,
                "trained_on": [getattr(p, "name", str(i)) for i, p in enumerate(problems)]}

    @classmethod
    def pretrain(cls, problems: Sequence[Any], *, iterations: int = 2000, seconds: float | None = None,
                 order: str = "round_robin", policy: LSTMPolicy | None = None, **kwargs: Any) -> "RL":
        """An RL solver whose policy is trained on ``problems`` for ``iterations`` REINFORCE
        updates (``seconds``: safety cap), from a fresh policy or a copy of ``policy`` (not
        modified). The returned solver has ``iterations = 0``: it applies the policy with no
        retraining. ``solver.pretrain_info["trained_on"]`` names the training problems."""

        def pretrained() -> "RL":
            solver = cls(policy=None if policy is None else policy.clone(), **kwargs)
            solver.pretrain_info = solver.train(list(problems), seconds=seconds, iterations=iterations, order=order)
            solver.iterations = 0
            solver.train_from_scratch = False
            return solver

        return outside_strategy(pretrained)

    # ----------------------------------------------------------------- applying
    def decision_ms(self, problem: Any, repeats: int = 15, deadline: float | None = None) -> float:
        """Median wall time per decision of a greedy decode (ms): features (memoised lookahead
        features are forgotten before each decode), the network step in numpy and the arg-max;
        over ``repeats`` decodes after a warm-up (fewer, at least 3, when ``deadline`` would
        otherwise pass). A timing only: it never changes the schedule."""
        if self.policy is None:
            self._resolve(problem)
        env = self._env(problem)
        t0 = time.perf_counter()
        self.policy.greedy(env)  # warm-up (and the one-off per-problem hint of lookahead features)
        if deadline is not None:
            one = max(time.perf_counter() - t0, 1e-4)
            repeats = max(3, min(repeats, int((deadline - time.perf_counter()) / one)))
        times = []
        clear = getattr(env, "clear_memo", None)
        for _ in range(repeats):
            if clear is not None:
                clear()
            t0 = time.perf_counter()
            self.policy.greedy(env)
            times.append((time.perf_counter() - t0) / env.n * 1e3)
        return float(np.median(times))

    def apply(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """The policy's placement with no training: greedy decode, beam search and samples, the
        best by ``(objective, penalized)``."""
        if self.policy is None:
            self._resolve(problem)
        env = self._env(problem)
        a = self.policy.greedy(env)[2][0]
        best_key, best = problem.scores(a), a
        greedy_objective = best_key[0]
        beam, samples = self._decode_widths()
        many: list[np.ndarray] = []
        if beam:
            many.extend(self.policy.beam(env, beam))
        if samples:
            many.extend(self.policy.rollout(env, samples, greedy=False)[2])
        for x in many:
            key = problem.scores(x)
            if key < best_key:
                best_key, best = key, x
        return best, {"greedy_objective": greedy_objective}

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        if problem.num_choices == 1:
            return np.zeros(problem.num_decisions, dtype=np.int64), {"policy": "none: one choice per decision"}
        if isinstance(problem, PSSProblem):
            return self._solve_pss(problem)
        return self._solve_problem(problem, measure=True)

    def _solve_problem(self, problem: Any, measure: bool) -> tuple[np.ndarray, dict[str, Any]]:
        """Train (when budgeted), decode, polish (when on) and, with ``measure``, time the decode."""
        t_start = time.perf_counter()
        self._resolve(problem)
        notes = RLNotes(policy=self._source, features=self.features or "basic")
        deadline = None if self.max_solve_seconds is None else t_start + self.max_solve_seconds
        track: Track = {}
        iterations = self._training_iterations(problem)
        if iterations:
            cap = self.train_seconds
            if self.max_solve_seconds is not None:  # the whole solve's cap, less what it spent already
                room = max(0.0, self.max_solve_seconds - self.post_seconds - (time.perf_counter() - t_start))
                cap = room if cap is None else min(cap, room)
            info = self.train([problem], iterations=iterations, seconds=cap, track=track)
            for key in ("iterations", "iterations_budget", "episodes", "train_seconds", "final_mean_score"):
                setattr(notes, key, info[key])
            notes.time_cap_cut.extend(info.get("time_cap_cut", []))
        elif self.policy is None:
            raise ProblemError("RL needs a policy: give policy=..., train=True, or use the shipped policy")
        a, info = self.apply(problem)
        notes.greedy_decode_objective = info["greedy_objective"]
        decoded = problem.scores(a)
        pool = sorted(track.get(0, {}).items(), key=lambda kv: kv[1])[: self.pool_size]
        starts = sorted([(decoded, a)] + [(key, np.array(x, dtype=np.int64)) for x, key in pool],
                        key=lambda s: s[0])
        notes.best_from = "training sample" if pool and pool[0][1] < decoded else "decode"
        a = starts[0][1]
        notes.policy_objective = float(problem.objective(a))
        notes.policy_assignment = [int(x) for x in a]
        if self.polish:
            a = self._polish(problem, [s for _, s in starts], notes, deadline)
        notes.solve_seconds = time.perf_counter() - t_start  # the solve before the latency measurement
        if measure:
            notes.decision_ms = self.decision_ms(problem, deadline=deadline)
        return a, notes.to_dict()

    def _polish(self, problem: Any, starts: list[np.ndarray], notes: RLNotes, deadline: float | None) -> np.ndarray:
        """The best polished placement of ``starts`` (best first: the budget cuts the least
        promising), within ``polish_evaluations`` evaluations."""
        budget = self.polish_evaluations if self.polish_evaluations is not None else (
            PSS_POLISH_EVALUATIONS if isinstance(problem, PSSProblem) else DEFAULT_POLISH_EVALUATIONS)
        t0 = time.perf_counter()
        timing = 5 * problem.num_decisions * 2e-3  # room for the latency measurement after it
        polish_deadline = None if deadline is None else deadline - timing
        best, best_key, evals = starts[0], problem.scores(starts[0]), 0
        for start in starts:
            if polish_deadline is not None and time.perf_counter() > polish_deadline:
                cut: dict[str, Any] = {}
                time_cap_cut(cut, "rl", "polish", self.max_solve_seconds or 0.0)
                notes.time_cap_cut.extend(cut["time_cap_cut"])
                break
            if evals >= budget:
                break
            cand, e = polish(problem, start, deadline=polish_deadline, max_evaluations=budget - evals)
            evals += e
            key = problem.scores(cand)
            if key < best_key:
                best, best_key = cand, key
        notes.polished = True
        notes.polish_evaluations, notes.polish_seconds = evals, time.perf_counter() - t0
        return best

    def _solve_pss(self, problem: PSSProblem) -> tuple[np.ndarray, dict[str, Any]]:
        """The policy on the cluster's HeterPS view, mapped onto the PSS problem (module docstring):
        decoded with :data:`PSS_APPLY_BEAM` and :data:`PSS_APPLY_SAMPLES` unless set, and with no
        latency measurement (a plan is wanted in seconds; ``RL.decision_ms`` measures it)."""
        view = heterps_view(problem)
        saved = self.polish, self.beam, self.samples
        self.polish = False  # the polish below works on the PSS cost model
        self.beam = PSS_APPLY_BEAM if self.beam is None else self.beam
        self.samples = PSS_APPLY_SAMPLES if self.samples is None else self.samples
        try:
            a_view, notes = self._solve_problem(view, measure=False)
        finally:
            self.polish, self.beam, self.samples = saved
        ev = view.evaluate(a_view)
        a = problem.from_types([view.catalog.types[r].role == "ps" for r in a_view])
        notes = dict(notes)
        notes.update(heterps_predicted_throughput=ev.throughput, heterps_predicted_cost_per_million=ev.cost,
                     heterps_objective=ev.objective, heterps_assignment=[int(x) for x in a_view],
                     policy_objective=problem.objective(a), policy_assignment=[int(x) for x in a], polished=False)
        if self.polish:
            rl_notes = RLNotes()
            a = self._polish(problem, [a], rl_notes, None)
            notes.update(polished=True, polish_evaluations=rl_notes.polish_evaluations,
                         polish_seconds=rl_notes.polish_seconds)
        return a, notes

