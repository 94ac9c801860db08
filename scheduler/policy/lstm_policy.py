"""The placement policy network: Dense(relu) -> LSTMCell -> Dense(logits), masked, with a
``tfp.distributions.Categorical`` over the allowed actions.

``h_t = LSTM(Dense_relu(x_t), h_{t-1})``, ``logits_t = Dense(h_t)`` with masked actions at
``-1e9``. One step is a ``tf.function`` for sampled rollouts; the same cell runs under
``tf_keras.layers.RNN`` over whole sequences for the update; greedy decodes and the beam search
run the same network in numpy (:meth:`LSTMPolicy.numpy_weights`), which is what applying a
trained policy costs per decision.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.core.errors import ProblemError

__all__ = ["LSTMPolicy"]


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
        self._train = tf.function(self._train_impl, reduce_retracing=True)
        self._np: tuple[np.ndarray, ...] | None = None

    def clone(self, seed: int | None = None) -> "LSTMPolicy":
        """A new policy with a copy of this one's weights (fresh optimizer state), e.g. to
        fine-tune a shared pretrained policy per fold without touching the original."""
        other = LSTMPolicy(self.feature_dim, self.num_actions, hidden=self.hidden,
                           learning_rate=float(self.optimizer.learning_rate.numpy()), entropy=self.entropy,
                           seed=self._seed if seed is None else seed)
        for dst, src in zip(other.variables, self.variables):
            dst.assign(src)
        return other

    def _step_impl(self, x: Any, h: Any, c: Any, mask: Any) -> tuple[Any, Any, Any]:
        tf = self.tf
        out, (h2, c2) = self.cell(self.embed(x), [h, c])
        logits = tf.where(mask, self.head(out), -1e9)
        seed = tf.cast(self.seed_gen.make_seeds(1)[:, 0], tf.int32)
        return self.tfd.Categorical(logits=logits).sample(seed=seed), h2, c2

    # ----------------------------------------------------------------- numpy inference
    def numpy_weights(self) -> tuple[np.ndarray, ...]:
        """The network's weights as float32 arrays ``(W_e, b_e, W, U, b, W_h, b_h)`` (cached until
        the next :meth:`update` or :meth:`set_weights`)."""
        if self._np is None:
            self._np = tuple(np.asarray(v.numpy(), dtype=np.float32) for v in self.variables)
        return self._np

    def numpy_step(self, x: np.ndarray, h: np.ndarray, c: np.ndarray, mask: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step in numpy (float32): ``(masked logits, h, c)``. The LSTM gates are tf_keras's
        ``LSTMCell`` (sigmoid recurrent activation, tanh): ``z = e W + h U + b`` split into
        ``i, f, g, o``; ``c' = s(f) c + s(i) tanh(g)``, ``h' = s(o) tanh(c')``."""
        We, be, W, U, b, Wh, bh = self.numpy_weights()
        e = np.maximum(x.astype(np.float32) @ We + be, 0.0)
        z = e @ W + h @ U + b
        H = self.hidden
        i, f, g, o = (z[:, k * H:(k + 1) * H] for k in range(4))
        c2 = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h2 = _sigmoid(o) * np.tanh(c2)
        logits = np.where(mask, h2 @ Wh + bh, np.float32(-1e9))
        return logits, h2, c2

    def greedy(self, env: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The greedy (arg-max) decode of one rollout, in numpy: features [1, n, F], masks
        [1, n, A] and the assignment [1, n]. The one greedy rule of every decode."""
        self._check_env(env)
        env.reset(1)
        h = np.zeros((1, self.hidden), np.float32)
        c = np.zeros((1, self.hidden), np.float32)
        X = np.zeros((1, env.n, self.feature_dim), dtype=np.float32)
        M = np.zeros((1, env.n, self.num_actions), dtype=bool)
        for t in range(env.n):
            x, m = env.observe(t)
            X[:, t], M[:, t] = x, m
            logits, h, c = self.numpy_step(x, h, c, m)
            env.step(t, np.argmax(logits, axis=-1).astype(np.int64))
        return X, M, env.assignments()

    def get_weights(self) -> list[np.ndarray]:
        """The trainable weights, in :attr:`variables` order."""
        return [np.asarray(v.numpy()) for v in self.variables]

    def set_weights(self, arrays: Any) -> None:
        """Assign ``arrays`` (shapes of :attr:`variables`, in order) to the weights."""
        arrays = list(arrays)
        if len(arrays) != len(self.variables) or any(tuple(a.shape) != tuple(v.shape)
                                                     for a, v in zip(arrays, self.variables)):
            raise ProblemError("saved weights do not fit this policy network (shapes differ); the file was made "
                               "for another feature width, action count or hidden size")
        for v, a in zip(self.variables, arrays):
            v.assign(a)
        self._np = None

    def beam(self, env: Any, width: int) -> np.ndarray:
        """Beam search over the policy's log-probabilities (numpy): keep the ``width`` most likely
        partial placements at every step (ties broken by index, so deterministic); returns their
        completions [<= width, n], most likely first. Uses only the policy."""
        self._check_env(env)
        env.reset(1)
        h = np.zeros((1, self.hidden), np.float32)
        c = np.zeros((1, self.hidden), np.float32)
        scores = np.zeros(1)
        for t in range(env.n):
            x, m = env.observe(t)
            logits, h, c = self.numpy_step(x, h, c, m)
            lp = logits - logits.max(axis=1, keepdims=True)
            lp = lp - np.log(np.exp(lp).sum(axis=1, keepdims=True))
            cand = np.where(m, scores[:, None] + lp.astype(np.float64), -np.inf)
            order = np.argsort(-cand, axis=None, kind="stable")[:width]
            order = order[np.isfinite(cand.reshape(-1)[order])]
            parent, act = np.divmod(order, self.num_actions)
            env.select(parent)
            h, c = h[parent], c[parent]
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
        """Run the policy over ``env``: features [B, n, F], masks [B, n, A], actions [B, n];
        sampled (seeded ``tfp`` Categorical), or with ``greedy`` the numpy arg-max decode
        (:meth:`greedy`, ``batch`` 1)."""
        if greedy:
            if batch != 1:
                raise ProblemError(f"a greedy decode is one rollout, got batch={batch}")
            return self.greedy(env)
        tf = self.tf
        self._check_env(env)
        env.reset(batch)
        h = tf.zeros([batch, self.hidden])
        c = tf.zeros([batch, self.hidden])
        X = np.zeros((batch, env.n, self.feature_dim), dtype=np.float32)
        M = np.zeros((batch, env.n, self.num_actions), dtype=bool)
        for t in range(env.n):
            x, m = env.observe(t)
            X[:, t], M[:, t] = x, m
            a, h, c = self._step(x, h, c, m)
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
        self._np = None
        return float(self._train(tf.constant(X), tf.constant(M), tf.constant(actions.astype(np.int32)),
                                 tf.constant(adv.astype(np.float32))))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)
