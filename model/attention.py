"""BERT self-attention with a padding mask, through keras.ops.dot_product_attention when it can be.

The original drops out attention probabilities (0.1 during pretraining); the fused op has no dropout,
so training with attention dropout takes an explicit path (float32 softmax → dropout → matmul) that
computes the same function. Inference, or attention_dropout = 0, uses the fused op.

`compute_dtype_softmax` (a named option, off by default): under a 16-bit compute dtype (mixed_bfloat16) the
explicit path keeps the scores, softmax and dropout in that dtype, so no float32 [batch, heads, seq, seq] exists
in the step (tests/test_attention_dtype.py checks the lowered JAX step). The softmax's sum accumulates in float32
inside a matmul by ones (its [batch, heads, seq, 1] result is the only wider tensor); the dropout keeps an element
when a float16 uniform (16 random bits, 10 used) is under the keep probability rounded to a multiple of 1/1024
(0.1 → 0.0996), scaled by that probability's inverse. Under a float32 compute dtype it is today's path.

`causal` ("ltr" or "rtl"; default None: bidirectional) adds the original's left-to-right or
right-to-left mask (model/modeling.py, the ltr/rtl arguments of BertModel, used by Electric's two-tower
generator; docs/reproduction.md#electric): query i attends to keys j <= i (ltr) or j >= i (rtl), its own
position included, on top of the padding mask. A query left with no key (a padding query in an rtl
tower) attends to every key by its raw scores, as the original's additive mask gives it: -10000 added
to every score of the row shifts them all alike, so its softmax is that of the raw scores over all keys
(not uniform). That output is used: the roll puts the rtl tower's first padding position beside the
last real token, whose log q enters the discriminator's logit and loss (docs/reproduction.md#electric).

`fused_attention_fn` (a named option, off by default, not in the config): a backend's fused attention with
dropout, called as fn(query, key, value, mask, scale, dropout_rate, seed_generator, training) instead of the
explicit path when the layer trains with attention dropout and is not causal, so that no [batch, heads, seq, seq]
is kept for the backward pass. The model never imports a backend: training_jax/flash_attention.py provides the
Pallas kernels and sets it (training_jax.step.use_fused_attention).

`matmul_dtype` (a named option, "float32" by default): the Q/K/V projection's operands in bfloat16 under a float32
compute dtype, its product cast back (model/matmul.py); the query/key/value Dense layers take it too, although
project_qkv computes their product itself. The attention's scores and weighted sum are not covered.
"""
import math

import keras
from keras import ops

from model.initializers import truncated_normal
from model.matmul import Dense, check_matmul_dtype, operand_dtype
from model.unpadding import gather_rows, scatter_rows

_MASKED_LOGIT = -1e9  # exp() underflows to exactly 0 in float32, and never overflows
CAUSAL_DIRECTIONS = ("ltr", "rtl")


def padding_mask(input_mask):
    """[batch, seq] 0/1 → boolean [batch, 1, 1, seq]: every query may attend to every real key."""
    return ops.cast(input_mask, "bool")[:, None, None, :]


def attention_mask(input_mask, causal=None):
    """The boolean mask of one attention: [batch, 1, 1, seq] (padding only) or, with `causal` "ltr" /
    "rtl", [batch, 1, seq, seq] (padding and direction; a query with no key left gets them all, see the
    module docstring). Without `causal` only an example with no real token has such a row, and nothing
    reads its outputs, so the bidirectional mask is left as it is."""
    mask = padding_mask(input_mask)
    if causal is None:
        return mask
    positions = ops.arange(ops.shape(input_mask)[1])
    queries, keys = positions[:, None], positions[None, :]
    allowed = ops.less_equal(keys, queries) if causal == "ltr" else ops.greater_equal(keys, queries)
    mask = ops.logical_and(mask, allowed[None, None, :, :])
    # A row with no allowed key gets every key, so its softmax is the original's (its scores all - 10000).
    return ops.logical_or(mask, ops.logical_not(ops.any(mask, axis=-1, keepdims=True)))


