"""A supervised training run: restarts failed tasks, plays a fault plan, adds workers, measures recovery.

:class:`Supervisor` owns a :class:`~ralp_tf.run.launch.LocalCluster` (loopback, or inside a namespace
testbed when one is given) and runs the coordinator as a child process
(``python -m ralp_tf.cli.coordinator_job``, :mod:`ralp_tf.faults.coordinator`) that checkpoints
every ``checkpoint_every`` steps and reports each completed step. Its loop (every 0.2 s):

* **plays the fault plan** (:mod:`ralp_tf.faults.plan`): kills tasks (SIGKILL), takes links down
  or throttles them for their duration (:class:`~ralp_tf.testbed.link_faults.LinkFaults`);
* **restarts dead tasks** on the same address (with a :class:`~ralp_tf.faults.restart.RestartPolicy`):
  after the policy's backoff, :meth:`LocalCluster.restart` starts the task again. A restarted
  *worker* is picked up by TF's ``ClusterCoordinator`` itself (it waits for a failed worker,
  reconnects with ``update_server_def`` and rebuilds its per-worker datasets and functions);
* **recovers from a PS failure without a human**: a PS loses its variables when it dies, and TF's
  coordinator raises at once (its failure handler only covers workers). The coordinator process
  then exits with status 3; once the PS is back the supervisor starts a *fresh coordinator
  process* on the same cluster, which rebuilds strategy, ``ClusterCoordinator``, model and
  optimizer and restores the latest checkpoint. Lost: the steps since that checkpoint. The
  coordinator counts as task ``chief`` in the restart budget;
* **adds a worker** at a step (an ``add_worker`` event) or when asked (:meth:`Supervisor.request_add_worker`,
  from any thread): the coordinator runs to that step (or the next checkpoint), saves a checkpoint
  and exits; :meth:`LocalCluster.add_worker` starts worker ``N`` and a fresh
  coordinator resumes from the checkpoint on the ``N + 1``-worker cluster spec. Nothing is lost;
  the cost is the seconds between the last step on ``N`` and the first on ``N + 1`` workers.
  For an ``add_worker`` event the new worker's process and the next coordinator are started
  *ahead*, while the old coordinator runs its last steps, so that their TensorFlow start is not
  part of that cost: once ``steps left x seconds per step <= PRESTART_MARGIN x`` the time the
  cluster's first tasks took to start (both measured in this run). The worker is left out of every
  coordinator's cluster spec until the join; the coordinator does its imports and waits on a start
  file (``--start-file``), which the supervisor creates once the old coordinator has exited and
  the worker is ready (:meth:`LocalCluster.wait_ready`). The ``N``-worker rate window ends where
  they were started (:meth:`Supervisor._rates`).

A link fault hits a worker's host: the coordinator's host has ``tcp_retries2`` lowered
(:meth:`LinkFaults.detect_dead_peers`), so its connections to that worker fail within ~6 s,
gRPC reports the worker unavailable and TF treats it as a failed worker: its closures are retried
on the others. When the link returns the worker is *fenced* (:meth:`Supervisor._fence`): killed and
restarted on its address, since a PS can otherwise stay blocked on that worker's abandoned step.

Measured per fault (:class:`FaultRecord`): ``recovery_s``, the seconds from the end of the fault
(link back, rate restored, task restarted, worker joined) to the first step completed after it
(for a PS kill: from the kill, as training stops meanwhile); ``steps_lost`` (steps completed and
then redone from a checkpoint); ``steps_during`` (steps completed while it lasted).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from ralp_tf.errors import ClusterRuntimeError
from ralp_tf.faults.plan import FaultEvent, FaultPlan, FaultPlanError
from ralp_tf.faults.report import (FaultRecord, SupervisedReport, leftovers, measure_recovery,
                                   rates_per_worker_count)
from ralp_tf.faults.restart import RestartPolicy
from ralp_tf.run.training import LOOP_OPTIMIZER

__all__ = ["Supervisor", "FaultRecord", "SupervisedReport", "leftovers"]

POLL_S = 0.2
#: Start a joining worker once the steps left before its join take at most this many times the
#: measured start time of a task (slack for a start slower than the cluster's first one).
PRESTART_MARGIN = 1.5


class _Chief:
    """The coordinator child process and a thread that turns its marks into queue items."""

    def __init__(self, proc: subprocess.Popen, marks: "queue.Queue[tuple[str, dict[str, Any]]]",
                 log_path: str | None = None, target: int = 0, run: int = 1, workers: int = 0,
                 start_file: str | None = None) -> None:
        self.proc, self.marks, self.log_path, self.target = proc, marks, log_path, target
        self.run, self.workers, self.start_file = run, workers, start_file
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.started = time.time()
        self.result: dict[str, Any] | None = None
        self.finished_kind: str | None = None
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        from ralp_tf.testbed.jobs import parse_line

        assert self.proc.stdout is not None
        log = open(self.log_path, "a", buffering=1) if self.log_path else None
        for line in self.proc.stdout:
            self.tail.append(line.rstrip("\n"))
            if log:
                log.write(line)
            msg = parse_line(line)
            if msg is not None:
                self.marks.put(msg)

    def drained(self) -> None:
        self._thread.join(timeout=10)


@dataclasses.dataclass
class _LoopState:
    """What :meth:`Supervisor._loop` tracks between polls."""

    pending: list[FaultEvent]
    chief: _Chief | None
    last_chief: _Chief | None = None
    #: link faults in play: (record, ends at unix time, host)
    active: list[tuple[FaultRecord, float, str]] = dataclasses.field(default_factory=list)
    #: task -> (restart at unix time, backoff)
    restarting: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    failed_tasks: dict[str, FaultRecord] = dataclasses.field(default_factory=dict)
    chief_due: float | None = None
    ps_down_record: FaultRecord | None = None
    done_before_failure: int = 0


class Supervisor:
    """A supervised run (see the module docstring). ``testbed``: an open namespace testbed with tasks
    ``worker0..``, ``ps0..`` and ``chief`` (plus a ``worker<N>`` host per worker an ``add_worker``
    event adds), or None for loopback. ``stop_after_s``: stop at the first checkpoint boundary after
    that many seconds of training, once every fault has ended (the chaos run's bound)."""

    def __init__(self, *, model: str = "alexnet_cifar", policy: str = "ralp", workers: int = 2, ps: int = 1,
                 steps: int = 60, batch_size: int = 32, checkpoint_dir: str | None = None,
                 checkpoint_every: int = 10, plan: FaultPlan | None = None, restart: RestartPolicy | None = None,
                 testbed: Any = None, bandwidth: str | None = None, seed: int = 0, log_dir: str | None = None,
                 timeout_s: float = 1800.0, stop_after_s: float | None = None, compression: str | None = None,
                 policy_options: dict[str, Any] | None = None, detect_retries: int = 4, steps_per_closure: int = 1,
                 optimizer: str = LOOP_OPTIMIZER) -> None:
        self.model, self.policy, self.workers, self.ps = model, policy, workers, ps
        self.steps, self.batch_size, self.seed = steps, batch_size, seed
        self.steps_per_closure, self.optimizer = steps_per_closure, optimizer
        self.plan = plan or FaultPlan()
        self.restart = restart
        self.tb = testbed
        self.plan.validate(workers=workers, ps=ps, emulated=bool(testbed is not None and testbed.emulated),
                           restart=restart is not None)
        adds = sorted(e.at_step for e in self.plan.events if e.kind == "add_worker" and e.at_step is not None)
        if any(e.kind == "add_worker" and e.at_step is None for e in self.plan.events):
            raise FaultPlanError("add_worker happens at a step (add_worker,at=20): the coordinator stops at that "
                                 "step's checkpoint and resumes with one more worker")
        if any(not 0 < s < steps for s in adds):
            raise FaultPlanError(f"add_worker steps {adds} must lie between 1 and steps - 1 ({steps - 1})")
        self.segment_ends = adds + [steps]
        if testbed is not None:
            from ralp_tf.faults.hosts import supervised_hosts

            need = supervised_hosts(workers, ps, len(adds))
            missing = [t for t in need if t not in testbed.tasks]
            if missing:
                from ralp_tf.testbed.base import TestbedConfigError

                raise TestbedConfigError(f"the testbed lacks task(s) {missing}: a supervised run needs {need}")
            import math

            if math.isinf(testbed.bandwidth_bps) and any(e.rate_fraction for e in self.plan.events):
                    raise FaultPlanError("a throttle to a fraction of the rate needs a capped testbed (--bandwidth "
                                     "1gbit); give an absolute rate=100mbit instead")
        self.own_ckpt = checkpoint_dir is None
        self.checkpoint_dir = checkpoint_dir or tempfile.mkdtemp(prefix="ralp_tf_ckpt_")
        self.checkpoint_every = checkpoint_every
        self.bandwidth, self.compression = bandwidth, compression
        self.policy_options = policy_options or {}
        self.log_dir = log_dir
        self.timeout_s, self.stop_after_s = timeout_s, stop_after_s
        self.detect_retries = detect_retries
        self.pids: list[int] = []
        self._marks: "queue.Queue[tuple[str, dict[str, Any]]]" = queue.Queue()
        self.progress: list[tuple[float, int, float | None, int]] = []  # (unix time, done, loss, coordinator run)
        self.records: list[FaultRecord] = []
        self.t0: float | None = None
        self.done = 0
        self.chief_runs = 0
        self.steps_lost = 0
        self.worker_count_at: list[tuple[float, int]] = []
        self._add_requested = threading.Event()
        #: seconds the cluster's first tasks took from spawn to ready (the estimate of a worker's start)
        self.task_start_s: float | None = None
        self._spare: tuple[int, float] | None = None  # (index, spawn unix time) of a worker started ahead
        self._ahead: _Chief | None = None  # the coordinator started ahead of that join, waiting
        self._ahead_for = 0  # the step of that join
        self.ahead_at: dict[int, float] = {}  # coordinator run -> unix time a join's tasks were started ahead

    # ------------------------------------------------------------------ helpers
    def _now(self) -> float:
        return time.time() - (self.t0 if self.t0 is not None else time.time())

    def _env(self) -> dict[str, str]:
        """The environment of tasks and coordinator. On a testbed, without the loopback bind shim
        (``ralp-tf run`` preloads it into itself): there a task must listen on its host's address."""
        from ralp_tf.run.launch import NATIVE_SHIM
        from ralp_tf.testbed.jobs import base_env

        env = base_env()
        if self.tb is not None:
            env["LD_PRELOAD"] = ":".join(p for p in env.get("LD_PRELOAD", "").split(":")
                                         if p and os.path.basename(p) != NATIVE_SHIM.name)
        return env

    def _start_chief(self, lc: Any, stop_file: str, ahead_of: int | None = None) -> _Chief:
        """Start the next coordinator process, resuming from the latest checkpoint. ``ahead_of``: start
        it now but let it wait, after its imports, on a start file (:meth:`_take_over` creates it)
        until the current coordinator stops at step ``ahead_of`` for a join; its cluster spec then
        includes the worker started ahead for that join."""
        run = self.chief_runs + 1
        target = next(s for s in self.segment_ends if s > (self._checkpointed() if ahead_of is None else ahead_of))
        spec = dict(lc.cluster_spec_dict)
        workers = lc.num_workers
        if self._spare is not None and ahead_of is None:  # started ahead, not joined yet: not in this cluster
            spare = lc.task("worker", self._spare[0]).address
            spec["worker"] = [a for a in spec["worker"] if a != spare]
            workers -= 1
        if self.tb is not None:
            # Name the coordinator's own address: left out, TF would pick one from the hostname, which
            # resolves to 127.0.0.1 in the namespace, and a PS sending it a tensor (checkpoint) could not connect.
            spec["chief"] = [self.tb.address("chief", 2299 + run)]
        argv = [sys.executable, "-m", "ralp_tf.cli.coordinator_job", "--cluster", json.dumps(spec),
                "--model", self.model, "--policy", self.policy, "--steps", str(target),
                "--batch-size", str(self.batch_size), "--seed", str(self.seed),
                "--checkpoint-dir", self.checkpoint_dir, "--checkpoint-every", str(self.checkpoint_every),
                "--stop-file", stop_file]
        for k, v in self.policy_options.items():
            argv += ["--policy-option", f"{k}={json.dumps(v)}"]  # as JSON: True is `true`, "dp" is `"dp"`
        argv += ["--steps-per-closure", str(self.steps_per_closure) if self.steps_per_closure else "auto"]
        argv += ["--optimizer", self.optimizer]
        if self.bandwidth:
            argv += ["--bandwidth", self.bandwidth]
        if self.compression:
            argv += ["--compression", self.compression]
        start_file = None
        if ahead_of is not None:
            start_file = os.path.join(self.checkpoint_dir, f"START-{run}")
            if os.path.exists(start_file):
                os.remove(start_file)
            argv += ["--start-file", start_file]
        elif os.path.exists(stop_file):
            os.remove(stop_file)
        env = self._env()
        if self.tb is not None:
            proc = self.tb.popen("chief", argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        else:
            from ralp_tf.run._procutil import die_with_parent
            from ralp_tf.run.launch import loopback_env

            proc = subprocess.Popen(argv, env=loopback_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                                    preexec_fn=die_with_parent)
        self.pids.append(proc.pid)
        chief = _Chief(proc, self._marks, os.path.join(str(lc.log_dir), f"coordinator-{run}.log"), target, run,
                       workers, start_file)
        return chief if ahead_of is not None else self._activate(chief)

    def _activate(self, chief: _Chief) -> _Chief:
        """``chief`` is the coordinator now: progress marks count for its run from here on."""
        self.chief_runs = chief.run
        self.worker_count_at.append((time.time(), chief.workers))
        return chief

    def _take_over(self, lc: Any, stop_file: str, reached: int) -> _Chief:
        """The coordinator after a join at step ``reached``: the one started ahead for it (its start
        file is created), or, when there is none (or it died, or the join came at another step), a
        fresh one."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.proc.poll() is None and self._ahead_for == reached:
            if os.path.exists(stop_file):
                os.remove(stop_file)
            assert ahead.start_file is not None
            open(ahead.start_file, "w").close()
            return self._activate(ahead)
        self._drop(ahead)
        return self._start_chief(lc, stop_file)

    def _drop(self, chief: _Chief | None) -> None:
        """Stop a coordinator started ahead that will not be used (SIGKILL, waited for)."""
        if chief is not None and chief.proc.poll() is None:
            chief.proc.kill()
            chief.proc.wait(timeout=30)

    def _checkpointed(self) -> int:
        """The newest complete checkpoint's step (no TF import; :func:`ralp_tf.run.checkpoints.latest_complete_step`)."""
        from ralp_tf.run.checkpoints import latest_complete_step

        return latest_complete_step(self.checkpoint_dir)

    def _record(self, event: FaultEvent | None, kind: str, target: str | None, note: str = "") -> FaultRecord:
        rec = FaultRecord(kind=kind, target=target, planned=event.describe() if event else f"{kind} {target}",
                          start_s=self._now(), step_at_start=self.done, note=note, coordinator_run=self.chief_runs)
        self.records.append(rec)
        return rec

    # ------------------------------------------------------------------ the loop
    def run(self) -> SupervisedReport:
        """Run to the end; raise ClusterRuntimeError (restart budget spent, a PS lost without
        --restart-failed, the safety cap) naming the last checkpoint."""
        from ralp_tf.run.launch import LocalCluster

        started = time.time()
        links = None
        stop_file = os.path.join(self.checkpoint_dir, "STOP")
        if os.path.exists(stop_file):
            os.remove(stop_file)
        with LocalCluster(workers=self.workers, ps=self.ps, launcher=self.tb, log_dir=self.log_dir,
                          env=self._env()) as lc:
            self.task_start_s = time.time() - started
            self.pids += lc.pids()
            if self.tb is not None and self.tb.emulated:
                from ralp_tf.testbed.link_faults import LinkFaults

                links = LinkFaults(self.tb)
                links.detect_dead_peers("chief", self.detect_retries)
            try:
                chief = self._loop(lc, links, stop_file, started)
            finally:
                self._drop(self._ahead)
                if links is not None:
                    links.heal_all()
            self.log_dir = str(lc.log_dir) if not lc._own_log_dir else None
        result = chief.result or {}
        if self.own_ckpt:  # a temporary checkpoint folder goes once the run succeeded (kept on failure)
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        for rec in self.records:
            measure_recovery(rec, self.progress, self.t0)
        final_loss = self.progress[-1][2] if self.progress else None
        if result.get("final_loss") is not None:
            final_loss = result["final_loss"]
        return SupervisedReport(
            model=self.model, policy=self.policy, steps_requested=self.steps, steps_completed=self.done,
            final_loss=final_loss, wall_s=time.time() - started, faults=self.records,
            restarts=dict(self.restart.counts) if self.restart else {}, coordinator_runs=self.chief_runs,
            steps_lost=self.steps_lost,
            samples_per_s=rates_per_worker_count(self.progress, self.worker_count_at, self.ahead_at,
                                                 self.checkpoint_every, self.batch_size), batch_size=self.batch_size,
            stopped_by_time=chief.finished_kind == "stopped", log_dir=self.log_dir)

    def _loop(self, lc: Any, links: Any, stop_file: str, started: float) -> _Chief:
        """Poll until the run ends: play due faults, heal ended link faults, restart dead tasks,
        follow the coordinator (resume or join when it ends), start a joining worker ahead, and
        ask for stops; return the coordinator that finished the run."""
        state = _LoopState(pending=list(self.plan.events), chief=self._start_chief(lc, stop_file))
        state.last_chief = state.chief
        while True:
            now = time.time()
            if now - started > self.timeout_s:
                raise ClusterRuntimeError(f"the supervised run did not finish within {self.timeout_s:.0f} s (safety "
                                          f"cap); {self.done} of {self.steps} steps done, last checkpoint step "
                                          f"{self._checkpointed()} in {self.checkpoint_dir}")
            self._drain(state.last_chief)
            self._fire_faults(lc, links, state, now)
            self._end_link_faults(lc, links, state, now)
            self._tend_tasks(lc, state)
            finished = self._follow_chief(lc, stop_file, state)
            if finished is not None:
                return finished
            self._restart_chief(lc, stop_file, state)
            self._ask_for_stops(lc, stop_file, state, now)
            time.sleep(POLL_S)

    def _fire_faults(self, lc: Any, links: Any, state: _LoopState, now: float) -> None:
        """Play every planned fault that is due (by step or by time); workers that join are played
        at the end of a coordinator's run instead."""
        for ev in list(state.pending):
            if ev.kind == "add_worker":
                state.pending.remove(ev)  # handled at the segment end
                continue
            due = (ev.at_step is not None and self.done >= ev.at_step) or \
                  (ev.at_s is not None and self.t0 is not None and now - self.t0 >= ev.at_s)
            if not due:
                continue
            state.pending.remove(ev)
            if ev.kind == "kill":
                job, index = _split(ev.target)
                if not lc.task(job, index).alive() or ev.target in state.restarting:
                    self._record(ev, "kill", ev.target, note="skipped: task already down")
                    continue
                rec = self._record(ev, "kill", ev.target)
                lc.kill(job, index)
                state.failed_tasks[ev.target] = rec
            elif ev.kind == "link_down":
                rec = self._record(ev, ev.kind, ev.target)
                state.active.append((rec, now + float(ev.for_s), links.down(ev.target)))
            elif ev.kind == "throttle":
                rate = ev.rate if ev.rate is not None else self.tb.bandwidth_bps * float(ev.rate_fraction)
                rec = self._record(ev, ev.kind, ev.target)
                state.active.append((rec, now + float(ev.for_s), links.throttle(ev.target, rate)))

    def _end_link_faults(self, lc: Any, links: Any, state: _LoopState, now: float) -> None:
        """Bring back every link whose fault is over (fencing the peers a downed link lost)."""
        for item in list(state.active):
            rec, ends, host = item
            if now >= ends:
                (links.up if rec.kind == "link_down" else links.restore)(host)
                rec.end_s = self._now()
                state.active.remove(item)
                if rec.kind == "link_down":
                    self._fence(lc, host, rec)

    def _tend_tasks(self, lc: Any, state: _LoopState) -> None:
        """Record every task found dead (a planned kill or not), schedule its restart after its
        backoff (with --restart-failed), and restart the tasks whose backoff is over."""
        for t in list(lc.tasks):
            name = f"{t.job}{t.index}"
            if t.alive() or name in state.restarting:
                continue
            rec = state.failed_tasks.get(name)
            if rec is None:
                rec = state.failed_tasks[name] = self._record(None, "died", name,
                                                              note=f"unplanned, exit {t.proc.returncode}")
            if t.job == "ps":
                state.ps_down_record = rec
            if self.restart is None:
                if t.job == "worker" and rec.end_s is None:
                    rec.end_s, rec.note = rec.start_s, (rec.note + "; not restarted").lstrip("; ")
                continue
            delay = self.restart.next_delay(name, t.proc.returncode)
            state.restarting[name] = (time.time() + delay, delay)
        for name, (due, delay) in list(state.restarting.items()):
            if time.time() >= due:
                # On this thread: a task dies with the thread that started it (PR_SET_PDEATHSIG).
                new = lc.restart(*_split(name))
                self.pids.append(new.pid)
                rec = state.failed_tasks.pop(name)
                rec.end_s = self._now()
                rec.note = (rec.note + f"; restarted after {delay:g} s backoff").lstrip("; ")
                del state.restarting[name]

    def _follow_chief(self, lc: Any, stop_file: str, state: _LoopState) -> _Chief | None:
        """When the coordinator has exited: the coordinator that finished the run; or, at the end of
        a segment, the next one (a worker joins first); or, after a failure, a restart scheduled
        (with --restart-failed and a PS down) or ClusterRuntimeError naming the last checkpoint."""
        chief = state.chief
        if chief is None or chief.proc.poll() is None:
            return None
        chief.drained()
        self._drain(chief)
        rc = chief.proc.returncode
        if rc == 0 and chief.finished_kind == "stopped" and not self._add_requested.is_set():
            return chief
        if rc == 0 and chief.finished_kind in ("result", "stopped"):
            reached = self._checkpointed()
            self.done = max(self.done, reached)
            if reached >= self.steps:
                return chief
            self._add_requested.clear()
            self._join(lc, reached)
            state.chief = state.last_chief = self._take_over(lc, stop_file, reached)
            return None
        self._drop(self._ahead)  # it failed: a coordinator started ahead resumes no more than a fresh one
        self._ahead = None
        ps_failed = state.ps_down_record is not None or any(t.job == "ps" and not t.alive() for t in lc.tasks)
        if self.restart is None or not ps_failed:
            why = "\n".join(list(chief.tail)[-12:])
            dead = [f"{t.job}:{t.index} (exit {t.proc.returncode})" for t in lc.tasks if not t.alive()]
            raise ClusterRuntimeError(
                f"the coordinator exited with status {rc} near step {self.done}"
                + (f"; dead task(s): {', '.join(dead)}" if dead else "")
                + (". Pass --restart-failed to restart failed tasks and resume from the last checkpoint"
                   if self.restart is None else "")
                + f". Last checkpoint: step {self._checkpointed()} in {self.checkpoint_dir}. "
                  f"Its output ends:\n{why}")
        state.done_before_failure = self.done
        state.chief_due = time.time() + self.restart.next_delay("chief", rc)
        state.chief = None
        return None

    def _restart_chief(self, lc: Any, stop_file: str, state: _LoopState) -> None:
        """Start the next coordinator once its backoff is over and every task is back: it resumes
        from the last checkpoint, the steps since counted as lost."""
        if state.chief is not None or state.chief_due is None or time.time() < state.chief_due or state.restarting \
                or not all(t.alive() for t in lc.tasks):
            return
        resumed = self._checkpointed()
        lost = max(state.done_before_failure - resumed, 0)
        self.steps_lost += lost
        if state.ps_down_record is not None:
            state.ps_down_record.steps_lost += lost
            state.ps_down_record.note = (state.ps_down_record.note
                                         + f"; resumed from checkpoint step {resumed}").lstrip("; ")
            state.ps_down_record = None
        self.done = resumed
        state.chief = state.last_chief = self._start_chief(lc, stop_file)
        state.chief_due = None

    def _ask_for_stops(self, lc: Any, stop_file: str, state: _LoopState, now: float) -> None:
        """Start a worker that joins at the end of this coordinator's run ahead of time; ask the
        coordinator to stop at its next checkpoint when a worker is requested, or when the time
        bound (chaos) is reached with no fault in play."""
        chief = state.chief
        if chief is not None and self._spare is None and self._spare_due(chief):
            new = lc.add_worker(wait=False)
            self.pids.append(new.pid)
            self._spare = (new.index, time.time())
            self.ahead_at[self.chief_runs] = self._spare[1]
            self._ahead, self._ahead_for = self._start_chief(lc, stop_file, ahead_of=chief.target), chief.target
        if self._add_requested.is_set() and chief is not None and not os.path.exists(stop_file):
            open(stop_file, "w").close()
        if self.stop_after_s is not None and self.t0 is not None and now - self.t0 >= self.stop_after_s \
                and not state.pending and not state.active and not state.restarting and chief is not None \
                and not os.path.exists(stop_file):
            open(stop_file, "w").close()

    def _spare_due(self, chief: _Chief) -> bool:
        """Whether to start the worker that joins at ``chief.target`` now: once the steps left take at
        most ``PRESTART_MARGIN x task_start_s`` at this coordinator's rate so far (its first 3 steps
        left out; known once it spans a checkpoint interval, as steps come in bursts between the
        checkpoints' pauses). Never before that, nor for the run's last segment."""
        if chief.target >= self.steps or self.task_start_s is None:
            return False
        pts = [(t, d) for t, d, _, run in self.progress if run == self.chief_runs][3:]
        if len(pts) < 2 or pts[-1][1] - pts[0][1] < max(5, self.checkpoint_every):
            return False
        step_s = (pts[-1][0] - pts[0][0]) / (pts[-1][1] - pts[0][1])
        return (chief.target - self.done) * step_s <= PRESTART_MARGIN * self.task_start_s

    def _join(self, lc: Any, reached: int) -> None:
        """The coordinator stopped at step ``reached`` to add a worker: use the one started ahead (wait
        until it is ready) or start one now; record the join (its cost is measured later)."""
        before = lc.num_workers - (self._spare is not None)
        rec = self._record(None, "add_worker", f"worker{before}")
        rec.planned = f"add worker{before} at step {reached}"
        waited = time.time()
        if self._spare is not None:
            index, spawned = self._spare
            lc.wait_ready([lc.task("worker", index)])
            self._spare = None
            last = max((t for t, _, _, _ in self.progress), default=waited)
            rec.note = (f"worker{index} started {last - spawned:.1f} s before the last step on {before} workers "
                        f"(estimate {PRESTART_MARGIN:g} x {self.task_start_s:.1f} s); waited {time.time() - waited:.1f} "
                        "s for it after the coordinator stopped")
        else:
            new = lc.add_worker()
            self.pids.append(new.pid)
            rec.note = f"worker{new.index} started after the coordinator stopped; ready in {time.time() - waited:.1f} s"
        rec.end_s = self._now()
        group = self.tb.cpu_group(self.tb.host_of(f"worker{before}")) if self.tb is not None else None
        if group is not None:  # check, not assume, that the new machine computes on its own budget
            from ralp_tf.testbed._cgroups import group_pids, quota_cores

            inside = lc.task("worker", before).pid in group_pids(group)
            rec.note += (f"; its process runs in its host's CPU group ({quota_cores(group):g} cores)" if inside
                         else f"; its process is NOT in its host's CPU group {group}")

    def _fence(self, lc: Any, host: str, rec: FaultRecord) -> None:
        """Restart the worker tasks of ``host`` (fresh processes, same addresses) once its link is
        back. TF already treats such a worker as failed, but a PS can stay blocked in a receive from
        that worker's abandoned step, which stalls every worker (seen: no step for minutes); killing
        the worker closes those connections and unblocks the PS. Not charged to the restart budget."""
        for task in self.tb.hosts[host]:
            if task.startswith("worker"):
                job, index = _split(task)
                if lc.task(job, index).alive():
                    lc.kill(job, index)
                new = lc.restart(job, index)
                self.pids.append(new.pid)
                rec.note = (rec.note + f"; {task} fenced (restarted {self._now() - rec.end_s:.0f} s after the link "
                            "returned)").lstrip("; ")

    def request_add_worker(self) -> None:
        """Add one worker to the running job, from any thread: the coordinator stops at its next
        checkpoint (nothing is lost) and resumes on one more worker, as an ``add_worker`` event does."""
        self._add_requested.set()

    def _drain(self, chief: _Chief | None) -> None:
        while True:
            try:
                kind, data = self._marks.get_nowait()
            except queue.Empty:
                return
            if kind == "progress":
                done = int(data["done"])
                if self.t0 is None:
                    self.t0 = float(data["t"])
                if done > self.done:
                    self.done = done
                self.progress.append((float(data["t"]), done, data.get("loss"), self.chief_runs))
            elif kind in ("result", "stopped") and chief is not None:
                chief.finished_kind = kind
                chief.result = data
            elif kind == "failed" and chief is not None:
                chief.finished_kind = kind


def _split(task: str) -> tuple[str, int]:
    job = "worker" if task.startswith("worker") else "ps"
    return job, int(task[len(job):])
