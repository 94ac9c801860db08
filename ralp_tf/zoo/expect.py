"""What a placement planner should find interesting in each zoo shape, in the order of
:data:`ralp_tf.zoo.shapes.SHAPES`. Plain data: importing it imports no TensorFlow, so the zoo's
shape names can be listed (and tests parametrised) without building anything. Weight counts
are of the builder's model as it is today; the tests check the structure, not these notes.
"""
from __future__ import annotations

__all__ = ["EXPECT"]

#: Shape name -> a short note for the planner's reader: what dominates the weights, what must
#: stay on the workers, what is unusual about the model's structure.
EXPECT: dict[str, str] = {
    "subclassed_cnn": "subclassed, no layer names, model.inputs is None (input spec from its first call): a "
                      "4096 x 512 dense (2.1M of 2.12M weights) worth moving; two small convs stay",
    "text_transformer": "a 20000 x 32 token embedding (640k of 658k) inside the custom TokenAndPositionEmbedding, "
                        "which holds two embeddings in one layer; the custom TransformerBlock holds "
                        "MultiHeadAttention, a nested Sequential FFN, LayerNorms and Dropouts",
    "bidirectional_lstm_imdb": "a 20000 x 128 embedding (2.56M of 2.76M) over a variable-length input (no static "
                               "sequence length); two Bidirectional LSTMs are recurrent compute: keep on the workers",
    "lstm_flatten_dense": "Sequential: a 12800 x 1024 dense after Flatten over the BiLSTM sequence (13.1M of 15.8M) "
                          "and a 20000 x 128 embedding (2.56M): both worth moving, the LSTM stays",
    "conv1d_text": "a 20000 x 128 embedding (2.56M of 2.81M) fed int64 ids, then cheap strided Conv1Ds and a "
                   "small dense",
    "recommender_net": "subclassed, model.inputs is None; one (batch, 2) int64 input sliced in call into a 9724 x 50 "
                       "movie and a 610 x 50 user embedding plus two bias tables (ids below 610); L2 regularised "
                       "embeddings (2 terms in model.losses); raw tf ops (tensordot, sigmoid) in call",
    "wide_and_deep": "dict inputs: six named scalar (shape ()) inputs, model.inputs sorted by name; 100k x 32 user "
                     "and 50k x 32 item embeddings (4.8M of 5.0M) plus 1-d wide embeddings; HashedCrossing (no "
                     "weights, int output, no gradient) and tf.expand_dims op layers between inputs and layers",
    "functional_multi_io": "three inputs (two variable-length id inputs, floats), two outputs as a list (a logit and "
                           "a softmax); two 10000 x 64 embeddings (1.28M of 1.39M); the LSTMs stay",
    "mixed_precision_mlp": "mixed_float16 layers (float16 compute, float32 variables; activations crossing devices "
                           "are float16): 784 x 4096 and 4096 x 4096 dense (20M), the softmax in float32; the global "
                           "policy is back to float32 after building",
    "time_distributed_frames": "TimeDistributed wrappers: a Dense(256) on 4096 features per frame (1.05M of 1.13M) "
                               "is a TimeDistributed layer run on all 8 frames at once; the LSTM stays",
    "siamese_triplet": "a nested Embedding model shared by three inputs (its 4096 x 512 dense, 2.1M, computes three "
                       "times per step with one set of weights); a custom DistanceLayer called with three tensors, "
                       "returning a tuple",
    "vae_kl_loss": "a custom Sampling layer adding the KL term with self.add_loss in call (model.losses must survive "
                   "placement) and drawing random numbers; nested encoder and decoder models; small (107k)",
    "cosine_head": "a custom layer whose 2048 x 1000 add_weight kernel is 2.05M of 2.14M weights, not a Dense: the "
                   "planner must price it from its variables",
    "regularized_cnn": "Sequential; L2 kernel regularisers on two convs and two dense (4 terms in model.losses, "
                       "which follow moved variables), BatchNormalization moving statistics (non-trainable) in the "
                       "dense head; a 2304 x 1024 dense (2.36M of 2.39M)",
    "mobilenetv2_transfer": "a nested MobileNetV2 (2.26M, BatchNormalization in inference mode through "
                            "training=False, depthwise convs) as one layer, then 1280 x 4096 and 4096 x 4096 dense "
                            "(22M of 24.3M): the head to the PS, the backbone stays (the scheduler issue's case)",
    "stateful_char_gru": "stateful GRU, batch fixed at 8 by Input(batch_size=8): must stay on the workers, and a "
                         "run must use per-replica batch 8; its state is an (8, 256) variable in layer.states that "
                         "model.weights does not list; 65 x 256 embedding, 0.43M in all",
    "deep_cross_network": "a 100000 x 16 embedding (1.6M of 1.76M) over one (batch, 8) id input; three custom Cross "
                          "layers with their own 141 x 141 kernels, each called with two tensors (x0, x)",
    "char_seq2seq": "the encoder LSTM's states passed as initial_state (keyword tensors) to the decoder LSTM; "
                    "variable-length one-hot float inputs; 0.72M weights, all recurrent or small: nothing to move",
    "attention_qa": "one Embedding (1000 x 64) and one Conv1D shared by two variable-length inputs; layers.Attention "
                    "has no weights; tiny (90k)",
    "masked_tagger": "Embedding(mask_zero=True) 10000 x 64 (640k of 666k) whose mask flows to the GRU and the "
                     "per-token Dense: a placed embedding must keep producing the mask; output (batch, length, 9)",
    "siamese_contrastive": "a Lambda distance between two calls of a shared tower, BatchNormalization on both sides; "
                           "5k weights: nothing worth moving, a planner should leave it alone",
    "functional_resnet": "residual adds, 0.22M weights spread over seven convs and a small dense: nothing dominant",
    "xception_small": "RandomFlip and RandomRotation in a nested Sequential (random ops, no weights), SeparableConv2D "
                      "and BatchNormalization with residual adds, 2.7M conv weights and no dense head: "
                      "compute-bound, nothing to move",
    "vit_small": "custom Patches (tf.image.extract_patches) and PatchEncoder (a Dense and a 64 x 64 position "
                 "Embedding inside one custom layer), 8 MultiHeadAttention blocks; the MLP head (4096 x 2048, "
                 "2048 x 1024: 10.5M of 11.2M) is worth moving",
    "bn_head_cnn": "a 4096 x 4096 Dense without bias, then BatchNormalization (moving statistics), ReLU, Dropout and "
                   "a 4096 x 2048 Dense whose kernel has a max_norm constraint (25.2M of 25.2M): the cut goes "
                   "before the first Dense, through the normalization, and the constraint runs where its kernel is",
    "layernorm_head": "an MLP head of two 4096-wide Dense with LayerNormalization and GELU between them (17.4M of "
                      "17.4M) after a small conv stem: cut through the normalization",
    "op_joined_heads": "subclassed, no names; two 7200 x 2048 heads in a dict attribute (29.5M of 29.5M) joined by "
                       "+, slicing, a product and tf.concat in call: those ops compute with the heads",
    "kim_text_cnn": "a 20000 x 128 embedding (2.56M of 2.99M) of 40 int64 ids read by three Conv1D on the workers: "
                    "its rows and their gradient cross; the Dense(2048) head after the pooled convs is worth moving",
    "text_bilstm_stack": "two stacked Bidirectional LSTMs over a 20000 x 128 embedding of a variable-length input: "
                         "the LSTMs' loop is a function and reads its kernels once",
    "two_tower_recommender": "a 100000 x 64 user and a 50000 x 64 item embedding (9.6M of 9.7M), one id each, two "
                             "Dense towers and their dot product: the towers can follow their tables",
    "partitioned_table_ctr": "an 800,000 x 32 table (25.6M of 25.7M, 102 MB) of ten int64 ids: with several PS tasks "
                             "it is worth partitioning",
    "hashing_ctr": "string features hashed (Hashing, no weights) into a 200000 x 16 embedding (3.2M of 3.3M): "
                   "the synthetic data give it ids as text",
    "grn_vsn_classifier": "dict inputs, seven small embeddings and six Dense encoders into a custom "
                          "VariableSelection of gated residual networks: many small variables, ops in call",
    "siamese_text": "one 10000 x 64 embedding and one LSTM shared by two inputs: the table's rows are looked up "
                    "twice a step, its sparse gradients summed",
    "custom_cell_rnn": "RNN(MinimalRNNCell(256)) over a variable-length sequence: the cell reads its kernels every "
                       "timestep (a loop of its own: it stays on the workers)",
    "conv_lstm_frames": "two ConvLSTM2D over a variable-length frame sequence, auto-named cells inside: identity "
                        "without names; each reads its kernels every timestep",
}
