"""The original's scatter_update, in keras.ops."""
from keras import ops


def scatter_update(sequence, updates, positions):
    """The original pretrain_helpers.scatter_update for int32 [batch, seq] sequences.

    Writes updates [batch, n] at positions [batch, n]. Like the original: writes to position 0 are
    ignored (that is where unused slots point), and a position drawn k times receives the integer mean
    (sum // k) of its k updates, which is an exact copy when the k updates agree (the [MASK] id, the
    original ids) and, as in the original, another token when k different samples land on it.
    Returns (updated sequence, int32 mask of the positions written).
    """
    sequence = ops.convert_to_tensor(sequence)
    shape = ops.shape(sequence)
    batch, length = shape[0], shape[1]
    positions = ops.cast(positions, "int32")
    flat_positions = ops.reshape(positions + length * ops.arange(batch, dtype="int32")[:, None], (-1, 1))
    flat_updates = ops.reshape(ops.cast(updates, "int32"), (-1,))
    summed = ops.reshape(ops.scatter(flat_positions, flat_updates, (batch * length,)), (batch, length))
    counts = ops.scatter(flat_positions, ops.ones_like(flat_updates), (batch * length,))
    not_first_token = ops.cast(ops.arange(length) > 0, "int32")[None, :]
    counts = ops.reshape(counts, (batch, length)) * not_first_token
    written = counts > 0
    updated = ops.where(written, ops.floor_divide(summed, ops.maximum(counts, 1)), ops.cast(sequence, "int32"))
    return updated, ops.cast(written, "int32")
