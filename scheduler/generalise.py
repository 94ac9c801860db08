r"""Training a placement policy that generalises, and measuring it on unseen workloads (issue 14, item 2).

**Method: DAgger-style imitation of exact solutions, on lookahead features.** The policy is the
paper's LSTM + ``tfp`` Categorical (:class:`scheduler.rl.LSTMPolicy`), reading the features of
:mod:`scheduler.policy_features` (``RL(features="lookahead")``). Training is supervised, in
rounds:

1. *Teacher forcing*: the features along the exact optimum of each training problem, labelled
   with the optimum's actions (plain imitation, as :meth:`scheduler.rl.RL.imitate`).
2. *Aggregation (DAgger)*: roll the current policy (sampled) on a training problem, and label
   every state it visited with an expert action for *that* state; train on the policy's own
   state distribution, so that it learns to recover from its own mistakes. Experts:

   * **max-load**: the exact optimum-to-go of the linear-order split (:func:`split_tables`):
     with ``S[i, e]`` the penalised load of groups ``i..e`` on one accelerator and
     ``G[j, m] = min_e max(S[j, e], G[e + 1, m - 1])`` (``G[n, m] = 0``), at a state whose
     current accelerator ``k`` started at group ``i``, *stay* is worth
     ``min_{e >= t} max(S[i, e], G[e + 1, F - k - 1])`` and *next* is worth
     ``max(S[i, t - 1], G[t, F - k - 1])``; the label is the smaller (stay on ties).
   * **HeterPS**: the exact optimum's type for the layer (the θ-sweep DP gives no cheap
     optimum-to-go of an arbitrary prefix); the features still come from the policy's own
     prefix.

Why this method and not REINFORCE: REINFORCE alone on generated graphs collapsed to one cheap
type (docs/scheduler.md), and after imitation it traded one workload for another; the exact
solver gives a label for every training state at no risk, and the lookahead features make
those labels predictable from the state (a label is mostly "the action whose completion is
cheapest", with learned exceptions).

**Leave-one-out** (:func:`leave_one_out`): for each built-in, a policy trained on generated
graphs (:func:`scheduler.workloads.generated.generated_problems`) plus the *other* built-ins, then
applied with no retraining (greedy decode plus ``samples`` sampled placements, no polish).
**Transfer to the shared dnn-partitioning workloads** (:func:`maxload_transfer`): one policy
trained on generated branchy layer graphs (:func:`training_layer_graphs`) only, applied to each
shared workload. Both check that no evaluated workload is in its policy's training set.

Work budgets: ``rounds`` x ``steps`` gradient steps, ``dagger_batch`` rollouts per DAgger
step; the same seed and budgets give the same policy and placements.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from scheduler.errors import ProblemError
from scheduler.maxload import MaxLoadProblem
from scheduler.rl import RL, MaxLoadEnv

#: Placements a trained policy samples on an unseen workload besides its greedy decode.
APPLY_SAMPLES = 64


# ----------------------------------------------------------------------------- max-load expert
def split_tables(problem: MaxLoadProblem) -> tuple[np.ndarray, np.ndarray]:
    """``S[i, e]`` (penalised load of groups ``i..e`` alone on an accelerator, relative to
    ``reference_load``; ``+4`` when it breaks memory) and ``G[j, m]`` (the least penalised
    max-load of groups ``j..n-1`` on at most ``m`` further accelerators), per the module
    docstring. ``S`` comes from :meth:`MaxLoadProblem.evaluate` of the segment on one accelerator
    and everything else on another, so it is the cost model's own number."""
    p = problem
    n, F = p.num_decisions, p.max_fpgas
    if F == 0:
        raise ProblemError(f"{p.name!r} has no accelerators; the linear split needs at least one")
    ref = p.reference_load()
    S = np.full((n, n), np.inf)
    acc0, acc1 = p.max_cpus, p.max_cpus + min(1, F - 1)
    for i in range(n):
        for e in range(i, n):
            if F == 1 and (i != 0 or e != n - 1):
                continue  # one accelerator: the only segment is the whole
            dev = np.full(n, acc0, dtype=np.int64)
            dev[i:e + 1] = acc1
            if p.max_cpus:
                dev[~p.allowed[np.arange(n), dev]] = 0
            ev = p.evaluate(dev)
            mem_bad = _segment_memory(p, i, e) > p.max_size * (1 + 1e-12)
            cpu = ev.loads[:p.max_cpus].max() / ref if p.max_cpus else 0.0
            S[i, e] = max(ev.loads[acc1] / ref, cpu) + (4.0 if mem_bad else 0.0)
    G = np.full((n + 1, F + 1), np.inf)
    G[n, :] = 0.0
    for m in range(1, F + 1):
        for j in range(n - 1, -1, -1):
            G[j, m] = np.min(np.maximum(S[j, j:], G[j + 1:, m - 1]))
    return S, G


def _segment_memory(p: MaxLoadProblem, i: int, e: int) -> float:
    """Bytes the groups ``i..e`` put on an accelerator (groups it cannot hold go to a CPU)."""
    groups = np.arange(i, e + 1)
    on_acc = p.allowed[groups, p.max_cpus] if p.max_cpus else np.ones(len(groups), dtype=bool)
    return float(p.group_size[groups][on_acc].sum())


def _values(tables: tuple[np.ndarray, np.ndarray], t: int, i: int, k: int, fpgas: int) -> tuple[float, float]:
    """(stay, next) values of the state "decision ``t``, current accelerator ``k`` opened at group ``i``"."""
    S, G = tables
    left = fpgas - k - 1
    stay = float(np.min(np.maximum(S[i, t:], G[t + 1:, left])))
    nxt = float(max(S[i, t - 1], G[t, left])) if (t > 0 and left > 0) else math.inf
    return stay, nxt


