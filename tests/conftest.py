"""Shared fixtures. TF-heavy fixtures are session-scoped: one in-process cluster per test run."""
from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

# A test run started in the background by a non-interactive shell (`cmd &`, `nohup`) inherits
# SIGINT ignored, and Python then installs no KeyboardInterrupt handler, here or in the processes
# the tests start. The tests that send SIGINT need Python's default handling: restore it (a
# handled signal is reset to its default in exec'd children, so they get it too).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def inprocess():
    """One worker and two PS tasks in this process, with a strategy and a coordinator."""
    import tensorflow as tf

    from inprocess_cluster import InProcessCluster

    cluster = InProcessCluster(workers=1, ps=2)
    strategy = cluster.strategy()
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    return cluster, strategy, coordinator


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """Print exactly one line, always: ``skip summary: N skipped (k x reason; ...)``, reasons grouped
    and most frequent first (CI greps for it). It does not change the exit status."""
    reasons: Counter[str] = Counter()
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    detail = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common())
    terminalreporter.write_line(f"skip summary: {sum(reasons.values())} skipped" + (f" ({detail})" if detail else ""))
