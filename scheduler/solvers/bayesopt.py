r"""Bayesian optimisation: a tensorflow-probability Gaussian process with expected improvement.

The search space is the problem's continuous encoding ``x in [0,1]^d`` (``encode_dim`` /
``decode``: one coordinate per layer for HeterPS problems, one per cut point for max-load
problems). The GP models ``y = log(penalized score)`` with a Matern-5/2 kernel (amplitude,
length scale and noise fitted by maximising the marginal likelihood with Adam each round).
The next point maximises expected improvement over ``y* = min y`` among candidates (uniform
samples and Gaussian perturbations of the best points; ``evaluations`` is the budget,
``time_limit_s`` only a safety cap reported in ``notes["time_cap_cut"]``):
``EI(x) = (y* - mu(x)) Phi(z) + sigma(x) phi(z)``, ``z = (y* - mu(x)) / sigma(x)``.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from scheduler.solvers.base import Solver, time_cap_cut
from scheduler.core.errors import ProblemError

__all__ = ["BayesOpt"]


class BayesOpt(Solver):
    name = "bo"

    def __init__(self, evaluations: int = 60, initial: int = 12, candidates: int = 2000, fit_steps: int = 50,
                 time_limit_s: float = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(evaluations, bool) or int(evaluations) != evaluations or evaluations < 1:
            raise ProblemError(f"Bayesian optimisation needs a budget of at least 1 evaluation, got {evaluations!r}")
        self.evaluations = int(evaluations)
        self.initial = int(initial)
        self.candidates = int(candidates)
        self.fit_steps = int(fit_steps)
        self.time_limit_s = float(time_limit_s)

    def _solve(self, problem: Any) -> tuple[np.ndarray, dict[str, Any]]:
        import tensorflow as tf

        rng = np.random.default_rng(self.seed)
        tf.random.set_seed(self.seed)
        d = problem.encode_dim()
        t0 = time.perf_counter()
        X: list[np.ndarray] = []
        y: list[float] = []
        best_key, best_a = (math.inf, math.inf), None

        def observe(x: np.ndarray) -> None:
            nonlocal best_key, best_a
            a = problem.decode(x)
            obj, pen = problem.scores(a)
            X.append(x)
            y.append(math.log(pen))
            key = (obj, y[-1])
            if key < best_key:
                best_key, best_a = key, a

        # Initial design: random segmentations where the problem can encode them, else uniform points.
        n0 = min(self.initial, self.evaluations)
        if hasattr(problem, "encode"):
            for a in problem.random_assignments(rng, n0):
                observe(problem.encode(a))
        else:
            for _ in range(n0):
                observe(rng.random(d))
        gp = _GaussianProcess(d, self.fit_steps)
        rounds = 0
        notes: dict[str, Any] = {}
        while len(y) < self.evaluations:
            if time.perf_counter() - t0 >= self.time_limit_s:
                time_cap_cut(notes, "bo", "the search", self.time_limit_s)
                break
            xs = tf.constant(np.array(X), dtype=tf.float64)
            ys_np = np.array(y)
            mu0, sd0 = ys_np.mean(), ys_np.std() + 1e-9
            ys = tf.constant((ys_np - mu0) / sd0, dtype=tf.float64)
            gp.fit(xs, ys)
            top = np.array(X)[np.argsort(y)[:3]]
            local = top[rng.integers(0, len(top), self.candidates // 2)] + \
                rng.normal(0, 0.08, (self.candidates // 2, d)) * (rng.random((self.candidates // 2, d)) < 0.3)
            cand = np.clip(np.vstack([rng.random((self.candidates - len(local), d)), local]), 0, 1)
            mu, sd = gp.predict(xs, ys, tf.constant(cand, dtype=tf.float64))
            mu, sd = mu.numpy(), np.maximum(sd.numpy(), 1e-9)
            z = (((min(y) - mu0) / sd0) - mu) / sd
            ei = (((min(y) - mu0) / sd0) - mu) * _norm_cdf(z) + sd * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            observe(cand[int(np.argmax(ei))])
            rounds += 1
        return best_a, {"evaluations": len(y), "bo_rounds": rounds, "length_scale": gp.length_scale,
                        "amplitude": gp.amplitude, **notes}


class _GaussianProcess:
    """The GP of the module docstring: Matern 5/2, log amplitude, length scale and noise fitted
    by ``fit_steps`` Adam steps on the marginal likelihood per :meth:`fit`."""

    def __init__(self, d: int, fit_steps: int) -> None:
        import tensorflow as tf
        import tensorflow_probability as tfp
        import tf_keras

        self.tf, self.tfd, self.psd = tf, tfp.distributions, tfp.math.psd_kernels
        self.amp = tf.Variable(0.0, dtype=tf.float64)
        self.ls = tf.Variable(math.log(0.3 * math.sqrt(d)), dtype=tf.float64)
        self.noise = tf.Variable(-4.0, dtype=tf.float64)
        self.params = [self.amp, self.ls, self.noise]
        self.opt = tf_keras.optimizers.Adam(learning_rate=0.05)
        self.fit_steps = int(fit_steps)
        self.fit = tf.function(self._fit, reduce_retracing=True)
        self.predict = tf.function(self._predict, reduce_retracing=True)

    def _kernel(self) -> Any:
        return self.psd.MaternFiveHalves(amplitude=self.tf.exp(self.amp), length_scale=self.tf.exp(self.ls))

    def _fit(self, xs: Any, ys: Any) -> Any:
        tf = self.tf

        def loss() -> Any:
            gp = self.tfd.GaussianProcess(self._kernel(), index_points=xs,
                                          observation_noise_variance=tf.exp(self.noise) + 1e-6)
            return -gp.log_prob(ys)

        for _ in tf.range(self.fit_steps):
            with tf.GradientTape() as tape:
                value = loss()
            self.opt.apply_gradients(zip(tape.gradient(value, self.params), self.params))
        return loss()

    def _predict(self, xs: Any, ys: Any, cand: Any) -> tuple[Any, Any]:
        post = self.tfd.GaussianProcessRegressionModel(
            self._kernel(), index_points=cand, observation_index_points=xs, observations=ys,
            observation_noise_variance=self.tf.exp(self.noise) + 1e-6)
        return post.mean(), post.stddev()

    @property
    def length_scale(self) -> float:
        return float(np.exp(self.ls.numpy()))

    @property
    def amplitude(self) -> float:
        return float(np.exp(self.amp.numpy()))


def _norm_cdf(z: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * (1.0 + np.vectorize(erf)(z / math.sqrt(2.0)))
