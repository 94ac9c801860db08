"""Text and sequence models a new user brings, written from the Keras NLP examples and the RNN,
masking and attention guides.

Each builder returns a fresh, built, uncompiled tf_keras model over token ids (int inputs, ids
below the smallest Embedding vocabulary) or one-hot characters. Where the example leaves a token
input's dtype at float32 (``layers.Input(shape=(maxlen,))``), the builder says ``dtype="int32"`` so
synthetic data can tell ids from features; everything else is written as the example writes it.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

__all__ = ["TransformerBlock", "TokenAndPositionEmbedding", "text_transformer", "bidirectional_lstm_imdb",
           "lstm_flatten_dense", "conv1d_text", "stateful_char_gru", "char_seq2seq", "attention_qa",
           "masked_tagger"]


class TransformerBlock(layers.Layer):
    """Self-attention, a Sequential feed-forward network, two residual LayerNorms and Dropouts."""

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, rate: float = 0.1) -> None:
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs: Any, training: Any) -> Any:
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    """A token Embedding plus a position Embedding of ``tf.range(maxlen)``."""

    def __init__(self, maxlen: int, vocab_size: int, embed_dim: int) -> None:
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x: Any) -> Any:
        maxlen = tf.shape(x)[-1]
        positions = tf.range(start=0, limit=maxlen, delta=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def text_transformer() -> keras.Model:
    """A one-block Transformer classifier over 200 token ids: the custom
    ``TokenAndPositionEmbedding`` (20000 x 32 tokens, 200 x 32 positions), the custom
    ``TransformerBlock`` (2 heads, ff 32), GAP, Dropout, Dense 20, Dense(2, softmax).

    Follows the Keras example 'Text classification with Transformer'
    (keras.io/examples/nlp/text_classification_with_transformer), hyperparameters included; the
    token Embedding holds ~97% of the ~0.66M weights."""
    vocab_size, maxlen, embed_dim, num_heads, ff_dim = 20000, 200, 32, 2, 32
    inputs = layers.Input(shape=(maxlen,), dtype="int32")
    embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def bidirectional_lstm_imdb() -> keras.Model:
    """Two stacked ``Bidirectional(LSTM(64))`` over a 20000 x 128 Embedding of a variable-length
    ``keras.Input(shape=(None,), dtype="int32")``, sigmoid output.

    Follows the Keras example 'Bidirectional LSTM on IMDB' (keras.io/examples/nlp/bidirectional_lstm_imdb)
    as written there; the Embedding holds ~92% of the ~2.7M weights."""
    max_features = 20000
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(max_features, 128)(inputs)
    x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(64))(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs)


def lstm_flatten_dense() -> keras.Model:
    """A Sequential IMDB classifier over a fixed 100 tokens: Embedding 20000 x 128,
    ``Bidirectional(LSTM(64, return_sequences=True))``, Flatten (100 x 128 = 12800), a 12800 x 1024
    Dense (13.1M of ~15.8M weights), Dropout, Dense(1, sigmoid).

    Follows the Sequential models of the guide 'Working with RNNs' (keras.io/guides/working_with_rnns)
    and the example 'Bidirectional LSTM on IMDB' with the fixed ``maxlen`` of its ``pad_sequences``
    step, and a user's large dense classifier on the flattened sequence."""
    return keras.Sequential([
        keras.Input(shape=(100,), dtype="int32"),
        layers.Embedding(20000, 128),
        layers.Bidirectional(layers.LSTM(64, return_sequences=True)),
        layers.Flatten(),
        layers.Dense(1024, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(1, activation="sigmoid"),
    ])


def conv1d_text() -> keras.Model:
    """Conv1D text classification: Embedding 20000 x 128 over 200 int64 ids, Dropout, two strided
    Conv1D(128, 7), GlobalMaxPooling1D, Dense 128, Dropout, Dense(1, sigmoid) named ``predictions``.

    Follows the Keras example 'Text classification from scratch'
    (keras.io/examples/nlp/text_classification_from_scratch). The example's input is
    ``shape=(None,)``; it is fixed at 200 here because two valid, stride-3, width-7 convolutions
    need at least 25 tokens (the example pads to 500)."""
    max_features, embedding_dim = 20000, 128
    inputs = keras.Input(shape=(200,), dtype="int64")
    x = layers.Embedding(max_features, embedding_dim)(inputs)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    return keras.Model(inputs, predictions)


def stateful_char_gru() -> keras.Model:
    """A stateful character model: ``keras.Input(shape=(None,), batch_size=8, dtype="int32")``,
    Embedding 65 x 256, ``GRU(256, return_sequences=True, stateful=True)``, Dense(65) logits per step.
    The GRU keeps its state between batches in an (8, 256) variable of ``layer.states``, which is
    not among the model's weights.

    Follows the TensorFlow tutorial 'Text generation with an RNN'
    (tensorflow.org/text/tutorials/text_generation, its stateful Sequential version) and the
    'Cross-batch statefulness' section of the guide 'Working with RNNs'
    (keras.io/guides/working_with_rnns), with 256 GRU units instead of 1024."""
    vocab_size = 65
    return keras.Sequential([
        keras.Input(shape=(None,), batch_size=8, dtype="int32"),
        layers.Embedding(vocab_size, 256),
        layers.GRU(256, return_sequences=True, stateful=True, recurrent_initializer="glorot_uniform"),
        layers.Dense(vocab_size),
    ])


def char_seq2seq() -> keras.Model:
    """A character-level encoder-decoder: an encoder ``LSTM(256, return_state=True)`` over one-hot
    characters (None, 71) whose two states are the decoder LSTM's ``initial_state``, the decoder
    over (None, 93), and a per-step Dense(93, softmax).

    Follows the Keras example 'Character-level recurrent sequence-to-sequence model'
    (keras.io/examples/nlp/lstm_seq2seq) as written there (its token counts, latent_dim 256)."""
    num_encoder_tokens, num_decoder_tokens, latent_dim = 71, 93, 256
    encoder_inputs = keras.Input(shape=(None, num_encoder_tokens))
    encoder = layers.LSTM(latent_dim, return_state=True)
    encoder_outputs, state_h, state_c = encoder(encoder_inputs)
    encoder_states = [state_h, state_c]
    decoder_inputs = keras.Input(shape=(None, num_decoder_tokens))
    decoder_lstm = layers.LSTM(latent_dim, return_sequences=True, return_state=True)
    decoder_outputs, _, _ = decoder_lstm(decoder_inputs, initial_state=encoder_states)
    decoder_dense = layers.Dense(num_decoder_tokens, activation="softmax")
    decoder_outputs = decoder_dense(decoder_outputs)
    return keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)


