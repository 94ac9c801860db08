"""Layers called more than once, and embeddings read where their table lives.

Pins: the profile counts every call of a shared layer and every call's activation; the cost
model charges a worker-computed layer one weight read per call and one gradient, and a
worker-computed embedding's rows only where they go; a PS-placed shared layer computes every
call, and sums its weight gradients, on its PS task (checked on the traced step); placed
losses equal the unplaced model's; measured bytes on real task processes match the prediction.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from ralp_tf import costmodel, models
from ralp_tf.plan.cluster import Cluster
from ralp_tf.errors import PlacementMismatchError, PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.traffic import HANDLE_BYTES
from ralp_tf.place.applier import place
from ralp_tf.model.profiler import profile
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.place.verify import verify_placement

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
PS1 = "/job:ps/replica:0/task:1/device:CPU:0"
BATCH = 32


def _seeded(builder: Callable[..., Any], **kw: Any) -> Callable[[], Any]:
    def build() -> Any:
        import tf_keras

        tf_keras.utils.set_random_seed(5)
        return builder(**kw)

    return build


SIAMESE = _seeded(models.siamese_cnn, fc=64)
REUSED = _seeded(models.reused_dense, width=64)


# ----------------------------------------------------------------------------- profile
def test_profile_counts_every_call_and_every_activation() -> None:
    prof = profile(models.siamese_cnn(), batch_size=BATCH)
    fc = prof.layer("shared_fc")
    assert prof.layer("shared_conv").calls == 2 and fc.calls == 2
    assert set(fc.inbound) == {"flatten_left", "flatten_right"}
    fc_tensors = [t for t in prof.tensors if t.producer == "shared_fc"]
    assert len(fc_tensors) == 2 and all(t.consumers == ("concat",) and t.bytes == fc.output_bytes
                                        for t in fc_tensors)
    assert [t.producer for t in prof.tensors if t.is_output] == ["logits"]

    reused = profile(models.reused_dense(width=64), batch_size=BATCH).layer("reused")
    once = profile(models.reused_dense(width=64, calls=1), batch_size=BATCH).layer("reused")
    assert reused.calls == 3 and reused.flops == pytest.approx(3 * once.flops)


def test_profile_json_keeps_calls_and_tensors() -> None:
    prof = profile(models.siamese_cnn(), batch_size=BATCH)
    again = ModelProfile.from_json(prof.to_json())
    assert again == prof
    legacy = prof.to_dict()
    del legacy["tensors"]
    for layer in legacy["layers"]:
        del layer["calls"]
    old = ModelProfile.from_dict(legacy)  # a profile written before calls and tensors existed
    assert all(l.calls == 1 for l in old.layers) and len(old.activation_tensors()) == len(old.layers)


# ----------------------------------------------------------------------------- cost model
def test_worker_layer_reads_its_weights_once_per_call_and_pushes_one_gradient() -> None:
    prof = profile(models.reused_dense(width=64), batch_size=BATCH)
    cluster = Cluster.local(1, 1)
    est = costmodel.estimate(prof, cluster)
    reused, logits = prof.layer("reused"), prof.layer("logits")
    # 3 reads of reused's 2 variables, 1 read of logits' 2, 4 pushes: 12 messages, control both ways
    overhead = costmodel.STEP_OVERHEAD_BYTES / 2 + 12 * costmodel.RPC_CONTROL_BYTES / 2
    assert est.bytes_between[("ps:0", "worker")] == pytest.approx(3 * reused.param_bytes + logits.param_bytes
                                                                  + overhead)
    assert est.bytes_between[("worker", "ps:0")] == pytest.approx(reused.param_bytes + logits.param_bytes + overhead)


def test_ps_placed_shared_layer_moves_each_calls_activation() -> None:
    prof = profile(models.siamese_cnn(fc=64), batch_size=BATCH)
    head = {"shared_fc": PS0, "concat": PS0, "logits": PS0, "flatten_left": PS0, "flatten_right": PS0}
    est = costmodel.estimate(prof, Cluster.local(1, 1), head)
    conv_out = sum(t.bytes for t in prof.tensors if t.producer == "shared_conv")
    conv = prof.layer("shared_conv")
    # messages: 4 conv reads and 2 pushes, 2 conv outputs and their 2 gradients, the logits and theirs
    overhead = costmodel.STEP_OVERHEAD_BYTES / 2 + 12 * costmodel.RPC_CONTROL_BYTES / 2
    logits = BATCH * prof.layer("logits").output_bytes
    # both calls' conv activations go up, their gradients come back; the conv weights are read twice
    handles = 4 * HANDLE_BYTES  # shared_fc's and logits' variables, read on the PS: a handle each per closure
    assert est.bytes_between[("worker", "ps:0")] == pytest.approx(BATCH * conv_out + conv.param_bytes + logits
                                                                  + overhead + handles)
    assert est.bytes_between[("ps:0", "worker")] == pytest.approx(BATCH * conv_out + 2 * conv.param_bytes + logits
                                                                  + overhead)


def test_embedding_rows_never_visit_the_worker_when_the_head_is_on_its_ps() -> None:
    prof = profile(models.ctr_head(), batch_size=BATCH)
    head = {"flatten": PS0, "fc1": PS0, "fc2": PS0, "logits": PS0}
    est = costmodel.estimate(prof, Cluster.local(1, 1), head)
    from ralp_tf.plan.traffic import distinct_rows

    rows = BATCH * prof.layer("embedding").output_bytes
    logits = BATCH * prof.layer("logits").output_bytes
    # messages: the ids up, the rows' gradient and its indices down, the push up, the logits and their gradient
    overhead = costmodel.STEP_OVERHEAD_BYTES / 2 + 6 * costmodel.RPC_CONTROL_BYTES / 2
    ids = BATCH * 8 * 4
    table_rows, row_bytes = 50_000, 64 * 4
    distinct = distinct_rows(BATCH * 8, table_rows)  # the optimizer sums repeated ids before the push
    assert BATCH * 8 - 1 < distinct < BATCH * 8
    # forward: the gather and its consumer share PS 0; backward: the rows' gradient goes to the
    # worker (the IndexedSlices are built there) with the PS's copy of the ids, and back up, one row
    # and id per distinct id
    assert est.bytes_between[("ps:0", "worker")] == pytest.approx(rows + ids + logits + overhead)
    handles = 6 * HANDLE_BYTES  # fc1's, fc2's and logits' kernels and biases
    assert est.bytes_between[("worker", "ps:0")] == pytest.approx(ids + distinct * (row_bytes + 4) + logits + overhead
                                                                  + handles)


# ----------------------------------------------------------------------------- placement (in-process)
def _placed_pair(strategy: Any, build: Callable[[], Any], plan: Plan) -> tuple[Any, Any]:
    import tf_keras

    base = build()
    reference = tf_keras.models.clone_model(base)
    reference.set_weights(base.get_weights())
    return reference, place(base, plan, strategy)


SHARED_PLANS = {
    "siamese": (SIAMESE, Plan({"shared_fc": PS1, "concat": PS1, "logits": PS0, "flatten_left": PS1,
                               "flatten_right": PS1}, policy="test")),
    "reused": (REUSED, Plan({"reused": PS1, "logits": PS1}, policy="test")),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHARED_PLANS))
def test_shared_layer_is_placed_for_every_call_and_trains_like_the_unplaced_model(inprocess: Any, name: str) -> None:
    import tensorflow as tf
    import tf_keras

    _, strategy, coordinator = inprocess
    build, plan = SHARED_PLANS[name]
    reference, placed = _placed_pair(strategy, build, plan)  # place() verified every call's devices
    with strategy.scope():
        opt = tf_keras.optimizers.SGD(0.05)
    ref_opt = tf_keras.optimizers.SGD(0.05)

    def loss_of(model: Any, x: Any, y: Any) -> Any:
        return tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(y, model(x, training=True),
                                                                             from_logits=True))

    @tf.function
    def step(x: Any, y: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_of(placed, x, y)
            opt.apply_gradients(zip(tape.gradient(loss, placed.trainable_variables), placed.trainable_variables))
            return loss

        return strategy.run(replica_fn, args=(x, y))

    batches = [models.synthetic_batch(reference, 8, seed=s % 2) for s in range(5)]
    placed_losses = [float(coordinator.schedule(step, args=(tf.nest.map_structure(tf.constant, x),
                                                           tf.constant(y))).fetch()) for x, y in batches]
    ref_losses = []
    for x, y in batches:
        with tf.GradientTape() as tape:
            loss = loss_of(reference, x, y)
        ref_opt.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                    reference.trainable_variables))
        ref_losses.append(float(loss))
    assert len(placed_losses) == 5
    np.testing.assert_allclose(placed_losses, ref_losses, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_verification_names_a_layer_whose_gradients_left_its_device(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    build, plan = SHARED_PLANS["reused"]
    placed = place(build(), plan, strategy, verify=False)
    layer = placed.get_layer("reused")
    layer.call = type(layer).call.__get__(layer)  # undo the placement of its calls
    with pytest.raises(PlacementMismatchError, match="'reused'"):
        verify_placement(placed, plan)


@pytest.mark.slow
def test_a_layer_also_called_inside_a_nested_model_is_refused(inprocess: Any) -> None:
    import tf_keras

    _, strategy, _ = inprocess
    L = tf_keras.layers
    shared = L.Dense(16, name="shared")
    inner_in = L.Input((16,))
    inner = tf_keras.Model(inner_in, shared(inner_in), name="inner")
    x = L.Input((16,), name="x")
    model = tf_keras.Model(x, L.Dense(2, name="logits")(inner(shared(x))), name="outer")
    with pytest.raises(PlanError, match="'shared' is also called at 'inner/shared'"):
        place(model, Plan({"shared": PS0}), strategy)


# ----------------------------------------------------------------------------- measured bytes (real processes)
#: Each model with its placed plan (None: the analyzer's), measured against stock PS on one cluster.
MEASURED: list[tuple[str, dict[str, str] | None]] = [
    ("siamese_cnn", None),
    ("reused_dense", None),
    ("ctr_head", {"flatten": PS0, "fc1": PS0, "fc2": PS0, "logits": PS0}),
    ("ctr_dnn", None),
    # embeddings computed on the PS: their gradient still goes to the worker and back
    ("ctr_dnn", {n: PS0 for n in ("emb0", "emb1", "emb2", "emb3", "flat0", "flat1", "flat2", "flat3", "concat",
                                  "fc1", "fc2", "fc3", "logit")}),
]


@pytest.fixture(scope="module")
def measured() -> dict[tuple[str, str], Any]:
    """Every run of :data:`MEASURED` (stock PS once per model), on one 2-worker, 1-PS LocalCluster;
    keyed by (model, policy name)."""
    from measure import compare_many_in_subprocess

    runs, keys, seen = [], [], set()
    for model, plan in MEASURED:
        policies: list[Any] = [] if model in seen else ["ps"]
        policies.append(Plan(plan, policy="head") if plan else "ralp")
        seen.add(model)
        runs.append((model, policies, {"steps": 4, "warmup_steps": 2, "batch_size": BATCH}))
        keys.append(model)
    return {(model, name): r for model, results in zip(keys, compare_many_in_subprocess(runs))
            for name, r in results.items()}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("model, plan", MEASURED)
def test_measured_bytes_match_the_prediction(measured: dict[tuple[str, str], Any], model: str,
                                             plan: dict[str, str] | None) -> None:
    for name in ("ps", "head" if plan else "ralp"):
        r = measured[(model, name)]
        assert r.bytes_per_step and r.predicted_bytes_per_step, name
        if name != "ps":
            assert r.plan["placements"], "the analyzer chose to split"
        assert r.bytes_per_step == pytest.approx(r.predicted_bytes_per_step, rel=0.10), (model, name)
