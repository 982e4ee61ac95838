"""The BERT-compatible encoder of ELECTRA: embeddings, optional projection E→H, transformer layers.

Variable scopes follow the TF1 checkpoints: `<name>/embeddings/...` (unless shared embeddings are passed
in), `<name>/embeddings_project/...` when embedding_size ≠ hidden_size, `<name>/encoder/layer_{i}/...`.
The discriminator (and every fine-tuned model) is named "electra", the generator "generator".
"""
import keras
from keras import ops

from model.embeddings import BertEmbeddings
from model.initializers import glorot_uniform
from model.layer_scan import scan_layers
from model.matmul import Dense, matmul_dtype_of
from model.transformer import TransformerLayer
from model.unpadding import gather_rows, real_token_rows, scatter_rows


class BertEncoder(keras.Model):
    """Call with {"input_ids", "input_mask", "segment_ids"} (int32 [batch, seq]).

    Returns the sequence output [batch, seq, hidden] (float32: the last LayerNorm runs in float32), or,
    with `return_all_layers=True`, the list of every layer's output. No pooler, as in ELECTRA.

    `embeddings`: a BertEmbeddings built elsewhere to share (the generator and discriminator share all
    embeddings, the LayerNorm included); its embedding_size wins over the argument.
    `gdes_embeddings`: DeBERTa-v3's gradient-disentangled sharing: the word table this encoder sees is
    stop_gradient(shared table) + its own zero-initialised `word_embeddings_delta`.
    `dtype`: the Keras dtype policy of this encoder and every layer it creates (None: Keras' global
    policy); a shared `embeddings` keeps its own. Pass it here, per model: setting the global policy
    would leak into whatever the process builds next.
    `causal`: None (bidirectional, every model but one), or "ltr" / "rtl": every layer attends only to the
    left / right and its own position, as the original's BertModel(ltr=True / rtl=True) for Electric's
    two-tower generator (model/two_tower.py; docs/reproduction.md#electric).
    `compute_dtype_softmax`: every self-attention's option of that name (model/attention.py; off: the original's
    float32 softmax); training_jax.step.use_compute_dtype_softmax sets it on a built model.
    `matmul_dtype`: "float32" (the original) or "bfloat16": the operands' dtype of every dense projection's product
    under a float32 compute dtype (model/matmul.py; ignored under a 16-bit policy); model.matmul.set_matmul_dtype
    sets it on a built model.
    `skip_padding` (an attribute, False by default: the original computes every position): the layers' per-position
    work runs on the real tokens' rows only, and padding positions come out as zeros (model/unpadding.py;
    TensorFlow only). Set on a built encoder, as fine-tuning's config does; not saved with it.
    """

    skip_padding = False

    def __init__(self, vocab_size, hidden_size, num_layers, num_heads, intermediate_size,
                 embedding_size=None, max_position_embeddings=512, type_vocab_size=2, dropout=0.1,
                 attention_dropout=0.1, initializer_range=0.02, layer_norm_epsilon=1e-12,
                 embeddings=None, gdes_embeddings=False, causal=None, scan_layers=False, compute_dtype_softmax=False,
                 matmul_dtype="float32", name="electra", dtype=None, **kwargs):
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.causal = causal
        self.scan_layers = scan_layers
        if embeddings is not None:
            embedding_size = embeddings.embedding_size
        elif embedding_size is None:
            embedding_size = hidden_size
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.gdes_embeddings = gdes_embeddings
        self.owns_embeddings = embeddings is None
        if gdes_embeddings and self.owns_embeddings:
            raise ValueError("gdes_embeddings needs shared `embeddings` to disentangle from")
        self.embeddings = embeddings or BertEmbeddings(
            vocab_size, embedding_size, max_position_embeddings, type_vocab_size, dropout,
            initializer_range, layer_norm_epsilon, dtype=self.dtype_policy, name="embeddings")
        self.embeddings_project = None
        if embedding_size != hidden_size:
            self.embeddings_project = Dense(
                hidden_size, kernel_initializer=glorot_uniform(), matmul_dtype=matmul_dtype, dtype=self.dtype_policy,
                name="embeddings_project")
        self.transformer_layers = [
            TransformerLayer(hidden_size, num_heads, intermediate_size, dropout, attention_dropout,
                             initializer_range, layer_norm_epsilon, causal=causal,
                             compute_dtype_softmax=compute_dtype_softmax, matmul_dtype=matmul_dtype,
                             dtype=self.dtype_policy, name=f"layer_{i}")
            for i in range(num_layers)
        ]

    @classmethod
    def from_model_config(cls, model_config, name="electra", embeddings=None, gdes_embeddings=False,
                          causal=None, dtype=None, matmul_dtype="float32"):
        """From a configs.model_config.ModelConfig."""
        c = model_config
        return cls(c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.intermediate_size,
                   c.embedding_size, c.max_position_embeddings, c.type_vocab_size, c.dropout,
                   c.attention_dropout, c.initializer_range, c.layer_norm_epsilon,
                   embeddings=embeddings, gdes_embeddings=gdes_embeddings, causal=causal,
                   matmul_dtype=matmul_dtype, name=name, dtype=dtype)

    def build(self, input_shape=None):
        if not self.embeddings.built:
            self.embeddings.build()
        if self.gdes_embeddings:
            with keras.name_scope("embeddings"):
                self.word_embeddings_delta = self.add_weight(
                    shape=(self.vocab_size, self.embedding_size), initializer="zeros",
                    name="word_embeddings_delta")
        if self.embeddings_project is not None:
            self.embeddings_project.build((None, None, self.embedding_size))
        with keras.name_scope("encoder"):
            for layer in self.transformer_layers:
                layer.build((None, None, self.hidden_size))
        self.built = True

    @property
    def embedding_table(self):
        """The word table the input lookups use (the tied output table of an MLM head)."""
        return self.embeddings.word_embeddings

    def word_table(self):
        """What this encoder's lookups read: the shared table, or under GDES sg(shared) + delta."""
        if not self.gdes_embeddings:
            return self.embeddings.word_embeddings
        return ops.add(ops.stop_gradient(ops.convert_to_tensor(self.embeddings.word_embeddings)),
                       self.word_embeddings_delta)

    def merged_word_embeddings(self):
        """The word table to export for this encoder (GDES: shared + delta merged)."""
        return ops.convert_to_tensor(self.word_table())

    def call(self, inputs, training=False, return_all_layers=False, use_fused_attention=None):
        input_ids = ops.cast(inputs["input_ids"], "int32")
        input_mask = inputs["input_mask"]
        segment_ids = ops.cast(inputs["segment_ids"], "int32")
        word_table = self.word_table() if self.gdes_embeddings else None
        hidden = self.embeddings(input_ids, segment_ids, training=training, word_embeddings=word_table)
        if self.skip_padding:
            return self._call_real_rows(hidden, input_mask, training, return_all_layers, use_fused_attention)
        if self.embeddings_project is not None:
            hidden = self.embeddings_project(hidden)
        layers, outputs = self.transformer_layers, []
        if self.scan_layers and layers and keras.backend.standardize_dtype(hidden.dtype) != layers[0].output_dtype:
            # a bfloat16 projection's output: layer 0 unrolled, so that its residual adds in bfloat16 as
            # unrolled (a scan's carry keeps one dtype, the layers' float32 output)
            hidden = layers[0](hidden, input_mask, training=training, use_fused_attention=use_fused_attention)
            layers, outputs = layers[1:], [hidden]
        if self.scan_layers and len(layers) > 1:
            stacked = scan_layers(layers, hidden, input_mask, training=training,
                                  use_fused_attention=use_fused_attention)
            outputs += ops.unstack(stacked, axis=0) if return_all_layers else []
            hidden, layers = stacked[-1], []
        for layer in layers:
            hidden = layer(hidden, input_mask, training=training, use_fused_attention=use_fused_attention)
            outputs.append(hidden)
        return outputs if return_all_layers else hidden

    def _call_real_rows(self, embedded, input_mask, training, return_all_layers, use_fused_attention):
        """call's layers under skip_padding: on the real tokens' rows, scattered back at the end."""
        if self.scan_layers:
            raise ValueError("skip_padding runs the layers unrolled: it cannot be combined with scan_layers")
        if self.causal is not None:
            raise ValueError(f"skip_padding with a causal ({self.causal}) encoder: its padding queries' outputs are "
                             "used (model/attention.py), and skip_padding does not compute them")
        real_rows = real_token_rows(input_mask)
        hidden = gather_rows(embedded, real_rows)
        if self.embeddings_project is not None:
            hidden = self.embeddings_project(hidden)
        outputs = []
        for layer in self.transformer_layers:
            hidden = layer(hidden, input_mask, training=training, use_fused_attention=use_fused_attention,
                           real_rows=real_rows)
            outputs.append(hidden)
        if return_all_layers:
            return [scatter_rows(output, real_rows, input_mask) for output in outputs]
        return scatter_rows(hidden, real_rows, input_mask)

    def get_config(self):
        """Constructor arguments; a shared `embeddings` layer is not serialised (builders re-share)."""
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size, num_layers=self.num_layers,
                      num_heads=self.num_heads, intermediate_size=self.intermediate_size,
                      embedding_size=self.embedding_size, max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, dropout=self.dropout_rate,
                      attention_dropout=self.attention_dropout, initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon, gdes_embeddings=self.gdes_embeddings,
                      causal=self.causal, scan_layers=self.scan_layers,
                      compute_dtype_softmax=any(layer.attention_self.compute_dtype_softmax
                                                for layer in self.transformer_layers),
                      matmul_dtype=matmul_dtype_of(self))
        return config