def _masked_logit(dtype):
    """-1e9, or for float16 (whose largest finite is 65504) -3e4: either one's exp() is exactly 0."""
    return -3e4 if keras.backend.standardize_dtype(dtype) == "float16" else _MASKED_LOGIT


def rounded_keep_probability(rate):
    """1 - rate rounded to a multiple of 1/1024: what a float16 uniform (k/1024, k < 1024) can draw exactly."""
    return round((1.0 - rate) * 1024) / 1024


def compute_dtype_softmax(logits):
    """softmax over the last axis in logits' dtype; the sum accumulates in float32 inside a matmul by ones (a
    reduction of a 16-bit tensor would first convert the whole [..., seq] tensor to float32)."""
    peak = ops.stop_gradient(ops.max(logits, axis=-1, keepdims=True))
    exps = ops.exp(ops.subtract(logits, peak))
    total = ops.matmul(exps, ops.ones((ops.shape(logits)[-1], 1), dtype=logits.dtype))
    return ops.divide(exps, total)


def compute_dtype_dropout(probs, rate, seed):
    """Dropout of `probs` in their dtype from 16 random bits an element (see the module docstring)."""
    keep = rounded_keep_probability(rate)
    uniform = keras.random.uniform(ops.shape(probs), dtype="float16", seed=seed)
    kept = ops.less(uniform, ops.cast(keep, "float16"))
    return ops.where(kept, ops.multiply(probs, ops.cast(1.0 / keep, probs.dtype)), ops.zeros_like(probs))


def compute_dtype_attention(query, key, value, mask, scale, dropout_rate=0.0, seed=None, training=False):
    """explicit_attention with the scores, softmax and dropout in the inputs' dtype (the compute_dtype_softmax
    option); `seed`: the dropout's keras SeedGenerator."""
    dtype = query.dtype
    logits = ops.multiply(ops.einsum("bqhd,bkhd->bhqk", query, key), ops.cast(scale, dtype))
    logits = ops.where(mask, logits, ops.cast(_masked_logit(dtype), dtype))
    probs = compute_dtype_softmax(logits)
    if training and dropout_rate > 0:
        probs = compute_dtype_dropout(probs, dropout_rate, seed)
    return ops.einsum("bhqk,bkhd->bqhd", probs, ops.cast(value, dtype))


def explicit_attention(query, key, value, mask, scale, dropout=None, training=False):
    """softmax(q·kᵀ·scale masked) · v with the softmax in float32; layout [batch, seq, heads, dim]."""
    logits = ops.einsum("bqhd,bkhd->bhqk", query, key)
    logits = ops.cast(logits, "float32") * scale
    logits = ops.where(mask, logits, _MASKED_LOGIT)
    probs = ops.softmax(logits, axis=-1)
    if dropout is not None:
        probs = dropout(probs, training=training)
    return ops.einsum("bhqk,bkhd->bqhd", ops.cast(probs, value.dtype), value)


