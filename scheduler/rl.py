r"""RL solver (HeterPS): an LSTM policy in TensorFlow, trained by REINFORCE.

**Policy.** At decision ``t`` (a layer, or a colour class of a max-load workload, in the
problem's order) the input is ``x_t = [static features of t, dynamic features]``:

* HeterPS problems: layer kind (one-hot), log FLOPs, log parameter bytes, log activation bytes;
  per resource type: units its compute alone needs at the required throughput
  ``c(l, r) X_min / b`` (log), the same for its parameter sync and activation traffic, the
  type's relative price, whether the layer may run there, and context: the units the whole
  model would need on that type (log; and relative to the type's unit cap), the units the
  layers from ``t`` to the end need (log), this layer's share of the whole, the next layer's
  need (log), the layer's memory relative to a unit's; position ``t / L``, model size
  ``log10(L) / 3``, fan-in/fan-out (log1p) and whether a skip edge touches the layer;
  dynamically the previous decision (one-hot), the current run's length, the units its
  compute needs so far (log, and relative to the previous type's cap).
* max-load problems (actions: stay on the current accelerator / open the next one): the
  group's accelerator latency and communication cost relative to ``total / F``, its size
  relative to the limit; dynamically the current accelerator's load, the accelerators used,
  and the remaining load per remaining accelerator, all relative to ``total / F``.

``h_t = LSTM(Dense_relu(x_t), h_{t-1})``, ``logits_t = Dense(h_t)`` masked to the allowed
actions, ``a_t ~ tfp.distributions.Categorical(logits_t)``.

**Training** (REINFORCE with a moving-average baseline): sample ``B`` placements, reward
``R = -penalized(a)`` (minus the cost relative to the problem's reference cost, with a penalty
when the throughput constraint or a limit is missed, see ``Problem.penalized``), baseline
``b <- beta b + (1 - beta) mean(R)`` per problem, loss
``-mean((R - b) / std(R) * sum_t log pi(a_t)) - eta * entropy``. One policy can be trained on
several problems (round robin, one baseline each) and applied to unseen ones with no retraining
(same catalog size, so the same feature and action dimensions).

**Pretraining for unseen workloads.** :meth:`RL.imitate` is a supervised warm start: it
maximises the log-likelihood of given placements (the exact optima of *training* problems,
e.g. generated layer graphs from :mod:`scheduler.workloads.generated`) with the same update
and advantage 1, the features teacher-forced along the target. :meth:`LSTMPolicy.clone` copies a
pretrained policy so that several folds can continue from it.

**Generalising variant** (issue 14): ``RL(features="lookahead")`` reads the features of
:mod:`scheduler.policy_features` (the above plus the cost model's verdict on cheap completions
of the current prefix), ``RL(beam=w)`` adds a beam search of width ``w`` over the policy's own
probabilities to the greedy decode and samples when applying, and
:func:`scheduler.generalise.train_dagger` trains it by DAgger-style imitation of exact experts.
The defaults (``features="basic"``, ``beam=0``) are the paper's policy, kept as the baseline.

**Work budget.** A solve is budgeted in work, so that the same seed and budget give the same
schedule, bit for bit, on an idle or a loaded machine: ``iterations`` REINFORCE updates of
``batch`` episodes each (default :func:`default_iterations`: ``min(2000, ceil(24000 / n))`` for
``n`` decisions, about what 45 s of training did on 2 shared cores before budgets were counted
in work), and a polish of at most ``polish_evaluations`` evaluations. Wall-clock limits
(``train_seconds`` for training, ``max_solve_seconds`` for the whole solve, of which
``post_seconds`` are kept for decode, polish and timing) are safety caps only: when one cuts a
phase short, ``notes["time_cap_cut"]`` names the phase and a :class:`RuntimeWarning` says so
(the schedule then depends on the machine's speed). Only ``notes["decision_ms"]`` and the
``*_seconds`` notes are timings.

**Isolation.** The policy's variables, tf.functions and optimizer live outside any distribution
strategy: :meth:`RL.solve` / :meth:`RL.plan` (inherited), :meth:`RL.train`, :meth:`RL.imitate`
and :meth:`RL.pretrain` run in :func:`ralp_tf.place.isolation.outside_strategy`, so the solver
works as a placement policy inside ``strategy.scope()`` and creates nothing on the cluster.

**Result.** The best placement the policy produced (among the training samples and the
greedy arg-max decode; ``notes["policy_objective"]``), then, with ``polish=True`` (default), a
local improvement (:func:`polish`: best block moves of 1-3 consecutive decisions until none
helps) of that placement and of the policy's 5 best distinct training samples. Both numbers are reported. ``notes["decision_ms"]`` is the measured inference time per decision
of a greedy decode (features, LSTM step and action choice), median over repeats.
"""
from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np

from ralp_tf.plan import transfer_seconds
from ralp_tf.model import LAYER_KINDS
from scheduler.base import Solver, time_cap_cut
from scheduler.errors import ProblemError
from ralp_tf.place import outside_strategy
from scheduler.maxload import MaxLoadProblem
from scheduler.problem import Problem

