"""``ralp_tf.fit`` (ralp_tf/run/fit.py): the Python entry of ``--strategy``; which builders a ring can import."""
from __future__ import annotations

import pytest

import ralp_tf
from ralp_tf.errors import ValidationError
from ralp_tf.model.builtin import small_cnn
from ralp_tf.run.fit import model_reference


def test_a_builder_becomes_the_reference_ring_workers_import() -> None:
    assert model_reference("small_cnn") == "small_cnn"
    assert model_reference(small_cnn) == "ralp_tf.model.builtin:small_cnn"


def _local() -> object:
    def build() -> object:
        return None
    return build


@pytest.mark.parametrize("builder", [lambda: None, _local(), type("M", (), {"__module__": "__main__",
                                                                             "__qualname__": "build",
                                                                             "__call__": lambda self: None})()])
def test_a_builder_no_worker_can_import_is_refused_with_the_fix(builder: object) -> None:
    with pytest.raises(ValidationError, match="top level of a module on PYTHONPATH"):
        model_reference(builder)  # type: ignore[arg-type]


def test_fit_is_public_and_refuses_unknown_strategies() -> None:
    assert ralp_tf.fit is ralp_tf.run.fit.fit
    with pytest.raises(ValidationError, match="strategy must be one of pss, mwms, auto"):
        ralp_tf.fit("small_cnn", strategy="horovod")
