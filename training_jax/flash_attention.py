"""Flash attention with dropout as Pallas kernels: the self-attention's training path without [batch, heads, seq, seq].

The explicit path (model/attention.py) materialises the scores, the softmax and the dropout mask of every layer and
keeps them for the backward pass. Here the forward kernel walks the keys block by block with an online softmax and
saves only the output and each row's log-sum-exp; the two backward kernels (dK/dV over query blocks, dQ over key
blocks) recompute the probabilities block by block from them.

The dropout mask is a pure function of (seed, batch, head, query, key): each row (batch, head, query) gets a 32-bit
key hashed from the seed (a [batch, heads, seq] array, computed outside the kernels), and inside the kernels each
element's bits are murmur3's 32-bit finaliser of (row key XOR key index · golden ratio). The forward and the backward
kernels hash the same numbers, so the backward drops exactly what the forward dropped, and nothing of the mask is
stored. An element is kept when its bits are under (1 - rate) · 2³²; kept probabilities are scaled by 1 / (1 - rate).
`dropout_keep_mask` materialises the same mask for tests.

Only the bidirectional padding mask (keys masked, [batch, seq] or [batch, 1, 1, seq]) is supported; causal layers
keep the explicit path (model/attention.py checks). The softmax is float32 whatever the inputs' dtype; the output
and the gradients are in the inputs' dtype.

The kernels use what the Pallas Triton backend lowers (ref slices with pl.ds, jnp element ops on uint32, lax.dot_general,
lax.fori_loop over blocks, power-of-two block shapes); on a CPU they run in Pallas's interpret mode. JAX only: the
model reaches this through SelfAttention.fused_attention_fn, set by `use_fused_attention_in` or
training_jax.step.use_fused_attention.
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import keras
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
from jax.sharding import PartitionSpec

DEFAULT_BLOCK = 64  # rows (and keys) per block: Triton takes powers of two; 64 fits electra_small/base's seq 128
_MASKED_LOGIT = -1e9  # as model/attention.py: exp() of it minus any real score is exactly 0 in float32
_GOLDEN = 0x9E3779B9  # 2³² / φ: consecutive key indices times it land far apart before the hash mixes them


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """What the kernels are compiled for (static: hashable, a jax.custom_vjp non-differentiable argument)."""
    scale: float
    keep_probability: float  # 1.0: no dropout
    block_q: int
    block_k: int
    interpret: bool

    @property
    def dropout(self):
        return self.keep_probability < 1.0

    @property
    def keep_threshold(self):
        """Bits under this are kept: (1 - rate) · 2³², at most 2³² - 1."""
        return min(int(round(self.keep_probability * 2.0 ** 32)), 2 ** 32 - 1)


# ------------------------------------------------------------------------------------------- the dropout's bits


def mix32(bits):
    """murmur3's 32-bit finaliser: a bijection of uint32 whose every output bit depends on every input bit."""
    bits = bits ^ (bits >> 16)
    bits = bits * jnp.uint32(0x85EBCA6B)
    bits = bits ^ (bits >> 13)
    bits = bits * jnp.uint32(0xC2B2AE35)
    return bits ^ (bits >> 16)


def seed_words(seed):
    """uint32[2] from a keras SeedGenerator (its next state: the generator advances, functionally inside a
    keras.StatelessScope, as keras.random.dropout's draw does), a uint32[2] array, or an int."""
    if seed is None:
        raise ValueError("flash_attention with dropout needs a seed: the layer's SeedGenerator, uint32[2] or an int")
    if isinstance(seed, keras.random.SeedGenerator):
        seed = seed.next()
    words = jnp.ravel(jnp.asarray(seed)).astype(jnp.uint32)
    return jnp.pad(words, (0, 2 - words.shape[0])) if words.shape[0] < 2 else words[:2]


