"""Host link loads summed by task and host equal the worker-by-worker sums they stand for; the
chain model's stages."""
from __future__ import annotations

import collections

import pytest

from plan_helpers import builtin, ps
from ralp_tf.plan.cluster import Cluster, TaskRef
from ralp_tf.plan.costmodel import resolve_placements
from ralp_tf.plan.loads import ChainModel, host_loads, transfer_seconds
from ralp_tf.plan.plans import Plan
from ralp_tf.plan.traffic import resolve_splits, resolve_storage, step_traffic

W = TaskRef.worker()


def _brute_force(cluster: Cluster, phased: dict) -> tuple[dict, dict, dict]:
    """Every worker's step, one by one: per host and phase, the bytes out and in."""
    ps_host = {TaskRef.ps(t.index): t.host for t in cluster.ps}
    out: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    into: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    for w in cluster.workers:
        for (src, dst, phase), b in phased.items():
            hs = w.host if src == W else ps_host[src]
            hd = w.host if dst == W else ps_host[dst]
            if hs != hd:
                out[hs][phase] += b
                into[hd][phase] += b
    link_s = {h.name: transfer_seconds(sum(max(out[h.name][q], into[h.name][q])
                                           for q in set(out[h.name]) | set(into[h.name])), h.bandwidth_bps)
              for h in cluster.hosts}
    return ({h: sum(v.values()) for h, v in out.items()}, {h: sum(v.values()) for h, v in into.items()}, link_s)


def test_host_loads_equal_the_worker_by_worker_sums() -> None:
    p = builtin("alexnet_cifar")
    cluster = Cluster.from_dict({"worker": ["a:1", "a:2", "b:1", "c:1"], "ps": ["a:3", "b:2", "d:1", "e:1"]},
                                bandwidth={"worker": "1gbit", "ps": "10gbit"})
    plan = Plan({"fc1": ps(2), "fc2": ps(2), "logits": ps(2)},
                splits={"fc1": {"by": "columns", "shards": [ps(2), ps(3), ps(0)]}},
                storage={"conv3": {"variables": [{"axis": 3, "shards": [ps(0), ps(1), ps(3)]}, ps(1)]}})
    where = resolve_placements(p, plan)
    phased = step_traffic(p, where, cluster.num_ps, resolve_storage(plan), {}, resolve_splits(plan)).bytes
    loads = host_loads(cluster, phased)
    out, into, link_s = _brute_force(cluster, phased)
    for h in cluster.hosts:
        assert loads.bytes_out[h.name] == pytest.approx(out.get(h.name, 0.0))
        assert loads.bytes_in[h.name] == pytest.approx(into.get(h.name, 0.0))
        assert loads.link_s[h.name] == pytest.approx(link_s[h.name])
    rate = {h.name: h.bandwidth_bps for h in cluster.hosts}  # a and b also run workers: 1 Gbit/s
    host = {TaskRef.ps(t.index): t.host for t in cluster.ps}
    worker_a = sum(transfer_seconds(b, min(1e9, rate[host[d if s == W else s]])) for (s, d, _), b in phased.items()
                   if W in (s, d) and host[d if s == W else s] != "a")
    among = sum(transfer_seconds(b, min(rate[host[s]], rate[host[d]])) for (s, d, _), b in phased.items()
                if W not in (s, d) and host[s] != host[d])
    assert loads.comm_by_host["a"] == pytest.approx(worker_a + among)


def test_a_split_stage_waits_for_its_slowest_part_and_single_stages_add_up() -> None:
    cluster = Cluster.local(1, 3, bandwidth="1gbit")  # worker0 alone; ps0..ps2 on hosts of their own
    chain = ChainModel(cluster, 0.010, [{"ps0": 0.004}, {"ps1": 0.003, "ps2": 0.001}, {"ps0": 0.002}],
                       {"ps0": 0.006, "ps1": 0.003, "ps2": 0.001}, {})
    assert chain.seconds_by_host(1.0)["worker0"] == pytest.approx(0.010 + 0.004 + 0.003 + 0.002)
    assert chain.cpu_per_worker_step() == pytest.approx({"ps0": 0.006, "ps1": 0.003, "ps2": 0.001})
