"""Profiles as data: the built-in models' cached profiles (and that they match the profiler) and the
analytic ResNet-50 and BERT-base profiles with their variable shapes."""
from __future__ import annotations

import json
import math

import pytest

from ralp_tf.errors import ValidationError
from ralp_tf.model.profiles import ModelProfile
from ralp_tf.plan.profiles import (CACHED_MODELS, bert_base_profile, cached_profile, dump_profile,
                                   resnet50_profile)


def test_cached_profiles_load_with_shapes_and_rescale() -> None:
    for name in CACHED_MODELS:
        prof = cached_profile(name)
        assert prof.model_name == name and prof.batch_size == 32
        weighted = [l for l in prof.layers if l.var_bytes]
        assert weighted and all(len(l.var_shapes) == len(l.var_bytes) for l in weighted)
        assert all(4 * math.prod(s) == b for l in weighted for s, b in zip(l.var_shapes, l.var_bytes))
    assert cached_profile("alexnet_cifar").param_bytes == 35_855_178 * 4
    assert cached_profile("small_cnn", batch_size=4).batch_size == 4
    with pytest.raises(ValidationError, match="no cached profile of model 'gpt'"):
        cached_profile("gpt")


def test_dump_is_one_layer_a_line_and_round_trips() -> None:
    prof = cached_profile("small_cnn")
    text = dump_profile(prof)
    assert len(text.splitlines()) == 3 + len(prof.layers) + len(prof.tensors)
    assert ModelProfile.from_dict(json.loads(text)) == prof


def test_data_profiles_carry_the_shapes_of_their_variables() -> None:
    r50 = resnet50_profile()
    assert r50.layer("stage4_block1").var_shapes == ((1, 1, 1024, 512), (3, 3, 512, 512), (1, 1, 512, 2048),
                                                     (1, 1, 1024, 2048))
    assert r50.layer("fc").var_shapes == ((2048, 1000), (1000,)) and r50.layer("fc").class_name == "Dense"
    bert = bert_base_profile()
    assert bert.layer("word_embeddings").var_shapes == ((30_522, 768),)
    assert bert.layer("encoder0_ffn").var_shapes[0] == (768, 3072)
    assert bert.layer("encoder0_attention").class_name == "EncoderAttention"  # a composite: stored, never split
    for prof in (r50, bert):
        assert all(4 * math.prod(s) == b for l in prof.layers for s, b in zip(l.var_shapes, l.var_bytes))


@pytest.mark.slow
def test_cached_profiles_equal_fresh_ones() -> None:
    """The cache is what the profiler writes (imports TensorFlow); rewrite it with
    ``python -m ralp_tf.plan.profiles`` when this fails."""
    from ralp_tf.model import builtin
    from ralp_tf.model.profiler import profile

    for name in CACHED_MODELS:
        assert cached_profile(name).to_dict() == profile(builtin.BUILTIN_MODELS[name](), batch_size=32).to_dict(), name
