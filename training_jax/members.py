"""Trains the members of one task at once (models × trials): one jitted jax.vmap of JaxTrainer's update
over a member axis, instead of one member's updates after another's (issue 33).

Each member is what TrialRunner would have trained alone (its own model, optimizer, dropout seed
generators and batch order from its trial's seed): the states are stacked on a leading axis, each
step takes every member's next batch (stacked: members of one seed, as the models of one trial, draw
the same batches), and at the end each member's slice is
written back to its own variables, so prediction, evaluation and results files are TrialRunner's.
The numbers are the separate runs' within float32 rounding (a batched matmul may sum in another
order; tests/test_jax_finetune_vmap.py). One program per head kind and batch shape for all members.
"""
import math
import time

import jax
import numpy as np

from data.progress import ProgressLine
from finetune.batches import grow_rows
from finetune.loop import model_inputs


def train_members(trainers, arguments):
    """Trains JaxTrainers together; `arguments`: each one's trainer.train arguments (features by task,
    steps, seed, reporter, label), the same features and steps for all. Returns the training seconds."""
    start = time.monotonic()
    features, num_steps = arguments[0][0], arguments[0][1]
    same_features = {name: id(value) for name, value in features.items()}
    if any(a[1] != num_steps or {name: id(value) for name, value in a[0].items()} != same_features
           for a in arguments):
        raise ValueError("members trained together need the same training features and number of steps")
    seeds, reporters = [a[2] for a in arguments], [a[3] for a in arguments]
    first = trainers[0]
    rows, interval = first.config.train_batch_size, first.config.iterations_per_loop
    streams = [_batch_stream(trainer, features, np.random.default_rng(seed)) for trainer, seed in zip(trainers, seeds)]
    state = _stack([trainer.state for trainer in trainers])
    progress = ProgressLine(f"fine-tuning {len(trainers)} members together", num_steps,
                            lambda done, elapsed: f"step {int(done)}/{num_steps}, {done / elapsed:.2f} steps/s")
    losses, last_means = [], np.full(len(trainers), np.nan)
    for step in range(1, num_steps + 1):
        drawn = [next(stream) for stream in streams]
        task = drawn[0][0]
        if any(t.name != task.name for t, _ in drawn):
            raise ValueError("members trained together must draw the same task's batch at each step")
        inputs = [grow_rows(model_inputs(batch), rows) for _, batch in drawn]
        state, loss = first.members_train_fn(task)(state, stack_batches(inputs), first._schedule_steps)
        losses.append(loss)  # read when logged, so the device is not made to wait after every update
        if step % interval == 0 or step == num_steps or step == 1:
            last_means = np.mean(np.asarray(losses, np.float64), axis=0)
            _report(trainers, reporters, state, step, last_means)
            losses = []
        progress.update(step, f"mean loss {np.mean(last_means):.4f}")
    for number, trainer in enumerate(trainers):
        trainer._state = _member(state, number)
        trainer.finish_training()
    progress.finish(num_steps, f"mean loss {np.mean(last_means):.4f}")
    seconds = time.monotonic() - start
    for trainer in trainers:
        if trainer.timings is not None:
            trainer.timings.append({"updates": num_steps, "seconds": seconds})
    diverged = [n for n, mean in enumerate(last_means) if not math.isfinite(mean)]
    if diverged:
        raise RuntimeError(f"fine-tuning diverged (member {diverged[0]}: loss {last_means[diverged[0]]}); "
                           "lower learning_rate")
    return seconds


def stack_batches(inputs):
    """The members' batches on a leading axis; sequences of different bucketed lengths padded with zeros
    (input_mask 0) to the longest, as a batch of that bucket would be."""
    length = max(batch["input_ids"].shape[1] for batch in inputs)

    def padded(batch):
        own = batch["input_ids"].shape[1]
        return {key: np.pad(value, [(0, 0), (0, length - own)] + [(0, 0)] * (value.ndim - 2))
                if value.ndim >= 2 and value.shape[1] == own else value for key, value in batch.items()}

    inputs = [padded(batch) for batch in inputs]
    return {key: np.stack([batch[key] for batch in inputs]) for key in inputs[0]}


@jax.jit
def _stack(states):
    """The members' states on a leading axis: one program for the whole tree, not one per array shape."""
    return jax.tree.map(lambda *values: jax.numpy.stack(values), *states)


@jax.jit
def _member(state, number):
    """One member's slice of a stacked state (`number` an input: one program for all members)."""
    return jax.tree.map(lambda value: value[number], state)


def _batch_stream(trainer, features, rng):
    """The batches BaseTrainer.train draws, epoch after epoch, from the trial's generator."""
    while True:
        yield from trainer.epoch_batches(features, rng)


def _report(trainers, reporters, state, step, means):
    for number, (trainer, reporter) in enumerate(zip(trainers, reporters)):
        if reporter is not None:
            rate = trainer.learning_rate_at(_member(state[2], number))
            reporter.scalars(reporter.train_writer, step, {"loss": float(means[number]), "learning_rate": rate})