__all__ = ["HeterPSEnv", "MaxLoadEnv", "DEFAULT_DECISION_ITERATIONS", "DEFAULT_POLISH_EVALUATIONS",
           "default_iterations", "polish", "make_env", "LSTMPolicy", "RL"]


def _log(x: np.ndarray | float, scale: float = 3.0) -> np.ndarray:
    return np.log10(np.asarray(x, dtype=np.float64) + 1e-3) / scale


class HeterPSEnv:
    """Sequential decisions over a HeterPS problem's layers (one resource type each).

    Every feature is scale-free (logs of unit counts at the required throughput, ratios to the
    whole model, to the type's unit cap or memory), so one policy reads problems of any size;
    the width depends only on the number of resource types (module docstring).
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        p = problem
        n, T, b = p.num_decisions, p.num_choices, p.batch_size
        xmin = p.constraints.min_throughput or 0.25 * p.best_throughput()
        self.need = p.compute * xmin / b                                   # units needed by compute
        kinds = np.zeros((n, len(LAYER_KINDS)))
        for l, k in enumerate(p.kinds):
            kinds[l, LAYER_KINDS.index(k) if k in LAYER_KINDS else -1] = 1.0
        price = np.array([t.price_per_hour for t in p.catalog.types])
        caps = np.array([t.max_units for t in p.catalog.types], dtype=np.float64)
        fan_in, fan_out, skip = np.zeros(n), np.zeros(n), np.zeros(n)
        for u, v in p.edges:
            fan_out[u] += 1
            fan_in[v] += 1
            if v > u + 1:
                skip[u] = skip[v] = 1.0
        total = self.need.sum(axis=0)                                       # whole model on one type
        suffix = np.cumsum(self.need[::-1], axis=0)[::-1]                   # layers t..n-1
        nxt = np.vstack([self.need[1:], np.zeros((1, T))])
        per_type = []
        for r, t in enumerate(p.catalog.types):
            sync = np.array([transfer_seconds(2.0 * p.trainable_bytes[l], t.bandwidth_bps) for l in range(n)])
            act = np.array([transfer_seconds(b * p.output_bytes[l], t.bandwidth_bps) for l in range(n)])
            per_type.append(np.stack([
                _log(self.need[:, r]), _log(sync * xmin / b), _log(act * xmin / b),
                np.full(n, price[r] / price.max()), p.allowed[:, r].astype(float),
                np.full(n, _log(total[r])), _log(suffix[:, r]), self.need[:, r] / (total[r] + 1e-12),
                _log(nxt[:, r]), _log(p.memory / t.memory_bytes), np.full(n, _log(total[r] / caps[r])),
            ], axis=1))
        self.static = np.hstack([kinds, _log(p.flops, 10.0)[:, None], _log(p.param_bytes, 10.0)[:, None],
                                 _log(p.output_bytes, 8.0)[:, None], *per_type,
                                 (np.arange(n) / n)[:, None], np.full((n, 1), math.log10(n) / 3.0),
                                 np.log1p(fan_in)[:, None], np.log1p(fan_out)[:, None], skip[:, None]]
                                ).astype(np.float32)
        self.caps = caps
        self.n, self.A = n, T
        self.feature_dim = self.static.shape[1] + (T + 1) + 3
        self.initial_bias = np.zeros(T)

    #: Per-rollout state (first axis: the batch), reordered by :meth:`select` in a beam search.
    BATCH_STATE = ("actions", "prev", "run_len", "run_need")

    def select(self, rows: np.ndarray) -> None:
        """Keep the rollouts ``rows`` (indices, repeats allowed) of the batch, in that order."""
        for name in self.BATCH_STATE:
            setattr(self, name, getattr(self, name)[rows].copy())

    def reset(self, batch: int) -> None:
        self.actions = np.zeros((batch, self.n), dtype=np.int64)
        self.prev = np.full(batch, -1)
        self.run_len = np.zeros(batch)
        self.run_need = np.zeros(batch)

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        B = len(self.prev)
        onehot = np.zeros((B, self.A + 1), dtype=np.float32)
        onehot[np.arange(B), np.where(self.prev < 0, self.A, self.prev)] = 1.0
        cap = np.where(self.prev < 0, 1.0, self.caps[np.maximum(self.prev, 0)])
        dyn = np.stack([self.run_len / 10.0, _log(self.run_need), np.minimum(self.run_need / cap, 4.0)],
                       axis=1).astype(np.float32)
        x = np.hstack([np.repeat(self.static[t][None], B, 0), onehot, dyn])
        mask = np.repeat(self.problem.allowed[t][None], B, 0)
        return x, mask

    def step(self, t: int, a: np.ndarray) -> None:
        self.actions[:, t] = a
        same = a == self.prev
        self.run_len = np.where(same, self.run_len + 1, 1)
        self.run_need = np.where(same, self.run_need, 0.0) + self.need[t, a]
        self.prev = a

    def assignments(self) -> np.ndarray:
        return self.actions.copy()


class MaxLoadEnv:
    """Sequential stay/next decisions over a max-load problem's groups (contiguous splits)."""

    def __init__(self, problem: MaxLoadProblem) -> None:
        if problem.max_fpgas == 0:
            raise ProblemError(f"{problem.name!r} has no accelerators; the RL policy splits work over accelerators")
        self.problem = p = problem
        self.target = p.reference_load()
        n = p.num_decisions
        comm = np.array([p.cost[g].sum() for g in p.groups])
        rem = np.cumsum(p.group_fpga[::-1])[::-1]
        self.static = np.stack([p.group_fpga / self.target, comm / self.target, p.group_size / p.max_size,
                                np.arange(n) / n, rem / (p.group_fpga.sum() + 1e-12)], axis=1).astype(np.float32)
        self.rem_after = rem - p.group_fpga
        self.n, self.A, self.F = n, 2, p.max_fpgas
        self.feature_dim = self.static.shape[1] + 3 + 4
        # Start near F - 1 cuts per rollout: P(next) ~ (F - 1) / n.
        self.initial_bias = np.array([0.0, math.log(max(self.F - 1, 1) / max(n, 1))])

    BATCH_STATE = ("acc", "load", "dev", "last")
    select = HeterPSEnv.select

    def reset(self, batch: int) -> None:
        self.acc = np.zeros(batch, dtype=np.int64)
        self.load = np.zeros(batch)
        self.dev = np.zeros((batch, self.n), dtype=np.int64)
        self.last = np.zeros((batch, 3), dtype=np.float32)
        self.last[:, 2] = 1.0

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        B = len(self.acc)
        left = self.F - self.acc - 1  # accelerators after the current one
        rem_per = np.where(left > 0, self.rem_after[t] / (np.maximum(left, 1) * self.target), 10.0)
        dyn = np.stack([self.load / self.target, (self.load + self.problem.group_fpga[t]) / self.target,
                        self.acc / self.F, np.minimum(rem_per, 10.0)], axis=1)
        x = np.hstack([np.repeat(self.static[t][None], B, 0), self.last, dyn.astype(np.float32)]).astype(np.float32)
        mask = np.ones((B, 2), dtype=bool)
        mask[:, 1] = (t > 0) & (self.acc < self.F - 1)
        return x, mask

    def step(self, t: int, a: np.ndarray) -> None:
        nxt = a == 1
        self.acc = self.acc + nxt
        self.load = np.where(nxt, 0.0, self.load) + self.problem.group_fpga[t]
        self.dev[:, t] = self.acc
        self.last[:] = 0.0
        self.last[np.arange(len(a)), a] = 1.0

    def assignments(self) -> np.ndarray:
        p = self.problem
        out = self.dev + p.max_cpus
        if p.max_cpus:
            bad = ~p.allowed[np.arange(self.n)[None, :], out]
            out[bad] = 0
        return out