def row_keys(words, batch, heads, seq):
    """uint32 [batch, heads, seq]: the key of each (batch, head, query) row, hashed from the seed's two words.
    It depends on the indices only, not on the padded length, so padding leaves the real rows' masks alone."""
    base = mix32(words[0] ^ mix32(words[1] ^ jnp.uint32(0x6A09E667)))
    batch_heads = (jnp.arange(batch, dtype=jnp.uint32)[:, None] * jnp.uint32(heads)
                   + jnp.arange(heads, dtype=jnp.uint32)[None, :])
    per_head = mix32(base ^ mix32(batch_heads + jnp.uint32(0xBB67AE85)))
    queries = jnp.arange(seq, dtype=jnp.uint32)
    return mix32(per_head[:, :, None] ^ mix32(queries * jnp.uint32(_GOLDEN) + jnp.uint32(0x3C6EF372))[None, None, :])


def kept(keys_of_rows, first_key, block_k, threshold):
    """bool [rows, block_k]: which of keys first_key … first_key + block_k - 1 each row keeps (in and out of kernels)."""
    columns = (first_key + lax.broadcasted_iota(jnp.int32, (block_k,), 0)).astype(jnp.uint32)
    bits = mix32(keys_of_rows[:, None] ^ (columns * jnp.uint32(_GOLDEN))[None, :])
    return bits < jnp.uint32(threshold)


def dropout_keep_mask(seed, batch, heads, seq, dropout_rate):
    """bool [batch, heads, seq, seq]: the mask the kernels apply for this seed (uint32[2] or int; not a
    SeedGenerator, which would advance): for tests and references only, it is what the kernels never store."""
    threshold = KernelConfig(1.0, 1.0 - dropout_rate, seq, seq, True).keep_threshold
    keys = row_keys(seed_words(seed), batch, heads, seq)
    return kept(keys.reshape(-1), 0, seq, threshold).reshape(batch, heads, seq, seq)


# ------------------------------------------------------------------------------------------- the kernels' pieces


def _dot(a, b, trans_a=False, trans_b=False):
    """a·b of two 2-D blocks, accumulated in float32 (what pl.dot did; JAX 0.11 moved it out of pallas, so the
    kernels spell it with lax.dot_general, which every version's Triton lowering takes)."""
    contract = ((0 if trans_a else 1,), (1 if trans_b else 0,))
    return lax.dot_general(a, b, dimension_numbers=(contract, ((), ())), preferred_element_type=jnp.float32)


def _scores(q, k, key_ok, scale):
    """float32 [rows, keys]: q·kᵀ·scale, masked keys at -1e9 (as explicit_attention)."""
    logits = _dot(q, k, trans_b=True) * scale
    return jnp.where(key_ok[None, :], logits, _MASKED_LOGIT)


def _dropped(values, keep):
    """values where kept, scaled by 1 / keep probability; 0 where dropped (`keep` is (mask, probability) or None)."""
    if keep is None:
        return values
    mask, probability = keep
    return jnp.where(mask, values * (1.0 / probability), 0.0)


def _keep_block(config, keys_of_rows, first_key):
    return (kept(keys_of_rows, first_key, config.block_k, config.keep_threshold), config.keep_probability) \
        if config.dropout else None


