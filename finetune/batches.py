"""Length-bucketed batches: each batch is padded to its own longest example, not to max_seq_length.

Training draws batches the "sortish" way: shuffle all examples, cut the order into pools of
`pool_batches` batches, sort each pool by length, cut it into batches and shuffle the batches. Every
example is in exactly one batch per epoch and none is truncated (the features are already within
max_seq_length). Evaluation sorts everything by length and keeps the original order in `index`.
With bucketing off every batch is padded to max_seq_length (the original's fixed shapes).

`pad_to_multiple` rounds each bucketed length up to a multiple (capped at max_seq_length): a compiler
that specialises on shapes (JAX's jit) then sees at most max_seq_length / multiple lengths instead of
one per distinct longest example. The extra positions are masked, so outputs change only by rounding.
"""
from typing import Dict, Iterator, List, Optional

import numpy as np


def batch_order(lengths, batch_size, rng: Optional[np.random.Generator], pool_batches=50) -> List[np.ndarray]:
    """Lists of example indices, one per batch. rng None: evaluation order (sorted by length, stable)."""
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    order = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool):
        members = order[start:start + pool]
        members = members[np.argsort(lengths[members], kind="stable")]
        batches += [members[i:i + batch_size] for i in range(0, len(members), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def pad_batch(sequences: Dict[str, List[np.ndarray]], indices, length: int) -> Dict[str, np.ndarray]:
    """Pads the chosen examples' sequences to `length` with zeros; adds input_mask."""
    first = sequences["input_ids"]
    out = {}
    for name, values in sequences.items():
        array = np.zeros((len(indices), length), np.int32)
        for row, index in enumerate(indices):
            array[row, :len(values[index])] = values[index]
        out[name] = array
    mask = np.zeros((len(indices), length), np.int32)
    for row, index in enumerate(indices):
        mask[row, :len(first[index])] = 1
    out["input_mask"] = mask
    return out


def iterate_batches(sequences: Dict[str, List[np.ndarray]], scalars: Dict[str, np.ndarray], batch_size: int,
                    max_seq_length: int, rng=None, bucketing=True, pool_batches=50,
                    min_length: int = 1, pad_to_multiple: int = 0) -> Iterator[dict]:
    """Padded batches of `sequences` (per-example int arrays) and `scalars` (per-example values); each
    batch also has "index" (the examples' positions). Without bucketing, order is shuffled or kept.
    `min_length`: the shortest padded length (the span head's beam needs that many positions).
    `pad_to_multiple` > 0: bucketed lengths rounded up to a multiple of it, at most max_seq_length."""
    lengths = np.array([len(v) for v in sequences["input_ids"]])
    if bucketing:
        groups = batch_order(lengths, batch_size, rng, pool_batches)
    else:
        order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
        groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for indices in groups:
        length = max(int(lengths[indices].max()), min_length) if bucketing else max_seq_length
        if bucketing and pad_to_multiple > 0:
            length = min(-(-length // pad_to_multiple) * pad_to_multiple, max(max_seq_length, length))
        batch = pad_batch(sequences, indices, length)
        for name, values in scalars.items():
            batch[name] = values[indices]
        batch["index"] = np.asarray(indices)
        yield batch
