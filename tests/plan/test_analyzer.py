"""The RALP analyzer: its candidates, what they mean as fields, and its choices. No TensorFlow
(built-in models from their cached profiles)."""
from __future__ import annotations

import pytest

from plan_helpers import builtin, cnn_with_head
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.analyzer import Candidate, analyze, candidate_splits, cuts
from ralp_tf.plan.cluster import Cluster
from ralp_tf.plan.costmodel import estimate
from ralp_tf.plan.plans import PLAN_FORMAT, Plan
from ralp_tf.plan.profiles import resnet50_profile
from ralp_tf.plan.projection import projection_cluster


@pytest.fixture(scope="module")
def profiles() -> dict[str, ModelProfile]:
    return {name: builtin(name) for name in ("alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn")}


def test_analyzer_splits_alexnet_at_the_fc_head_and_vgg_through_its_last_convs(profiles: dict[str, ModelProfile]) -> None:
    """At 1 Gbit/s alexnet's cut is its FC head (15x fewer bytes); vgg16's block5 convs (two 9.4 MB
    kernels at 2x2 pixels) cost more to ship than to compute, so its cut takes them too."""
    head = {"flatten", "fc1", "fc2", "logits"}
    for name, bound, on_ps in (("alexnet_cifar", 15.0, head),
                               ("vgg16_cifar", 3.34, head | {"block5_conv2", "block5_conv3", "block5_pool"})):
        a = analyze(profiles[name], Cluster.local(2, 1, bandwidth="1gbit"))
        assert a.is_split
        assert set(a.plan.ps_layers()) == on_ps
        ratio = a.baseline.estimate.bytes_per_step / a.chosen.estimate.bytes_per_step
        assert ratio == pytest.approx(bound, rel=0.03)
        text = a.report()
        assert "Decision: split" in text and "MB" in text and "speed-up" in text
    fc_only = next(c for c in analyze(profiles["vgg16_cifar"], Cluster.local(2, 1, bandwidth="1gbit")).candidates
                   if set(c.ps_layers) == head)
    assert fc_only.estimate.step_s > 1.05 * a.chosen.estimate.step_s


def test_analyzer_keeps_resnet_on_the_workers_where_its_links_keep_up(profiles: dict[str, ModelProfile]) -> None:
    """resnet_cifar has no head: at 1 and 10 Gbit/s nothing pays; at 100 Mbit/s its last stage on
    the PS is predicted over the threshold, and the decision says so."""
    for bw in ("1gbit", "10gbit"):
        a = analyze(profiles["resnet_cifar"], Cluster.local(2, 1, bandwidth=bw))
        assert not a.is_split, a.report()
        assert "Decision: no split" in a.report()
    slow = analyze(profiles["resnet_cifar"], Cluster.local(2, 1, bandwidth="100mbit"))
    assert slow.predicted_speedup >= slow.min_speedup and "Decision: split" in slow.report()


def test_no_ps_tasks_means_no_split(profiles: dict[str, ModelProfile]) -> None:
    a = analyze(profiles["alexnet_cifar"], Cluster.local(2, 0))
    assert not a.is_split


def test_embedding_model_candidates_include_embeddings_on_ps(profiles: dict[str, ModelProfile]) -> None:
    labels = [label for label, _ in candidate_splits(profiles["ctr_dnn"])]
    assert "embeddings on PS" in labels
    assert [c.label for c in cuts(profiles["ctr_dnn"])] == labels


