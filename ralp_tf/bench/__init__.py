r"""``ralp-tf bench``: RALP against stock PSS, a scheduler plan, ring all-reduce and Horovod,
measured side by side on an emulated cluster with bandwidth-capped links.
The command itself is :mod:`ralp_tf.cli.bench`.

The package sits on the testbed (:mod:`ralp_tf.testbed`); the core modules never import it. Its
modules, in the order data flows through them:

===============  ==============================================================================
``config``       the matrix (``model x workers x bandwidth``, 1 PS) and :class:`BenchConfig`
``predictions``  the profiling child process, ``compute_scale``, cost-model predictions and the
                 scheduler's plan (through the ``scheduler.<solver>`` placement policy)
``quota_profile`` a profile under a host's CPU budget: unthrottled layer shares calibrated to
                 whole steps timed under the quota
``run``          :class:`Bench`: one testbed per cell, every strategy on it, repetitions
                 interleaved, the results file rewritten after every run
``progress``     progress and ETA lines on stderr
``records``      the run / strategy / cell records and their medians (``to_dict``/``from_dict``)
``targets``      the pass/fail goals, read from ``benchmarks/targets.json``
``report``       README tables, the ``--json`` object; ``plots``: the PNG plots
===============  ==============================================================================

``python -m ralp_tf.bench _profile MODEL BATCH OUT`` is the profiling helper (``__main__``).
The results file and ``--json`` schema: docs/bench.md.
"""
from __future__ import annotations

from ralp_tf.bench.config import (DEFAULT_BANDWIDTHS, DEFAULT_MODELS, DEFAULT_STRATEGIES, DEFAULT_WORKERS,
                                  MEM_PER_TASK_GIB, NUM_PS, PS_STRATEGIES, QUICK, RING_STRATEGIES, STRATEGIES,
                                  BenchConfig, BenchConfigError, BenchError, Cell, config_from_args, max_workers,
                                  parse_bandwidths, parse_cell, parse_models, parse_strategies, parse_workers)
from ralp_tf.bench.predictions import cell_cluster, compute_scale, measure_profile, predictions, scheduler_plan
from ralp_tf.bench import quota_profile
from ralp_tf.bench.progress import Progress
from ralp_tf.bench.records import CellRecord, RunRecord, StrategySummary, summarize_strategy
from ralp_tf.bench.report import README_BEGIN, README_END, markdown_tables, strategy_json, update_readme, \
    write_report
from ralp_tf.bench.run import Bench, choose_steps, machine_info
from ralp_tf.bench.targets import Target, TargetsError, evaluate_targets, load_targets, targets

__all__ = [
    "Bench", "BenchConfig", "BenchConfigError", "BenchError", "Cell", "CellRecord", "DEFAULT_BANDWIDTHS",
    "DEFAULT_MODELS", "DEFAULT_STRATEGIES", "DEFAULT_WORKERS", "MEM_PER_TASK_GIB", "NUM_PS", "PS_STRATEGIES",
    "Progress", "QUICK", "README_BEGIN", "README_END", "RING_STRATEGIES", "RunRecord", "STRATEGIES",
    "StrategySummary", "Target", "TargetsError", "cell_cluster", "choose_steps", "compute_scale",
    "config_from_args", "evaluate_targets", "load_targets", "machine_info", "markdown_tables", "max_workers",
    "measure_profile", "parse_bandwidths", "parse_cell", "parse_models", "parse_strategies", "parse_workers",
    "predictions", "quota_profile", "scheduler_plan", "strategy_json", "summarize_strategy",
    "targets", "update_readme", "write_report",
]
