"""Trains the members of one task at once (the models of a trial): one jitted jax.vmap of JaxTrainer's block of
updates over a member axis, instead of one model's updates after another's (issues 33 and 42).

Each member is what TrialRunner would have trained alone (its own model, optimizer and dropout seed
generators; the batch order of its trial's seed): the states are stacked on a leading axis, the members of
one seed share each block's example indices (training_jax.finetune_blocks), and at the end each member's slice
is written back to its own variables, so prediction, evaluation and results files are TrialRunner's. The
numbers are the separate runs' within float32 rounding (a batched matmul may sum in another order; on the CPU
they come out equal bit for bit; tests/test_jax_finetune_buckets.py). One program per head kind, bucket length
and K for all members. Members of different seeds (other batch orders) train one seed after another.
"""
import time

from training_jax.finetune_blocks import train_in_blocks


def train_members(trainers, arguments):
    """Trains JaxTrainers (with block_steps) together; `arguments`: each one's trainer.train arguments
    (features by task, steps, seed, reporter, label), one task and the same steps for all. Returns the
    training seconds."""
    start = time.monotonic()
    if not all(trainer.block_steps for trainer in trainers):
        raise ValueError("members trained together train in blocks: give each JaxTrainer block_steps >= 1")
    for seed in dict.fromkeys(a[2] for a in arguments):
        chosen = [n for n, a in enumerate(arguments) if a[2] == seed]
        train_in_blocks([trainers[n] for n in chosen], [arguments[n] for n in chosen])
    return time.monotonic() - start
