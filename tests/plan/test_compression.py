"""Compression on the wire: settings in the plan, priced by the cost model, applied by the
applier (encode on the sending device, decode on the receiving one), bytes measured."""
from __future__ import annotations

import dataclasses
import types
import warnings
from typing import Any

import numpy as np
import pytest

from ralp_tf import models
from ralp_tf.plan.analyzer import analyze
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.compression import (AUTO, Compression, parse_compression, parse_setting, pushed_bytes, setting_of,
                                  topk_count, wire_bytes, wire_ratio)
from ralp_tf.plan.costmodel import RPC_CONTROL_BYTES, STEP_OVERHEAD_BYTES, estimate
from ralp_tf.errors import PlanError
from ralp_tf.plan.plans import Plan
from ralp_tf.model.profiler import profile
from ralp_tf.run.training import sgd_losses

PS0 = "/job:ps/replica:0/task:0/device:CPU:0"
HEAD = {"flatten": PS0, "fc1": PS0, "fc2": PS0, "logits": PS0}


# ------------------------------------------------------------------ settings and the plan
def test_settings_parse_with_per_layer_overrides() -> None:
    comp = parse_compression({"*": "fp16", "fc1": {"activations": "bf16"}})
    assert setting_of(comp, "conv1") == Compression(activations="fp16", weights="fp16")
    assert setting_of(comp, "fc1") == Compression(activations="bf16")
    assert wire_ratio("fp16") == wire_ratio("bf16") == 0.5 and wire_ratio("int8") == 0.25
    assert wire_ratio("topk:0.01") == pytest.approx(0.02)


def test_text_settings_name_the_kind_of_each_codec() -> None:
    assert parse_setting("fp16", "x") == Compression(activations="fp16", weights="fp16")
    assert parse_setting("int8", "x") == Compression(gradients="int8")
    assert parse_setting("gradients=int8", "x") == Compression(gradients="int8")
    assert parse_setting("topk:0.01", "x") == Compression(gradients="topk:0.01")
    assert parse_setting("bf16, gradients=topk:0.1:no-feedback", "x") == Compression(
        activations="bf16", weights="bf16", gradients="topk:0.1:no-feedback")
    assert parse_setting("weights=fp16,gradients=int8", "x") == Compression(weights="fp16", gradients="int8")


def test_gradient_codecs_wire_bytes() -> None:
    assert wire_bytes("int8", 4000) == 1004  # 1 byte per entry + the fp32 scale
    assert topk_count(1000, 0.01) == 10 and topk_count(10, 0.01) == 1 and topk_count(3, 1.0) == 3
    assert wire_bytes("topk:0.01", 4000) == 80 and wire_bytes("topk:0.01:no-feedback", 4000) == 80
    assert pushed_bytes(Compression(weights="fp16"), 4000) == 2000
    assert pushed_bytes(Compression(weights="fp16", gradients="int8"), 4000) == 1004  # the gradients codec wins


