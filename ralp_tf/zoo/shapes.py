"""The zoo's user model shapes: :data:`SHAPES`, every builder by name, and :data:`EXPECT`, what a
placement planner should find interesting in each.

A builder takes no arguments and returns a fresh, built, uncompiled ``tf_keras`` model, written
the way a Keras example or guide writes it (its docstring names which): layers without names,
custom layers without ``get_config``, subclassed models, dict inputs, nested models. Nothing is
downloaded or read from disk; each model trains a step on a CPU in seconds; no builder leaves
global state behind. The builders live in :mod:`~ralp_tf.zoo.shapes_guides`,
:mod:`~ralp_tf.zoo.shapes_text`, :mod:`~ralp_tf.zoo.shapes_structured`,
:mod:`~ralp_tf.zoo.shapes_vision`, :mod:`~ralp_tf.zoo.shapes_heads` and :mod:`~ralp_tf.zoo.shapes_sparse`.
"""
from __future__ import annotations

from typing import Any, Callable

from ralp_tf.zoo.expect import EXPECT
from ralp_tf.zoo.shapes_guides import (functional_multi_io, functional_resnet, mixed_precision_mlp, subclassed_cnn,
                                       vae_kl_loss)
from ralp_tf.zoo.shapes_heads import bn_head_cnn, layernorm_head, op_joined_heads
from ralp_tf.zoo.shapes_sparse import (conv_lstm_frames, custom_cell_rnn, grn_vsn_classifier, hashing_ctr, kim_text_cnn,
                                       partitioned_table_ctr, siamese_text, text_bilstm_stack, two_tower_recommender)
from ralp_tf.zoo.shapes_structured import deep_cross_network, recommender_net, wide_and_deep
from ralp_tf.zoo.shapes_text import (attention_qa, bidirectional_lstm_imdb, char_seq2seq, conv1d_text,
                                     lstm_flatten_dense, masked_tagger, stateful_char_gru, text_transformer)
from ralp_tf.zoo.shapes_vision import (cosine_head, mobilenetv2_transfer, regularized_cnn, siamese_contrastive,
                                       siamese_triplet, time_distributed_frames, vit_small, xception_small)

__all__ = ["SHAPES", "EXPECT"]

#: Shape name -> builder, in definition order: the seventeen shapes of the zoo's brief first, then
#: the other common example shapes.
SHAPES: dict[str, Callable[[], Any]] = {
    "subclassed_cnn": subclassed_cnn,
    "text_transformer": text_transformer,
    "bidirectional_lstm_imdb": bidirectional_lstm_imdb,
    "lstm_flatten_dense": lstm_flatten_dense,
    "conv1d_text": conv1d_text,
    "recommender_net": recommender_net,
    "wide_and_deep": wide_and_deep,
    "functional_multi_io": functional_multi_io,
    "mixed_precision_mlp": mixed_precision_mlp,
    "time_distributed_frames": time_distributed_frames,
    "siamese_triplet": siamese_triplet,
    "vae_kl_loss": vae_kl_loss,
    "cosine_head": cosine_head,
    "regularized_cnn": regularized_cnn,
    "mobilenetv2_transfer": mobilenetv2_transfer,
    "stateful_char_gru": stateful_char_gru,
    "deep_cross_network": deep_cross_network,
    "char_seq2seq": char_seq2seq,
    "attention_qa": attention_qa,
    "masked_tagger": masked_tagger,
    "siamese_contrastive": siamese_contrastive,
    "functional_resnet": functional_resnet,
    "xception_small": xception_small,
    "vit_small": vit_small,
    "bn_head_cnn": bn_head_cnn,
    "layernorm_head": layernorm_head,
    "op_joined_heads": op_joined_heads,
    "kim_text_cnn": kim_text_cnn,
    "text_bilstm_stack": text_bilstm_stack,
    "two_tower_recommender": two_tower_recommender,
    "partitioned_table_ctr": partitioned_table_ctr,
    "hashing_ctr": hashing_ctr,
    "grn_vsn_classifier": grn_vsn_classifier,
    "siamese_text": siamese_text,
    "custom_cell_rnn": custom_cell_rnn,
    "conv_lstm_frames": conv_lstm_frames,
}