#: Default REINFORCE work per solve, in decisions x iterations (see :func:`default_iterations`).
DEFAULT_DECISION_ITERATIONS = 24_000
#: Evaluations the polish may spend per solve by default (all of its starts together).
DEFAULT_POLISH_EVALUATIONS = 200_000


def default_iterations(num_decisions: int) -> int:
    """Default REINFORCE iterations for a problem of ``num_decisions`` decisions:
    ``min(2000, ceil(DEFAULT_DECISION_ITERATIONS / n))`` (work, not time)."""
    return int(min(2000, math.ceil(DEFAULT_DECISION_ITERATIONS / max(int(num_decisions), 1))))


def polish(problem: Any, assignment: np.ndarray, max_block: int = 3, max_passes: int = 50,
           deadline: float | None = None, max_evaluations: int | None = None) -> tuple[np.ndarray, int]:
    """Local improvement of ``assignment``: repeatedly apply the best move that sets a block of
    1..``max_block`` consecutive decisions to one allowed choice, until none lowers the
    (objective, penalised score). Returns the result and the number of evaluations.

    Work budget: at most ``max_passes`` moves and ``max_evaluations`` evaluations (a pass cut by
    the budget applies the best move it has seen). ``deadline`` (a ``time.perf_counter()``
    value) is a safety cap: stop when it passes, keeping the best placement found so far (never
    worse than ``assignment``)."""
    a = np.array(assignment, dtype=np.int64)
    key = (problem.objective(a), problem.penalized(a))
    evals = 0
    n, C = problem.num_decisions, problem.num_choices
    for _ in range(max_passes):
        best_key, best = key, None
        for i in range(n):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if max_evaluations is not None and evals >= max_evaluations:
                break
            for w in range(1, max_block + 1):
                if i + w > n:
                    break
                for r in range(C):
                    if not problem.allowed[i:i + w, r].all() or (a[i:i + w] == r).all():
                        continue
                    if max_evaluations is not None and evals >= max_evaluations:
                        break
                    cand = a.copy()
                    cand[i:i + w] = r
                    evals += 1
                    k = (problem.objective(cand), problem.penalized(cand))
                    if k < best_key:
                        best_key, best = k, cand
        if best is None:
            break
        a, key = best, best_key
        if deadline is not None and time.perf_counter() > deadline:
            break
        if max_evaluations is not None and evals >= max_evaluations:
            break
    return a, evals


