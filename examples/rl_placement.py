"""The scheduler's RL solver (a REINFORCE-trained LSTM policy) as the placement policy of `@ralp_tf.placement`.

    python examples/rl_placement.py --workers 2 --ps 1 --steps 5 --rl_iterations 300

Shows that any object with ``plan(profile, cluster) -> Plan`` can decide the placement, here
``scheduler.RL`` built through the policy table, ``ralp_tf.place.policies.resolve_policy("rl", ...)``
(the same as ``ralp-tf run --policy rl --policy-option iterations=300``). The solver trains its
policy on this model's profile and this cluster's tasks within a work budget (``iterations`` of
REINFORCE; the same seed and budget give the same plan), with ``train_seconds`` and
``max_solve_seconds`` only as safety caps on the wall time, outside the
strategy, so it creates nothing on the cluster. Prints the device string it chose for each layer
and where the variables landed, then trains the placed model with ``Model.fit``.
"""
from __future__ import annotations

import time
from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=5, batch_size=16)
flags.DEFINE_string("model", "small_cnn", "Built-in model name or package.module:function that builds it.")
flags.DEFINE_integer("rl_iterations", 300, "RL: training iterations (the work budget: same seed + "
                     "iterations = same plan).", lower_bound=1)
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
