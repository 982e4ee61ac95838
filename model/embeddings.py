"""BERT's embedding block: word + position + token type (all `embedding_size` wide), LayerNorm, dropout.

One instance can be shared by several encoders: that is how ELECTRA's generator and discriminator share
every embedding, the embedding LayerNorm included.
"""
import keras
from keras import ops

from model.initializers import truncated_normal
from model.layer_norm import layer_norm


def embedding_lookup(table, ids):
    """`ops.take(table, ids, axis=0)` whose gradient with respect to `table` is a dense [V, E] tensor.

    Under TensorFlow a plain gather hands the optimizer a tf.IndexedSlices holding one row per
    occurrence, duplicates unsummed. Keras 3 optimizers (keras.optimizers.Adam, and the
    `ops.square(gradient)` of model/optimizers.py's AdamWeightDecay) then square each slice before the
    duplicates are summed: the second moment of a row looked up n times is Σ g_k² instead of (Σ g_k)²,
    up to n times too small, and that row moves up to √n times faster than Adam intends. The
    token-type row 0 is looked up at every position of every sequence (n = batch·seq), so it raced
    away and, through the embedding LayerNorm, drowned out the word signal: the encoder could not learn
    anything that needs context. Summing the duplicates here (what TF1's dense Adam did) restores the
    original update. Other backends already return dense gradients.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.take(table, ids, axis=0)
    return _take_with_dense_gradient(table, ids)


@ops.custom_gradient
def _take_with_dense_gradient(table, ids):
    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        rows, width = ops.shape(table)[0], ops.shape(table)[-1]
        summed = ops.segment_sum(ops.reshape(upstream, (-1, width)), ops.reshape(ids, (-1,)),
                                 num_segments=rows)
        return ops.cast(summed, table.dtype), None

    return ops.take(table, ids, axis=0), grad


class BertEmbeddings(keras.layers.Layer):
    """Weights: word_embeddings [V, E], position_embeddings [P, E], token_type_embeddings [T, E],
    LayerNorm/{gamma, beta} [E]: the names of the TF1 `electra/embeddings/` scope.

    Call with int32 `input_ids` and `segment_ids` [batch, seq]; returns float32 [batch, seq, E]
    (summed, normalised in float32, dropped out). `word_embeddings` replaces the word table for that call
    (gradient-disentangled sharing passes stop_gradient(shared) + residual here). `dtype`: the Keras
    dtype policy (variables float32 under a mixed one; the sum and its LayerNorm in float32 regardless).
    """

    def __init__(self, vocab_size, embedding_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout=0.1, initializer_range=0.02, layer_norm_epsilon=1e-12, **kwargs):
        kwargs.setdefault("name", "embeddings")
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.layer_norm = layer_norm("LayerNorm", layer_norm_epsilon)
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        # One initializer per table: an unseeded Keras initializer fixes its seed when created, so a shared
        # one would give every table the same draw (token i's vector equal to position i's).
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.embedding_size), initializer=truncated_normal(self.initializer_range),
            name="word_embeddings")
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=truncated_normal(self.initializer_range), name="position_embeddings")
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.embedding_size), initializer=truncated_normal(self.initializer_range),
            name="token_type_embeddings")
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=False, word_embeddings=None):
        table = self.word_embeddings if word_embeddings is None else word_embeddings
        seq_length = ops.shape(input_ids)[1]
        words = embedding_lookup(ops.cast(table, "float32"), input_ids)
        positions = ops.slice(ops.cast(self.position_embeddings, "float32"), (0, 0),
                              (seq_length, self.embedding_size))
        types = embedding_lookup(ops.cast(self.token_type_embeddings, "float32"), segment_ids)
        summed = words + positions[None, :, :] + types
        return self.dropout(self.layer_norm(summed), training=training)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, dropout=self.dropout_rate,
                      initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config
