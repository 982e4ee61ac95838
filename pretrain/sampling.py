"""Sampling fakes from the generator and building the discriminator's input, as the original did."""
import functools

import keras
from keras import ops
from keras import random

from pretrain.sequence_ops import scatter_update

DISALLOW_PENALTY = 1000.0  # the original subtracts 1000 from the disallowed logit


def argmax_last_axis(values):
    """argmax over the last axis (the first of equal maxima), as int32: through top_k or a reduction,
    the same index either way (tests/test_step_kernels.py), whichever is faster where the step runs."""
    if argmax_by_top_k():
        return ops.cast(ops.top_k(values, 1)[1][..., 0], "int32")
    return ops.cast(ops.argmax(values, axis=-1), "int32")


@functools.cache
def argmax_by_top_k():
    """True under TensorFlow and on a CPU: top_k, about 3x faster there than ops.argmax, which adds a
    negative-zero fix-up pass over the whole [batch, n, vocabulary] tensor on CPUs. False on an accelerator
    under JAX: ops.argmax is one reduction there, where XLA sorts for a top_k."""
    return keras.backend.backend() == "tensorflow" or keras.distribution.list_devices()[0].startswith("cpu")


def gumbel_noise(shape, seed):
    """-log(-log(u + 1e-9) + 1e-9), u ~ U[0, 1), float32."""
    uniform = random.uniform(shape, minval=0.0, maxval=1.0, dtype="float32", seed=seed)
    return -ops.log(-ops.log(uniform + 1e-9) + 1e-9)


def sample_tokens(logits, seed, temperature=1.0, disallow_ids=None):
    """Gumbel-max sample of int32 ids [batch, n] from logits [batch, n, V]: argmax(logits/T + noise).

    No gradient flows back (the discriminator never trains the generator). With `disallow_ids`
    (the original tokens, for disallow_correct) their logit is lowered by 1000 first.
    """
    logits = ops.stop_gradient(ops.cast(logits, "float32")) / temperature
    if disallow_ids is not None:
        logits = logits - DISALLOW_PENALTY * ops.one_hot(disallow_ids, ops.shape(logits)[-1],
                                                         dtype="float32")
    return argmax_last_axis(logits + gumbel_noise(ops.shape(logits), seed))


def uniform_generator_logits(batch, num_predictions, vocab_size):
    """The original's uniform_generator: all-zero logits, i.e. fakes uniform over the vocabulary."""
    return ops.zeros((batch, num_predictions, vocab_size), dtype="float32")


def corrupt_inputs(input_ids, sampled_ids, positions, every_written_is_fake=False):
    """Puts samples into every chosen position; returns (fake input_ids, labels int32 [batch, seq]).

    A label is 1 (fake) where a position was written AND the token differs from the original: a
    correctly sampled token counts as real. With `every_written_is_fake` (Electric, whose noise-contrastive
    loss counts a sample as noise whatever it drew) every written position is 1.
    """
    input_ids = ops.cast(input_ids, "int32")
    fake_ids, written = scatter_update(input_ids, sampled_ids, positions)
    labels = written if every_written_is_fake else written * ops.cast(ops.not_equal(fake_ids, input_ids), "int32")
    return ops.stop_gradient(fake_ids), labels
