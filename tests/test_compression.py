"""Compression on the wire: settings in the plan, priced by the cost model, applied by the
applier (encode on the sending device, decode on the receiving one), bytes measured."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest

from ralp_tf import models
from ralp_tf.analyzer import analyze
from ralp_tf.cluster import Cluster
from ralp_tf.compression import AUTO, Compression, parse_compression, setting_of, wire_ratio
from ralp_tf.costmodel import STEP_OVERHEAD_BYTES, estimate
from ralp_tf.errors import PlanError
from ralp_tf.plan import Plan
from ralp_tf.profiler import profile
from ralp_tf.train import sgd_losses

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
HEAD = {"flatten": PS0, "fc1": PS0, "fc2": PS0, "logits": PS0}


# ------------------------------------------------------------------ settings and the plan
def test_settings_parse_with_per_layer_overrides() -> None:
    comp = parse_compression({"*": "fp16", "fc1": {"activations": "bf16"}})
    assert setting_of(comp, "conv1") == Compression(activations="fp16", weights="fp16")
    assert setting_of(comp, "fc1") == Compression(activations="bf16")
    assert wire_ratio("fp16") == wire_ratio("bf16") == 0.5 and wire_ratio("int8") == 0.25
    assert wire_ratio("topk:0.01") == pytest.approx(0.02)


@pytest.mark.parametrize("bad, message", [
    ({"*": "fp8"}, "unknown compression 'fp8'"),
    ({"*": {"activations": "int8"}}, "unknown compression 'int8' for activations"),
    ({"*": {"gradients": "topk:0"}}, r"top-k fraction in 'topk:0' must be in \(0, 1\]"),
    ({"*": {"gradients": "topk:1.5"}}, r"must be in \(0, 1\]"),
    ({"*": {"colour": "fp16"}}, "unknown compression kind 'colour'"),
])
def test_bad_settings_are_refused_with_the_choices(bad: Any, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        Plan({}, compression=bad)


def test_plan_json_carries_compression_in_format_2_only() -> None:
    plan = Plan(HEAD, compression={"*": "fp16"})
    assert plan.to_dict()["format"] == "ralp_tf.plan/2" and Plan.from_json(plan.to_json()) == plan
    assert Plan(HEAD).to_dict()["format"] == "ralp_tf.plan/1"
    with pytest.raises(PlanError, match="format 'ralp_tf.plan/1' has field"):
        Plan.from_dict({"format": "ralp_tf.plan/1", "placements": {}, "compression": {"*": "fp16"}})


# ------------------------------------------------------------------ cost model and analyzer
def test_fp16_halves_the_compressed_traffic_in_the_cost_model() -> None:
    prof = profile(models.alexnet_cifar(), batch_size=32)
    cluster = Cluster.local(2, 1)
    plain = estimate(prof, cluster, Plan(HEAD))
    half = estimate(prof, cluster, Plan(HEAD, compression={"*": "fp16"}))
    overhead = STEP_OVERHEAD_BYTES
    assert half.bytes_per_step - overhead == pytest.approx((plain.bytes_per_step - overhead) / 2, rel=1e-3)
    stock_fp16 = estimate(prof, cluster, Plan({}, compression={"*": {"weights": "bf16"}}))
    assert stock_fp16.bytes_per_step - overhead == pytest.approx(
        (estimate(prof, cluster, None).bytes_per_step - overhead) / 2, rel=1e-3)


def test_auto_compression_picks_fp16_and_never_int8_or_topk() -> None:
    prof = profile(models.small_cnn(), batch_size=32)
    chosen = analyze(prof, Cluster.local(2, 1, bandwidth="100mbit"), compression="auto").plan
    assert chosen.compression == {"*": AUTO}
    assert all(s.gradients == "none" for s in chosen.compression.values())
    assert analyze(prof, Cluster.local(2, 1)).plan.compression == {}


# ------------------------------------------------------------------ applier (in-process cluster)
def _placed(strategy: Any, compression: Any) -> Any:
    import tf_keras

    from ralp_tf.applier import place

    tf_keras.utils.set_random_seed(2)
    return place(models.small_cnn(fc=64), Plan(HEAD, compression=compression), strategy)


@pytest.mark.slow
def test_encode_runs_on_the_sender_and_decode_on_the_receiver(inprocess: Any) -> None:
    import tensorflow as tf

    _, strategy, _ = inprocess
    model = _placed(strategy, {"*": "fp16"})
    x, y = models.synthetic_batch(model, 4)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function(tf.TensorSpec(x.shape), tf.TensorSpec(y.shape, tf.int32)).graph
    casts = [op for op in graph.get_operations() if op.type == "Cast"]

    def where(op: Any) -> str:
        return "ps" if "/job:ps" in op.device else "worker"

    encode = [op for op in casts if "ralp_encode" in op.name and not op.name.startswith("gradient_tape")]
    assert encode and all(where(op) == "worker" and op.outputs[0].dtype == tf.float16 for op in encode)
    decode = [op for op in casts if op.name.startswith("small_cnn/flatten/Cast")]
    assert decode and all(where(op) == "ps" for op in decode)
    pulls = [op for op in casts if op.name.startswith("small_cnn/conv1/") and op.outputs[0].dtype == tf.float16]
    assert pulls and all(where(op) == "ps" for op in pulls)  # the weights are narrowed on their PS task


@pytest.mark.slow
def test_fp16_and_bf16_train_like_no_compression_and_stay_finite(inprocess: Any) -> None:
    _, strategy, coordinator = inprocess
    losses = {}
    for codec in ("none", "fp16", "bf16"):
        model = _placed(strategy, {"*": codec} if codec != "none" else {})
        x, y = models.synthetic_batch(model, 8)
        losses[codec] = sgd_losses(strategy, coordinator, model, [(x, y)] * 4)
    assert all(np.isfinite(v).all() for v in losses.values())
    np.testing.assert_allclose(losses["fp16"], losses["none"], rtol=2e-3)
    np.testing.assert_allclose(losses["bf16"], losses["none"], rtol=3e-2)


@pytest.mark.slow
def test_overflow_is_an_error_naming_the_layer(inprocess: Any) -> None:
    import tensorflow as tf

    _, strategy, coordinator = inprocess
    model = _placed(strategy, {"*": "fp16"})

    @tf.function
    def forward(x: Any) -> Any:
        return strategy.run(lambda x: model(x, training=False), args=(x,))

    huge = tf.fill([2, 16, 16, 3], 1e30)
    try:
        with pytest.raises(Exception, match="layer (flatten|fc1).*NaN or Inf"):
            coordinator.schedule(forward, args=(huge,)).fetch()
    finally:
        try:
            coordinator.join()  # the coordinator keeps a closure's error until join() reports it
        except Exception:
            pass


@pytest.mark.slow
def test_gradient_codecs_are_refused_and_useless_settings_warned(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    with pytest.raises(PlanError, match="gradient compression 'int8' is priced by the cost model but not applied"):
        _placed(strategy, {"*": {"gradients": "int8"}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _placed(strategy, {"conv1": {"activations": "fp16"}})  # conv1 computes on the worker
    assert any("'conv1': activations compression asked" in str(w.message) for w in caught)


# ------------------------------------------------------------------ measured bytes (real processes)
@pytest.mark.slow
@pytest.mark.integration
def test_measured_bytes_drop_by_the_predicted_ratio() -> None:
    from measure import compare_in_subprocess as compare

    base = Plan(HEAD, policy="head")
    policies = [base, dataclasses.replace(base, policy="head+fp16", compression={"*": "fp16"}),
                dataclasses.replace(base, policy="head+bf16", compression={"*": "bf16"})]
    results = compare("small_cnn", workers=2, ps=1, steps=4, warmup_steps=2, policies=policies)
    assert len(results) == 3
    for r in results.values():
        assert r.bytes_per_step == pytest.approx(r.predicted_bytes_per_step, rel=0.10)
    plain = results["head"].bytes_per_step - STEP_OVERHEAD_BYTES
    for name in ("head+fp16", "head+bf16"):
        assert results[name].bytes_per_step - STEP_OVERHEAD_BYTES == pytest.approx(plain / 2, rel=0.05)
