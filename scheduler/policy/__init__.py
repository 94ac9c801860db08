"""scheduler.policy: the learned placement policy and the RL solver that runs it; imports
:mod:`scheduler.core` and :mod:`scheduler.solvers` (the polish, the solver base).

* :mod:`~scheduler.policy.envs`: the paper's decision environments (features per decision).
* :mod:`~scheduler.policy.policy_features`, :mod:`~scheduler.policy.completions`: lookahead
  features (the cost model's verdict on completions of a prefix) and their vectorised pricing.
* :mod:`~scheduler.policy.slots`: type slots, one feature layout for catalogs of 2-6 types.
* :mod:`~scheduler.policy.features`: the env of a feature set (``basic``, ``lookahead``, ``slots``).
* :mod:`~scheduler.policy.lstm_policy`: the LSTM network with its ``tfp`` Categorical head.
* :mod:`~scheduler.policy.shipped`: the shipped weights (``scheduler/weights/*.npz``): their
  file format, feature signature and loading (training them: :mod:`scheduler.evaluation.recipes`).
* :mod:`~scheduler.policy.rl`: :class:`~scheduler.policy.rl.RL`, the shipped policy by default,
  fine-tuning, REINFORCE, decode, polish.
"""

#: The modules of this package (import them by their full names).
__all__ = ["completions", "envs", "features", "lstm_policy", "policy_features", "rl", "shipped", "slots"]
