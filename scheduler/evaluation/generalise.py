r"""Training a placement policy that generalises, and measuring it on unseen workloads.

**Method: DAgger-style imitation of exact solutions, on lookahead features.** The policy is the
paper's LSTM + ``tfp`` Categorical (:class:`scheduler.policy.rl.LSTMPolicy`), reading the features of
:mod:`scheduler.policy.policy_features` (``RL(features="lookahead")``). Training is supervised, in
rounds:

1. *Teacher forcing*: the features along the exact optimum of each training problem, labelled
   with the optimum's actions (plain imitation, as :meth:`scheduler.policy.rl.RL.imitate`).
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
applied with no retraining (greedy decode, a beam search of width ``beam`` over the policy's
probabilities and ``samples`` sampled placements, the best by objective; no polish).
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

from scheduler.evaluation.compare_report import fmt
from scheduler.core.errors import InfeasibleError, ProblemError
from scheduler.core.maxload import MaxLoadProblem
from scheduler.policy.rl import RL

__all__ = ["APPLY_SAMPLES", "MEMORY_PENALTY", "split_tables", "expert_actions", "split_optimum", "Expert",
           "train_dagger", "GENERATED_COUNT", "PRETRAIN_ITERATIONS", "FOLD_ITERATIONS", "generalisation", "HETERPS_BUDGET", "MAXLOAD_BUDGET", "rule_placement", "leave_one_out",
           "maxload_transfer", "markdown", "main"]

#: Placements a trained policy samples on an unseen workload besides its greedy decode.
APPLY_SAMPLES = 64


# ----------------------------------------------------------------------------- max-load expert
#: Added to a segment's relative load when it breaks an accelerator's memory (feasibility first).
MEMORY_PENALTY = 1e6


def split_tables(problem: MaxLoadProblem) -> tuple[np.ndarray, np.ndarray]:
    """``S[i, e]`` (load of groups ``i..e`` alone on an accelerator, relative to
    ``reference_load``; ``+`` :data:`MEMORY_PENALTY` when it breaks memory, so feasibility comes
    first; among feasible splits ``G[0, F]`` is the least max-load, which
    :meth:`MaxLoadProblem.penalized` then equals) and ``G[j, m]`` (the least penalised
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
            S[i, e] = max(ev.loads[acc1] / ref, cpu) + (MEMORY_PENALTY if mem_bad else 0.0)
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
    from scheduler.policy.envs import actions_of

    return actions_of(env, np.asarray(assignment, dtype=np.int64))


class Expert:
    """Labels for the states a policy visits on one training problem (module docstring)."""

    def __init__(self, problem: Any, optimum: np.ndarray | None = None) -> None:
        self.problem = problem
        if isinstance(problem, MaxLoadProblem):
            self.tables = split_tables(problem)
            self.target_actions = split_optimum(problem, self.tables)
        else:
            if optimum is None:
                from scheduler.solvers.exact import Exact

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
    from ralp_tf.place import outside_strategy

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


# ----------------------------------------------------------------------------- the paper-LSTM baseline
#: Generated layer graphs in the paper-LSTM baseline's pretraining set.
GENERATED_COUNT = 48
#: Imitation steps of the baseline's base policy (on the generated graphs) and of each fold.
PRETRAIN_ITERATIONS = 6000
FOLD_ITERATIONS = 2500


def generalisation(names: Sequence[str], *, pretrain_iterations: int = PRETRAIN_ITERATIONS,
                   fold_iterations: int = FOLD_ITERATIONS, generated: int = GENERATED_COUNT, seed: int = 0,
                   log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """The paper-LSTM baseline's leave-one-out over the built-in workloads ``names``: a base policy
    (paper features) imitates the exact optima of ``generated`` generated layer graphs; per
    held-out built-in, a copy imitates those plus the *other* built-ins, then is applied with no
    retraining (greedy decode plus :data:`APPLY_SAMPLES` samples) and polished.

    Returns one row per held-out workload: the policy's own ratio to the exact optimum
    (``policy_ratio_to_exact``), the polished ratio (``ratio_to_exact``), constraint met, the
    training sets (``trained_on``: the built-ins; ``generated``: how many generated graphs)
    and times. Raises ``AssertionError`` if a held-out workload ever was in a training set.
    """
    from scheduler.solvers.exact import Exact
    from scheduler.workloads import builtin_problem
    from scheduler.workloads.generated import generated_problems

    t0 = time.perf_counter()
    gen = generated_problems(generated, seed=seed + 1000)
    gen_targets = [Exact().solve(p).assignment for p in gen]
    base = RL(seed=seed, iterations=0, features="basic")
    base_info = base.imitate(gen, gen_targets, iterations=pretrain_iterations)
    base_s = time.perf_counter() - t0
    log(f"generalisation: base policy imitated {len(gen)} generated graphs "
        f"({base_info['imitation_iterations']} steps, {base_s:.0f} s with their exact optima)")
    problems = {n: builtin_problem(n) for n in names}
    exact = {n: Exact().solve(p) for n, p in problems.items()}
    rows: list[dict[str, Any]] = []
    for held in names:
        others = [n for n in names if n != held]
        t1 = time.perf_counter()
        solver = RL(policy=base.policy.clone(), seed=seed, iterations=0, samples=APPLY_SAMPLES, beam=0, polish=True,
                    features="basic")
        info = solver.imitate(gen + [problems[n] for n in others],
                              gen_targets + [exact[n].assignment for n in others], iterations=fold_iterations)
        trained_on = info["trained_on"] + base_info["trained_on"]
        assert held not in trained_on, f"leave-one-out broken: {held!r} is in its own training set"
        train_s = time.perf_counter() - t1
        problem = problems[held]
        sch = solver.solve(problem)
        opt = exact[held].objective
        rows.append({"workload": held, "trained_on": others, "generated": len(gen),
                     "objective": sch.objective,
                     "ratio_to_exact": sch.objective / opt if math.isfinite(sch.objective) else None,
                     "policy_ratio_to_exact": sch.notes["policy_objective"] / opt
                     if math.isfinite(sch.notes["policy_objective"]) else None,
                     "constraint_met": sch.constraint_met, "exact_constraint_met": exact[held].constraint_met,
                     "pretrain_seconds": base_s + train_s, "fold_iterations": info["imitation_iterations"],
                     "apply_seconds": sch.solve_seconds, "decision_ms": sch.notes.get("decision_ms")})
        log(f"generalisation: {held:<14} policy {fmt(rows[-1]['policy_ratio_to_exact'], 5)} polished "
            f"{fmt(rows[-1]['ratio_to_exact'], 5)} (trained on {len(gen)} generated + {', '.join(others)}; "
            f"applied in {sch.solve_seconds:.2f} s)")
    return rows


# ----------------------------------------------------------------------------- measurements
#: Default work budgets of the measurements (gradient steps; see :func:`train_dagger`).
HETERPS_BUDGET = {"generated": 48, "imitation_steps": 800, "dagger_steps": 400}
MAXLOAD_BUDGET = {"graphs": 24, "imitation_steps": 600, "dagger_steps": 300}


def rule_placement(problem: Any) -> np.ndarray:
    """The untrained rule the lookahead features suggest (an ablation, not a solver): at every
    decision take the action whose completion is cheapest (HeterPS: least ``c2(r)``, first on
    ties; max-load: *next* when its completion has the lower max-load)."""
    from scheduler.policy.features import make_feature_env

    env = make_feature_env(problem, "lookahead")
    env.reset(1)
    for t in range(env.n):
        x, m = env.observe(t)
        f = x[0, env.base_dim:]
        if isinstance(problem, MaxLoadProblem):
            a = int(m[0, 1] and f[1] < f[0])
        else:
            a = int(np.argmin(np.where(m[0], f[:env.A], np.inf)))
        env.step(t, np.array([a], dtype=np.int64))
    return env.assignments()[0]


def _policy_solver(seed: int, features: str = "lookahead", beam: int = APPLY_SAMPLES) -> RL:
    return RL(seed=seed, iterations=0, samples=APPLY_SAMPLES, beam=beam, polish=False, features=features)


def _apply_row(solver: RL, problem: Any, reference: float, trained_on: list[str]) -> dict[str, Any]:
    """Apply a trained solver (no retraining, no polish); the polish is run after, for its column."""
    from scheduler.solvers.polish import DEFAULT_POLISH_EVALUATIONS, polish

    if getattr(problem, "name", None) in trained_on:
        raise AssertionError(f"held-out workload {problem.name!r} is in its policy's training set")
    sch = solver.solve(problem)

    def ratio(x: float) -> float | None:
        return x / reference if math.isfinite(x) else None

    polished, _ = polish(problem, np.asarray(sch.assignment, dtype=np.int64),
                         max_evaluations=DEFAULT_POLISH_EVALUATIONS)
    return {"policy_objective": sch.objective, "policy_ratio": ratio(sch.objective),
            "greedy_ratio": ratio(sch.notes["greedy_decode_objective"]),
            "polished_ratio": ratio(problem.objective(polished)),
            "rule_ratio": ratio(problem.objective(rule_placement(problem))),
            "constraint_met": sch.constraint_met, "apply_seconds": sch.solve_seconds,
            "decision_ms": sch.notes.get("decision_ms")}


def leave_one_out(names: Sequence[str], *, generated: int = HETERPS_BUDGET["generated"],
                  imitation_steps: int = HETERPS_BUDGET["imitation_steps"],
                  dagger_steps: int = HETERPS_BUDGET["dagger_steps"], seed: int = 0, features: str = "lookahead",
                  log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Leave-one-out over the built-in workloads ``names``: per held-out workload, a fresh
    lookahead policy trained by :func:`train_dagger` on ``generated`` generated graphs (all six
    families, transformer blocks included, cycled; draws that no placement can make meet their
    constraint are dropped) and the
    other built-ins (exact optima as experts), applied with no retraining. One row each; raises
    ``AssertionError`` if a held-out workload was in its training set. ``features="basic"``: the
    same training and decode on the paper's features (an ablation)."""
    from scheduler.solvers.exact import Exact
    from scheduler.workloads import builtin_problem
    from scheduler.workloads.generated import EXTRA_FAMILIES, FAMILIES, generated_problems

    t0 = time.perf_counter()
    gen, gen_opt = [], []
    for p in generated_problems(generated, seed=seed + 1000, families=FAMILIES + EXTRA_FAMILIES):
        try:
            gen_opt.append(Exact().solve(p).assignment)
        except InfeasibleError:  # the unit caps, shared by stages, cannot meet its constraint
            continue
        gen.append(p)
    gen_s = time.perf_counter() - t0
    problems = {n: builtin_problem(n) for n in names}
    exact = {n: Exact().solve(p) for n, p in problems.items()}
    rows = []
    for held in names:
        others = [n for n in names if n != held]
        solver = _policy_solver(seed, features=features)
        info = train_dagger(solver, gen + [problems[n] for n in others],
                            optima=gen_opt + [exact[n].assignment for n in others],
                            imitation_steps=imitation_steps, dagger_steps=dagger_steps)
        row = {**info, "workload": held, "trained_on": others, "trained_on_all": info["trained_on"],
               "generated": len(gen), "train_seconds": info["train_seconds"] + gen_s}
        row.update(_apply_row(solver, problems[held], exact[held].objective, info["trained_on"]))
        rows.append(row)
        log(f"leave-one-out ({features}) {held:<14} policy {fmt(row['policy_ratio'], 5)} (greedy decode "
            f"{fmt(row['greedy_ratio'], 5)}, rule {fmt(row['rule_ratio'], 5)}) polished "
            f"{fmt(row['polished_ratio'], 5)}; {fmt(row['decision_ms'], 3)} ms/decision")
    return rows


def maxload_transfer(*, graphs: int = MAXLOAD_BUDGET["graphs"],
                     imitation_steps: int = MAXLOAD_BUDGET["imitation_steps"],
                     dagger_steps: int = MAXLOAD_BUDGET["dagger_steps"], seed: int = 0,
                     features: str = "lookahead", include_hard: bool = True,
                     log: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """One policy trained on ``graphs`` generated layer graphs
    (:func:`scheduler.workloads.layer_graphs.training_layer_graphs`) only, applied with no
    retraining to every shared dnn-partitioning workload. ``features="basic"`` with
    ``dagger_steps=0`` is the paper's LSTM trained by imitation (the baseline row). Rows carry
    the ratio to the published optimum and to the exact contiguous optimum. ``include_hard``:
    also the max-load harder workloads (:mod:`scheduler.workloads.hard`; no published optimum,
    so their ratio is to the exact contiguous optimum)."""
    from scheduler.solvers.exact import Exact
    from scheduler.workloads import dnn_partitioning
    from scheduler.workloads.layer_graphs import training_layer_graphs

    shared = dnn_partitioning.shared_workloads()
    if not shared:
        raise ProblemError("no shared dnn-partitioning workloads found; set RALP_SHARED_DIR or put them in "
                           "../shared/data/dnn-partitioning")
    train = [dnn_partitioning.from_dict(g, g["name"]) for g in training_layer_graphs(graphs, seed=seed + 2000)]
    solver = _policy_solver(seed, features=features, beam=APPLY_SAMPLES if features == "lookahead" else 0)
    info = train_dagger(solver, train, imitation_steps=imitation_steps, dagger_steps=dagger_steps)
    from scheduler.workloads import load_workload
    from scheduler.workloads.hard import HARD_WORKLOADS

    targets = {name: (lambda path=path: dnn_partitioning.load(path)) for name, path in shared.items()}
    if include_hard:
        targets.update({name: (lambda name=name: load_workload(name)) for name in HARD_WORKLOADS})
    assert not set(targets) & set(info["trained_on"]), "an evaluated workload is in the training set"
    rows = []
    for name, load in targets.items():
        problem = load()
        if not isinstance(problem, MaxLoadProblem):
            continue  # a HeterPS harder workload: another catalog size, not this policy's
        published = dnn_partitioning.PUBLISHED_OPTIMUM.get(name)
        exact = Exact().solve(problem).objective
        row = {"workload": name, "features": features, "graphs": graphs, "published_optimum": published,
               "reference": "published" if published else "exact", "exact": exact,
               "train_seconds": info["train_seconds"],
               **{k: info[k] for k in ("imitation_steps", "dagger_steps", "final_agreement")}}
        row.update(_apply_row(solver, problem, published if published else exact, info["trained_on"]))
        row["policy_ratio_to_exact"] = row["policy_objective"] / exact
        rows.append(row)
        log(f"transfer ({features}) {name:<24} policy {fmt(row['policy_ratio'], 5)} x {row['reference']} "
            f"(greedy decode {fmt(row['greedy_ratio'], 5)}, rule {fmt(row['rule_ratio'], 5)}); "
            f"{fmt(row['decision_ms'], 3)} ms/decision")
    return rows


def markdown(doc: dict[str, Any]) -> str:
    """The two tables (leave-one-out on the built-ins; transfer to the shared workloads)."""

    def f(x: Any, d: int = 4) -> str:
        return fmt(x, d + 1) if isinstance(x, float) else fmt(x)

    lines = ["### Leave-one-out on the built-ins (policy alone = greedy decode, beam 64 and 64 samples; no polish)",
             "", "| held out | policy alone | greedy decode only | rule only (no learning) | polished | "
             "paper features, same training and decode: policy alone | "
             "LSTM baseline: policy alone | LSTM baseline: polished | ms/decision | train s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = {r["workload"]: r for r in doc.get("baseline_leave_one_out", [])}
    abl = {r["workload"]: r for r in doc.get("ablation_leave_one_out", [])}
    for r in doc.get("leave_one_out", []):
        b, a = base.get(r["workload"], {}), abl.get(r["workload"], {})
        lines.append(f"| {r['workload']} | **{f(r['policy_ratio'])}** | {f(r['greedy_ratio'])} | {f(r['rule_ratio'])} "
                     f"| {f(r['polished_ratio'])} | {f(a.get('policy_ratio'))} | {f(b.get('policy_ratio_to_exact'))} "
                     f"| {f(b.get('ratio_to_exact'))} "
                     f"| {f(r['decision_ms'], 2)} | {f(r['train_seconds'], 2)} |")
    lines += ["", "### Max-load workloads, trained without them (ratio to the published optimum; to the exact "
              "contiguous optimum for the harder generated ones)", "",
              "| workload | policy alone | greedy decode only | rule only (no learning) | polished | "
              "LSTM baseline (paper features, imitation): policy alone | ms/decision |", "|---|---|---|---|---|---|---|"]
    base = {r["workload"]: r for r in doc.get("baseline_transfer", [])}
    for r in doc.get("transfer", []):
        b = base.get(r["workload"], {})
        lines.append(f"| {r['workload']} | **{f(r['policy_ratio'])}** | {f(r['greedy_ratio'])} | {f(r['rule_ratio'])} "
                     f"| {f(r['polished_ratio'])} | {f(b.get('policy_ratio'))} | {f(r['decision_ms'], 2)} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scheduler.generalise --out DIR``: both measurements (and the baselines) to
    ``DIR/generalisation.json`` and ``DIR/generalisation.md``."""
    import argparse
    import json
    import os
    from pathlib import Path

    from scheduler.core.schedule import _clean
    from scheduler.workloads import BUILTIN_WORKLOADS

    ap = argparse.ArgumentParser(prog="python -m scheduler.generalise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for generalisation.json and generalisation.md")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--part", choices=("all", "policy", "baseline", "ablation"), default="all",
                    help="policy: only the lookahead policy's rows; baseline: only the paper-LSTM baseline rows; "
                         "ablation: only the leave-one-out with this training and decode on the paper's features")
    ap.add_argument("--quick", action="store_true", help="tiny budgets (a smoke test, not a measurement)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    hb, mb = dict(HETERPS_BUDGET), dict(MAXLOAD_BUDGET)
    if args.quick:
        hb = {"generated": 4, "imitation_steps": 20, "dagger_steps": 10}
        mb = {"graphs": 3, "imitation_steps": 20, "dagger_steps": 10}
    names = list(BUILTIN_WORKLOADS)
    doc: dict[str, Any] = {"generated_by": "python -m scheduler.generalise", "seed": args.seed,
                           "heterps_budget": hb, "maxload_budget": mb, "apply_samples": APPLY_SAMPLES,
                           "beam": APPLY_SAMPLES, "machine": f"{os.cpu_count()} CPUs"}
    if args.part in ("all", "policy"):
        doc["leave_one_out"] = leave_one_out(names, seed=args.seed, **hb)
        doc["transfer"] = maxload_transfer(seed=args.seed, **mb)
    if args.part in ("all", "ablation"):
        doc["ablation_leave_one_out"] = leave_one_out(names, seed=args.seed, features="basic", **hb)
    if args.part in ("all", "baseline"):
        doc["baseline_transfer"] = maxload_transfer(seed=args.seed, features="basic", graphs=mb["graphs"],
                                                    imitation_steps=mb["imitation_steps"] + mb["dagger_steps"],
                                                    dagger_steps=0)
        kw = {"pretrain_iterations": 60, "fold_iterations": 30, "generated": 4} if args.quick else {}
        doc["baseline_leave_one_out"] = generalisation(names, seed=args.seed, **kw)
    doc["total_seconds"] = time.perf_counter() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "generalisation.json").write_text(json.dumps(_clean(doc), indent=1))
    (out / "generalisation.md").write_text(markdown(doc))
    print(f"wrote {out / 'generalisation.json'} and {out / 'generalisation.md'} ({doc['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
