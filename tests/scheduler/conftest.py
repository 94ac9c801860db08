"""Fixtures of the scheduler tests (helpers live in sched_helpers.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from sched_helpers import SHARED_DATA, tiny_problem
from scheduler.core.problem import Problem


@pytest.fixture
def tiny() -> Problem:
    return tiny_problem()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared dnn-partitioning data not found at {SHARED_DATA} (CI keeps a copy of shared/ "
                    "beside the repository root)")
    return SHARED_DATA
