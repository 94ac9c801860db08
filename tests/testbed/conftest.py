"""Fixtures for the testbed tests.

Tests that build namespaces need root and iproute2; they are skipped (with the reason) otherwise
(see tbhelpers.needs_netns). Every test uses its own namespace prefix starting with ``tbt`` and
the autouse fixture checks that no namespace or CPU group with that prefix is left behind, after
each test marked ``needs_root`` (only those build them; the others run in make test's in-process
pass, beside the namespace pass, whose namespaces they must not touch).
"""
from __future__ import annotations

import os

import pytest

from ralp_tf.testbed import _cgroups, _nsops
from tbhelpers import tbt_cpu_groups, tbt_namespaces


@pytest.fixture(autouse=True)
def no_leftovers(request: pytest.FixtureRequest):
    """Fail a ``needs_root`` test that leaves a ``tbt*`` namespace or CPU group behind (and remove it)."""
    yield
    if request.node.get_closest_marker("needs_root") is None:
        return
    left = tbt_namespaces()
    groups = tbt_cpu_groups()
    for n in left:
        _nsops.delete_netns(n)
    for g in groups:
        _cgroups.remove_group(g)
    if left or groups:
        pytest.fail(f"left behind: namespaces {left}, CPU groups {groups}")


@pytest.fixture
def child_env():
    """Environment for child Python processes: ralp_tf importable, unbuffered output."""
    env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env
