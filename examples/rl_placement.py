"""Place a model with the scheduler's RL policy instead of RALP's analyzer, then train it with ``Model.fit``.

    python examples/rl_placement.py --workers 2 --ps 1 --steps 5 --rl_iterations 300

What it does, in order:

1. Builds the placement policy ``rl`` from the policy table,
   ``ralp_tf.place.policies.resolve_policy("rl", ...)``: ``scheduler.RL``, the same solver as
   ``ralp-tf run --policy rl --policy-option iterations=300``. It starts from the shipped pretrained
   LSTM policy (``scheduler/weights``) and fine-tunes a copy by ``--rl_iterations`` REINFORCE
   iterations on this model and cluster: the work budget, so the same ``--seed`` and iterations
   give the same plan. ``--rl_train_seconds`` and ``--rl_max_solve_seconds`` are only safety caps
   on the wall time.
2. Starts a ``LocalCluster`` of ``--workers`` worker and ``--ps`` PS task processes on 127.0.0.1.
3. Builds ``--model`` (a built-in name, default ``small_cnn``, or ``package.module:function``)
   through ``@ralp_tf.placement(rl, ...)`` under the strategy: the decorator profiles the model, the
   solver plans outside the strategy (so it creates nothing on the cluster) and returns the faster,
   by ralp_tf's cost model, of its own plan and the analyzer's; the model is built placed and the
   placement verified.
4. Prints the plan: for each layer, the device string it computes on and where its variables were
   created.
5. Trains the placed model for ``--steps`` steps with ``Model.fit`` on synthetic data, prints the
   loss, and stops the cluster.

It shows that any object with ``plan(profile, cluster) -> Plan`` can decide the placement.
"""
from __future__ import annotations

import time
from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=5, batch_size=16)
flags.DEFINE_string("model", "small_cnn", "Built-in model name or package.module:function that builds it.")
flags.DEFINE_integer("rl_iterations", 300, "RL: REINFORCE iterations fine-tuning the shipped policy on this "
                     "model and cluster (the work budget: same seed + iterations = same plan).", lower_bound=1)
flags.DEFINE_float("rl_train_seconds", 30.0, "RL: safety cap on training wall time (a warning says when it cuts "
                   "training short).", lower_bound=0.1)
flags.DEFINE_float("rl_max_solve_seconds", 60.0, "RL: safety cap on the whole solve's wall time (training, "
                   "decode, polish).", lower_bound=1.0)
flags.DEFINE_integer("seed", 0, "RL: random seed.")


def main(argv: list[str]) -> None:
    del argv
    import ralp_tf
    from ralp_tf.place.policies import resolve_policy

    _common.quiet_logs()
    build = ralp_tf.model.builtin.resolve_model(FLAGS.model)
    rl = resolve_policy("rl", train_seconds=FLAGS.rl_train_seconds, iterations=FLAGS.rl_iterations,
                        max_solve_seconds=FLAGS.rl_max_solve_seconds,
                        post_seconds=min(4.0, FLAGS.rl_max_solve_seconds / 4), seed=FLAGS.seed)
    print(f"placement policy: {type(rl).__module__}.{type(rl).__name__} (train_seconds={rl.train_seconds:g}, "
          f"iterations={rl.iterations}, max_solve_seconds={rl.max_solve_seconds:g})")

    @ralp_tf.placement(rl, batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth)
    def build_model() -> Any:
        return build()

    with ralp_tf.LocalCluster(workers=FLAGS.workers, ps=FLAGS.ps) as cluster:
        strategy = cluster.strategy()
        t0 = time.perf_counter()
        with strategy.scope():
            model = build_model()  # profile -> RL solve -> plan -> placed model
        print(f"RL planned and placed {model.name} in {time.perf_counter() - t0:.1f} s; the device strings it chose:")
        _common.print_placement(model)
        losses = _common.fit_on_synthetic(model, strategy, batch_size=FLAGS.batch_size, steps=FLAGS.steps)
        print(f"trained {FLAGS.steps} steps on the RL plan: loss {losses[-1]:.4f}")
    print("rl_placement: done, cluster stopped")


if __name__ == "__main__":
    app.run(main)
