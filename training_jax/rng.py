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
DEFAULT_PRNG = "threefry2x32"
PRNG_IMPLS = (DEFAULT_PRNG, "rbg", "unsafe_rbg")
_KERAS_DRAW_SEED = []  # Keras's own seed drawing, kept at the first use_prng (jax is imported only then)


def keras_draw_seed():
    from keras.src.backend.jax import random as keras_jax_random

    if not _KERAS_DRAW_SEED:
        _KERAS_DRAW_SEED.append(keras_jax_random.jax_draw_seed)
    return _KERAS_DRAW_SEED[0]


def keyed_for(impl):
    """Keras's seed drawing with each raw uint32[2] seed made a typed key of `impl` (threefry-hashed to its size)."""
    import jax
    import jax.numpy as jnp

    key_shape = jax.random.key_data(jax.random.key(0, impl=impl)).shape
    keras_draw = keras_draw_seed()

    def draw_seed(seed):
        seed = keras_draw(seed)
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
            return seed
        threefry_key = jax.random.wrap_key_data(jnp.asarray(seed, "uint32"), impl=DEFAULT_PRNG)
        return jax.random.wrap_key_data(jax.random.bits(threefry_key, key_shape, jnp.uint32), impl=impl)

    return draw_seed


def use_prng(impl=DEFAULT_PRNG):
    """Every Keras random draw after this (under JAX) takes its bits from `impl`; returns the previous impl."""
    import jax
    from keras.src.backend.jax import random as keras_jax_random

    if impl not in PRNG_IMPLS:
        raise ValueError(f"no PRNG implementation {impl!r}; choose one of {', '.join(PRNG_IMPLS)}")
    previous = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", impl)
    keras_jax_random.jax_draw_seed = keras_draw_seed() if impl == DEFAULT_PRNG else keyed_for(impl)
    return previous
