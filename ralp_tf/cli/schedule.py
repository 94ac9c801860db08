"""``ralp-tf schedule``, ``ralp-tf compare-schedulers`` and ``ralp-tf execute-schedule`` 
(:mod:`scheduler.execution.execute`).

:func:`register` adds the subcommands to an argparse ``subparsers`` object (``ralp-tf``
lists this module in :data:`ralp_tf.cli.main.COMMAND_MODULES`). Handlers return 0 or raise; errors
go through :func:`ralp_tf.cli.args.run_command` like every ralp_tf command's: bad input exits 2,
no schedule meeting the constraints (:class:`~scheduler.core.errors.InfeasibleError`) exits 3.
``python -m ralp_tf.cli.schedule`` runs them stand-alone. The logic lives in ``scheduler``
(this module only parses and prints).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import Any

from ralp_tf.cli.args import add_output_arg, int_at_least, run_command
from ralp_tf.errors import CommandFailed

__all__ = ["cmd_schedule", "cmd_compare", "cmd_execute", "add_execute_parser", "register", "main"]


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
    from scheduler.core.catalogs import get_catalog
    from scheduler.core.errors import InfeasibleError
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
    from scheduler.evaluation.compare import run_comparison

    run_comparison(out_dir=args.out_dir, rl_iterations=args.rl_iterations, workloads=args.workloads,
                   solvers=args.solvers, seed=args.seed, quick=args.quick, log=print)
    return 0


def register(subparsers: Any) -> None:
    """Add ``schedule`` and ``compare-schedulers`` to an argparse subparsers object."""
    from scheduler import SOLVERS
    from scheduler.core.catalogs import CATALOGS
    from scheduler.evaluation.compare import DEFAULT_SOLVERS, SOLVER_ORDER

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

    add_execute_parser(subparsers)


def add_execute_parser(subparsers: Any) -> None:
    """Add ``execute-schedule`` to an argparse subparsers object (:func:`register`)."""
    from scheduler import SOLVERS
    from scheduler.execution.emulated import builtin_catalogs
    from scheduler.execution.unitrate import DEFAULT_CACHE_DIR

    p = subparsers.add_parser(
        "execute-schedule", help="solve, provision and run a HeterPS schedule on emulated heterogeneous hardware",
        description="Measure the model under each emulated type's CPU quota, solve the HeterPS problem restricted "
                    "to what ParameterServerStrategy runs, provision the units with the cost model, run real PSS "
                    "training on the namespace testbed (root) and report measured samples/s and $/M samples next to "
                    "the predictions, beside greedy and 'all on the fastest type'.")
    p.add_argument("--workload", required=True, help="built-in ralp_tf model (ralp_tf.model.builtin), e.g. ctr_head")
    p.add_argument("--catalog", required=True,
                   help=f"emulated catalog: built-in ({', '.join(builtin_catalogs())}) or a JSON path")
    p.add_argument("--throughput", type=float, required=True, help="minimum samples/s the schedule must reach")
    p.add_argument("--solver", default="exact", choices=sorted(SOLVERS), help="the solver whose schedule is run")
    p.add_argument("--compare", nargs="*", default=["greedy"], choices=sorted(SOLVERS),
                   help="more solvers to run beside it (the fastest-type row is always added)")
    p.add_argument("--batch", type=int_at_least(1), default=32, help="batch per worker step")
    p.add_argument("--steps", type=int_at_least(1), default=20, help="measured global steps per run (at least)")
    p.add_argument("--window-s", type=float, default=15.0,
                   help="more steps where needed so that each run's predicted measured window lasts this long")
    p.add_argument("--warmup", type=int_at_least(1), default=3, help="untimed global steps first")
    p.add_argument("--rl-iterations", type=int_at_least(1), default=None,
                   help="RL: REINFORCE iterations fine-tuning the shipped policy (when --solver/--compare has rl)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--predict-only", action="store_true", help="stop after the predictions (no testbed run)")
    add_output_arg(p, "--out-dir", kind="dir", default="/tmp/ralp_tf_execute", help="plans, logs and execution.json")
    add_output_arg(p, "--cache-dir", kind="dir", default=DEFAULT_CACHE_DIR,
                   help="measured rates per (model, batch, quota)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_execute)


def _execute_solver(name: str, args: Any) -> Any:
    import scheduler

    kw: dict[str, Any] = {"seed": args.seed}
    if name == "rl" and args.rl_iterations is not None:
        kw["iterations"] = args.rl_iterations
    return scheduler.SOLVERS[name](**kw)


def cmd_execute(args: Any) -> int:
    """The ``execute-schedule`` handler: run the pipeline, print the tables (or JSON), save JSON."""
    from scheduler.core.schedule import _clean
    from scheduler.execution.emulated import load_catalog
    from scheduler.execution.execute import FASTEST, execute_schedule, format_rates, save_report

    catalog = load_catalog(args.catalog)
    log = (lambda s: print(s, file=sys.stderr, flush=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the warnings are printed below and kept in the report
        report = execute_schedule(
            args.workload, catalog, args.throughput, solver=_execute_solver(args.solver, args),
            compare=[(c, _execute_solver(c, args)) for c in args.compare if c != args.solver],
            batch_size=args.batch, steps=args.steps, warmup=args.warmup, window_s=args.window_s,
            run=not args.predict_only,
            out_dir=args.out_dir, cache_dir=args.cache_dir, log=log)
    os.makedirs(args.out_dir, exist_ok=True)
    save_report(report, os.path.join(args.out_dir, "execution.json"))
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(_clean(report.to_dict()), indent=2))
    else:
        print(format_rates(report))
        print()
        print(report.markdown())
        for label, c in report.comparison().items():
            if label != FASTEST:
                print(f"{label}: cost vs all-on-fastest "
                      + ", ".join(f"{k.split('_')[0]} {v:.3f}" for k, v in c.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ralp_tf.cli.schedule schedule|compare-schedulers|execute-schedule ...``: parse and run through the
    error path and exit codes of every ralp_tf command (:func:`ralp_tf.cli.args.run_command`)."""
    ap = argparse.ArgumentParser(prog="python -m ralp_tf.cli.schedule")
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    args = ap.parse_args(argv)
    return run_command(args.func, args, prog=ap.prog)


if __name__ == "__main__":
    raise SystemExit(main())
