"""A recommender (embeddings for several sparse features + an MLP) read from TFRecord files, placed by RALP.

    python examples/recommender.py --workers 2 --ps 1 --steps 5 --examples 2048 --files 4
    python examples/recommender.py --data_dir /tmp/recsys   # keep the TFRecord files there

Shows the input side of a real ParameterServerStrategy job and the analyzer's choice about
embeddings:

1. writes a small click data set as ``--files`` TFRecord files of ``tf.train.Example`` records
   (one int64 id per sparse feature in ``--features``, a few dense floats, a 0/1 label), to
   ``--data_dir`` or a temporary folder that is removed at the end;
2. reads it back with ``tf_keras.utils.experimental.DatasetCreator(dataset_fn)``:
   ``dataset_fn(input_context)`` lists the files, shards them with
   ``input_context.num_input_pipelines`` / ``input_context.input_pipeline_id``, and parses and
   batches the records, on each worker. Note what TensorFlow passes here: under
   ParameterServerStrategy every worker gets the same ``InputContext(num_input_pipelines=1,
   input_pipeline_id=0)`` (the function is traced once, on the coordinator, and the same graph
   runs on every worker), so that shard keeps every file and each worker reads the whole data
   set in its own shuffled order. The same ``dataset_fn`` does split the files between workers
   under MultiWorkerMirroredStrategy; for exactly-once visits under PSS, TensorFlow offers the
   tf.data service (``tf.data.experimental.service.distribute``). The script prints the context
   and the files each input pipeline reads;
3. places the model with ``@ralp_tf.placement("ralp")`` and prints
   ``model.ralp_analysis.report()``, which says whether the embeddings (and the MLP) compute on
   the PS task that stores them, and why; then trains with ``Model.fit``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from absl import app, flags

import _common

FLAGS = flags.FLAGS
_common.define_cluster_flags(steps=5, batch_size=32)
flags.DEFINE_list("features", ["user:50000", "item:20000", "category:200", "hour:24"],
                  "Sparse features as NAME:VOCABULARY_SIZE, one embedding each.")
flags.DEFINE_integer("embed_dim", 16, "Embedding width of every sparse feature.", lower_bound=1)
flags.DEFINE_list("hidden", ["256", "128"], "Widths of the MLP's hidden Dense layers.")
flags.DEFINE_integer("dense_features", 4, "Dense float features per example.", lower_bound=1)
flags.DEFINE_integer("examples", 2048, "Examples written to the TFRecord files.", lower_bound=1)
flags.DEFINE_integer("files", 4, "TFRecord files the examples are split over.", lower_bound=1)
flags.DEFINE_string("data_dir", None, "Write the TFRecord files here and keep them (default: a temporary "
                    "folder, removed at the end).")


def parse_features(specs: list[str]) -> dict[str, int]:
    """``["user:50000", ...]`` -> ``{"user": 50000, ...}``; raises app.UsageError on a bad item."""
    out: dict[str, int] = {}
    for spec in specs:
        name, _, size = spec.partition(":")
        if not name.isidentifier() or not size.isdigit() or int(size) < 2:
            raise app.UsageError(f"--features item {spec!r} is not NAME:VOCABULARY_SIZE (size >= 2)")
        out[name] = int(size)
    return out


def write_tfrecords(data_dir: str, vocab: dict[str, int], examples: int, files: int, dense: int) -> list[str]:
    """Write ``examples`` synthetic click records over ``files`` TFRecord files; return their paths.

    Ids follow a Zipf-like law (a few popular users and items, a long tail); the label depends on
    the item, the hour and the first dense feature, so the model has something to learn."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    ids = {name: np.minimum(rng.zipf(1.3, examples) - 1, size - 1) for name, size in vocab.items()}
    floats = rng.standard_normal((examples, dense)).astype("float32")
    first = next(iter(ids.values()))
    labels = ((first % 7 < 3) ^ (floats[:, 0] > 0.5)).astype("float32")
    paths = [os.path.join(data_dir, f"clicks-{i:03d}-of-{files:03d}.tfrecord") for i in range(files)]
    writers = [tf.io.TFRecordWriter(p) for p in paths]
    try:
        for i in range(examples):
            feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(col[i])]))
                       for name, col in ids.items()}
            feature["dense"] = tf.train.Feature(float_list=tf.train.FloatList(value=floats[i].tolist()))
            feature["label"] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(labels[i])]))
            writers[i % files].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    finally:
        for w in writers:
            w.close()
    return paths