def test_slower_network_favours_ralp_more(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["alexnet_cifar"]
    fast = analyze(p, Cluster.local(2, 1, bandwidth="10gbit")).predicted_speedup
    slow = analyze(p, Cluster.local(2, 1, bandwidth="100mbit")).predicted_speedup
    assert slow > fast >= 1


def test_transfers_that_hide_behind_the_compute_leave_nothing_to_move(profiles: dict[str, ModelProfile]) -> None:
    """alexnet at 10 Gbit on workers with a core free: the dense weights arrive while the conv layers
    compute and leave during their backward, so stock PSS costs its compute alone and the analyzer
    keeps it; on a machine whose cores the two workers fill, nothing overlaps and the head moves."""
    p = profiles["alexnet_cifar"]
    free = analyze(p, Cluster.local(2, 1, bandwidth="10gbit"))
    assert not free.is_split
    assert free.baseline.estimate.step_s == pytest.approx(free.baseline.estimate.worker_compute_s, rel=1e-3)
    busy = analyze(p, Cluster.local(2, 1, bandwidth="10gbit").with_shared_cores(2.0))
    assert busy.is_split and {"flatten", "fc1", "fc2", "logits"} <= set(busy.plan.ps_layers())


@pytest.mark.parametrize("bw", ["100mbit", "1gbit", "10gbit"])
def test_cuts_on_a_machine_whose_cores_the_workers_fill_take_the_head(profiles: dict[str, ModelProfile],
                                                                      bw: str) -> None:
    """No core free (this machine): alexnet's and vgg16's cuts save bytes (more than half below 10
    Gbit/s), and hold
    their whole FC head below 10 Gbit/s (at 10 Gbit/s the cut with the least PS compute within 5%
    of the fastest may hold less of it); resnet stays whole at 1 Gbit/s and up."""
    cluster = Cluster.local(2, 1, bandwidth=bw).with_shared_cores(2.0)
    for name in ("alexnet_cifar", "vgg16_cifar"):
        a = analyze(profiles[name], cluster)
        share = 1.0 if bw == "10gbit" else 0.5
        assert a.is_split and a.chosen.estimate.bytes_per_step < share * a.baseline.estimate.bytes_per_step, a.report()
        assert bw == "10gbit" or {"flatten", "fc1", "fc2", "logits"} <= set(a.plan.ps_layers()), a.report()
    assert bw == "100mbit" or not analyze(profiles["resnet_cifar"], cluster).is_split


def test_analyzer_offers_storage_and_head_variants_and_reports_the_ring() -> None:
    p = cnn_with_head()
    colocated = analyze(p, Cluster.local(2, 2, layout="colocated", bandwidth="1gbit"))
    labels = {c.label for c in colocated.candidates}
    # the head on one task goes to the task round-robin leaves the fewest conv bytes: ps:1 (c3, c1)
    assert {"no split", "no split, balanced storage", "cut before flat, head on ps:1",
            "cut before flat, head on ps:1, balanced storage"} <= labels
    assert colocated.is_split and colocated.chosen.label.startswith("cut before fc")
    balanced = next(c for c in colocated.candidates if c.label == "cut before flat, head on ps:1, balanced storage")
    assert balanced.plan.storage and balanced.plan.to_dict()["format"] == PLAN_FORMAT
    slow = analyze(p, Cluster.local(2, 2, layout="colocated", bandwidth="100mbit"))
    assert slow.to_dict()["ring_predicted_faster"] is False and "FASTER" not in slow.report()
    only_convs = ModelProfile.from_dict({**p.to_dict(), "layers": p.to_dict()["layers"][:5], "outputs": ["c1"]})
    ring_wins = analyze(only_convs, Cluster.local(2, 1, bandwidth="1gbit"))
    assert ring_wins.to_dict()["ring_predicted_faster"] is True and ring_wins.ring_speedup > 1.05
    assert "The ring all-reduce is predicted FASTER than this plan" in ring_wins.report()


# ---------------------------------------------------------------------------- typed candidates
def test_a_candidates_label_is_made_from_its_fields() -> None:
    def label(**fields: object) -> str:
        return Candidate(ps_layers=(), plan=Plan({}), estimate=None, **fields).label  # type: ignore[arg-type]

    assert label(cut="no split") == "no split"
    assert label(cut="no split", embeddings_on_ps=True) == "embeddings on PS"
    assert label(cut="cut before fc1", embeddings_on_ps=True, head_on_one=True, storage="balanced") == (
        "cut before fc1 + embeddings on PS, head on ps:0, balanced storage")
    assert label(cut="cut before fc1", compression="activations fp16, weights fp16") == (
        "cut before fc1, activations fp16, weights fp16 on the wire")
    assert label(cut="cut before fc1", split_tasks=8, split_pattern="by columns", storage="partitioned",
                 piece_bytes=250e3) == "cut before fc1, head split over 8 PS tasks (by columns), partitioned storage " \
                                       "(pieces <= 0.25 MB)"


def test_to_dict_keeps_its_fields(profiles: dict[str, ModelProfile]) -> None:
    d = analyze(profiles["alexnet_cifar"], Cluster.local(4, 4, layout="colocated", bandwidth="1gbit")).to_dict()
    assert set(d) == {"model", "batch_size", "split", "chosen", "predicted_speedup", "baseline", "chosen_estimate",
                      "allreduce", "plan", "ring_predicted_faster", "ring_speedup", "candidates"}
    assert all(set(c) == {"label", "ps_layers", "step_s", "bytes_per_step", "samples_per_s", "max_link_bytes",
                          "storage", "kept_on_workers"} for c in d["candidates"])


def test_compressed_candidates_keep_their_meaning(profiles: dict[str, ModelProfile]) -> None:
    a = analyze(profiles["alexnet_cifar"], Cluster.local(2, 2, bandwidth="1gbit"), compression="auto", split=False,
                partition=False)
    compressed = [c for c in a.candidates if c.compression]
    assert compressed and all(c.label.endswith(" on the wire") for c in compressed)
    assert len(compressed) == len(a.candidates) // 2


# -------------------------------------------------------------- partitioned storage and splits
def test_partitioned_storage_is_weighed_where_shapes_are_known() -> None:
    p = resnet50_profile()
    cluster = projection_cluster(16, 10e9)
    a = analyze(p, cluster)
    partitioned = [c for c in a.candidates if c.storage == "partitioned"]
    assert partitioned and all(c.piece_bytes > 0 and "partitioned storage (pieces <= " in c.label for c in partitioned)
    assert a.chosen.storage == "partitioned" and a.chosen.estimate.samples_per_s >= 0.95 * a.allreduce.samples_per_s
    stock = estimate(p, cluster)
    assert a.chosen.estimate.samples_per_s > 1.5 * stock.samples_per_s  # round-robin: whole kernels on few tasks
    assert not [c for c in analyze(p, cluster, partition=False).candidates if c.storage == "partitioned"]
    assert not [c for c in analyze(cnn_with_head(), Cluster.local(4, 4, layout="colocated")).candidates
                if c.storage == "partitioned"]  # no shapes, no partitioning


def test_the_analyzer_chooses_how_many_ps_tasks_compute_the_head(profiles: dict[str, ModelProfile]) -> None:
    """16 colocated GPU hosts: at 100 Gbit/s the head's CPU is the limit, so the head goes over more
    PS tasks than at 10 Gbit/s, where the activations sent to every shard are."""
    p = profiles["alexnet_cifar"]
    fast, slow = analyze(p, projection_cluster(16, 100e9)), analyze(p, projection_cluster(16, 10e9))
    assert fast.chosen.split_tasks > slow.chosen.split_tasks >= 2
    assert fast.plan.splits and fast.plan.to_dict()["format"] == "ralp_tf.plan/3"
    for a in (fast, slow):
        assert a.chosen.estimate.samples_per_s >= a.allreduce.samples_per_s
        a.plan.validate(p, projection_cluster(16, 100e9))
    one = [c for c in fast.candidates if c.head_on_one and c.storage == "partitioned" and c.cut == fast.chosen.cut]
    assert one and fast.chosen.estimate.samples_per_s > 3 * one[0].estimate.samples_per_s
    assert not [c for c in analyze(p, projection_cluster(16, 100e9), split=False).candidates if c.split_tasks]


def test_cpu_only_ps_hosts_take_the_split_head_first(profiles: dict[str, ModelProfile]) -> None:
    p = profiles["vgg16_cifar"]
    a = analyze(p, projection_cluster(16, 100e9, ps_hosts=4))
    assert a.chosen.split_tasks >= 2
    first = a.plan.splits[next(iter(a.plan.splits))].devices[0]
    assert first == "/job:ps/replica:0/task:16/device:CPU:0"  # the first CPU-only PS host's task
    assert a.chosen.estimate.samples_per_s >= 1.3 * a.allreduce.samples_per_s


def test_a_splittable_head_is_varied_even_when_its_whole_form_ranks_below_cuts_through_convs() -> None:
    """vgg16_cifar on 32 GPU hosts at 10 Gbit/s: the FC head whole on PS tasks round-robin prices
    below six cuts through the convs, split over PS tasks with its conv weights partitioned it is
    the fastest plan (issue 40: before, the analyzer kept stock PSS, level with the ring)."""
    from ralp_tf.plan.projection import MODELS

    profile = MODELS["vgg16_cifar"]()
    cluster = projection_cluster(32, 10e9)
    a = analyze(profile, cluster)
    assert "cut before fc1" in a.chosen.label and "head split" in a.chosen.label
    assert a.chosen.estimate.samples_per_s >= 1.5 * a.allreduce.samples_per_s