@pytest.mark.parametrize("bad, message", [
    ({"*": "fp8"}, "unknown compression 'fp8'"),
    ({"*": "int4"}, "unknown compression 'int4'; use fp16, bf16 or none .* int8 or topk:<fraction>"),
    ({"*": "gradients=int4"}, "unknown compression 'int4' for gradients"),
    ({"*": "topk:2"}, r"top-k fraction in 'topk:2' must be in \(0, 1\]"),
    ({"*": "topk:-0.1:no-feedback"}, r"must be in \(0, 1\]"),
    ({"*": "topk:lots"}, r"must be in \(0, 1\]"),
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


def test_gradient_codecs_price_the_push_per_variable_and_their_compute() -> None:
    from ralp_tf.plan.compression import codec_flops
    from ralp_tf.plan.costmodel import PUSH, resolve_placements, worker_step_traffic

    prof = profile(models.small_cnn(), batch_size=32)
    cluster = Cluster.local(2, 1)

    def push(compression: Any) -> float:
        plan = Plan({}, compression=compression)
        traffic = worker_step_traffic(prof, resolve_placements(prof, plan), 1, {}, plan.compression)
        control = STEP_OVERHEAD_BYTES / 2 + len(sizes) * RPC_CONTROL_BYTES  # a message per variable, both ways
        return sum(b for (_, _, phase), b in traffic.items() if phase == PUSH) - control

    sizes = [v for l in prof.layers for v in l.var_bytes]
    assert push({}) == sum(sizes)
    assert push({"*": "int8"}) == sum(v / 4 + 4 for v in sizes)
    assert push({"*": "topk:0.01"}) == sum(8 * topk_count(int(v // 4), 0.01) for v in sizes)
    plain, coded = estimate(prof, cluster, Plan({})), estimate(prof, cluster, Plan({}, compression={"*": "topk:0.01"}))
    up = ("worker", "ps:0")
    assert coded.bytes_between[up] < plain.bytes_between[up] / 10  # only the push is compressed
    work = sum(codec_flops("topk:0.01", v) for v in sizes) / cluster.workers[0].flops
    assert coded.worker_compute_s == pytest.approx(plain.worker_compute_s + work)  # encode + decode, charged
    assert codec_flops("topk:0.01:no-feedback", 4e6) < codec_flops("topk:0.01", 4e6) and codec_flops("fp16", 4e6) == 0


def test_auto_compression_picks_fp16_and_never_int8_or_topk() -> None:
    prof = profile(models.small_cnn(), batch_size=32)
    chosen = analyze(prof, Cluster.local(2, 1, bandwidth="100mbit"), compression="auto").plan
    assert chosen.compression == {"*": AUTO}
    assert all(s.gradients == "none" for s in chosen.compression.values())
    assert analyze(prof, Cluster.local(2, 1)).plan.compression == {}


# ------------------------------------------------------------------ applier (in-process cluster)
def _placed(strategy: Any, compression: Any) -> Any:
    import tf_keras

    from ralp_tf.place.applier import place

    tf_keras.utils.set_random_seed(2)
    return place(models.small_cnn(fc=64), Plan(HEAD, compression=compression), strategy)


def _training_graph(model: Any) -> Any:
    """The traced graph of one training step of ``model`` (forward, loss, tape gradients)."""
    import tensorflow as tf

    x, y = models.synthetic_batch(model, 4)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    return step.get_concrete_function(tf.TensorSpec(x.shape), tf.TensorSpec(y.shape, tf.int32)).graph


@pytest.mark.slow
def test_encode_runs_on_the_sender_and_decode_on_the_receiver(inprocess: Any) -> None:
    import tensorflow as tf

    _, strategy, _ = inprocess
    model = _placed(strategy, {"*": "fp16"})
    graph = _training_graph(model)
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
def test_settings_on_traffic_that_does_not_cross_are_warned(inprocess: Any) -> None:
    _, strategy, _ = inprocess
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _placed(strategy, {"conv1": {"activations": "fp16"}, "fc1": {"gradients": "int8"}})
    messages = [str(w.message) for w in caught]
    assert any("'conv1': activations compression asked" in m for m in messages)  # conv1 computes on the worker
    assert any("'fc1': gradients compression asked" in m and "Remove gradients from the plan's compression of 'fc1'"
               in m for m in messages)  # fc1's gradients are computed and applied on its PS task


def test_int8_or_topk_on_an_integer_tensor_is_refused_naming_the_layer() -> None:
    import tensorflow as tf

    from ralp_tf.place.codecs import encode_int8, encode_topk
    from ralp_tf.place.wrappers import narrow_weights_call

    with pytest.raises(PlanError, match="layer conv1: gradient of k: int8 compression needs a floating-point "
                                        "tensor, but it is int32; set gradients: none for this layer"):
        encode_int8(tf.constant([1, 2, 3]), "conv1: gradient of k")
    with pytest.raises(PlanError, match="top-k compression needs a floating-point tensor, but it is int64"):
        encode_topk(tf.constant([1, 2, 3], tf.int64), 1, "conv1: gradient of k")
    layer = types.SimpleNamespace(trainable_weights=[tf.Variable([1, 2], name="counts")])
    with pytest.raises(PlanError, match="layer counter: variable counts:0: int8 compression needs a floating-point"):
        narrow_weights_call(layer, lambda x: x, "none", "counter", "int8")


def test_nan_in_a_compressed_gradient_is_an_error_naming_the_layer() -> None:
    import tensorflow as tf

    from ralp_tf.place.codecs import encode_int8, encode_topk

    for encode in (lambda g: encode_int8(g, "conv2: gradient of conv2/kernel:0"),
                   lambda g: encode_topk(g, 1, "conv2: gradient of conv2/kernel:0")):
        with pytest.raises(tf.errors.InvalidArgumentError, match="layer conv2: gradient of conv2/kernel:0 holds NaN"):
            encode(tf.constant([1.0, float("nan")]))


def test_int8_round_trip_is_within_half_a_step() -> None:
    import tensorflow as tf

    from ralp_tf.place.codecs import decode_int8, encode_int8

    g = tf.constant(np.random.default_rng(0).standard_normal(1000).astype("float32"))
    q, scale = encode_int8(g, "x")
    assert q.dtype == tf.int8 and scale.shape == ()
    error = np.abs(decode_int8(q, scale, tf.float32).numpy() - g.numpy())
    assert error.max() <= float(scale) / 2 + 1e-7
    q0, s0 = encode_int8(tf.zeros([4]), "x")  # an all-zero gradient: no division by zero
    assert not np.any(decode_int8(q0, s0, tf.float32).numpy())


@pytest.mark.slow
def test_gradient_codecs_encode_on_the_worker_and_decode_on_the_ps(inprocess: Any) -> None:
    import tensorflow as tf

    _, strategy, _ = inprocess
    for codec, wire_op, wire_dtypes in (("int8", "Cast", {tf.int8}), ("topk:0.1", "TopKV2", {tf.float32, tf.int32})):
        model = _placed(strategy, {"*": {"gradients": codec}})
        graph = _training_graph(model)
        ops = graph.get_operations()
        encode = [op for op in ops if "ralp_grad_encode" in op.name and op.type not in ("Const", "NoOp")]
        decode = [op for op in ops if "ralp_grad_decode" in op.name and op.type not in ("Const", "NoOp")]
        assert encode and all("/job:ps" not in op.device for op in encode)  # on whichever worker runs the step
        assert decode and all(op.device.startswith("/job:ps/replica:0/task:") for op in decode)
        wire = [op for op in encode if op.type == wire_op]
        assert len(wire) == 4 and all({o.dtype for o in op.outputs} <= wire_dtypes for op in wire)  # conv1, conv2
        residuals = [op for op in encode if op.type == "VarHandleOp"]
        assert len(residuals) == (4 if codec.startswith("topk") else 0)  # worker-local, never on a PS


@pytest.mark.slow
def test_topk_error_feedback_keeps_what_was_not_sent(inprocess: Any) -> None:
    """Per worker: residual after a step = (residual before + gradient) - sent, and over all steps
    sum(sent) + residual = sum(gradients); without feedback the rest is dropped."""
    import tensorflow as tf

    from ralp_tf.place.codecs import WorkerResidual, new_prefix, residual_name, send

    _, strategy, coordinator = inprocess
    with strategy.scope():
        var = tf.Variable(tf.zeros([4, 5]), name="feedback_kernel")
    prefix = new_prefix()

    def scheduled(fn: Any, *args: Any) -> np.ndarray:
        return np.asarray(coordinator.schedule(tf.function(lambda *a: strategy.run(fn, args=a)), args=args).fetch())

    def residual() -> np.ndarray:
        return scheduled(lambda: WorkerResidual(residual_name(prefix, var), 20).read())

    grads = [np.random.default_rng(i).standard_normal((4, 5)).astype("float32") for i in range(5)]
    sent_total, before = np.zeros(20, "float32"), np.zeros(20, "float32")
    for g in grads:
        sent = scheduled(lambda g: send(g, "topk:0.2", var, "dense: gradient of kernel", prefix),
                         tf.constant(g)).ravel()
        after = residual()
        assert np.count_nonzero(sent) == 4  # k = 0.2 * 20
        wanted = before + g.ravel()
        assert set(np.flatnonzero(sent)) == set(np.argsort(-np.abs(wanted))[:4])  # the largest of gradient + residual
        np.testing.assert_allclose(after, wanted - sent, atol=1e-6)  # the residual is what was not sent
        sent_total, before = sent_total + sent, after
    np.testing.assert_allclose(sent_total + before, np.sum(grads, axis=0).ravel(), atol=1e-5)
    plain = scheduled(lambda g: send(g, "topk:0.2:no-feedback", var, "dense", prefix), tf.constant(grads[0])).ravel()
    np.testing.assert_array_equal(plain, np.where(np.isin(np.arange(20), np.argsort(-np.abs(grads[0].ravel()))[:4]),
                                                  grads[0].ravel(), 0))


@pytest.mark.slow
def test_int8_and_topk_train_and_stay_finite(inprocess: Any) -> None:
    _, strategy, coordinator = inprocess
    losses = {}
    for codec in ("none", "int8", "topk:0.1"):
        model = _placed(strategy, {"*": {"gradients": codec}} if codec != "none" else {})
        x, y = models.synthetic_batch(model, 8)
        losses[codec] = np.array(sgd_losses(strategy, coordinator, model, [(x, y)] * 4))
    assert all(np.isfinite(v).all() and v[-1] < v[0] for v in losses.values())
    np.testing.assert_allclose(losses["int8"], losses["none"], rtol=2e-2)


# ------------------------------------------------------------------ measured bytes (real processes)
@pytest.mark.slow
@pytest.mark.integration
def test_measured_bytes_drop_by_the_predicted_ratio() -> None:
    """fp16/bf16 halve a RALP plan's traffic; int8 and top-k cut the gradients pushed by stock PSS
    (every gradient crosses, nothing else goes up) as predicted, measured by the kernel's counters."""
    from measure import compare_in_subprocess as compare

    from ralp_tf.bench.compression_report import ratios

    base, stock = Plan(HEAD, policy="head"), Plan({}, policy="stock")
    policies = [base, dataclasses.replace(base, policy="head+fp16", compression={"*": "fp16"}),
                dataclasses.replace(base, policy="head+bf16", compression={"*": "bf16"}), stock,
                dataclasses.replace(stock, policy="stock+int8", compression={"*": "int8"}),
                dataclasses.replace(stock, policy="stock+topk", compression={"*": "topk:0.05"})]
    results = compare("small_cnn", workers=2, ps=1, steps=4, warmup_steps=2, policies=policies)
    assert len(results) == len(policies)
    for r in results.values():
        assert r.bytes_per_step == pytest.approx(r.predicted_bytes_per_step, rel=0.10)
    # the predicted control bytes, which a codec does not shrink: plain = control + data, fp16 = control + data / 2
    control = 2 * results["head+fp16"].predicted_bytes_per_step - results["head"].predicted_bytes_per_step
    plain = results["head"].bytes_per_step - control
    for name in ("head+fp16", "head+bf16"):
        assert results[name].bytes_per_step - control == pytest.approx(plain / 2, rel=0.05)
    rows = ratios(profile(models.small_cnn(), batch_size=32), 1, vars(results["stock"]),
                  [vars(results["stock+int8"]), vars(results["stock+topk"])])
    assert rows[0].predicted_ratio == pytest.approx(0.25, rel=1e-3)
    assert rows[0].measured_ratio == pytest.approx(0.25, rel=0.10)  # int8 quarters the pushed gradients
    assert rows[1].predicted_ratio == pytest.approx(0.10, rel=1e-2)  # top-k 5%: values + int32 indices
    assert rows[1].measured_ratio == pytest.approx(rows[1].predicted_ratio, rel=0.10)


def test_sampled_top_k_selects_exactly_the_largest_entries() -> None:
    import tensorflow as tf

    from ralp_tf.place.codecs import SAMPLED_TOPK_MIN, top_k_indices

    n = 4 * SAMPLED_TOPK_MIN
    rng = np.random.default_rng(3)
    for values in (rng.standard_normal(n), np.where(np.arange(n) % 997 == 0, 100.0, rng.random(n) * 1e-3),
                   np.linspace(0.0, 1.0, n)):  # spikes the stride misses: the full top-k runs
        magnitude = np.abs(values).astype("float32")
        for k in (1, n // 100, n // 5):
            got = top_k_indices(tf.constant(magnitude), k).numpy()
            assert len(got) == k and np.min(magnitude[got]) >= np.sort(magnitude)[-k]


@pytest.mark.slow
def test_each_worker_keeps_its_own_residual() -> None:
    """2 workers (a process of its own): sum of everything sent + each worker's residual = the sum of
    the gradients, and both workers hold a residual (one shared residual would be counted twice)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "feedback_per_worker.py"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, str(script), "12"], capture_output=True, text=True, timeout=300, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["workers"] == 2 and result["max_error"] < 1e-5
    assert all(norm > 0 for norm in result["residual_norms"])


@pytest.mark.slow
def test_a_shared_layer_reads_once_and_pushes_one_encoded_gradient(inprocess: Any) -> None:
    import tensorflow as tf

    from ralp_tf.place.applier import place
    from ralp_tf.plan.costmodel import PULL, resolve_placements, worker_step_traffic

    _, strategy, _ = inprocess
    plan = Plan({"logits": PS0}, compression={"*": "int8"})
    model = place(models.siamese_cnn(fc=32), plan, strategy)
    x, y = models.synthetic_batch(model, 4)

    @tf.function
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    graph = step.get_concrete_function([tf.TensorSpec(t.shape) for t in x]).graph
    encoded = [op for op in graph.get_operations() if "ralp_grad_encode" in op.name and op.type == "Cast"
               and op.outputs[0].dtype == tf.int8]
    assert len(encoded) == 4  # shared_conv and shared_fc, called twice each: one push per variable
    prof = profile(models.siamese_cnn(fc=32), batch_size=32)
    pulled = {l.name: l for l in prof.layers}
    traffic = worker_step_traffic(prof, resolve_placements(prof, plan), 1, {}, plan.compression)
    expected = sum(sum(pulled[n].var_bytes) for n in ("shared_conv", "shared_fc"))
    control = STEP_OVERHEAD_BYTES / 2 + 4 * RPC_CONTROL_BYTES  # 4 reads, one per variable, their control both ways
    assert sum(b for (_, _, phase), b in traffic.items() if phase == PULL) - control == expected
