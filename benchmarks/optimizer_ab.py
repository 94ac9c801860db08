"""The optimizer's share of a small step: tf_keras's SGD against tf_keras.optimizers.legacy.SGD.

    python benchmarks/optimizer_ab.py local --model ctr_dnn
    python benchmarks/optimizer_ab.py ops --model ctr_dnn
    python benchmarks/optimizer_ab.py pss --model ctr_dnn --workers 2 --k 1,32 [--legacy]

``local``: one model, no cluster, a ``tf.function`` step timed with each optimizer (``SGD`` with
``jit_compile`` on, its default, and off; ``legacy.SGD``), and the losses of 20 steps of each
(the same SGD math: they must agree). ``ops``: the variable updates in each optimizer's traced
step (the op type, its variable's name and the updated shape), one JSON object per optimizer. ``pss``: :func:`ralp_tf.run.training.compare` (ralp's plan
on a LocalCluster) at each K of ``--k``; with ``--legacy`` the training loop's ``SGD`` is
``legacy.SGD`` for this process (the optimizer is built by the coordinator, so the task
processes need nothing). Prints one JSON object per line.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def _seeded_step(model_name: str, make_optimizer: Any) -> tuple[Any, Any, Any]:
    """``(step, x, y)``: a fresh seeded build of ``model_name``, its synthetic batch of 32, and a
    ``tf.function`` training step with the optimizer ``make_optimizer()``."""
    import tensorflow as tf
    import tf_keras

    from ralp_tf.model.builtin import resolve_model
    from ralp_tf.model.data import synthetic_batch
    from ralp_tf.run.training import train_loss

    tf_keras.utils.set_random_seed(0)
    model = resolve_model(model_name)()
    x, y = synthetic_batch(model, 32, seed=0)
    x = tuple(x) if isinstance(x, list) else x
    opt, loss_fn = make_optimizer(), train_loss(model)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return step, x, y


def _local(model_name: str, steps: int = 50) -> None:
    import numpy as np
    import tf_keras

    losses: dict[str, list[float]] = {}
    makers = {"SGD(jit_compile=True)": lambda: tf_keras.optimizers.SGD(0.01),
              "SGD(jit_compile=False)": lambda: tf_keras.optimizers.SGD(0.01, jit_compile=False),
              "legacy.SGD": lambda: tf_keras.optimizers.legacy.SGD(0.01)}
    for name, make in makers.items():
        step, x, y = _seeded_step(model_name, make)
        losses[name] = [float(step(x, y)) for _ in range(20)]
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x, y).numpy()
        print(json.dumps({"model": model_name, "optimizer": name, "step_ms": (time.perf_counter() - t0) * 1e3 / steps}),
              flush=True)
    ref = losses["legacy.SGD"]
    print(json.dumps({"max_relative_loss_difference_vs_legacy": {
        n: float(np.max(np.abs(np.array(l) - ref) / np.abs(ref))) for n, l in losses.items()}}))


def _ops(model_name: str) -> None:
    import tf_keras

    updates = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceScatterAdd")
    for name, make in {"SGD": lambda: tf_keras.optimizers.SGD(0.01),
                       "legacy.SGD": lambda: tf_keras.optimizers.legacy.SGD(0.01)}.items():
        step, x, y = _seeded_step(model_name, make)
        graph = step.get_concrete_function(x, y).graph
        ops = [{"op": op.type, "variable": op.inputs[0].op.name, "shape": op.inputs[-1].shape.as_list()}
               for op in graph.get_operations() if op.type in updates]
        print(json.dumps({"model": model_name, "optimizer": name, "updates": ops}), flush=True)


def _pss(model_name: str, workers: int, ks: list[int], legacy: bool, steps: int, warmup: int) -> None:
    import tf_keras

    if legacy:
        tf_keras.optimizers.SGD = tf_keras.optimizers.legacy.SGD
    from ralp_tf.run.training import compare

    for k in ks:
        r = compare(model_name, workers=workers, ps=1, steps=steps, warmup_steps=warmup, policies=["ralp"],
                    steps_per_closure=k)["ralp"]
        print(json.dumps({"model": model_name, "workers": workers, "legacy_sgd": legacy, "k": k,
                          **{f: getattr(r, f) for f in ("samples_per_s", "measured_step_s", "predicted_step_s",
                                                        "bytes_per_step", "predicted_bytes_per_step", "final_loss")}}),
              flush=True)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run ``local`` or ``pss``."""
    p = argparse.ArgumentParser(prog="benchmarks/optimizer_ab.py")
    p.add_argument("mode", choices=("local", "ops", "pss"))
    p.add_argument("--model", default="ctr_dnn")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--k", default="1,32")
    p.add_argument("--legacy", action="store_true")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=32)
    args = p.parse_args(argv)
    if args.mode == "local":
        _local(args.model)
    elif args.mode == "ops":
        _ops(args.model)
    else:
        _pss(args.model, args.workers, [int(k) for k in args.k.split(",")], args.legacy, args.steps, args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
