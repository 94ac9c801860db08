"""Train an AlexNet-style CNN on a local ParameterServerStrategy cluster, without and with RALP.

    python examples/cnn_ps.py --workers 2 --ps 1 --steps 30 --batch_size 32

Starts one OS process per task (2 workers, 1 PS by default, all on 127.0.0.1), trains the
model on synthetic 32x32x3 data created on the workers, once with stock PS placement and once
with the RALP analyzer's plan, and prints measured bytes/step (from the kernel's per-socket
counters), steps/s and final loss beside the cost model's predictions.
"""
from __future__ import annotations

import json

from absl import app, flags

from ralp_tf.run.training import compare

FLAGS = flags.FLAGS
flags.DEFINE_string("model", "alexnet_cifar", "Built-in model name or package.module:function.")
flags.DEFINE_integer("workers", 2, "Worker tasks.", lower_bound=1)
flags.DEFINE_integer("ps", 1, "Parameter-server tasks.", lower_bound=1)
flags.DEFINE_integer("steps", 30, "Measured steps per run (after 3 warm-up steps).", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Batch per worker step.", lower_bound=1)
flags.DEFINE_string("bandwidth", None, "Link rate the analyzer assumes, e.g. 1gbit (default: 1gbit).")
flags.DEFINE_string("json_out", None, "Also write the results as JSON to this file.")


def main(argv: list[str]) -> None:
    del argv
    results = compare(FLAGS.model, workers=FLAGS.workers, ps=FLAGS.ps, steps=FLAGS.steps,
                      batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth)
    base, ralp = results["ps"], results["ralp"]
    print(f"{FLAGS.model}: {FLAGS.workers} workers, {FLAGS.ps} PS, batch {FLAGS.batch_size}/worker")
    print(f"{'':<28}{'stock PS':>14}{'RALP':>14}")
    for label, get in (("bytes/step measured (MB)", lambda r: r.bytes_per_step / 1e6),
                       ("bytes/step predicted (MB)", lambda r: r.predicted_bytes_per_step / 1e6),
                       ("steps/s measured", lambda r: r.steps_per_s),
                       ("final loss", lambda r: r.final_loss)):
        print(f"{label:<28}{get(base):>14.3f}{get(ralp):>14.3f}")
    print(f"RALP: {base.bytes_per_step / ralp.bytes_per_step:.1f}x fewer bytes, "
          f"{ralp.steps_per_s / base.steps_per_s:.2f}x steps/s")
    print(ralp.analysis)
    if FLAGS.json_out:
        with open(FLAGS.json_out, "w") as f:
            json.dump({k: v.to_dict() for k, v in results.items()}, f, indent=2)


if __name__ == "__main__":
    app.run(main)
