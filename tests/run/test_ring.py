"""Ring all-reduce training (ralp_tf/run/ring.py): MultiWorkerMirroredStrategy on local processes, its
bytes against the cost model's, and checkpoints that resume under either strategy."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # real worker processes


def _profile(model: str):  # type: ignore[no-untyped-def]
    from ralp_tf.plan.profiles import cached_profile

    return cached_profile(model)


def test_the_ring_trains_and_moves_the_bytes_the_cost_model_predicts(tmp_path: Path) -> None:
    from ralp_tf.run.ring import train_ring

    seen: list[int] = []
    r = train_ring("small_cnn", workers=2, steps=6, warmup_steps=2, profile=_profile("small_cnn"),
                   on_step=seen.append, log_dir=str(tmp_path))
    assert r.strategy == "mwms" and r.plan is None
    assert r.steps == 6 and r.total_steps == 8 and seen == list(range(8))
    assert len(r.losses) == 4 and all(math.isfinite(v) for v in r.losses) and r.losses[-1] < r.losses[0]
    assert r.bytes_per_step == pytest.approx(r.predicted_bytes_per_step, rel=0.05)  # 2 (N-1)/N x params x 4 B
    assert set(r.bytes_between) == {"worker0->worker1", "worker1->worker0"}


def test_a_checkpoint_resumes_under_the_other_strategy(tmp_path: Path) -> None:
    """ring -> ParameterServerStrategy with the head on a PS task -> ring: each resumes at the step
    the other saved, its restored variables equal to that checkpoint's."""
    from ralp_tf.run.checkpoints import checkpoint_model_digest, scan
    from ralp_tf.run.ring import train_ring
    from ralp_tf.run.training import compare

    folder = str(tmp_path / "ckpt")
    first = train_ring("small_cnn", workers=2, steps=4, warmup_steps=2, checkpoint_dir=folder, checkpoint_every=2)
    saved = scan(folder).complete[0]
    assert saved.step == first.total_steps == 6

    placed = compare("small_cnn", workers=2, ps=1, steps=6, policies=["ralp"], bandwidth="10mbit",
                     checkpoint_dir=folder, checkpoint_every=2, warmup_steps=2)["ralp"]
    assert placed.plan is not None and placed.plan.ps_layers()  # the head computes on the PS
    assert placed.resumed_from_step == 6
    assert placed.restored_weights_digest == checkpoint_model_digest(saved.prefix)
    saved = scan(folder).complete[0]
    assert saved.step == placed.total_steps == 8

    again = train_ring("small_cnn", workers=2, steps=10, warmup_steps=2, checkpoint_dir=folder, checkpoint_every=2)
    assert again.resumed_from_step == 8 and again.total_steps == 12
    assert again.restored_weights_digest == checkpoint_model_digest(saved.prefix)
    assert all(math.isfinite(v) for v in again.losses)
    assert not [p for p in Path(tmp_path).iterdir() if p.name.startswith(".ralp_ring_worker")]  # private folders gone
