"""Every public name users import keeps working: ralp_tf's own, its packages', and the module paths
of earlier releases (ralp_tf.models, ralp_tf.train, ...)."""
from __future__ import annotations

import importlib

import pytest

import ralp_tf

PACKAGES = ["ralp_tf.model", "ralp_tf.plan", "ralp_tf.place", "ralp_tf.run", "ralp_tf.cli", "ralp_tf.bench",
            "ralp_tf.testbed", "ralp_tf.errors"]
#: Names the README and the docs show users, by module.
DOCUMENTED = {
    "ralp_tf": ["placement", "place", "unplace", "profile", "analyze", "Plan", "Cluster", "LocalCluster",
                "verify_placement", "register_layer_kind", "ModelProfile", "Analysis", "parse_bandwidth"],
    "ralp_tf.models": ["alexnet_cifar", "vgg16_cifar", "resnet_cifar", "ctr_dnn", "small_cnn", "transfer_classifier",
                       "resolve_model", "synthetic_batch", "per_sample_loss", "weights_checksum", "BUILTIN_MODELS"],
    "ralp_tf.train": ["train", "compare", "RunResult", "sgd_losses"],
    "ralp_tf.traffic": ["cluster_endpoints", "TrafficMeter"],
    "ralp_tf.costmodel": ["estimate", "estimate_allreduce", "STEP_OVERHEAD_BYTES"],
    "ralp_tf.policies": ["register_policy", "resolve_policy", "policy_names", "RalpPolicy"],
    "ralp_tf.place.applier": ["place_from_builder", "colocated_variables", "cluster_of", "prepare"],
    "ralp_tf.place.verify": ["verify_placement", "traced_training_step"],
    "ralp_tf.model.graph": ["walk", "ModelGraph"],
    "ralp_tf.faults.supervisor": ["Supervisor"],
    "ralp_tf.cli.main": ["console_main", "main", "build_parser"],
    "ralp_tf.run.remote": ["train_on_cluster", "AgentMeter"],
    "ralp_tf.run.summaries": ["SummaryCallback", "write_run_summaries"],
}


def test_every_name_of_ralp_tf_all_is_there() -> None:
    missing = [n for n in ralp_tf.__all__ if not hasattr(ralp_tf, n)]
    assert not missing


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_package_exports_is_there(package: str) -> None:
    module = importlib.import_module(package)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


@pytest.mark.parametrize("module, names", sorted(DOCUMENTED.items()))
def test_documented_names_import(module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    assert [n for n in names if not hasattr(mod, n)] == []


def test_module_paths_of_earlier_releases_are_the_modules_that_now_hold_them() -> None:
    import ralp_tf.costmodel
    import ralp_tf.models
    import ralp_tf.policies
    import ralp_tf.traffic
    import ralp_tf.train
    from ralp_tf.place import policies
    from ralp_tf.run import training

    assert ralp_tf.policies is policies and ralp_tf.train is training
    assert ralp_tf.models.alexnet_cifar.__module__ == "ralp_tf.model.builtin"
    assert set(ralp_tf.MODULE_ALIASES) == {"ralp_tf.costmodel", "ralp_tf.models", "ralp_tf.policies",
                                           "ralp_tf.traffic", "ralp_tf.train"}