def expert_actions(tables: tuple[np.ndarray, np.ndarray], actions: np.ndarray, fpgas: int) -> np.ndarray:
    """The expert's stay (0) / next (1) label at every state of each row of ``actions``
    ([B, n] stay/next decisions the policy took), per the module docstring."""
    B, n = actions.shape
    out = np.zeros((B, n), dtype=np.int64)
    for b in range(B):
        k, i = 0, 0
        for t in range(n):
            stay, nxt = _values(tables, t, i, k, fpgas)
            out[b, t] = int(nxt < stay - 1e-12)
            if t > 0 and actions[b, t] == 1:
                k, i = k + 1, t
    return out


def split_optimum(problem: MaxLoadProblem, tables: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The optimal linear-order split as stay/next actions (following the expert's values)."""
    tables = tables if tables is not None else split_tables(problem)
    n, F = problem.num_decisions, problem.max_fpgas
    acts = np.zeros(n, dtype=np.int64)
    k, i = 0, 0
    for t in range(n):
        stay, nxt = _values(tables, t, i, k, F)
        if nxt < stay - 1e-12:
            acts[t] = 1
            k, i = k + 1, t
    return acts


# ----------------------------------------------------------------------------- training
def _env_actions(env: Any, assignment: np.ndarray) -> np.ndarray:
    from scheduler.rl import _actions_of

    return _actions_of(env, np.asarray(assignment, dtype=np.int64))


class Expert:
    """Labels for the states a policy visits on one training problem (module docstring)."""

    def __init__(self, problem: Any, optimum: np.ndarray | None = None) -> None:
        self.problem = problem
        if isinstance(problem, MaxLoadProblem):
            self.tables = split_tables(problem)
            self.target_actions = split_optimum(problem, self.tables)
        else:
            if optimum is None:
                from scheduler.exact import Exact

                optimum = Exact().solve(problem).assignment
            self.tables = None
            self.target_actions = np.asarray(optimum, dtype=np.int64)

    def label(self, actions: np.ndarray) -> np.ndarray:
        """Expert actions [B, n] at the states reached by the policy's ``actions`` [B, n]."""
        if self.tables is not None:
            return expert_actions(self.tables, actions, self.problem.max_fpgas)
        return np.repeat(self.target_actions[None, :], len(actions), axis=0)


def train_dagger(solver: RL, problems: Sequence[Any], *, optima: Sequence[np.ndarray | None] | None = None,
                 imitation_steps: int = 1500, dagger_steps: int = 1500, dagger_batch: int = 8,
                 log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Train ``solver``'s policy (created if missing) on ``problems``: ``imitation_steps``
    teacher-forced steps on the experts' optimal trajectories, then ``dagger_steps`` steps that
    each roll the policy ``dagger_batch`` times (sampled) on one problem and fit the expert's
    labels at the visited states. Problems are drawn in seeded random order. Returns work
    counts, seconds and ``trained_on`` (every problem's name)."""
    from ralp_tf.isolation import outside_strategy

    return outside_strategy(_train_dagger, solver, problems, optima=optima, imitation_steps=imitation_steps,
                            dagger_steps=dagger_steps, dagger_batch=dagger_batch, log=log)


def _train_dagger(solver: RL, problems: Sequence[Any], *, optima: Sequence[np.ndarray | None] | None,
                  imitation_steps: int, dagger_steps: int, dagger_batch: int,
                  log: Callable[[str], Any] | None) -> dict[str, Any]:
    if not problems:
        raise ProblemError("train_dagger needs at least one training problem")
    if imitation_steps < 0 or dagger_steps < 0 or imitation_steps + dagger_steps < 1:
        raise ProblemError(f"a budget of {imitation_steps} imitation + {dagger_steps} DAgger steps trains nothing; "
                           "give at least one step")
    if dagger_batch < 1:
        raise ProblemError(f"dagger_batch must be >= 1 rollout, got {dagger_batch!r}")
    t0 = time.perf_counter()
    optima = list(optima) if optima is not None else [None] * len(problems)
    experts = [Expert(p, o) for p, o in zip(problems, optima)]
    envs = [solver._env(p) for p in problems]
    if solver.policy is None:
        solver.policy = solver._new_policy(envs[0])
    policy = solver.policy
    forced = []
    for env, ex in zip(envs, experts):
        acts = ex.target_actions
        X, M = policy.teacher_forced(env, acts)
        forced.append((X, M, acts[None, :]))
    label_s = time.perf_counter() - t0
    rng = np.random.default_rng(solver.seed + 7)
    for step in range(imitation_steps):
        X, M, A = forced[int(rng.integers(len(forced)))]
        policy.update(X, M, A, np.ones(1))
    agree = []
    for step in range(dagger_steps):
        k = int(rng.integers(len(envs)))
        X, M, assign = policy.rollout(envs[k], dagger_batch, greedy=False)
        taken = _env_actions(envs[k], assign)
        labels = experts[k].label(taken)
        agree.append(float((labels == taken).mean()))
        policy.update(X, M, labels, np.ones(len(labels)))
        if log is not None and (step + 1) % 250 == 0:
            log(f"dagger step {step + 1}/{dagger_steps}: agreement with the expert {np.mean(agree[-250:]):.3f}")
    return {"imitation_steps": imitation_steps, "dagger_steps": dagger_steps, "dagger_batch": dagger_batch,
            "label_seconds": label_s, "train_seconds": time.perf_counter() - t0,
            "final_agreement": float(np.mean(agree[-100:])) if agree else None,
            "trained_on": [getattr(p, "name", str(i)) for i, p in enumerate(problems)]}
