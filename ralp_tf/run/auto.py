"""``--strategy auto``: train with whichever strategy is fastest on this cluster, ranked then measured.

:func:`train_auto` (``ralp-tf run --strategy auto``, :func:`ralp_tf.fit`):

1. builds and profiles the model once (:func:`ralp_tf.run.training.prepare_model`), plans it with the
   job's policy (default ``ralp``) and ranks every strategy by the cost model
   (:func:`ralp_tf.plan.strategies.rank_strategies`: the PSS plan, stock PSS, the ring);
2. **probes** the top ``probe_count`` strategies that can run, each on its own fresh cluster after the
   usual warm-up, nothing checkpointed: at least ``probe_steps`` measured worker steps, more where the
   cost model predicts them shorter than :data:`PROBE_PREDICTED_S` in all (:func:`probe_steps_for`,
   at most :data:`PROBE_MAX_STEPS`: a budget in steps, the same for the same prediction); the probe's
   samples/s decide (:meth:`~ralp_tf.plan.strategies.StrategyRanking.decide`). ``probe_steps=0``
   trusts the ranking;
3. writes the decision to ``<checkpoint_dir>/strategy.json`` (atomically) before training, so a rerun
   of the same job (after a crash, a kill -9) resumes from the checkpoint **under the strategy it
   chose**, without probing again, as long as the worker count is the one decided for; a rerun on
   another cluster decides again and still resumes (checkpoints hold the unplaced model's
   variables, whatever the strategy);
4. trains with the winner: a PSS strategy on a :class:`~ralp_tf.run.launch.LocalCluster`
   (:func:`ralp_tf.run.training.compare`, with the plan that was ranked), the ring on local
   MultiWorkerMirroredStrategy processes (:func:`ralp_tf.run.ring.train_ring`), with the same
   checkpoints, progress and result record.

:func:`train_auto_on_cluster` does the same on a running cluster (``ralp-tf run --cluster
--strategy auto``): it ranks on the cluster file's hosts, runs a PSS strategy with
:func:`ralp_tf.run.remote.train_on_cluster` (one coordinator in this process per run) and the ring on
the workers' ``ralp-tf server --roles`` (:func:`ralp_tf.run.ring.train_ring_on_cluster`); the ring is
ranked but marked unavailable, with the reason, when a worker's control port does not answer. The
decision file lives in the checkpoint folder, which the chief and every worker/PS host share.

:class:`AutoDecision` is what was decided and why (the ranking, the probe's figures, whether it came
from a rerun's file); ``ralp-tf run --json`` prints it under ``"auto"``.

With a ``calibration`` (``ralp-tf calibrate``'s, of this cluster: refused otherwise) the ranking, the
probes' and the run's predictions price the calibrated cluster and profile
(:func:`ralp_tf.run.calibrated.calibrated_job`), the ring's included.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import tempfile
from typing import Any, Callable, Mapping, Sequence

from ralp_tf.errors import ValidationError, check_int
from ralp_tf.place.policies import plan_with_policy
from ralp_tf.plan.cluster import Cluster, Rates
from ralp_tf.plan.closures import MEASURED_FLOOR
from ralp_tf.plan.strategies import RING_STRATEGIES, StrategyRanking, rank_strategies
from ralp_tf.place.applier import Prepared
from ralp_tf.run.remote import CONNECT_TIMEOUT_S, train_on_cluster
from ralp_tf.run.ring import train_ring, train_ring_on_cluster
from ralp_tf.run.roles import CONTROL_PORT_OFFSET, ring_unavailable_reason
from ralp_tf.run.tfconfig import ClusterConfig
from ralp_tf.run.training import LOOP_OPTIMIZER, RunResult, TrainConfig, compare, prepare_model

__all__ = ["PROBE_STEPS", "PROBE_PREDICTED_S", "PROBE_MAX_STEPS", "probe_steps_for", "PROBE_COUNT", "DECISION_FILE", "HOROVOD_IN_RUN", "AutoDecision", "rank_for_job",
           "read_decision", "train_auto", "train_auto_on_cluster"]

log = logging.getLogger(__name__)
#: The fewest measured worker steps per probed strategy (after its warm-up).
PROBE_STEPS = 6
#: Predicted seconds a probe measures at least (:func:`probe_steps_for`): 10 ms steps are noise for 6 steps.
PROBE_PREDICTED_S = 5.0
#: The most measured worker steps per probe.
PROBE_MAX_STEPS = 200
#: Strategies probed: the top two that can run.
PROBE_COUNT = 2
DECISION_FILE = "strategy.json"
DECISION_FORMAT = "ralp_tf.strategy/1"
#: Why ``ralp-tf run`` does not train with Horovod (the ring runs as MultiWorkerMirroredStrategy).
HOROVOD_IN_RUN = ("ralp-tf run trains the ring with MultiWorkerMirroredStrategy (no mpirun); Horovod runs in "
                  "ralp-tf bench")


@dataclasses.dataclass(frozen=True)
class AutoDecision:
    """The strategy ``auto`` trains with, and why: the ranking, the probe's measured samples/s by
    strategy (empty when none ran), and ``source``: ``"probe"``, ``"ranking"`` (no probe) or
    ``"checkpoint"`` (a rerun read :data:`DECISION_FILE`)."""

    strategy: str
    ranking: StrategyRanking
    measured: Mapping[str, float]
    source: str
    workers: int

    def report(self) -> str:
        why = {"probe": "the faster in the measured probe", "ranking": "the fastest predicted (no probe)",
               "checkpoint": f"chosen before, read from {DECISION_FILE}"}[self.source]
        return self.ranking.report(self.measured) + f"\n  Training with {self.strategy}: {why}."

    def to_dict(self) -> dict[str, Any]:
        return {"format": DECISION_FORMAT, "strategy": self.strategy, "source": self.source, "workers": self.workers,
                **self.ranking.to_dict(self.measured)}


def probe_steps_for(choice: Any, minimum: int = PROBE_STEPS) -> int:
    """Measured worker steps a probe of ``choice`` (a :class:`~ralp_tf.plan.strategies.StrategyChoice`)
    runs: enough for :data:`PROBE_PREDICTED_S` predicted seconds (a worker step takes ``step_s / N`` of
    the whole cluster's time, PSS or ring), at least ``minimum``, at most :data:`PROBE_MAX_STEPS`."""
    e = choice.estimate
    per_step = e.step_s / max(e.num_workers, 1)
    wanted = math.ceil(PROBE_PREDICTED_S / per_step) if per_step > 0 and math.isfinite(per_step) else minimum
    return max(minimum, min(wanted, PROBE_MAX_STEPS))


def rank_for_job(prepared: Prepared, cluster: Cluster, policy: Any = "ralp", *, compression: Any = None,
                 unavailable: Mapping[str, str] | None = None, horovod: str = HOROVOD_IN_RUN) -> StrategyRanking:
    """Plan ``prepared``'s model with ``policy`` on ``cluster`` (the loop's closure floor priced, as a
    job prices it) and rank the strategies; Horovod is marked unavailable with ``horovod``, the reason
    (default :data:`HOROVOD_IN_RUN`; the command line says when Horovod is not installed at all)."""
    if cluster.floor is None:
        cluster = cluster.with_closures(1, MEASURED_FLOOR)
    plan = plan_with_policy(policy, prepared.profile, cluster, compression=compression)[0] if cluster.num_ps else None
    return rank_strategies(prepared.profile, cluster, plan, horovod=horovod or HOROVOD_IN_RUN, unavailable=unavailable)


def read_decision(checkpoint_dir: str | None) -> dict[str, Any] | None:
    """The decision a job recorded in ``checkpoint_dir`` (None: no folder, no file, or not one of ours)."""
    if not checkpoint_dir:
        return None
    try:
        with open(os.path.join(checkpoint_dir, DECISION_FILE)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == DECISION_FORMAT else None


def _write_decision(checkpoint_dir: str, decision: AutoDecision) -> None:
    os.makedirs(checkpoint_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{DECISION_FILE}.", dir=checkpoint_dir)
    with os.fdopen(fd, "w") as f:
        json.dump(decision.to_dict(), f, indent=1, default=str)
    os.replace(tmp, os.path.join(checkpoint_dir, DECISION_FILE))


def _run_one(name: str, model: str, ranking: StrategyRanking, prepared: Prepared, job: Mapping[str, Any],
             *, steps: int, checkpoint_dir: str | None, step_callback: Callable[[str, int], None] | None,
             warmup_steps: int) -> RunResult:
    """Train ``name`` (a strategy of ``ranking``) for ``steps``: a PSS one with its ranked plan on a
    LocalCluster (or on ``job["config"]``'s running cluster), the ring on local processes (or on the
    cluster's role servers)."""
    if job.get("config") is not None:
        return _run_one_on_cluster(name, model, ranking, prepared, job, steps=steps, checkpoint_dir=checkpoint_dir,
                                   step_callback=step_callback, warmup_steps=warmup_steps)
    on_step = (lambda i: step_callback(name, i)) if step_callback else None
    if name in RING_STRATEGIES:
        return train_ring(model, workers=job["workers"], steps=steps, warmup_steps=warmup_steps,
                          batch_size=job["batch_size"], seed=job["seed"], checkpoint_dir=checkpoint_dir,
                          checkpoint_every=job["checkpoint_every"], log_dir=job.get("log_dir"), on_step=on_step,
                          optimizer=job["optimizer"], sequence_length=job.get("sequence_length"),
                          profile=prepared.profile, bandwidth=job.get("bandwidth"), flops=job.get("flops"),
                          cluster=job.get("cluster"))
    plan = ranking.choice(name).plan if name == "pss" else "ps"
    results = compare(model, workers=job["workers"], ps=job["ps"], steps=steps, batch_size=job["batch_size"],
                      bandwidth=job.get("bandwidth"), flops=job.get("flops"), policies=[plan], seed=job["seed"],
                      log_dir=job.get("log_dir"), checkpoint_dir=checkpoint_dir, checkpoint_every=job["checkpoint_every"],
                      warmup_steps=warmup_steps, compression=job.get("compression"),
                      step_callback=(lambda _n, i: step_callback(name, i)) if step_callback else None,
                      sequence_length=job.get("sequence_length"), prepared=prepared,
                      steps_per_closure=job.get("steps_per_closure", 1), optimizer=job["optimizer"],
                      fuse_transfers=job.get("fuse_transfers", False), calibration=job.get("calibration"))
    return next(iter(results.values()))


def _run_one_on_cluster(name: str, model: str, ranking: StrategyRanking, prepared: Prepared, job: Mapping[str, Any],
                        *, steps: int, checkpoint_dir: str | None, step_callback: Callable[[str, int], None] | None,
                        warmup_steps: int) -> RunResult:
    """:func:`_run_one` on the running cluster ``job["config"]``."""
    common = dict(agent_port=job.get("agent_port"), connect_timeout=job["connect_timeout"], rates=job["rates"],
                  checkpoint_dir=checkpoint_dir, steps=steps, warmup_steps=warmup_steps, batch_size=job["batch_size"],
                  seed=job["seed"], checkpoint_every=job["checkpoint_every"], optimizer=job["optimizer"],
                  sequence_length=job.get("sequence_length"), prepared=prepared)
    if name in RING_STRATEGIES:
        return train_ring_on_cluster(job["config"], model, control_offset=job["control_offset"],
                                     calibration=job.get("calibration"),
                                     on_step=(lambda i: step_callback(name, i)) if step_callback else None, **common)
    plan = ranking.choice(name).plan if name == "pss" else "ps"
    results = train_on_cluster(job["config"], model, policies=[plan], compression=job.get("compression"),
                               steps_per_closure=job.get("steps_per_closure", 1),
                               fuse_transfers=job.get("fuse_transfers", False),
                               calibration=job.get("calibration"),
                               step_callback=(lambda _n, i: step_callback(name, i)) if step_callback else None,
                               **common)
    return next(iter(results.values()))


def _checked_builder(model: Any, probe_steps: int, probe_count: int) -> Any:
    """``model``'s builder, once an auto job's arguments are checked (ValidationError naming the bad one)."""
    from ralp_tf.model.builtin import resolve_model

    if not isinstance(model, str):
        raise ValidationError("--strategy auto may train the ring, whose processes each build the model: pass a "
                              "built-in name or 'module:function', not a Python object")
    check_int(probe_steps, "probe_steps", minimum=0)
    check_int(probe_count, "probe_count")
    return resolve_model(model)


def train_auto(model: str, *, workers: int = 2, ps: int = 1, steps: int = 30, batch_size: int = 32,
               bandwidth: Any = None, flops: Any = None, policy: Any = "ralp", seed: int = 0,
               log_dir: str | None = None, checkpoint_dir: str | None = None, checkpoint_every: int = 10,
               warmup_steps: int = 3, compression: Any = None, sequence_length: int | None = None,
               steps_per_closure: int = 1, optimizer: str = LOOP_OPTIMIZER, fuse_transfers: bool = False,
               probe_steps: int = PROBE_STEPS, probe_count: int = PROBE_COUNT,
               step_callback: Callable[[str, int], None] | None = None,
               on_decision: Callable[[AutoDecision], None] | None = None,
               horovod: str = HOROVOD_IN_RUN, calibration: Any = None) -> tuple[dict[str, RunResult], AutoDecision]:
    """Rank, probe, record and train (module docstring) ``model`` (a built-in name or
    ``module:function``: the ring's processes build it too) on a local cluster of ``workers`` workers
    and ``ps`` PS tasks. Returns ``({strategy: RunResult}, decision)``; ``on_decision`` sees the
    decision before the training run starts. ``step_callback(strategy, step)`` reports progress of the
    probes and of the run; ``horovod`` is why Horovod does not run (:func:`rank_for_job`);
    ``calibration`` (of a local cluster of this shape on this machine) prices it all."""
    builder = _checked_builder(model, probe_steps, probe_count)
    job = {"workers": workers, "ps": ps, "batch_size": batch_size, "seed": seed, "checkpoint_every": checkpoint_every,
           "log_dir": log_dir, "optimizer": optimizer, "sequence_length": sequence_length, "bandwidth": bandwidth,
           "flops": flops, "compression": compression, "steps_per_closure": steps_per_closure,
           "fuse_transfers": fuse_transfers}
    prepared = prepare_model(builder, TrainConfig(batch_size=batch_size, seed=seed, sequence_length=sequence_length,
                                                  optimizer=optimizer))
    rates = Rates(bandwidth, flops).kwargs()
    cluster = Cluster.local(workers, ps, **rates)
    if calibration is not None:
        from ralp_tf.run.calibrated import calibrated_job

        prepared.profile, cluster = calibrated_job(calibration, cluster, prepared.profile, rates=rates)
        job.update(calibration=calibration, cluster=cluster)
    ranking = rank_for_job(prepared, cluster, policy, compression=compression, horovod=horovod)
    return _decide_and_train(model, ranking, prepared, job, checkpoint_dir=checkpoint_dir, steps=steps,
                             probe_steps=probe_steps, probe_count=probe_count, step_callback=step_callback,
                             on_decision=on_decision, warmup_steps=warmup_steps)


def train_auto_on_cluster(config: ClusterConfig, model: str, *, steps: int = 30, batch_size: int = 32,
                          policy: Any = "ralp", seed: int = 0, checkpoint_dir: str | None = None,
                          checkpoint_every: int = 10, warmup_steps: int = 3, compression: Any = None,
                          sequence_length: int | None = None, steps_per_closure: int = 1,
                          optimizer: str = LOOP_OPTIMIZER, fuse_transfers: bool = False,
                          probe_steps: int = PROBE_STEPS, probe_count: int = PROBE_COUNT,
                          agent_port: int | None = None, connect_timeout: float = CONNECT_TIMEOUT_S,
                          control_offset: int = CONTROL_PORT_OFFSET, rates: Mapping[str, Any] | None = None,
                          horovod: str = HOROVOD_IN_RUN, step_callback: Callable[[str, int], None] | None = None,
                          on_decision: Callable[[AutoDecision], None] | None = None, calibration: Any = None
                          ) -> tuple[dict[str, RunResult], AutoDecision]:
    """:func:`train_auto` on the running cluster ``config`` (module docstring): ranked on its hosts at
    ``rates`` (the file's, the command line's winning), probed and trained there; ``agent_port`` reads
    bytes from ``ralp-tf agent``; ``control_offset`` is the role servers' ``--control-port-offset``;
    ``calibration`` (of this cluster; its device kinds checked when a PSS run connects) prices it all."""
    from ralp_tf.run.remote import wait_reachable

    builder = _checked_builder(model, probe_steps, probe_count)
    wait_reachable(config.spec, connect_timeout)  # before TF is imported: an unreachable cluster fails fast
    ring_why = ring_unavailable_reason(config, control_offset)
    workers = len(config.spec.get("worker", []))
    job = {"config": config, "workers": workers, "ps": len(config.spec.get("ps", [])), "batch_size": batch_size,
           "seed": seed, "checkpoint_every": checkpoint_every, "optimizer": optimizer, "sequence_length": sequence_length,
           "compression": compression, "steps_per_closure": steps_per_closure, "fuse_transfers": fuse_transfers,
           "agent_port": agent_port, "connect_timeout": connect_timeout, "control_offset": control_offset,
           "rates": dict(rates or {})}
    prepared = prepare_model(builder, TrainConfig(batch_size=batch_size, seed=seed, sequence_length=sequence_length,
                                                  optimizer=optimizer))
    unavailable = {"mwms": ring_why} if ring_why else None
    cluster = config.cost_cluster(**job["rates"])
    if calibration is not None:  # its devices are checked once a PSS run connects (train_on_cluster)
        from ralp_tf.run.calibrated import calibrated_job

        prepared.profile, cluster = calibrated_job(calibration, cluster, prepared.profile, rates=job["rates"])
        job.update(calibration=calibration, cluster=cluster)
    ranking = rank_for_job(prepared, cluster, policy, compression=compression, unavailable=unavailable,
                           horovod=horovod)
    return _decide_and_train(model, ranking, prepared, job, checkpoint_dir=checkpoint_dir, steps=steps,
                             probe_steps=probe_steps, probe_count=probe_count, step_callback=step_callback,
                             on_decision=on_decision, warmup_steps=warmup_steps)


def _decide_and_train(model: str, ranking: StrategyRanking, prepared: Prepared, job: Mapping[str, Any], *,
                      checkpoint_dir: str | None, steps: int, probe_steps: int, probe_count: int,
                      step_callback: Callable[[str, int], None] | None,
                      on_decision: Callable[[AutoDecision], None] | None,
                      warmup_steps: int) -> tuple[dict[str, RunResult], AutoDecision]:
    """Steps 2-4 of the module docstring, for a local or a running cluster (``job["config"]``)."""
    log.info("%s", ranking.report())
    decision = _decide(model, ranking, prepared, job, checkpoint_dir, probe_steps, probe_count, step_callback,
                       warmup_steps)
    if on_decision:
        on_decision(decision)
    if checkpoint_dir:
        _write_decision(checkpoint_dir, decision)
    result = _run_one(decision.strategy, model, ranking, prepared, job, steps=steps, checkpoint_dir=checkpoint_dir,
                      step_callback=step_callback, warmup_steps=warmup_steps)
    return {decision.strategy: result}, decision


def _decide(model: str, ranking: StrategyRanking, prepared: Prepared, job: Mapping[str, Any],
            checkpoint_dir: str | None, probe_steps: int, probe_count: int,
            step_callback: Callable[[str, int], None] | None, warmup_steps: int) -> AutoDecision:
    """The recorded decision of a rerun on the same worker count, else the probe's, else the ranking's."""
    recorded = read_decision(checkpoint_dir)
    names = {c.name for c in ranking.available}
    if recorded and recorded.get("strategy") in names and recorded.get("workers") == job["workers"]:
        measured = {k: float(v) for k, v in (recorded.get("probe_samples_per_s") or {}).items()}
        return AutoDecision(recorded["strategy"], ranking, measured, "checkpoint", job["workers"])
    order: Sequence[str] = ranking.probe_order(probe_count) if probe_steps else ()
    if len(order) < 2:
        return AutoDecision(ranking.best.name, ranking, {}, "ranking", job["workers"])
    measured: dict[str, float] = {}
    for name in order:
        steps = probe_steps_for(ranking.choice(name), probe_steps)
        log.info("probe: %s for %d steps", name, steps)
        result = _run_one(name, model, ranking, prepared, job, steps=steps, checkpoint_dir=None,
                          step_callback=(lambda n, i: step_callback(f"probe {n}", i)) if step_callback else None,
                          warmup_steps=warmup_steps)
        measured[name] = result.samples_per_s
    return AutoDecision(ranking.decide(measured), ranking, measured, "probe", job["workers"])
