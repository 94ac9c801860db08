"""The supervised coordinator's progress count (:class:`ralp_tf.faults.coordinator.ProgressCoordinator`):
a closure of K steps counts K, a closure being retried counts once it completes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ralp_tf.faults import coordinator as progress


class _Value:
    def __init__(self, losses: list[float]) -> None:
        self.losses, self.ready, self.failing = losses, False, False

    def fetch(self) -> Any:
        if self.failing:
            raise RuntimeError("being retried")
        return np.asarray(self.losses, dtype=np.float32)


class _Coordinator:
    def __init__(self, values: list[_Value]) -> None:
        self.values = list(values)

    def schedule(self, fn: Any, args: Any = None, kwargs: Any = None) -> _Value:
        return self.values.pop(0)

    def join(self) -> None:
        pass


def test_closures_count_their_steps_and_a_retried_one_counts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_is_ready", lambda rv: rv.ready)
    closures = [_Value([1.0, 0.9, 0.8]), _Value([0.7, 0.6, 0.5]), _Value([0.4])]
    reports: list[tuple[int, float | None]] = []
    coord = progress.ProgressCoordinator(_Coordinator(closures), lambda done, loss: reports.append((done, loss)),
                                         offset=10, poll_s=3600)
    try:
        for _ in closures:
            coord.schedule(None)
        closures[0].ready = True
        closures[1].ready, closures[1].failing = True, True
        coord.join()
        assert coord.done == 13 and reports[-1] == (13, pytest.approx(0.8))
        closures[1].failing = False
        closures[2].ready = True
        coord.join()
        coord.join()
        assert coord.done == 17 and reports[-1] == (17, pytest.approx(0.4)) and len(reports) == 2
    finally:
        coord.close()
