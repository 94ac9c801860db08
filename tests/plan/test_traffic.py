"""A worker step's traffic: shards of variables, layouts of activations, phases, compatibility
of the string-keyed API."""
from __future__ import annotations

import pytest

from plan_helpers import BATCH, builtin, mlp, ps
from ralp_tf.plan.cluster import TaskRef
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.traffic import (PULL, PUSH, RPC_CONTROL_BYTES, STEP_OVERHEAD_BYTES, WORKER, resolve_placements,
                                  resolve_splits, resolve_storage, variable_shards, worker_step_traffic)

BATCH_32 = 32  # the cached profiles' batch


def test_placements_resolve_to_task_refs() -> None:
    where = resolve_placements(mlp(), Plan({"fc2": ps(3)}))
    assert where["fc2"] == "ps:3" and where["fc2"].index == 3 and where["fc1"] is WORKER or where["fc1"] == WORKER
    assert isinstance(where["fc2"], TaskRef) and where["x"] == "worker"


def test_variable_shards_follow_every_storage_form() -> None:
    p = builtin("alexnet_cifar")
    plan = Plan({}, storage={"conv1": {"variables": [{"axis": 3, "shards": [ps(0), ps(1), ps(2)]}, ps(2)]},
                             "conv2": [ps(0), ps(1)], "conv3": ps(1)})
    homes = variable_shards(p, resolve_placements(p, plan), 4, resolve_storage(plan))
    assert homes["conv1"] == [[(TaskRef.ps(0), 22 / 64), (TaskRef.ps(1), 21 / 64), (TaskRef.ps(2), 21 / 64)],
                              [(TaskRef.ps(2), 1.0)]]
    assert homes["conv2"][0] == [(TaskRef.ps(0), 2 / 3), (TaskRef.ps(1), 1 / 3)]  # 3 rows over 2 tasks
    assert homes["conv3"] == [[(TaskRef.ps(1), 1.0)], [(TaskRef.ps(1), 1.0)]]
    assert homes["conv4"] == [[(TaskRef.ps(0), 1.0)], [(TaskRef.ps(1), 1.0)]]  # round-robin, storage layers skipped


def test_worker_step_traffic_keeps_its_string_keyed_form() -> None:
    p = mlp((64, 32, 4))
    traffic = worker_step_traffic(p, {"x": "worker", "fc1": "worker", "fc2": "ps:0"}, 1)
    c = RPC_CONTROL_BYTES / 2  # one direction of a message's control
    # fc1's two variables: read and pushed, a message each, whose control also flows the other way
    assert traffic[("ps:0", "worker", PULL)] == 64 * 32 * 4 + 32 * 4 + STEP_OVERHEAD_BYTES / 2 + 2 * c
    assert traffic[("worker", "ps:0", PULL)] == 2 * c
    assert traffic[("worker", "ps:0", PUSH)] == 64 * 32 * 4 + 32 * 4 + STEP_OVERHEAD_BYTES / 2 + 2 * c
    assert traffic[("worker", "ps:0", "fwd:fc1")] == BATCH * 32 * 4 + c
    assert traffic[("ps:0", "worker", "fwd:fc2")] == BATCH * 16 + c


def test_each_message_to_a_split_layers_shards_costs_control_bytes() -> None:
    p = mlp((64, 32, 4))
    plan = Plan({"fc1": ps(0)}, splits={"fc1": {"by": "columns", "shards": [ps(0), ps(1), ps(2), ps(3)]}})
    traffic = worker_step_traffic(p, resolve_placements(p, plan), 4, {}, {}, resolve_splits(plan))
    x = BATCH * 64 * 4
    # x goes to 4 shards: 4 messages, each with its control, half each way
    for k in range(4):
        assert traffic[("worker", f"ps:{k}", "fwd:x")] == pytest.approx(x + RPC_CONTROL_BYTES / 2)
        assert traffic[(f"ps:{k}", "worker", "fwd:x")] == pytest.approx(RPC_CONTROL_BYTES / 2)


