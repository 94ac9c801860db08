"""The job protocol's answered marks: a rank that prints ``start`` with ``RALP_JOB_ACK=1`` goes on
only once the launcher's watcher has read its counters and answered."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from ralp_tf.testbed import jobs

RANK = ("import time; from ralp_tf.testbed.jobs import emit; emit('start'); print('timed steps', time.time(), "
        "flush=True); emit('end'); emit('result', ok=True)")


def test_a_rank_waits_until_the_launcher_has_read_its_counters() -> None:
    seen: list[tuple[str, float]] = []

    def slow_meter(kind: str) -> None:  # a launcher busy for 0.5 s before it reads
        time.sleep(0.5)
        seen.append((kind, time.time()))

    proc = subprocess.Popen([sys.executable, "-c", RANK], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.PIPE, text=True, env={**os.environ, jobs.ACK_ENV: "1"})
    watcher = jobs.JobWatcher([("chief", proc)], on_mark=slow_meter, ack=True)
    assert watcher.wait(60)
    assert [k for k, _ in seen] == ["start", "end"] and watcher.results == [{"ok": True}]
    timed = float(next(l for l in watcher.tails["chief"] if l.startswith("timed steps")).split()[-1])
    assert timed >= seen[0][1]  # the timed steps began after the launcher had read its counters


def test_without_the_answer_asked_a_rank_does_not_wait() -> None:
    env = {k: v for k, v in os.environ.items() if k != jobs.ACK_ENV}
    t0 = time.monotonic()
    # stdin stays open and unanswered: a rank that waited would sit 30 s on each of its two marks
    proc = subprocess.Popen([sys.executable, "-c", RANK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        out = proc.stdout.read()
        assert proc.wait(timeout=90) == 0 and "timed steps" in out and time.monotonic() - t0 < 45
    finally:
        proc.kill()
        proc.stdin.close()
        proc.stdout.close()


WINDOWS = ("import time; from ralp_tf.testbed.jobs import emit\n"
           "for w in ('a', 'b'):\n"
           "    emit('start', window=w); print('timed', w, time.time(), flush=True); emit('end', window=w)\n"
           "    emit('result', window=w)\n")


def test_each_window_of_a_job_is_read_and_answered_on_its_own() -> None:
    """One job timing several models: each window's marks reach ``on_window_mark`` once, tagged, and
    each is answered before the rank goes on (``on_mark`` sees none of them)."""
    seen: list[tuple[str, str, float]] = []

    def slow_window_meter(window: str, kind: str) -> None:
        time.sleep(0.3)
        seen.append((window, kind, time.time()))

    plain: list[str] = []
    proc = subprocess.Popen([sys.executable, "-c", WINDOWS], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.PIPE, text=True, env={**os.environ, jobs.ACK_ENV: "1"})
    watcher = jobs.JobWatcher([("w0", proc)], on_mark=plain.append, on_window_mark=slow_window_meter, ack=True)
    assert watcher.wait(60)
    assert [(w, k) for w, k, _ in seen] == [("a", "start"), ("a", "end"), ("b", "start"), ("b", "end")] and plain == []
    assert watcher.results == [{"window": "a"}, {"window": "b"}]
    timed = {l.split()[1]: float(l.split()[2]) for l in watcher.tails["w0"] if l.startswith("timed")}
    assert timed["a"] >= seen[0][2] and timed["b"] >= seen[2][2]  # each window began after its read