def _forward_kernel(q_ref, k_ref, v_ref, key_mask_ref, row_keys_ref, out_ref, lse_ref, *, config):
    """One block of query rows of one (batch, head) against every key block: online softmax (FlashAttention-2)."""
    q = q_ref[...]
    rows, seq = q.shape[0], k_ref.shape[0]
    keys_of_rows = row_keys_ref[...] if config.dropout else None

    def over_key_block(index, carry):
        acc, peak, total = carry
        block = pl.ds(index * config.block_k, config.block_k)
        scores = _scores(q, k_ref[block, :], key_mask_ref[block] != 0, config.scale)
        new_peak = jnp.maximum(peak, jnp.max(scores, axis=1))
        correction = jnp.exp(peak - new_peak)
        probs = jnp.exp(scores - new_peak[:, None])
        total = total * correction + jnp.sum(probs, axis=1)  # the softmax's normaliser: before dropout
        probs = _dropped(probs, _keep_block(config, keys_of_rows, index * config.block_k))
        v = v_ref[block, :]
        acc = acc * correction[:, None] + _dot(probs.astype(v.dtype), v)
        return acc, new_peak, total

    start = (jnp.zeros((rows, q.shape[1]), jnp.float32), jnp.full((rows,), -jnp.inf, jnp.float32),
             jnp.zeros((rows,), jnp.float32))
    acc, peak, total = lax.fori_loop(0, seq // config.block_k, over_key_block, start)
    out_ref[...] = (acc / total[:, None]).astype(out_ref.dtype)
    lse_ref[...] = peak + jnp.log(total)


def _score_gradient(config, q, k, v, d_out, lse, delta, key_ok, keep):
    """(dropped probabilities, dScores·scale) of one [rows, keys] block, recomputed from the log-sum-exp.
    dP = dropout(dO·vᵀ); dS = P ∘ (dP - delta), delta = rowsum(dO ∘ O) = rowsum(dP ∘ P) with the dropped output.
    Masked keys get no gradient, as through explicit_attention's where (it matters for a row with no real key)."""
    probs = jnp.exp(_scores(q, k, key_ok, config.scale) - lse[:, None])
    d_probs = _dropped(_dot(d_out, v, trans_b=True), keep)
    d_scores = jnp.where(key_ok[None, :], probs * (d_probs - delta[:, None]), 0.0) * config.scale
    return _dropped(probs, keep), d_scores


def _key_value_gradient_kernel(q_ref, k_ref, v_ref, key_mask_ref, row_keys_ref, d_out_ref, lse_ref, delta_ref,
                               dk_ref, dv_ref, *, config):
    """dK and dV of one key block of one (batch, head): a loop over the query blocks."""
    first_key = pl.program_id(2) * config.block_k
    k, v = k_ref[...], v_ref[...]
    key_ok = key_mask_ref[pl.ds(first_key, config.block_k)] != 0

    def over_query_block(index, carry):
        dk, dv = carry
        block = pl.ds(index * config.block_q, config.block_q)
        keep = _keep_block(config, row_keys_ref[block], first_key) if config.dropout else None
        q, d_out = q_ref[block, :], d_out_ref[block, :]
        probs, d_scores = _score_gradient(config, q, k, v, d_out, lse_ref[block], delta_ref[block], key_ok, keep)
        dv = dv + _dot(probs.astype(d_out.dtype), d_out, trans_a=True)
        dk = dk + _dot(d_scores.astype(q.dtype), q, trans_a=True)
        return dk, dv

    zeros = jnp.zeros(k.shape, jnp.float32)
    dk, dv = lax.fori_loop(0, q_ref.shape[0] // config.block_q, over_query_block, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _query_gradient_kernel(q_ref, k_ref, v_ref, key_mask_ref, row_keys_ref, d_out_ref, lse_ref, delta_ref,
                           dq_ref, *, config):
    """dQ of one query block of one (batch, head): a loop over the key blocks."""
    q, d_out, lse, delta = q_ref[...], d_out_ref[...], lse_ref[...], delta_ref[...]
    keys_of_rows = row_keys_ref[...] if config.dropout else None

    def over_key_block(index, dq):
        block = pl.ds(index * config.block_k, config.block_k)
        keep = _keep_block(config, keys_of_rows, index * config.block_k)
        k = k_ref[block, :]
        _, d_scores = _score_gradient(config, q, k, v_ref[block, :], d_out, lse, delta,
                                      key_mask_ref[block] != 0, keep)
        return dq + _dot(d_scores.astype(k.dtype), k)

    dq = lax.fori_loop(0, k_ref.shape[0] // config.block_k, over_key_block, jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = dq.astype(dq_ref.dtype)


# ------------------------------------------------------------------------------------------- the pallas calls


def _specs(seq, dim, block_rows):
    """BlockSpecs over the grid (batch, head, block): of a [batch, seq, heads, dim] tensor and of a [batch, heads,
    seq] row vector by blocks of `block_rows` (None: the whole sequence), and of the [batch, seq] key mask."""
    if block_rows is None:
        tensor = pl.BlockSpec((None, seq, None, dim), lambda b, h, i: (b, 0, h, 0))
        rows = pl.BlockSpec((None, None, seq), lambda b, h, i: (b, h, 0))
    else:
        tensor = pl.BlockSpec((None, block_rows, None, dim), lambda b, h, i: (b, i, h, 0))
        rows = pl.BlockSpec((None, None, block_rows), lambda b, h, i: (b, h, i))
    return tensor, rows, pl.BlockSpec((None, seq), lambda b, h, i: (b, 0))


def _compiler_params():
    """Triton's launch settings (ignored by the interpreter): 4 warps, as JAX's own kernel for head dims <= 64."""
    return plgpu.CompilerParams(num_warps=4, num_stages=2)


def _forward(config, q, k, v, key_mask, keys):
    batch, seq, heads, dim = q.shape
    block, rows, mask_spec = _specs(seq, dim, config.block_q)
    whole, _, _ = _specs(seq, dim, None)
    return pl.pallas_call(
        functools.partial(_forward_kernel, config=config),
        grid=(batch, heads, seq // config.block_q),
        in_specs=[block, whole, whole, mask_spec, rows],
        out_specs=[block, rows],
        out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((batch, heads, seq), jnp.float32)],
        compiler_params=_compiler_params(), interpret=config.interpret, name="flash_attention_forward",
    )(q, k, v, key_mask, keys)


def _backward(config, q, k, v, key_mask, keys, d_out, lse, delta):
    batch, seq, heads, dim = q.shape
    whole, whole_rows, mask_spec = _specs(seq, dim, None)
    key_block, _, _ = _specs(seq, dim, config.block_k)
    dk, dv = pl.pallas_call(
        functools.partial(_key_value_gradient_kernel, config=config),
        grid=(batch, heads, seq // config.block_k),
        in_specs=[whole, key_block, key_block, mask_spec, whole_rows, whole, whole_rows, whole_rows],
        out_specs=[key_block, key_block],
        out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
        compiler_params=_compiler_params(), interpret=config.interpret, name="flash_attention_dkv",
    )(q, k, v, key_mask, keys, d_out, lse, delta)
    query_block, query_rows, _ = _specs(seq, dim, config.block_q)
    dq = pl.pallas_call(
        functools.partial(_query_gradient_kernel, config=config),
        grid=(batch, heads, seq // config.block_q),
        in_specs=[query_block, whole, whole, mask_spec, query_rows, query_block, query_rows, query_rows],
        out_specs=query_block,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=_compiler_params(), interpret=config.interpret, name="flash_attention_dq",
    )(q, k, v, key_mask, keys, d_out, lse, delta)
    return dq, dk, dv


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(config, q, k, v, key_mask, keys):
    return _forward(config, q, k, v, key_mask, keys)[0]


def _flash_forward(config, q, k, v, key_mask, keys):
    out, lse = _forward(config, q, k, v, key_mask, keys)
    return out, (q, k, v, key_mask, keys, out, lse)  # no [batch, heads, seq, seq]: only the output and lse


def _flash_backward(config, residuals, d_out):
    q, k, v, key_mask, keys, out, lse = residuals
    delta = jnp.einsum("bshd,bshd->bhs", out.astype(jnp.float32), d_out.astype(jnp.float32))
    dq, dk, dv = _backward(config, q, k, v, key_mask, keys, d_out.astype(q.dtype), lse, delta)
    return dq, dk, dv, None, None


_flash.defvjp(_flash_forward, _flash_backward)


# ------------------------------------------------------------------------------------------- the entry point


def key_padding_mask(mask, batch, seq):
    """int32 [batch, seq] (1: a real key) from [batch, seq] 0/1 or bool, or the bidirectional [batch, 1, 1, seq]."""
    mask = jnp.asarray(mask)
    if mask.ndim == 4:
        if mask.shape[1] != 1 or mask.shape[2] != 1:
            raise ValueError(f"flash_attention takes a padding mask [batch, 1, 1, seq], not {mask.shape} "
                             "(a causal mask keeps the explicit attention)")
        mask = mask[:, 0, 0, :]
    return jnp.broadcast_to(mask != 0, (batch, seq)).astype(jnp.int32)


def _next_power_of_two(n):
    return 1 << max(n - 1, 0).bit_length()


def _padded(x, seq, dim):
    return jnp.pad(x, ((0, 0), (0, seq - x.shape[1]), (0, 0), (0, dim - x.shape[3])))


def flash_attention(query, key, value, input_mask_bool_or_mask, scale, dropout_rate=0.0, seed=None, training=False,
                    interpret=None, block_size=DEFAULT_BLOCK, mesh=None):
    """softmax(q·kᵀ·scale, padded keys masked) with dropout · v, layout [batch, seq, heads, dim] as
    model.attention.explicit_attention, without storing [batch, heads, seq, seq] for the backward pass.

    `seed`: the layer's keras SeedGenerator (advanced by one draw), a uint32[2] array or an int; needed only when
    training with dropout_rate > 0. `interpret`: None runs Pallas's interpreter on a CPU and the compiled (Triton)
    kernels elsewhere. `block_size`: rows and keys per block (a power of two; capped to the padded sequence).
    The sequence is padded to a multiple of the block (padded keys masked) and the head dim to a power of two.
    `mesh`: a jax.sharding.Mesh whose first axis splits the batch (training_jax.data_parallel's): the kernels run on
    each device's rows under shard_map, since XLA's partitioner cannot split a Pallas call (it would give every
    device the whole batch's attention). The row keys are hashed for the whole batch first, so the dropout drops
    what it drops on one device."""
    batch, seq, heads, dim = query.shape
    rate = float(dropout_rate) if training else 0.0
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout_rate {dropout_rate} is not in [0, 1)")
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size {block_size} is not a power of two of 16 or more (Triton's blocks)")
    if interpret is None:
        interpret = jax.devices()[0].platform == "cpu"
    block = min(block_size, max(_next_power_of_two(seq), 16))  # Triton's dot takes 16 rows or more
    padded_seq, padded_dim = -(-seq // block) * block, max(_next_power_of_two(dim), 16)
    key_mask = jnp.pad(key_padding_mask(input_mask_bool_or_mask, batch, seq), ((0, 0), (0, padded_seq - seq)))
    words = seed_words(seed) if rate > 0 else jnp.zeros((2,), jnp.uint32)
    keys = row_keys(words, batch, heads, padded_seq)
    config = KernelConfig(float(scale), 1.0 - rate, block, block, bool(interpret))
    q, k, v = (_padded(x, padded_seq, padded_dim) for x in (query, key, value))
    v = v.astype(q.dtype)
    attend = functools.partial(_flash, config)
    if mesh is not None and mesh.size > 1:
        rows = PartitionSpec(mesh.axis_names[0])
        attend = jax.shard_map(attend, mesh=mesh, in_specs=(rows,) * 5, out_specs=rows, check_vma=False)
    out = attend(q, k.astype(q.dtype), v, key_mask, keys)
    return out[:, :seq, :, :dim]


def fused_attention_fn(mesh=None):
    """What SelfAttention.fused_attention_fn is set to: flash_attention, split over `mesh`'s batch axis if given."""
    return flash_attention if mesh is None else functools.partial(flash_attention, mesh=mesh)


def use_fused_attention_in(model, on=True, mesh=None):
    """Sets (or clears) flash_attention as the training path of every SelfAttention in any Keras model or layer
    (a fine-tuning model, an encoder): called instead of the explicit path when the layer trains with attention
    dropout and is not causal. Set before the step is traced; returns how many layers it set. `mesh`: as
    flash_attention's, for a step data parallel over several devices."""
    from model.attention import SelfAttention

    layers = [layer for layer in model._flatten_layers(include_self=True, recursive=True)
              if isinstance(layer, SelfAttention)]
    for layer in layers:
        layer.fused_attention_fn = fused_attention_fn(mesh) if on else None
    return len(layers)