def make_dataset_fn(paths: list[str], vocab: dict[str, int], dense: int, batch_size: int) -> Any:
    """The ``dataset_fn(input_context)`` a PSS job hands to ``DatasetCreator``: shard the files by
    the input context, interleave, shuffle, parse, batch ``batch_size`` per worker step, repeat."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([1], tf.int64) for name in vocab}
    spec["dense"] = tf.io.FixedLenFeature([dense], tf.float32)
    spec["label"] = tf.io.FixedLenFeature([1], tf.float32)

    def parse(records: Any) -> Any:
        ex = tf.io.parse_example(records, spec)
        label = ex.pop("label")
        return {k: tf.cast(v, tf.int32) if k in vocab else v for k, v in ex.items()}, label

    def dataset_fn(input_context: Any) -> Any:
        n, i = input_context.num_input_pipelines, input_context.input_pipeline_id
        print(f"dataset_fn: InputContext(num_input_pipelines={n}, input_pipeline_id={i}) -> pipeline {i} reads "
              f"{len(paths[i::n])} of {len(paths)} file(s): {', '.join(os.path.basename(p) for p in paths[i::n])}")
        files = tf.data.Dataset.from_tensor_slices(paths).shard(n, i).shuffle(len(paths))
        ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=tf.data.AUTOTUNE)
        return (ds.shuffle(256).repeat().batch(batch_size, drop_remainder=True)
                .map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2))

    return dataset_fn


def build_recommender(vocab: dict[str, int], embed_dim: int, hidden: list[int], dense: int) -> Any:
    """One Embedding per sparse feature (inputs named after the features), concatenated with the
    dense features, then an MLP to one click logit."""
    import tf_keras

    L = tf_keras.layers
    sparse_in = [L.Input((1,), dtype="int32", name=name) for name in vocab]
    dense_in = L.Input((dense,), name="dense")
    embedded = [L.Flatten(name=f"{name}_flat")(L.Embedding(size, embed_dim, name=f"{name}_embedding")(inp))
                for (name, size), inp in zip(vocab.items(), sparse_in)]
    x = L.Concatenate(name="concat")(embedded + [dense_in])
    for k, width in enumerate(hidden):
        x = L.Dense(width, activation="relu", name=f"mlp{k + 1}")(x)
    return tf_keras.Model(sparse_in + [dense_in], L.Dense(1, name="click_logit")(x), name="recommender")


def print_embedding_choice(model: Any) -> None:
    """One line per embedding: computed on its PS task (rows looked up there) or on the workers."""
    ps_layers = model.ralp_plan.ps_layers()
    for layer in model.layers:
        if type(layer).__name__ == "Embedding":
            where = (f"computed on PS task {ps_layers[layer.name]}, where its table lives"
                     if layer.name in ps_layers else "computed on the workers (table stored on the PS)")
            print(f"  {layer.name:<22} {layer.input_dim:>7} x {layer.output_dim:<4} {where}")


def main(argv: list[str]) -> None:
    del argv
    import tf_keras

    import ralp_tf

    _common.quiet_logs()
    vocab = parse_features(FLAGS.features)
    hidden = [int(h) for h in FLAGS.hidden]
    data_dir = FLAGS.data_dir or tempfile.mkdtemp(prefix="ralp_recommender_")
    os.makedirs(data_dir, exist_ok=True)
    try:
        paths = write_tfrecords(data_dir, vocab, FLAGS.examples, FLAGS.files, FLAGS.dense_features)
        print(f"wrote {FLAGS.examples} examples to {len(paths)} TFRecord file(s) in {data_dir}")

        @ralp_tf.placement("ralp", batch_size=FLAGS.batch_size, bandwidth=FLAGS.bandwidth)
        def build_model() -> Any:
            return build_recommender(vocab, FLAGS.embed_dim, hidden, FLAGS.dense_features)

        with ralp_tf.LocalCluster(workers=FLAGS.workers, ps=FLAGS.ps) as cluster:
            strategy = cluster.strategy()
            with strategy.scope():
                model = build_model()
            print(model.ralp_analysis.report())
            print("the analyzer's choice about the embeddings:")
            print_embedding_choice(model)
            _common.compile_for_fit(model, strategy)
            data = tf_keras.utils.experimental.DatasetCreator(
                make_dataset_fn(paths, vocab, FLAGS.dense_features, FLAGS.batch_size))
            history = model.fit(data, epochs=1, steps_per_epoch=FLAGS.steps, verbose=0)
            print(f"trained {FLAGS.steps} steps from the TFRecord files: loss {history.history['loss'][-1]:.4f}")
    finally:
        if not FLAGS.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    print("recommender: done, cluster stopped")


if __name__ == "__main__":
    app.run(main)