def test_a_regularised_table_moves_whole_unless_its_layer_is_on_the_ps() -> None:
    """An embedding whose table a weight regulariser reads: computed on the worker, the loss reads
    the table whole and the summed gradient is dense (both ways, the whole table); computed on the
    PS, its regulariser runs there and the table stays."""
    import dataclasses

    p = builtin("ctr_dnn")
    emb = p.layer("emb0")
    table = emb.var_bytes[0]
    regularised = dataclasses.replace(p, layers=tuple(dataclasses.replace(l, regularised=(True,)) if l.name == "emb0"
                                                      else l for l in p.layers))
    on_worker = {l.name: "worker" for l in p.layers}
    plain, whole = (worker_step_traffic(q, on_worker, 1) for q in (p, regularised))
    # the table, in one more message
    assert whole[("ps:0", "worker", PULL)] - plain[("ps:0", "worker", PULL)] == pytest.approx(table + RPC_CONTROL_BYTES / 2)
    added = whole[("worker", "ps:0", PUSH)] - plain[("worker", "ps:0", PUSH)]
    assert 0.9 * table < added < table  # the whole table instead of the step's few rows
    on_ps = dict(on_worker, emb0="ps:0")
    assert worker_step_traffic(regularised, on_ps, 1) == worker_step_traffic(p, on_ps, 1)
    assert regularised.layer("emb0").to_dict()["regularised"] == [True] and "regularised" not in emb.to_dict()


def test_a_regularised_kernel_is_read_once_more_and_pushed_once() -> None:
    """A weight regulariser reads its variable apart from the layer's call: a worker-computed
    layer pulls it once more; the tape sums both gradients, so one push. On the PS it moves nothing."""
    import dataclasses

    p = mlp((64, 32, 4))
    fc1 = p.layer("fc1")
    regularised = dataclasses.replace(p, layers=tuple(
        dataclasses.replace(l, regularised=(True, False)) if l.name == "fc1" else l for l in p.layers))
    on_worker = {l.name: "worker" for l in p.layers}
    plain, again = (worker_step_traffic(q, on_worker, 1) for q in (p, regularised))
    extra_read = fc1.var_bytes[0] + RPC_CONTROL_BYTES / 2  # one more message
    assert again[("ps:0", "worker", PULL)] - plain[("ps:0", "worker", PULL)] == pytest.approx(extra_read)
    assert again[("worker", "ps:0", PUSH)] == plain[("worker", "ps:0", PUSH)]
    on_ps = dict(on_worker, fc1="ps:0")
    assert worker_step_traffic(regularised, on_ps, 1) == worker_step_traffic(p, on_ps, 1)



def _ctr_ralp_plan() -> dict[str, str]:
    """ctr_dnn's ralp plan: the lookups on the worker (the tables on ps:0), the rest on ps:0."""
    p = builtin("ctr_dnn")
    return {l.name: "worker" if l.kind in ("input", "embedding") else "ps:0" for l in p.layers}


def test_where_the_optimizer_sums_repeated_ids_decides_whether_embedding_gradients_cross() -> None:
    """tf_keras.optimizers.SGD sums a sparse gradient's repeated ids on the worker: with the head
    on the tables' PS, each table's rows come to the worker and go back. legacy.SGD sums them on
    the table's task: only the ids, the dense features and the logit cross (measured on ctr_dnn with
    its head on the PS, loopback, one step per closure: 45.6 KB per worker step with SGD, 6.3 KB with
    legacy.SGD, whose control bytes the cost model overprices at this size: 8.2 KB)."""
    p = builtin("ctr_dnn")
    where = _ctr_ralp_plan()
    keras, legacy = (worker_step_traffic(q, where, 1) for q in (p, p.with_optimizer("legacy-sgd")))
    tables = [l for l in p.layers if l.kind == "embedding"]
    rows = sum(BATCH_32 * l.output_bytes for l in tables)
    ids = sum(BATCH_32 * 4 for _ in tables)
    indices = BATCH_32 * 4 + RPC_CONTROL_BYTES / 2  # the gradient's ids, from the table's task's copy
    assert keras[("ps:0", "worker", "bwd:emb0")] == pytest.approx(BATCH_32 * p.layer("emb0").output_bytes
                                                                  + RPC_CONTROL_BYTES / 2 + indices)
    assert keras[("worker", "ps:0", PUSH)] > rows + ids
    assert not any(k[2].startswith("bwd:emb") for k in legacy)
    assert legacy[("worker", "ps:0", "fwd:emb0")] == pytest.approx(BATCH_32 * 4 + RPC_CONTROL_BYTES / 2)
    total_keras, total_legacy = sum(keras.values()), sum(legacy.values())
    assert total_keras == pytest.approx(45.6e3, rel=0.03) and total_legacy < 0.2 * total_keras
    # both deliver the rows' gradient to the tables: on the worker's push, or from the head's task
    on_worker = {l.name: "worker" for l in p.layers}
    stock_keras, stock_legacy = (worker_step_traffic(q, on_worker, 1) for q in (p, p.with_optimizer("legacy-sgd")))
    assert stock_legacy[("worker", "ps:0", "bwd:emb0")] == pytest.approx(BATCH_32 * p.layer("emb0").output_bytes
                                                                         + RPC_CONTROL_BYTES)  # and the ids' request
    assert stock_keras[("worker", "ps:0", PUSH)] > stock_legacy.get(("worker", "ps:0", PUSH), 0.0) + 0.9 * rows


