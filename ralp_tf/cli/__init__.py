"""The ``ralp-tf`` command line: the command modules, argument types, quiet output and progress.

The entry point is :func:`ralp_tf.cli.main.console_main` (``python -m ralp_tf.cli``). Nothing
below this package imports it. Command modules build on the
argument types and the one error path exported here (:mod:`ralp_tf.cli.args`).
"""
from ralp_tf.cli.args import (ExitCode, add_cluster_args, add_output_arg, add_policy_args, bandwidth, check_outputs,
                              cluster_rates, exit_code_for, int_at_least, non_negative_int, policy_options,
                              positive_int, run_command)

__all__ = ["ExitCode", "add_cluster_args", "add_output_arg", "add_policy_args", "bandwidth", "check_outputs",
           "cluster_rates", "exit_code_for", "int_at_least", "non_negative_int", "policy_options", "positive_int",
           "run_command"]
