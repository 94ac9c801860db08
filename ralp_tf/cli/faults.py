"""Command lines of the fault tools: ``ralp-tf chaos`` and the supervised mode of ``ralp-tf run``.

``ralp-tf run`` with ``--restart-failed``, ``--add-worker-at STEP`` or ``--fault SPEC`` runs under
the :class:`~ralp_tf.faults.supervisor.Supervisor` (see :func:`add_run_args`). A plan with link
faults needs the namespace testbed (root): ``run`` then builds one (a host per task, links at
``--bandwidth``, default 1gbit); without root it stops with
:class:`~ralp_tf.faults.plan.LinkFaultUnavailable`, since the loopback fallback cannot emulate a
link fault.

``ralp-tf chaos --minutes M --seed S`` trains a placed model on the namespace testbed while the
seeded schedule of :func:`~ralp_tf.faults.plan.chaos_plan` plays (worker kills, a PS kill, a link
down for 5-20 s, a throttle to a tenth of the rate), with every failed task restarted. It stops by
itself at the first checkpoint after ``M`` minutes of training (every fault has ended by then),
and prints each fault with its recovery, the steps lost, the final loss and what was left behind
(task processes, namespaces). Exit 0 when the run completed with a finite loss and nothing left
behind, else 3.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ralp_tf.cli.args import add_output_arg, non_negative_int, policy_options, positive_int
from ralp_tf.errors import CommandFailed
from ralp_tf.faults.hosts import host_budgets, supervised_hosts
from ralp_tf.faults.plan import FaultPlan, FaultPlanError, LinkFaultUnavailable, chaos_plan
from ralp_tf.faults.restart import RestartPolicy

__all__ = ["TESTBED_PREFIX", "add_run_args", "supervised_requested", "plan_from_args", "run_supervised",
           "supervise", "register", "cmd_chaos"]

TESTBED_PREFIX = "ralpft"


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """The supervised-mode flags of ``ralp-tf run``."""
    g = parser.add_argument_group("faults (a supervised run: the coordinator is a child process)")
    g.add_argument("--restart-failed", action="store_true",
                   help="restart a PS or worker task that dies, on the same address; after a PS failure a fresh "
                        "coordinator resumes from the latest checkpoint")
    g.add_argument("--max-restarts", type=non_negative_int, default=3,
                   help="restarts allowed per task with --restart-failed (default 3; backoff 1 s, doubling)")
    g.add_argument("--add-worker-at", type=positive_int, action="append", default=[], metavar="STEP",
                   help="add one worker at this step (checkpoint, then resume on N+1 workers; repeatable)")
    g.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="a fault to play, e.g. link_down:worker1,at=20s,for=10s or throttle:worker0,at=15,"
                        "for=20s,rate=1/10 or kill:ps0,at=17 (repeatable; link faults need root)")
    g.add_argument("--fault-plan", metavar="FILE", help="faults as a JSON list (see ralp_tf.faults.plan)")
    g.add_argument("--host-cpu", type=float, default=None, metavar="CORES",
                   help="run on the namespace testbed (root) with a CPU budget of CORES for every emulated host "
                        "(cgroup v1 quota): each worker, those that join included, each PS and the coordinator; "
                        "the sum over all of them must fit this machine's cores. Default: no budgets")


def supervised_requested(args: argparse.Namespace) -> bool:
    """Whether ``run``'s arguments ask for the supervised mode."""
    return bool(args.restart_failed or args.add_worker_at or args.fault or args.fault_plan
                or getattr(args, "host_cpu", None) is not None)


def plan_from_args(args: argparse.Namespace) -> FaultPlan:
    """The fault plan of ``run``'s arguments (``--fault``, ``--fault-plan``, ``--add-worker-at`` and,
    with ``--restart-failed``, ``--inject-fault`` as a kill)."""
    from ralp_tf.errors import read_json_file

    plan = FaultPlan.parse(args.fault)
    if args.fault_plan:
        plan = FaultPlan(plan.events + FaultPlan.from_list(read_json_file(args.fault_plan, FaultPlanError,
                                                                          "fault plan")).events)
    extra = [f"add_worker,at={s}" for s in args.add_worker_at]
    if getattr(args, "inject_fault", None):
        job, index, step = args.inject_fault
        extra.append(f"kill:{job}{index},at={step}")
    return FaultPlan(plan.events + FaultPlan.parse(extra).events)


def run_supervised(args: argparse.Namespace) -> int:
    """``ralp-tf run`` in supervised mode: print the fault table (``--json``: the report)."""
    from ralp_tf.plan.cluster import format_bandwidth

    if getattr(args, "cluster", None):
        raise FaultPlanError("--restart-failed, --add-worker-at and --fault supervise local task processes; they "
                             "cannot be used with --cluster (tasks started elsewhere)")
    if args.compare:
        raise FaultPlanError("--compare runs two policies one after the other; a supervised run (--restart-failed, "
                             "--add-worker-at, --fault) takes one --policy")
    if args.restart_failed and args.max_restarts == 0:
        RestartPolicy(0)  # raises the clear error
    restart = RestartPolicy(args.max_restarts) if args.restart_failed else None
    plan = plan_from_args(args)
    budgets = host_budgets(args.host_cpu, args.workers, args.ps, plan.joins)  # before anything starts
    emulated = plan.has_link_faults or budgets is not None
    if emulated:
        from ralp_tf.testbed.netns import netns_support

        emulated, why = netns_support()
        if budgets is not None:
            from ralp_tf.testbed._cgroups import cpu_controller_support
            from ralp_tf.testbed.base import TestbedError

            if emulated:
                emulated, why = cpu_controller_support()
            if not emulated:
                raise TestbedError(f"--host-cpu gives every emulated host a CPU budget on the namespace testbed, "
                                   f"which is not available here: {why}. The loopback fallback has one machine's "
                                   "cores for all tasks; run without --host-cpu")
    plan.validate(workers=args.workers, ps=args.ps, emulated=emulated, restart=restart is not None)
    bandwidth = format_bandwidth(args.bandwidth) if args.bandwidth is not None else "1gbit"
    report = supervise(model=args.model, policy=args.policy, workers=args.workers, ps=args.ps, steps=args.steps,
                       batch_size=args.batch_size, plan=plan, restart=restart, testbed=emulated,
                       bandwidth=bandwidth, seed=args.seed, log_dir=args.log_dir,
                       checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                       compression=args.compression, policy_options=policy_options(args), host_cpu=args.host_cpu,
                       steps_per_closure=args.steps_per_closure, optimizer=args.optimizer)
    _print(report, args.json)
    return 0


