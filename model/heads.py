"""Pretraining heads of ELECTRA: the generator's tied MLM head and the discriminator's token classifier."""
import keras
from keras import ops

from model.initializers import glorot_uniform, truncated_normal
from model.matmul import Dense, check_matmul_dtype, operand_dtype
from model.layer_norm import layer_norm


def gather_positions(sequence, positions):
    """sequence [batch, seq, dim], positions int32 [batch, n] → [batch, n, dim].

    A row gather from the flattened [batch·seq, dim] sequence (what the original's gather_indexes
    does): the same values as take_along_axis(axis=1), without broadcasting the indices to
    [batch, n, dim], so its gradient is a scatter of batch·n rows instead of batch·n·dim elements.
    """
    sequence = ops.convert_to_tensor(sequence)
    batch, length, width = ops.shape(sequence)[0], ops.shape(sequence)[1], ops.shape(sequence)[2]
    positions = ops.cast(positions, "int32")
    num_positions = ops.shape(positions)[1]
    flat_positions = ops.reshape(positions + length * ops.arange(batch, dtype="int32")[:, None], (-1,))
    rows = ops.take(ops.reshape(sequence, (batch * length, width)), flat_positions, axis=0)
    return ops.reshape(rows, (batch, num_positions, width))


class GeneratorHead(keras.layers.Layer):
    """TF1 scope `generator_predictions`: dense(E, gelu) → LayerNorm → · word tableᵀ + output_bias.

    Only the masked positions go through it (they are gathered first), which keeps the [.., V] logits
    small. Call with the generator's sequence output [batch, seq, Hg], positions [batch, n] and the tied
    word table [V, E]; returns float32 logits [batch, n, V]. The vocabulary matmul runs in the compute
    dtype (bfloat16 under mixed precision); the bias add and everything after it in float32.

    With positions None every position goes through it ([batch, seq, V]): Electric's cloze head, the
    same layers under the TF1 scope `cloze_predictions` (the original's get_token_logits).

    `matmul_dtype` (model/matmul.py; "float32" by default): its dense layer's and the vocabulary matmul's operands
    in bfloat16 under a float32 compute dtype, the logits float32 as always.
    """

    def __init__(self, vocab_size, embedding_size, initializer_range=0.02, layer_norm_epsilon=1e-12,
                 matmul_dtype="float32", **kwargs):
        kwargs.setdefault("name", "generator_predictions")
        super().__init__(**kwargs)
        self.matmul_dtype = check_matmul_dtype(matmul_dtype)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dense = Dense(embedding_size, activation="gelu",
                           kernel_initializer=truncated_normal(initializer_range),
                           matmul_dtype=matmul_dtype, dtype=self.dtype_policy, name="dense")
        self.layer_norm = layer_norm("LayerNorm", layer_norm_epsilon)

    def build(self, sequence_shape):
        self.dense.build(sequence_shape)
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                           name="output_bias")
        self.built = True

    def call(self, sequence_output, positions, embedding_table, training=None):
        if positions is not None:
            sequence_output = gather_positions(sequence_output, positions)
        hidden = self.layer_norm(self.dense(sequence_output))
        dtype = operand_dtype(self.matmul_dtype, self.compute_dtype) or self.compute_dtype
        logits = ops.einsum("bne,ve->bnv", ops.cast(hidden, dtype), ops.cast(embedding_table, dtype))
        return ops.add(ops.cast(logits, "float32"), ops.cast(self.output_bias, "float32"))

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon, matmul_dtype=self.matmul_dtype)
        return config


class DiscriminatorHead(keras.layers.Layer):
    """TF1 scope `discriminator_predictions`: dense(H, gelu) → dense_1(1); float32 logits [batch, seq].

    dense_1 keeps TF1's default Glorot-uniform init, as the original left it unset.
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        kwargs.setdefault("name", "discriminator_predictions")
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = Dense(hidden_size, activation="gelu",
                           kernel_initializer=truncated_normal(initializer_range),
                           dtype=self.dtype_policy, name="dense")
        self.dense_1 = Dense(1, kernel_initializer=glorot_uniform(), dtype=self.dtype_policy,
                             name="dense_1")

    def build(self, sequence_shape):
        self.dense.build(sequence_shape)
        self.dense_1.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, training=None):
        return ops.cast(ops.squeeze(self.dense_1(self.dense(sequence_output)), axis=-1), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