def make_env(problem: Any) -> HeterPSEnv | MaxLoadEnv:
    if isinstance(problem, MaxLoadProblem):
        return MaxLoadEnv(problem)
    if isinstance(problem, Problem):
        return HeterPSEnv(problem)
    raise ProblemError(f"RL cannot handle {type(problem).__name__}")


class LSTMPolicy:
    """Dense(relu) -> LSTMCell -> Dense(logits); one step for rollouts, the whole sequence for
    training (the same cell, weights shared)."""

    def __init__(self, feature_dim: int, num_actions: int, hidden: int = 64, learning_rate: float = 3e-3,
                 entropy: float = 0.01, seed: int = 0, initial_bias: np.ndarray | None = None) -> None:
        import tensorflow as tf
        import tensorflow_probability as tfp
        import tf_keras

        self.tf, self.tfd = tf, tfp.distributions
        self._seed = int(seed)
        tf.random.set_seed(seed)
        self.feature_dim, self.num_actions, self.hidden = int(feature_dim), int(num_actions), int(hidden)
        init = tf_keras.initializers.GlorotUniform(seed=seed)
        self.embed = tf_keras.layers.Dense(hidden, activation="relu", kernel_initializer=init)
        # Every initializer seeded (LSTMCell's default orthogonal recurrent one is not): the same
        # seed gives the same weights however many ops the process ran before.
        self.cell = tf_keras.layers.LSTMCell(hidden, kernel_initializer=init,
                                             recurrent_initializer=tf_keras.initializers.Orthogonal(seed=seed))
        self.rnn = tf_keras.layers.RNN(self.cell, return_sequences=True)
        self.head = tf_keras.layers.Dense(num_actions, kernel_initializer=tf_keras.initializers.Zeros())
        self.rnn(self.embed(tf.zeros([1, 1, feature_dim])))
        self.head(tf.zeros([1, hidden]))
        if initial_bias is not None:
            self.head.bias.assign(np.asarray(initial_bias, dtype=np.float32))
        self.variables = (self.embed.trainable_variables + self.cell.trainable_variables
                          + self.head.trainable_variables)
        self.optimizer = tf_keras.optimizers.Adam(learning_rate=learning_rate)
        self.entropy = float(entropy)
        self.seed_gen = tf.random.Generator.from_seed(seed)
        self._step = tf.function(self._step_impl, reduce_retracing=True)
        self._greedy_step = tf.function(self._greedy_step_impl, reduce_retracing=True)
        self._train = tf.function(self._train_impl, reduce_retracing=True)
        self._logp_step = tf.function(self._logp_step_impl, reduce_retracing=True)

    def clone(self, seed: int | None = None) -> "LSTMPolicy":
        """A new policy with a copy of this one's weights (fresh optimizer state), e.g. to
        fine-tune a shared pretrained policy per fold without touching the original."""
        other = LSTMPolicy(self.feature_dim, self.num_actions, hidden=self.hidden,
                           learning_rate=float(self.optimizer.learning_rate.numpy()), entropy=self.entropy,
                           seed=self._seed if seed is None else seed)
        for dst, src in zip(other.variables, self.variables):
            dst.assign(src)
        return other

    def _step_impl(self, x: Any, h: Any, c: Any, mask: Any, greedy: Any) -> tuple[Any, Any, Any]:
        tf = self.tf
        out, (h2, c2) = self.cell(self.embed(x), [h, c])
        logits = tf.where(mask, self.head(out), -1e9)
        seed = tf.cast(self.seed_gen.make_seeds(1)[:, 0], tf.int32)
        sampled = self.tfd.Categorical(logits=logits).sample(seed=seed)
        action = tf.where(greedy, tf.argmax(logits, axis=-1, output_type=tf.int32), sampled)
        return action, h2, c2

    def _greedy_step_impl(self, x: Any, h: Any, c: Any, mask: Any) -> tuple[Any, Any, Any]:
        tf = self.tf
        out, (h2, c2) = self.cell(self.embed(x), [h, c])
        logits = tf.where(mask, self.head(out), -1e9)
        return tf.argmax(logits, axis=-1, output_type=tf.int32), h2, c2

    def _logp_step_impl(self, x: Any, h: Any, c: Any, mask: Any) -> tuple[Any, Any, Any]:
        tf = self.tf
        out, (h2, c2) = self.cell(self.embed(x), [h, c])
        return tf.nn.log_softmax(tf.where(mask, self.head(out), -1e9)), h2, c2

    def beam(self, env: Any, width: int) -> np.ndarray:
        """Beam search over the policy's log-probabilities: keep the ``width`` most likely
        partial placements at every step (ties broken by index, so deterministic); returns
        their completions [<= width, n], most likely first. Uses only the policy."""
        tf = self.tf
        self._check_env(env)
        env.reset(1)
        h = tf.zeros([1, self.hidden])
        c = tf.zeros([1, self.hidden])
        scores = np.zeros(1)
        for t in range(env.n):
            x, m = env.observe(t)
            lp, h, c = self._logp_step(x, h, c, m)
            cand = np.where(m, scores[:, None] + lp.numpy().astype(np.float64), -np.inf)
            order = np.argsort(-cand, axis=None, kind="stable")[:width]
            order = order[np.isfinite(cand.reshape(-1)[order])]
            parent, act = np.divmod(order, self.num_actions)
            env.select(parent)
            h, c = tf.gather(h, parent), tf.gather(c, parent)
            scores = cand[parent, act]
            env.step(t, act.astype(np.int64))
        return env.assignments()

    def _train_impl(self, X: Any, M: Any, A: Any, adv: Any) -> Any:
        tf = self.tf
        with tf.GradientTape() as tape:
            logits = tf.where(M, self.head(self.rnn(self.embed(X))), -1e9)
            dist = self.tfd.Categorical(logits=logits)
            logp = tf.reduce_sum(dist.log_prob(A), axis=1)
            ent = tf.reduce_mean(tf.reduce_sum(dist.entropy(), axis=1))
            loss = -tf.reduce_mean(adv * logp) - self.entropy * ent / tf.cast(tf.shape(X)[1], tf.float32)
        grads = tape.gradient(loss, self.variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss

    def rollout(self, env: Any, batch: int, greedy: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run the policy over ``env``: features [B, n, F], masks [B, n, A], actions [B, n]."""
        tf = self.tf
        self._check_env(env)
        env.reset(batch)
        h = tf.zeros([batch, self.hidden])
        c = tf.zeros([batch, self.hidden])
        X = np.zeros((batch, env.n, self.feature_dim), dtype=np.float32)
        M = np.zeros((batch, env.n, self.num_actions), dtype=bool)
        g = tf.constant(greedy)
        for t in range(env.n):
            x, m = env.observe(t)
            X[:, t], M[:, t] = x, m
            if greedy:
                a, h, c = self._greedy_step(x, h, c, m)
            else:
                a, h, c = self._step(x, h, c, m, g)
            env.step(t, a.numpy().astype(np.int64))
        return X, M, env.assignments()

    def _check_env(self, env: Any) -> None:
        if env.feature_dim != self.feature_dim or env.A != self.num_actions:
            raise ProblemError(f"this policy was built for {self.feature_dim} features / {self.num_actions} actions; "
                               f"the problem has {env.feature_dim} / {env.A} (a different catalog size, problem "
                               "kind or feature set): train a policy for it")

    def teacher_forced(self, env: Any, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features [1, n, F] and masks [1, n, A] the policy would see while taking ``actions``
        (one per step) on ``env``; with :meth:`update` and advantage 1 this is imitation."""
        env.reset(1)
        X = np.zeros((1, env.n, self.feature_dim), dtype=np.float32)
        M = np.zeros((1, env.n, self.num_actions), dtype=bool)
        for t in range(env.n):
            x, m = env.observe(t)
            X[:, t], M[:, t] = x, m
            env.step(t, np.array([int(actions[t])], dtype=np.int64))
        return X, M

    def update(self, X: np.ndarray, M: np.ndarray, actions: np.ndarray, adv: np.ndarray) -> float:
        tf = self.tf
        return float(self._train(tf.constant(X), tf.constant(M), tf.constant(actions.astype(np.int32)),
                                 tf.constant(adv.astype(np.float32))))


def _actions_of(env: Any, assignment: np.ndarray) -> np.ndarray:
    """The per-step actions that produced ``assignment`` (identity for HeterPS envs)."""
    if isinstance(env, MaxLoadEnv):
        acc = assignment - env.problem.max_cpus
        return np.r_[0, (np.diff(acc, axis=-1) > 0).astype(np.int64)] if acc.ndim == 1 else \
            np.hstack([np.zeros((len(acc), 1), np.int64), (np.diff(acc, axis=1) > 0).astype(np.int64)])
    return assignment


class RL(Solver):
    """REINFORCE-trained LSTM placement policy (module docstring).

    * ``policy``: an already trained :class:`LSTMPolicy` (e.g. from :meth:`pretrain`); with
      ``iterations=0`` (or ``train_seconds=0``) the solver only applies it (no retraining).
    * ``iterations``: the training budget on the problem being solved, in REINFORCE updates of
      ``batch`` episodes (``None``: :func:`default_iterations` of the problem's size).
    * ``polish``: run the local polish after the policy (``False``: the policy's own result is
      the schedule); ``polish_evaluations``: its work budget.
    * ``train_seconds`` / ``max_solve_seconds`` (whole solve; ``post_seconds`` of it are kept
      for decode, polish and timing): wall-clock **safety caps**, reported in
      ``notes["time_cap_cut"]`` when they cut a phase short. ``None``: no cap.
    * ``samples``: placements sampled (no training) after the greedy decode when applying;
      ``beam``: width of a beam search over the policy's probabilities, also when applying
      (0: none). The best of all by (objective, penalised score) is the policy's result.
    * ``features``: ``"basic"`` (the paper's) or ``"lookahead"`` (:mod:`scheduler.policy_features`).
    """

    name = "rl"

    def __init__(self, policy: LSTMPolicy | None = None, *, iterations: int | None = None,
                 train_seconds: float | None = 600.0, batch: int = 32, hidden: int = 64,
                 learning_rate: float = 3e-3, entropy: float = 0.01, baseline_decay: float = 0.9, samples: int = 0,
                 polish: bool = True, polish_evaluations: int = DEFAULT_POLISH_EVALUATIONS,
                 max_solve_seconds: float | None = 900.0, post_seconds: float = 8.0, features: str = "basic",
                 beam: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from scheduler.policy_features import FEATURE_SETS

        if features not in FEATURE_SETS:
            raise ProblemError(f"unknown feature set {features!r}; use one of {', '.join(FEATURE_SETS)}")
        if max_solve_seconds is not None and not max_solve_seconds > 0:
            raise ProblemError(f"max_solve_seconds must be > 0 or None (no cap), got {max_solve_seconds!r}")
        if train_seconds is not None and not train_seconds >= 0:
            raise ProblemError(f"train_seconds must be >= 0 or None (no cap), got {train_seconds!r}")
        if not post_seconds >= 0:
            raise ProblemError(f"post_seconds must be >= 0, got {post_seconds!r}")
        if iterations is not None and (isinstance(iterations, bool) or int(iterations) != iterations
                                       or iterations < 0):
            raise ProblemError(f"iterations must be an integer >= 0 (or None for the default), got {iterations!r}")
        if int(batch) < 1:
            raise ProblemError(f"batch must be >= 1 episode per iteration, got {batch!r}")
        if int(polish_evaluations) < 0:
            raise ProblemError(f"polish_evaluations must be >= 0, got {polish_evaluations!r}")
        self.policy = policy
        self.iterations = None if iterations is None else int(iterations)
        self.train_seconds = None if train_seconds is None else float(train_seconds)
        self.batch = int(batch)
        self.hidden = int(hidden)
        self.learning_rate = float(learning_rate)
        self.entropy = float(entropy)
        self.baseline_decay = float(baseline_decay)
        self.samples = int(samples)
        self.polish = bool(polish)
        self.polish_evaluations = int(polish_evaluations)
        self.max_solve_seconds = None if max_solve_seconds is None else float(max_solve_seconds)
        self.post_seconds = float(post_seconds)
        self.pool_size = 5
        self.features = features
        if isinstance(beam, bool) or int(beam) != beam or beam < 0:
            raise ProblemError(f"beam must be an integer width >= 0 (0: no beam search), got {beam!r}")
        self.beam = int(beam)

    def _env(self, problem: Any) -> Any:
        """The decision env of ``problem`` for this solver's feature set (``basic``: the paper's;
        ``lookahead``: :mod:`scheduler.policy_features`)."""
        from scheduler.policy_features import make_feature_env

        return make_feature_env(problem, self.features)

    def _new_policy(self, env: Any) -> LSTMPolicy:
        return LSTMPolicy(env.feature_dim, env.A, hidden=self.hidden, learning_rate=self.learning_rate,
                          entropy=self.entropy, seed=self.seed, initial_bias=getattr(env, "initial_bias", None))

    def _trains(self) -> bool:
        return self.iterations != 0 and self.train_seconds != 0

    def train(self, problems: Sequence[Any], *, iterations: int, seconds: float | None = None,
              track: dict[int, dict[tuple[int, ...], tuple[float, float]]] | None = None,
              order: str = "round_robin") -> dict[str, Any]:
        """REINFORCE on ``problems`` for ``iterations`` updates (``batch`` episodes each);
        ``seconds`` is a safety cap (``time_cap_cut`` in the result when it cut training short).

        ``order``: ``"round_robin"`` (problem ``it % len``) or ``"random"`` (a uniformly random
        problem per iteration, seeded; better for large generated training sets). ``track``
        (optional) receives, per problem index, the best distinct placements sampled
        (placement -> (objective, penalised score)). The returned dict names every problem
        trained on (``trained_on``), so callers can check that a held-out workload was not.
        Runs outside any distribution strategy (:mod:`ralp_tf.place.isolation`).
        """
        return outside_strategy(self._train, problems, seconds=seconds, iterations=iterations, track=track,
                                order=order)

    def _train(self, problems: Sequence[Any], *, seconds: float | None, iterations: int,
               track: dict[int, dict[tuple[int, ...], tuple[float, float]]] | None, order: str) -> dict[str, Any]:
        if not problems:
            raise ProblemError("RL.train needs at least one problem to train on")
        if order not in ("round_robin", "random"):
            raise ProblemError(f"order must be 'round_robin' or 'random', got {order!r}")
        if int(iterations) < 1:
            raise ProblemError(f"a training budget of {iterations!r} iterations trains nothing; give iterations >= 1 "
                               f"(each is {self.batch} episodes)")
        envs = [self._env(p) for p in problems]
        if self.policy is None:
            self.policy = self._new_policy(envs[0])
        baselines: list[float | None] = [None] * len(envs)
        rng = np.random.default_rng(self.seed)
        t0 = time.perf_counter()
        it = 0
        history = []
        notes: dict[str, Any] = {}
        while it < iterations:
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                time_cap_cut(notes, "rl", "training", seconds)
                break
            k = it % len(envs) if order == "round_robin" else int(rng.integers(len(envs)))
            env, prob = envs[k], problems[k]
            X, M, assign = self.policy.rollout(env, self.batch, greedy=False)
            scores = np.array([prob.penalized(a) for a in assign])
            rewards = -scores
            if track is not None:
                pool = track.setdefault(k, {})
                for a, s in zip(assign, scores):
                    pool.setdefault(tuple(int(x) for x in a), (prob.objective(a), float(s)))
                if len(pool) > 4 * self.pool_size:  # keep the best distinct placements
                    keep = sorted(pool.items(), key=lambda kv: kv[1])[: self.pool_size]
                    track[k] = dict(keep)
            b = baselines[k]
            b = float(rewards.mean()) if b is None else self.baseline_decay * b + (1 - self.baseline_decay) * float(
                rewards.mean())
            baselines[k] = b
            adv = (rewards - b) / (rewards.std() + 1e-6)
            self.policy.update(X, M, _actions_of(env, assign), adv)
            history.append(float(scores.mean()))
            it += 1
        return {"iterations": it, "iterations_budget": int(iterations), "episodes": it * self.batch,
                "train_seconds": time.perf_counter() - t0,
                "final_mean_score": history[-1] if history else None, **notes,
                "trained_on": [getattr(p, "name", str(i)) for i, p in enumerate(problems)]}

    def imitate(self, problems: Sequence[Any], targets: Sequence[np.ndarray], *, iterations: int = 2000,
                seconds: float | None = None) -> dict[str, Any]:
        """Supervised warm start: maximise the log-likelihood of ``targets[i]`` (a placement of
        ``problems[i]``, e.g. the exact optimum of a *training* problem) under the policy, one
        problem per step in seeded random order, for ``iterations`` steps (``seconds``: a safety
        cap, reported as ``time_cap_cut``). Contract: only the given problems are read;
        ``trained_on`` in the result names them. Runs outside any distribution strategy
        (:mod:`ralp_tf.place.isolation`)."""
        return outside_strategy(self._imitate, problems, targets, seconds=seconds, iterations=iterations)

    def _imitate(self, problems: Sequence[Any], targets: Sequence[np.ndarray], *, seconds: float | None,
                 iterations: int) -> dict[str, Any]:
        if len(problems) != len(targets) or not problems:
            raise ProblemError("imitate needs one target placement per problem (and at least one problem)")
        if int(iterations) < 1:
            raise ProblemError(f"an imitation budget of {iterations!r} steps trains nothing; give iterations >= 1")
        envs = [self._env(p) for p in problems]
        if self.policy is None:
            self.policy = self._new_policy(envs[0])
        data = []
        for env, a in zip(envs, targets):
            acts = _actions_of(env, np.asarray(a, dtype=np.int64))
            X, M = self.policy.teacher_forced(env, acts)
            data.append((X, M, acts[None, :]))
        rng = np.random.default_rng(self.seed + 1)
        t0 = time.perf_counter()
        it = 0
        notes: dict[str, Any] = {}
        while it < iterations:
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                time_cap_cut(notes, "rl", "imitation", seconds)
                break
            X, M, A = data[int(rng.integers(len(data)))]
            self.policy.update(X, M, A, np.ones(1))
            it += 1
        return {"imitation_iterations": it, "imitation_seconds": time.perf_counter() - t0, **notes,
                "trained_on": [getattr(p, "name", str(i)) for i, p in enumerate(problems)]}

    def decision_ms(self, problem: Any, repeats: int = 15, deadline: float | None = None) -> float:
        """Median wall time per decision of a greedy decode (ms), features included (memoised
        lookahead features are forgotten before each decode), over ``repeats`` decodes after a
        warm-up (fewer, at least 3, when ``deadline`` would otherwise pass). A timing only: it
        never changes the schedule."""
        env = self._env(problem)
        t0 = time.perf_counter()
        self.policy.rollout(env, 1, greedy=True)  # warm (traces once per shape)
        if deadline is not None:
            one = max(time.perf_counter() - t0, 1e-4)
            repeats = max(3, min(repeats, int((deadline - time.perf_counter()) / one)))
        times = []
        clear = getattr(env, "clear_memo", None)  # lookahead features: time computing them, not a memo hit
        for _ in range(repeats):
            if clear is not None:
                clear()
            t0 = time.perf_counter()
            self.policy.rollout(env, 1, greedy=True)
            times.append((time.perf_counter() - t0) / env.n * 1e3)
        return float(np.median(times))

    def apply(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Greedy decode (plus a beam search of width ``beam`` and ``samples`` sampled placements)
        with the current policy, no training."""
        if self.policy is None:
            raise ProblemError("the RL policy is untrained; train it (RL.train) or give iterations > 0")
        env = self._env(problem)
        _, _, a = self.policy.rollout(env, 1, greedy=True)
        best_key, best = (problem.objective(a[0]), problem.penalized(a[0])), a[0]
        greedy_objective = best_key[0]
        many: list[np.ndarray] = []
        if self.beam:
            many.extend(self.policy.beam(env, self.beam))
        if self.samples:
            many.extend(self.policy.rollout(env, self.samples, greedy=False)[2])
        for x in many:
            key = (problem.objective(x), problem.penalized(x))
            if key < best_key:
                best_key, best = key, x
        return best, {"greedy_objective": greedy_objective}

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        t_start = time.perf_counter()
        deadline = None if self.max_solve_seconds is None else t_start + self.max_solve_seconds
        notes: dict[str, Any] = {}
        track: dict[int, dict[tuple[int, ...], tuple[float, float]]] = {}
        if self._trains():
            iterations = self.iterations if self.iterations is not None else default_iterations(problem.num_decisions)
            cap = self.train_seconds
            if deadline is not None:
                room = max(0.0, self.max_solve_seconds - self.post_seconds)
                cap = room if cap is None else min(cap, room)
            notes.update(self.train([problem], iterations=iterations, seconds=cap, track=track))
            notes.pop("trained_on", None)
        elif self.policy is None:
            raise ProblemError("RL with a training budget of 0 iterations needs a trained policy (RL(policy=...)); "
                               "give iterations >= 1 to train one on this problem")
        a, info = self.apply(problem)
        best_key = (problem.objective(a), problem.penalized(a))
        notes["greedy_decode_objective"] = info["greedy_objective"]
        pool = sorted(track.get(0, {}).items(), key=lambda kv: kv[1])[: self.pool_size]
        starts = sorted([(best_key, a)] + [(key, np.array(x, dtype=np.int64)) for x, key in pool],
                        key=lambda s: s[0])
        notes["best_from"] = "training sample" if pool and pool[0][1] < best_key else "greedy decode"
        a = starts[0][1]
        notes["policy_objective"] = float(problem.objective(a))
        notes["policy_assignment"] = [int(x) for x in a]
        notes["polished"] = self.polish
        if self.polish:
            t0 = time.perf_counter()
            # Leave time for the inference timing: about 5 greedy decodes of this problem.
            timing = 5 * len(a) * 2e-3
            polish_deadline = None if deadline is None else deadline - timing
            evals = 0
            for _, start in starts:  # best first: the budget cuts the least promising starts
                if polish_deadline is not None and time.perf_counter() > polish_deadline:
                    time_cap_cut(notes, "rl", "polish", self.max_solve_seconds)
                    break
                if evals >= self.polish_evaluations:
                    break
                cand, e = polish(problem, start, deadline=polish_deadline,
                                 max_evaluations=self.polish_evaluations - evals)
                evals += e
                if (problem.objective(cand), problem.penalized(cand)) < (problem.objective(a), problem.penalized(a)):
                    a = cand
            notes["polish_evaluations"] = evals
            notes["polish_seconds"] = time.perf_counter() - t0
        notes["decision_ms"] = self.decision_ms(problem, deadline=deadline)
        return a, notes

    @classmethod
    def pretrain(cls, problems: Sequence[Any], *, iterations: int = 2000, seconds: float | None = None,
                 order: str = "round_robin", policy: LSTMPolicy | None = None, **kwargs: Any) -> "RL":
        """An RL solver whose policy is trained on ``problems`` for ``iterations`` REINFORCE
        updates (``seconds``: safety cap). The returned solver has ``iterations = 0``: it applies the
        policy to unseen problems with no retraining (set ``iterations`` to fine-tune instead). ``policy``: start from a copy of this
        (already trained) policy instead of a fresh one; the given policy is not modified.
        ``solver.pretrain_info["trained_on"]`` names the problems it was trained on. Runs outside
        any distribution strategy (:mod:`ralp_tf.place.isolation`)."""

        def pretrained() -> "RL":
            solver = cls(policy=None if policy is None else policy.clone(), **kwargs)
            solver.pretrain_info = solver.train(list(problems), seconds=seconds, iterations=iterations, order=order)
            solver.iterations = 0  # apply with no retraining
            return solver

        return outside_strategy(pretrained)