def attention_qa() -> keras.Model:
    """Query-value attention: one Embedding (1000 x 64) and one Conv1D(100, 4) shared by a
    variable-length query and value, ``layers.Attention()([query, value])``, two
    GlobalAveragePooling1D, Concatenate, Dense(1, sigmoid).

    Follows the code example of the ``Attention`` API page
    (keras.io/api/layers/attention_layers/attention), which stops at the concatenation
    ("Add DNN layers, and create Model"); the sigmoid head is the user's."""
    query_input = keras.Input(shape=(None,), dtype="int32")
    value_input = keras.Input(shape=(None,), dtype="int32")
    token_embedding = layers.Embedding(input_dim=1000, output_dim=64)
    query_embeddings = token_embedding(query_input)
    value_embeddings = token_embedding(value_input)
    cnn_layer = layers.Conv1D(filters=100, kernel_size=4, padding="same")
    query_seq_encoding = cnn_layer(query_embeddings)
    value_seq_encoding = cnn_layer(value_embeddings)
    query_value_attention_seq = layers.Attention()([query_seq_encoding, value_seq_encoding])
    query_encoding = layers.GlobalAveragePooling1D()(query_seq_encoding)
    query_value_attention = layers.GlobalAveragePooling1D()(query_value_attention_seq)
    input_layer = layers.Concatenate()([query_encoding, query_value_attention])
    outputs = layers.Dense(1, activation="sigmoid")(input_layer)
    return keras.Model([query_input, value_input], outputs)


def masked_tagger() -> keras.Model:
    """A sequence tagger with masking: ``Embedding(10000, 64, mask_zero=True)`` over a
    variable-length int32 input (id 0 is padding), a ``GRU(64, return_sequences=True)`` that
    consumes the mask, and a per-token Dense(9, softmax); output (batch, length, 9).

    Follows the guide 'Understanding masking & padding'
    (keras.io/guides/understanding_masking_and_padding): the Embedding makes the mask, the
    recurrent layer and the Dense after it receive it implicitly."""
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(input_dim=10000, output_dim=64, mask_zero=True)(inputs)
    x = layers.GRU(64, return_sequences=True)(x)
    outputs = layers.Dense(9, activation="softmax")(x)
    return keras.Model(inputs, outputs)
