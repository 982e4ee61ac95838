"""Which of JAX's random-bit generators the step's draws use (dropout masks, masking, Gumbel noise): a named option.

"threefry2x32" (JAX's default and ours) hashes a counter per 32 bits in many elementwise integer ops; "rbg" (and
"unsafe_rbg", which differs only in how keys split, which the step never does) draws the bulk bits with XLA's
RngBitGenerator, one op that accelerators run as a kernel of its own. Keras's jax SeedGenerator does not follow
JAX's jax_default_prng_impl flag: it keeps a uint32[2] threefry seed and hands it to jax.random as a raw key, which
under "rbg" alone fails (an rbg key is uint32[4]). So `use_prng` sets the flag and also translates each seed Keras
draws: threefry hashes its two words into four (a few scalar ops per draw), which key RngBitGenerator. The seed
states (and so checkpoints and the step's non-trainable variables) stay Keras's; only the bits drawn from them
change. Call it after the model is built (so its initial weights are the default's) and before the step is traced.
"""
import jax
import jax.numpy as jnp
from keras.src.backend.jax import random as keras_jax_random

DEFAULT_PRNG = "threefry2x32"
PRNG_IMPLS = (DEFAULT_PRNG, "rbg", "unsafe_rbg")
_KERAS_DRAW_SEED = keras_jax_random.jax_draw_seed


def keyed_for(impl):
    """Keras's seed drawing with each raw uint32[2] seed made a typed key of `impl` (threefry-hashed to its size)."""
    key_shape = jax.random.key_data(jax.random.key(0, impl=impl)).shape

    def draw_seed(seed):
        seed = _KERAS_DRAW_SEED(seed)
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
            return seed
        threefry_key = jax.random.wrap_key_data(jnp.asarray(seed, "uint32"), impl=DEFAULT_PRNG)
        return jax.random.wrap_key_data(jax.random.bits(threefry_key, key_shape, jnp.uint32), impl=impl)

    return draw_seed


def use_prng(impl=DEFAULT_PRNG):
    """Every Keras random draw after this (under JAX) takes its bits from `impl`; returns the previous impl."""
    if impl not in PRNG_IMPLS:
        raise ValueError(f"no PRNG implementation {impl!r}; choose one of {', '.join(PRNG_IMPLS)}")
    previous = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", impl)
    keras_jax_random.jax_draw_seed = _KERAS_DRAW_SEED if impl == DEFAULT_PRNG else keyed_for(impl)
    return previous