def test_a_constrained_kernel_is_read_by_its_constraint_and_written_back_unless_on_the_ps() -> None:
    """The optimizer applies a weight constraint after its update, where the step runs: a
    worker-computed layer's ``max_norm`` kernel is read twice more and written back (3x its
    bytes); computed on the PS, the constraint runs on the variable's task and moves nothing."""
    import dataclasses

    from ralp_tf.model.profiles import LayerProfile
    from ralp_tf.plan.traffic import CONSTRAINT, CONSTRAINT_WRITE

    p = mlp((64, 32, 4))
    kernel = p.layer("fc1").var_bytes[0]
    constrained = dataclasses.replace(p, layers=tuple(
        dataclasses.replace(l, constraint_reads=(2, 0)) if l.name == "fc1" else l for l in p.layers))
    on_worker = {l.name: "worker" for l in p.layers}
    t = worker_step_traffic(constrained, on_worker, 1)
    assert t[("ps:0", "worker", CONSTRAINT)] == pytest.approx(2 * kernel + RPC_CONTROL_BYTES)
    assert t[("worker", "ps:0", CONSTRAINT_WRITE)] == pytest.approx(kernel + RPC_CONTROL_BYTES / 2)
    on_ps = dict(on_worker, fc1="ps:0")
    assert worker_step_traffic(constrained, on_ps, 1) == worker_step_traffic(p, on_ps, 1)
    layer = constrained.layer("fc1")
    assert layer.to_dict()["constraint_reads"] == [2, 0] and LayerProfile.from_dict(layer.to_dict()) == layer
    assert "constraint_reads" not in p.layer("fc1").to_dict()


def test_each_closure_sends_a_handle_per_variable_a_ps_computed_layer_reads() -> None:
    """Every variable of a PS-computed layer costs its task a resource handle per closure (150 B with
    the tf_keras optimizers, 70 B with the legacy ones), spread over the closure's steps; a
    worker-computed layer's variables cost none (their reads are messages)."""
    from ralp_tf.plan.traffic import HANDLE_BYTES, HANDLES, LEGACY_HANDLE_BYTES, step_traffic

    p = mlp((64, 32, 4))
    where = resolve_placements(p, {"fc1": ps(0), "fc2": ps(0)})

    def handle_bytes(q: object, k: int) -> float:
        step = step_traffic(q, where, 1, steps_per_closure=k)  # type: ignore[arg-type]
        return sum(b for (src, dst, phase), b in step.control.items() if phase == HANDLES and src == WORKER)

    assert handle_bytes(p, 1) == 4 * HANDLE_BYTES and handle_bytes(p, 8) == 4 * HANDLE_BYTES / 8
    assert handle_bytes(p.with_optimizer("legacy-sgd"), 1) == 4 * LEGACY_HANDLE_BYTES
    assert handle_bytes(p, 1) and not sum(b for (_, _, phase), b in step_traffic(
        p, resolve_placements(p, {}), 1).control.items() if phase == HANDLES)
