"""One post-LayerNorm BERT transformer layer, with the sub-scopes of the TF1 checkpoint.

Variables (under `layer_{i}/`): attention/self/{query,key,value}, attention/output/dense,
attention/output/LayerNorm, intermediate/dense, output/dense, output/LayerNorm.
"""
import keras
from keras import ops

from model.attention import SelfAttention
from model.initializers import truncated_normal
from model.matmul import Dense
from model.layer_norm import layer_norm


class TransformerLayer(keras.layers.Layer):
    """Call with hidden [batch, seq, hidden] and input_mask [batch, seq]; returns [batch, seq, hidden].

    `dtype` (a Keras dtype policy) reaches every sublayer but the two LayerNorms, which stay float32.
    `causal`: None, "ltr" or "rtl", the direction of the self-attention (model/attention.py).
    `compute_dtype_softmax`: the self-attention's option of that name (model/attention.py).
    `matmul_dtype`: the operands' dtype of the Q/K/V, attention output and FFN products (model/matmul.py).
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, dropout=0.1, attention_dropout=0.1,
                 initializer_range=0.02, layer_norm_epsilon=1e-12, causal=None, compute_dtype_softmax=False,
                 matmul_dtype="float32", **kwargs):
        super().__init__(**kwargs)
        self.causal = causal
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_self = SelfAttention(hidden_size, num_heads, attention_dropout,
                                            initializer_range, causal=causal,
                                            compute_dtype_softmax=compute_dtype_softmax, matmul_dtype=matmul_dtype,
                                            dtype=self.dtype_policy, name="self")
        # A fresh initializer per kernel: a shared unseeded one repeats one draw (see model/initializers.py).
        self.attention_output_dense = Dense(hidden_size, kernel_initializer=truncated_normal(initializer_range),
                                            matmul_dtype=matmul_dtype, dtype=self.dtype_policy, name="dense")
        self.attention_output_layer_norm = layer_norm("LayerNorm", layer_norm_epsilon)
        self.intermediate_dense = Dense(intermediate_size, activation="gelu",
                                        kernel_initializer=truncated_normal(initializer_range),
                                        matmul_dtype=matmul_dtype, dtype=self.dtype_policy, name="dense")
        self.output_dense = Dense(hidden_size, kernel_initializer=truncated_normal(initializer_range),
                                  matmul_dtype=matmul_dtype, dtype=self.dtype_policy, name="dense")
        self.output_layer_norm = layer_norm("LayerNorm", layer_norm_epsilon)
        self.attention_output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy,
                                                             name="attention_output_dropout")
        self.output_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="output_dropout")

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_size)
        with keras.name_scope("attention"):
            self.attention_self.build(hidden_shape)
            with keras.name_scope("output"):
                self.attention_output_dense.build(hidden_shape)
                self.attention_output_layer_norm.build(hidden_shape)
        with keras.name_scope("intermediate"):
            self.intermediate_dense.build(hidden_shape)
        with keras.name_scope("output"):
            self.output_dense.build((None, None, self.intermediate_size))
            self.output_layer_norm.build(hidden_shape)
        self.built = True

    def call(self, hidden, input_mask, training=False, use_fused_attention=None, real_rows=None):
        """`real_rows`: `hidden` is the real tokens' rows [tokens, hidden] (model/unpadding.py)."""
        context = self.attention_self(hidden, input_mask, training=training, use_fused=use_fused_attention,
                                      real_rows=real_rows)
        attention = self.attention_output_dropout(self.attention_output_dense(context), training=training)
        attention = self.attention_output_layer_norm(ops.add(attention, hidden))
        intermediate = self.intermediate_dense(attention)
        output = self.output_dropout(self.output_dense(intermediate), training=training)
        return self.output_layer_norm(ops.add(output, attention))

    @property
    def output_dtype(self):
        """The dtype of what call returns: the last LayerNorm's (float32 under any policy)."""
        return self.output_layer_norm.compute_dtype

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, dropout=self.dropout_rate,
                      attention_dropout=self.attention_dropout,
                      initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon, causal=self.causal,
                      compute_dtype_softmax=self.attention_self.compute_dtype_softmax,
                      matmul_dtype=self.attention_self.matmul_dtype)
        return config
