"""What the profile records about loops and ids: a recurrent loop that reads its variables every
timestep (and so stays on the workers), the bytes of an embedding's ids, and synthetic text ids."""
from __future__ import annotations

import pytest

from ralp_tf.model.profiler import profile


def _sequence_model(rnn):  # type: ignore[no-untyped-def]
    import tf_keras
    from tf_keras import layers

    inp = tf_keras.Input((12, 8))
    return tf_keras.Model(inp, layers.Dense(1)(rnn(inp)))


@pytest.mark.parametrize("make", ["SimpleRNN", "RNN(LSTMCell)", "ConvLSTM2D"])
def test_a_loop_that_reads_its_variables_every_timestep_is_priced_and_kept_on_the_workers(make: str) -> None:
    """Under ParameterServerStrategy each timestep's read is a transfer (measured: SimpleRNN(256) over
    20 timesteps, 20 reads of its 296 KB a step)."""
    import tf_keras
    from tf_keras import layers

    if make == "ConvLSTM2D":
        inp = tf_keras.Input((12, 6, 6, 1))
        model = tf_keras.Model(inp, layers.ConvLSTM2D(4, 3)(inp))
    else:
        model = _sequence_model(layers.SimpleRNN(16) if make == "SimpleRNN" else layers.RNN(layers.LSTMCell(16)))
    rnn = next(l for l in profile(model, batch_size=4).layers if l.var_bytes)
    assert rnn.loop_reads == (12,) * len(rnn.var_bytes)
    assert rnn.reads(0) == 12
    assert "loop" in rnn.ps_refusal


@pytest.mark.parametrize("make", ["LSTM", "GRU"])
def test_recurrent_layers_whose_loop_is_a_function_read_their_variables_once(make: str) -> None:
    from tf_keras import layers

    rnn = next(l for l in profile(_sequence_model(getattr(layers, make)(16)), batch_size=4).layers if l.var_bytes)
    assert rnn.loop_reads == () and rnn.reads(0) == 1 and rnn.ps_refusal == ""


def test_an_embeddings_id_bytes_follow_the_ids_dtype_and_round_trip() -> None:
    import tf_keras
    from tf_keras import layers

    from ralp_tf.model.profiles import ModelProfile

    for dtype, size in (("int64", 8), ("int32", 4), ("float32", 4)):
        inp = tf_keras.Input((5,), dtype=dtype)
        prof = profile(tf_keras.Model(inp, layers.Flatten()(layers.Embedding(100, 4)(inp))), batch_size=2)
        assert prof.layer("embedding").id_bytes == size
        assert ModelProfile.from_json(prof.to_json()).layer("embedding").id_bytes == size


def test_a_string_input_gets_text_ids() -> None:
    """A Hashing CTR model's synthetic batch (before: a float array, and tf.data refused it)."""
    import tf_keras
    from tf_keras import layers

    from ralp_tf.model.data import synthetic_batch

    inp = tf_keras.Input((3,), dtype="string")
    model = tf_keras.Model(inp, layers.Dense(1)(layers.Flatten()(layers.Embedding(50, 4)(layers.Hashing(50)(inp)))))
    x, _ = synthetic_batch(model, 4)
    assert x.shape == (4, 3) and isinstance(x[0, 0], str)
    model(x)
