"""A layer called more than once whose variable gradients are sparse (an Embedding's rows,
``tf.IndexedSlices``), dense, or both: the calls' gradients are summed on the layer's device
(:class:`ralp_tf.place.wrappers.CallChain`), two sparse ones kept sparse, and the placed model's
first-step loss and gradients equal the unplaced model's (rtol 1e-5)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from ralp_tf.model import synthetic_batch
from ralp_tf.place.applier import place_from_builder, prepare
from ralp_tf.place.verify import reference_gradients, verify_gradients
from ralp_tf.place.wrappers import gradient_sum
from ralp_tf.plan.plans import Plan
from ralp_tf.run.training import train_loss

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
VOCAB, DIM, LENGTH = 40, 8, 6


def _siamese(encoder: str = "pool", regularised: bool = False) -> Callable[[], Any]:
    """Two id inputs through one Embedding (and one encoder: an LSTM or a pooling) each."""

    def build() -> Any:
        import tf_keras as keras

        L = keras.layers
        a, b = L.Input((LENGTH,), dtype="int32", name="a"), L.Input((LENGTH,), dtype="int32", name="b")
        emb = L.Embedding(VOCAB, DIM, name="emb",
                          embeddings_regularizer=keras.regularizers.l2(0.01) if regularised else None)
        enc = L.LSTM(DIM, name="lstm") if encoder == "lstm" else L.GlobalAveragePooling1D(name="pool")
        x = L.Concatenate(name="concat")([enc(emb(a)), enc(emb(b))])
        return keras.Model([a, b], L.Dense(3, name="logits")(L.Dense(16, activation="relu", name="fc")(x)))

    return build


def _tied() -> Any:
    """A language-model shape whose output layer is its Embedding's table read densely (weight tying):
    the lookup's gradient is sparse, the projection's dense."""
    import tensorflow as tf
    import tf_keras as keras

    L = keras.layers

    class TiedEmbedding(L.Embedding):
        def call(self, inputs: Any, project: bool = False) -> Any:
            if project:
                return tf.matmul(inputs, self.embeddings, transpose_b=True)
            return super().call(inputs)

    ids = L.Input((LENGTH,), dtype="int32", name="ids")
    emb = TiedEmbedding(VOCAB, DIM, name="emb")
    h = L.Dense(DIM, name="fc")(L.GlobalAveragePooling1D(name="pool")(emb(ids)))
    return keras.Model(ids, emb(h, project=True))


CASES: dict[str, tuple[Callable[[], Any], dict[str, str]]] = {
    # the table on a PS task by PSS's round-robin, the lookup on the worker: computed on the table's task
    "worker_embedding": (_siamese(), {"fc": PS1, "logits": PS1}),
    "ps_embedding": (_siamese(), {"emb": PS0, "pool": PS0, "concat": PS0}),
    "ps_embedding_and_lstm": (_siamese("lstm"), {"emb": PS0, "lstm": PS0, "concat": PS1, "fc": PS1}),
    "ps_regularised_embedding": (_siamese(regularised=True), {"emb": PS0, "fc": PS1}),
    "worker_regularised_embedding": (_siamese(regularised=True), {"fc": PS1}),
    "ps_tied_embedding": (_tied, {"emb": PS0, "pool": PS0, "fc": PS0}),
    "worker_tied_embedding": (_tied, {"fc": PS1}),
}


def _table_gradient_is_sparse(placed: Any, x: Any, y: Any) -> bool:
    """Whether the tape's gradient of the placed model's table is ``tf.IndexedSlices`` (traced, not run)."""
    import tensorflow as tf

    loss_fn, found = train_loss(placed), []
    table = next(v for v in placed.trainable_variables if "emb" in v.name)

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, placed(xb, training=False))
        found.append(isinstance(tape.gradient(loss, table), tf.IndexedSlices))
        return loss

    step.get_concrete_function(tf.nest.map_structure(tf.constant, x), tf.constant(y))
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_shared_layer_with_sparse_gradients_trains_like_the_unplaced_model(inprocess: Any, name: str) -> None:
    import tf_keras

    _, strategy, coordinator = inprocess
    build, placements = CASES[name]
    tf_keras.utils.set_random_seed(5)
    prepared = prepare(build, 4)
    with strategy.scope():
        placed = place_from_builder(build, prepared, Plan(placements, policy="test"), strategy)  # verified
    x, y = synthetic_batch(prepared.base, 4)
    reference = reference_gradients(prepared.base, train_loss(prepared.base), x, y, rtol=1e-5)
    assert verify_gradients(placed, train_loss(placed), x, y, coordinator, reference, rtol=1e-5)
    sparse = "regularised" not in name and "tied" not in name
    assert _table_gradient_is_sparse(placed, x, y) is sparse


def test_gradient_sum_adds_sparse_and_dense_gradients_in_any_combination() -> None:
    import tensorflow as tf

    dense = tf.reshape(tf.range(12, dtype=tf.float32), [4, 3])
    a = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([1, 3]), tf.constant([4, 3]))
    b = tf.IndexedSlices(2 * tf.ones([3, 3]), tf.constant([3, 0, 3], tf.int64), tf.constant([4, 3]))
    as_dense = lambda g: tf.convert_to_tensor(g).numpy()  # noqa: E731
    both = gradient_sum(a, b)
    assert isinstance(both, tf.IndexedSlices) and both.values.shape[0] == 5 and both.indices.dtype == tf.int64
    np.testing.assert_allclose(as_dense(both), as_dense(a) + as_dense(b))
    np.testing.assert_allclose(gradient_sum(a, dense).numpy(), as_dense(a) + dense.numpy())
    np.testing.assert_allclose(gradient_sum(dense, b).numpy(), dense.numpy() + as_dense(b))
    np.testing.assert_allclose(gradient_sum(dense, dense).numpy(), 2 * dense.numpy())