class SelfAttention(keras.layers.Layer):
    """The TF1 `attention/self/{query,key,value}` projections plus the attention itself.

    Call with hidden states [batch, seq, hidden] and input_mask [batch, seq]; returns the heads
    concatenated back to [batch, seq, hidden] (before the output projection). `use_fused` forces a path
    (None: fused unless training with attention dropout). `dtype`: the Keras dtype policy of the
    projections; the softmax of the explicit path runs in float32 whatever it is, unless
    `compute_dtype_softmax` (see the module docstring). `causal`: None, "ltr" or "rtl" (see the module docstring).
    `fused_attention_fn`, `matmul_dtype`: see the module docstring.
    """

    fused_attention_fn = None

    def __init__(self, hidden_size, num_heads, attention_dropout=0.1, initializer_range=0.02, causal=None,
                 compute_dtype_softmax=False, matmul_dtype="float32", **kwargs):
        kwargs.setdefault("name", "self")
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        if causal is not None and causal not in CAUSAL_DIRECTIONS:
            raise ValueError(f"causal {causal!r} is not one of None, {', '.join(CAUSAL_DIRECTIONS)}")
        self.causal = causal
        self.compute_dtype_softmax = compute_dtype_softmax
        self._matmul_dtype = check_matmul_dtype(matmul_dtype)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_dropout = attention_dropout
        self.initializer_range = initializer_range

        def projection(name):
            return Dense(hidden_size, kernel_initializer=truncated_normal(initializer_range),
                         matmul_dtype=matmul_dtype, dtype=self.dtype_policy, name=name)

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.probs_dropout = keras.layers.Dropout(attention_dropout, dtype=self.dtype_policy, name="probs_dropout")

    @property
    def matmul_dtype(self):
        return self._matmul_dtype

    @matmul_dtype.setter
    def matmul_dtype(self, value):
        """Set on a built layer too (model.matmul.set_matmul_dtype): the three projections follow."""
        self._matmul_dtype = check_matmul_dtype(value)
        for dense in (self.query, self.key, self.value):
            dense.matmul_dtype = value

    def build(self, input_shape):
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.built = True

    def _split_heads(self, x):
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, seq, self.num_heads, self.head_size))

    def project_qkv(self, hidden):
        """(query, key, value) [batch, seq, hidden] from ONE matmul with the three kernels side by side.

        The same numbers as the three Dense layers (each output column is the same dot product; within
        float32 rounding where a matmul kernel blocks a wider product differently), a third of the
        launches. The variables stay the TF1 checkpoint's query/key/value."""
        dtype = self.compute_dtype
        operand = operand_dtype(self.matmul_dtype, dtype) or dtype  # the kernels cast before they are joined
        kernel = ops.concatenate([ops.cast(dense.kernel, operand) for dense in (self.query, self.key, self.value)],
                                 axis=-1)
        bias = ops.concatenate([ops.cast(dense.bias, dtype) for dense in (self.query, self.key, self.value)])
        product = ops.matmul(ops.cast(hidden, operand), kernel)
        if operand != dtype:
            product = ops.cast(product, dtype)
        projected = ops.add(product, bias)
        return tuple(ops.split(projected, 3, axis=-1))  # one split: TF's slice gradients cost 8% of a step

    def call(self, hidden, input_mask, training=False, use_fused=None, real_rows=None):
        """`real_rows` (the encoder's skip_padding, model/unpadding.py): `hidden` is the real tokens' rows
        [tokens, hidden], and so is what this returns; the attention itself runs padded."""
        projected = self.project_qkv(hidden)
        if real_rows is not None:
            projected = (scatter_rows(x, real_rows, input_mask) for x in projected)
        query, key, value = (self._split_heads(x) for x in projected)
        mask = attention_mask(input_mask, self.causal)
        scale = 1.0 / math.sqrt(self.head_size)
        if use_fused is None:
            use_fused = not (training and self.attention_dropout > 0)
        if use_fused:
            batch, seq = ops.shape(query)[0], ops.shape(query)[1]
            mask = ops.broadcast_to(mask, (batch, self.num_heads, seq, seq))
            context = ops.dot_product_attention(query, key, value, mask=mask, scale=scale)
        elif self.fused_attention_fn is not None and training and self.attention_dropout > 0 and self.causal is None:
            context = self.fused_attention_fn(query, key, value, mask, scale, self.attention_dropout,
                                              self.probs_dropout.seed_generator, training)
        elif self.compute_dtype_softmax and keras.backend.standardize_dtype(query.dtype) != "float32":
            context = compute_dtype_attention(query, key, value, mask, scale, self.attention_dropout,
                                              getattr(self.probs_dropout, "seed_generator", None), training)
        else:
            context = explicit_attention(query, key, value, mask, scale, self.probs_dropout, training)
        batch, seq = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (batch, seq, self.hidden_size))
        return context if real_rows is None else gather_rows(context, real_rows)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      attention_dropout=self.attention_dropout,
                      initializer_range=self.initializer_range, causal=self.causal,
                      compute_dtype_softmax=self.compute_dtype_softmax, matmul_dtype=self.matmul_dtype)
        return config
