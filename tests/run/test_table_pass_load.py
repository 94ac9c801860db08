"""The load a calibrated table pass is timed under: every other PS task running the same passes
(``ralp_tf.run.device_times.table_passes_running``)."""
from __future__ import annotations

import time

import pytest



def test_the_load_runs_passes_on_every_device_while_active_and_stops_on_exit() -> None:
    from ralp_tf.run.device_times import table_passes_running

    with table_passes_running(["/device:CPU:0", "/device:CPU:0"], nbytes=1 << 20) as counts:
        time.sleep(0.5)
        during = list(counts)
    after = list(counts)
    time.sleep(0.2)
    assert all(c > 0 for c in during)
    assert list(counts) == after  # stopped: no update after the exit


def test_no_devices_is_no_load() -> None:
    from ralp_tf.run.device_times import table_passes_running

    with table_passes_running([]) as counts:
        assert counts == []


def test_a_device_that_cannot_run_the_passes_is_reported_not_hung() -> None:
    from ralp_tf.run.device_times import table_passes_running

    with pytest.raises(Exception):
        with table_passes_running(["/job:nowhere/replica:0/task:0/device:CPU:0"], nbytes=1 << 20):
            pass
