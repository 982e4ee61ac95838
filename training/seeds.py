"""Per-replica random streams without per-replica state.

`StepSeedGenerator` is a keras.random.SeedGenerator whose `next()` returns a seed derived from a base
seed tensor (run seed, global replica id, optimizer step, micro-batch) plus a call counter. It holds no
variable, so it works in any replica context, inside XLA and after a restore: replicas draw different
masks, every step draws new ones, and a resumed run draws exactly what the uninterrupted one would.
"""
import keras
from keras import ops
from keras.src.backend import random_seed_dtype

_CALLS_PER_STREAM = 1 << 10


class StepSeedGenerator(keras.random.SeedGenerator):
    """Seeds = [base[0], base[1] * 1024 + call index]; `base` is an int [2] tensor."""

    # super().__init__ is not called: it would make a state variable, which a traced step cannot create
    def __init__(self, base_seed, name="step_seed_generator"):
        self.name = name
        self.backend = keras.backend
        self._initial_seed = None
        self._base = ops.cast(base_seed, random_seed_dtype())
        self._calls = 0

    def next(self, ordered=True):
        index = self._calls
        self._calls += 1
        offset = ops.convert_to_tensor([0, index], dtype=random_seed_dtype())
        scale = ops.convert_to_tensor([1, _CALLS_PER_STREAM], dtype=random_seed_dtype())
        return self._base * scale + offset


def step_base_seed(run_seed, replica_id, step, micro_batch=0, micro_batches=1):
    """int64 [2]: stream (run seed, replica) × counter (step, micro-batch)."""
    import tensorflow as tf

    stream = tf.cast(run_seed, tf.int64) * 1_000_003 + tf.cast(replica_id, tf.int64)
    counter = tf.cast(step, tf.int64) * micro_batches + micro_batch
    return tf.stack([stream, counter])
