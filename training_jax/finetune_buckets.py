"""Which examples train together, and at which length: fine-tuning's batches planned as blocks of K updates of
one padded length each (NumPy only; training_jax.finetune_blocks runs them on the device).

Why: a compiler that specialises on shapes compiles each (K, length) once, so the lengths must be few; and
GLUE's examples are short (most under 64 tokens), so padding every batch to max_seq_length wastes most of an
update. With buckets (e.g. 32, 64, 128) each batch is padded to the smallest bucket that holds its longest
example; the padding is masked, so its update is the one of the same examples padded to max_seq_length
(within float32 rounding; tests/test_jax_finetune_buckets.py).

Bucketed epochs: shuffle all examples, sort them by length within pools of `pool_batches` batches (so that a
batch is mostly one bucket's), cut into batches (only the epoch's last is smaller), give each batch its
bucket; then each bucket's batches, in order, are cut into blocks of K; a bucket's leftover (< K batches)
moves up to the next bucket (a longer padding changes nothing but the cost), and the largest bucket's
leftover is carried into the next epoch's, so that only the run's very last block can be short. The epoch's
blocks are shuffled. Everything comes from the trial's generator: the same seed, the same training.

Without buckets the batches are BaseTrainer.epoch_batches' (the same draws from the generator, so the same
random batches in the same order, every one at max_seq_length), cut into blocks of K in order: K updates per
dispatch are then exactly today's updates.
"""
import dataclasses
from typing import Iterator, List, Optional, Sequence

import numpy as np


def bucket_lengths(max_seq_length: int, smallest: int = 32) -> List[int]:
    """The default buckets: smallest, twice that, ... up to and including max_seq_length."""
    lengths, length = [], smallest
    while length < max_seq_length:
        lengths.append(length)
        length *= 2
    return lengths + [max_seq_length]


def parse_buckets(text: str, max_seq_length: int) -> List[int]:
    """--bucket-lengths "32,64": sorted, each a multiple of 8 (the tensor cores' tile) and at most
    max_seq_length, which is always added (an example of any length has a bucket). ValueError otherwise."""
    lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    wrong = [n for n in lengths if n <= 0 or n % 8 or n > max_seq_length]
    if wrong:
        raise ValueError(f"bucket length {wrong[0]}: each must be a multiple of 8 and at most max_seq_length "
                         f"{max_seq_length}")
    return sorted(set(lengths) | {max_seq_length})


def bucket_of(longest: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `longest` tokens."""
    for length in buckets:
        if length >= longest:
            return length
    raise ValueError(f"an example of {longest} tokens is longer than the largest bucket {buckets[-1]}")


@dataclasses.dataclass
class Block:
    """Up to K batches (example indices each; the last batch of an epoch may be smaller) padded to `length`."""
    length: int
    batches: List[np.ndarray]


def training_blocks(lengths, batch_size: int, num_steps: int, rng: np.random.Generator, block_steps: int,
                    buckets: Optional[Sequence[int]], max_seq_length: int, pool_batches: int = 50,
                    min_length: int = 1) -> Iterator[Block]:
    """Blocks of `block_steps` batches, `num_steps` batches in all (the last block may be shorter), epoch after
    epoch. `buckets` None: today's random batches at max_seq_length, in today's order."""
    lengths = np.maximum(np.asarray(lengths), min_length)
    remaining, carry = num_steps, []
    while remaining > 0:
        if buckets is None:
            blocks, carry = _cut(carry + _random_batches(len(lengths), batch_size, rng), block_steps,
                                 max_seq_length)
        else:
            blocks, carry = _bucketed_epoch(lengths, batch_size, rng, block_steps, buckets, pool_batches, carry)
        for block in blocks:
            block.batches = block.batches[:remaining]
            remaining -= len(block.batches)
            yield block
            if remaining == 0:
                return
        if 0 < remaining <= len(carry):  # the run ends within the carried leftover: one short block
            yield Block(max_seq_length if buckets is None else buckets[-1], carry[:remaining])
            return


def _random_batches(count, batch_size, rng):
    """BaseTrainer.epoch_batches' batches of one task, from the same draws in the same order: it draws the
    order of the task's batches first (one task: a permutation it does not need), then task_batches' order
    of the examples (tests/test_jax_finetune_buckets.py holds the two together)."""
    rng.permutation(-(-count // batch_size))
    order = rng.permutation(count)
    return [order[i:i + batch_size] for i in range(0, count, batch_size)]


def _cut(batches, block_steps, length):
    """Whole blocks of `batches` in order, and the leftover batches."""
    whole = len(batches) - len(batches) % block_steps
    return ([Block(length, batches[i:i + block_steps]) for i in range(0, whole, block_steps)],
            batches[whole:])


def _bucketed_epoch(lengths, batch_size, rng, block_steps, buckets, pool_batches, carry):
    """One epoch's blocks, shuffled, and the largest bucket's leftover batches (module docstring)."""
    order = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    by_bucket = {length: [] for length in buckets}
    for start in range(0, len(order), pool):
        members = order[start:start + pool]
        members = members[np.argsort(lengths[members], kind="stable")]
        for i in range(0, len(members), batch_size):
            batch = members[i:i + batch_size]
            by_bucket[bucket_of(int(lengths[batch].max()), buckets)].append(batch)
    by_bucket[buckets[-1]] = carry + by_bucket[buckets[-1]]
    blocks, moving_up = [], []
    for length in buckets:
        whole, moving_up = _cut(moving_up + by_bucket[length], block_steps, length)
        blocks += whole
    return [blocks[i] for i in rng.permutation(len(blocks))], moving_up
