"""The bench's ``auto`` column (ralp_tf/bench/auto.py): the order it ranks, and the probe's choice."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ralp_tf.bench.auto import auto_order, choose
from ralp_tf.bench.config import BenchConfig, Cell

PRED = {"ps": {"step_s": 2.0}, "ralp": {"step_s": 0.5}, "allreduce": {"step_s": 1.0}, "horovod": {"step_s": 0.9},
        "ralp_nosplit": {"step_s": 0.1}, "analysis": {"chosen": "cut before fc1"}}


def test_auto_ranks_the_plan_stock_pss_and_the_rings_by_their_predictions() -> None:
    assert auto_order(PRED) == ["ralp", "horovod", "allreduce", "ps"]  # never a variant the job would not run
    assert auto_order(PRED, unavailable=("horovod",)) == ["ralp", "allreduce", "ps"]
    stock = {**PRED, "analysis": {"chosen": "no split"}}
    assert auto_order(stock) == ["horovod", "allreduce", "ps"]  # a plan that places nothing is stock PSS


def SCHEDULE(step_s: float | None) -> tuple[int, int]:
    return 4, 2


class _Bench:
    def __init__(self, rates: dict[str, float | None]) -> None:
        self.cfg = BenchConfig(cells=[], strategies=("auto",), min_steps=2, max_steps=4)
        self.rates, self.runs = rates, []

    def _run_one(self, name: str, tb: Any, cell: Any, steps: int, warmup: int, *rest: Any) -> Any:
        self.runs.append((name, steps))
        rate = self.rates[name]
        return SimpleNamespace(valid=rate is not None, samples_per_s=rate)


def test_auto_runs_the_faster_of_the_top_two_probes() -> None:
    cell = Cell("alexnet_cifar", 2, "1gbit")
    bench = _Bench({"ralp": 10.0, "horovod": 12.0})
    chosen, record = choose(bench, None, cell, ["ralp", "horovod", "ps"], PRED, {}, 1, SCHEDULE)
    assert chosen == "horovod" and [n for n, _ in bench.runs] == ["ralp", "horovod"]
    assert record["probe_samples_per_s"] == {"ralp": 10.0, "horovod": 12.0} and record["order"][0] == "ralp"
    failed = _Bench({"ralp": 10.0, "horovod": None})
    assert choose(failed, None, cell, ["ralp", "horovod"], PRED, {}, 1, SCHEDULE)[0] == "ralp"  # a failed probe never wins
    alone = _Bench({})
    assert choose(alone, None, cell, ["ps"], PRED, {}, 1, SCHEDULE)[0] == "ps" and alone.runs == []  # nothing to compare