def supervise(*, testbed: bool, bandwidth: str, host_cpu: float | None = None, **kw: Any) -> Any:
    """Run a :class:`~ralp_tf.faults.supervisor.Supervisor` (inside a fresh namespace testbed when
    ``testbed``, with ``host_cpu`` cores of CPU budget per host when given: :mod:`ralp_tf.faults.hosts`)
    and return its report with ``leftovers`` checked after teardown (processes; namespaces and CPU
    groups of the testbed's prefix)."""
    from ralp_tf.faults.supervisor import Supervisor, leftovers

    if not testbed:
        if host_cpu is not None:
            raise FaultPlanError("host_cpu budgets need the namespace testbed (testbed=True)")
        sup = Supervisor(bandwidth=bandwidth, **kw)
        report = sup.run()
        report.leftovers = leftovers(sup.pids)
        return report
    from ralp_tf.testbed import Testbed

    plan = kw.get("plan") or FaultPlan()
    budgets = host_budgets(host_cpu, kw["workers"], kw["ps"], plan.joins)
    with Testbed(supervised_hosts(kw["workers"], kw["ps"], plan.joins), bandwidth, prefix=TESTBED_PREFIX,
                 host_cpu=budgets) as tb:
        sup = Supervisor(testbed=tb, bandwidth=bandwidth, **kw)
        report = sup.run()
    report.host_cpu = budgets
    report.leftovers = leftovers(sup.pids, TESTBED_PREFIX)
    return report


def _print(report: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.table())


def register(subparsers: Any) -> None:
    """Add ``chaos`` to the ``ralp-tf`` parser."""
    c = subparsers.add_parser("chaos", help="train on the namespace testbed while a seeded schedule of faults plays "
                                            "(needs root)")
    c.add_argument("--minutes", type=float, default=10.0, help="training time; faults play in its first 85%% "
                                                               "(default 10)")
    c.add_argument("--seed", type=int, default=0, help="seed of the fault schedule (default 0)")
    c.add_argument("--faults", type=positive_int, default=None,
                   help="number of faults (default: one per minute of the fault window, at least 4)")
    c.add_argument("--model", default="alexnet_cifar")
    c.add_argument("--policy", default="ralp")
    c.add_argument("--workers", type=int, default=2, help="worker tasks (default 2; at least 2)")
    c.add_argument("--ps", type=positive_int, default=1)
    c.add_argument("--batch-size", type=positive_int, default=32)
    c.add_argument("--bandwidth", default="1gbit", help="link rate of every host (default 1gbit)")
    c.add_argument("--checkpoint-every", type=positive_int, default=10)
    c.add_argument("--max-restarts", type=positive_int, default=5, help="restarts per task (default 5)")
    add_output_arg(c, "--log-dir", kind="dir", default=None, help="where task logs go")
    c.add_argument("--dry-run", action="store_true", help="print the schedule and exit")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_chaos, needs_loopback_shim=False)


def cmd_chaos(args: argparse.Namespace) -> int:
    """``ralp-tf chaos``: see the module docstring."""
    from ralp_tf.plan.cluster import format_bandwidth, parse_bandwidth
    from ralp_tf.testbed.netns import netns_support

    plan = chaos_plan(args.seed, args.minutes, workers=args.workers, ps=args.ps, faults=args.faults)
    rate = parse_bandwidth(args.bandwidth)
    if math.isinf(rate):
        raise FaultPlanError("a chaos run throttles links to a tenth of their rate: give a finite --bandwidth, "
                             "e.g. 1gbit")
    if args.dry_run:
        for e in plan.events:
            print(e.describe())
        return 0
    ok, why = netns_support()
    if not ok:
        raise LinkFaultUnavailable(f"ralp-tf chaos needs the namespace testbed: {why}. The loopback fallback "
                                   "cannot emulate link faults")
    seconds = args.minutes * 60.0
    report = supervise(model=args.model, policy=args.policy, workers=args.workers, ps=args.ps,
                       steps=10 ** 7, batch_size=args.batch_size, plan=plan,
                       restart=RestartPolicy(args.max_restarts), testbed=True, bandwidth=format_bandwidth(rate),
                       seed=args.seed, log_dir=args.log_dir, checkpoint_every=args.checkpoint_every,
                       stop_after_s=seconds, timeout_s=seconds + 900.0)
    _print(report, args.json)
    left = any(report.leftovers.values())
    finite = report.final_loss is not None and math.isfinite(report.final_loss)
    if left or not finite:
        raise CommandFailed(f"chaos run {'left ' + str(report.leftovers) + ' behind' if left else ''}"
                            f"{' and ' if left and not finite else ''}"
                            f"{'ended without a finite loss' if not finite else ''}")
    return 0

