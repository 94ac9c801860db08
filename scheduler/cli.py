"""``ralp-tf schedule``, ``ralp-tf compare-schedulers`` and ``ralp-tf execute-schedule`` (:mod:`scheduler.execute`).

:func:`register` adds the subcommands to an argparse ``subparsers`` object (``ralp-tf``
lists this module in :data:`ralp_tf.cli.main.COMMAND_MODULES`). Handlers return 0 or raise; errors
go through :func:`ralp_tf.cli.args.run_command` like every ralp_tf command's: bad input exits 2,
no schedule meeting the constraints (:class:`~scheduler.errors.InfeasibleError`) exits 3.
``python -m scheduler.cli`` runs them stand-alone.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from ralp_tf.cli import add_output_arg, int_at_least, run_command
from ralp_tf.errors import CommandFailed

__all__ = ["cmd_schedule", "cmd_compare", "register", "main"]


def _solver(name: str, args: argparse.Namespace) -> Any:
    import scheduler

    cls = scheduler.SOLVERS[name]
    kw: dict[str, Any] = {"seed": args.seed}
    if name == "rl":
        kw.update(train=args.rl_train, iterations=args.rl_iterations, polish=args.polish,
                  max_solve_seconds=args.rl_max_seconds)
    return cls(**kw)



def cmd_schedule(args: argparse.Namespace) -> int:
    """Solve one workload with one solver; print the Schedule (JSON with --json)."""
    from scheduler.catalogs import get_catalog
    from scheduler.errors import InfeasibleError
    from scheduler.workloads import load_workload

    try:
        problem = load_workload(args.workload, catalog=get_catalog(args.catalog), throughput=args.throughput,
                                budget=args.budget)
        schedule = _solver(args.solver, args).solve(problem)
    except InfeasibleError as exc:
        raise CommandFailed(str(exc)) from exc
    if args.plan_out and schedule.objective_name == "cost":
        schedule.to_plan().save(args.plan_out)
    if args.json:
        print(json.dumps(schedule.to_dict(), indent=2))
    else:
        print(schedule.summary())
        if schedule.notes.get("policy_objective") is not None:
            print(f"  policy alone (before the polish): {schedule.objective_name} "
                  f"{schedule.notes['policy_objective']:.6g}" + ("" if schedule.notes.get("polished") else
                                                                 " (no polish: this is the schedule)"))
        for st in schedule.stages:
            print(f"  {st.first} .. {st.last} ({st.num_layers} layers): {st.units} x {st.type}, "
                  f"{st.rate:.4g} samples/s")
        if schedule.objective_name == "cost":
            print("TF_CONFIG cluster:", json.dumps(schedule.tf_config_cluster()))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Every solver on every built-in and shared workload; JSON, Markdown table and PNG chart."""
    from scheduler.compare import run_comparison

    run_comparison(out_dir=args.out_dir, rl_iterations=args.rl_iterations, workloads=args.workloads,
                   solvers=args.solvers, seed=args.seed, quick=args.quick, log=print)
    return 0


def register(subparsers: Any) -> None:
    """Add ``schedule`` and ``compare-schedulers`` to an argparse subparsers object."""
    from scheduler import SOLVERS
    from scheduler.catalogs import CATALOGS
    from scheduler.compare import DEFAULT_SOLVERS, SOLVER_ORDER

    p = subparsers.add_parser("schedule", help="place a workload's layers on heterogeneous resources (HeterPS)",
                              description="Solve one workload with one solver and print the schedule.")
    p.add_argument("--workload", required=True,
                   help="built-in name (alexnet, vgg16, resnet, ctr_dnn, matchnet, word2vec_nce), a shared "
                        "dnn-partitioning name (bert24_inference, ...) or a JSON path")
    p.add_argument("--solver", required=True, choices=sorted(SOLVERS))
    p.add_argument("--throughput", type=float, default=None,
                   help="minimum samples/s (default: 25%% of the best achievable, HeterPS workloads)")
    p.add_argument("--budget", type=float, default=None, help="maximum $/hour of all units")
    p.add_argument("--catalog", default="cloud",
                   help=f"built-in catalog ({', '.join(sorted(CATALOGS))}) or a catalog JSON file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rl-iterations", type=int_at_least(1), default=None,
                   help="RL: REINFORCE iterations of 32 episodes that fine-tune the shipped policy on this workload "
                        "(with --rl-train: the budget from scratch, default min(2000, ceil(24000 / decisions))); "
                        "the same seed and budget give the same schedule. Default: the shipped policy, no training")
    p.add_argument("--rl-train", action="store_true",
                   help="RL: train the paper's policy from scratch on this workload instead of the shipped one")
    p.add_argument("--rl-max-seconds", type=float, default=900.0,
                   help="RL wall-clock safety cap of the whole solve (reported in notes.time_cap_cut when it cuts)")
    p.add_argument("--polish", action="store_true", help="RL: run the local polish after the policy")
    p.add_argument("--no-polish", action="store_true",
                   help="RL: return the policy's own placement (the default; kept for older scripts)")
    add_output_arg(p, "--plan-out", default=None, help="also write the ralp_tf Plan JSON here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_schedule)

    c = subparsers.add_parser("compare-schedulers", help="run every solver on every workload; table and chart",
                              description="Writes results/schedulers.json, schedulers.md and schedulers.png.")
    add_output_arg(c, "--out-dir", kind="dir", default="benchmarks", help="folder for schedulers.md/.png and results/")
    c.add_argument("--rl-iterations", type=int_at_least(1), default=None,
                   help="rl_train: training budget per workload, in iterations of 32 episodes (default: min(2000, "
                        "ceil(24000 / decisions)))")
    c.add_argument("--workloads", nargs="*", default=None,
                   help="subset of workloads (names, or NAME@CATALOG for the HeterPS-scale ones)")
    c.add_argument("--solvers", nargs="*", default=None, choices=SOLVER_ORDER,
                   help=f"subset of solvers (default: {' '.join(DEFAULT_SOLVERS)})")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--quick", action="store_true", help="small budgets (a smoke run)")
    c.set_defaults(func=cmd_compare)

    from scheduler.execute import add_parser as add_execute_parser

    add_execute_parser(subparsers)


def main(argv: list[str] | None = None) -> int:
    """``python -m scheduler.cli schedule|compare-schedulers ...``: parse and run through the
    error path and exit codes of every ralp_tf command (:func:`ralp_tf.cli.args.run_command`)."""
    ap = argparse.ArgumentParser(prog="python -m scheduler.cli")
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    args = ap.parse_args(argv)
    return run_command(args.func, args, prog=ap.prog)


if __name__ == "__main__":
    raise SystemExit(main())
