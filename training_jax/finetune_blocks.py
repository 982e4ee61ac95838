"""Fine-tuning's updates K at a time: the task's training examples live on the device, and one dispatch runs a
block of K updates (lax.scan over the block's batches, as training_jax.pretrain does for pretraining), the
batches gathered there from the block's example indices and padded to its bucket length
(training_jax.finetune_buckets).

Why: at GLUE's batch of 32 a small model's update takes milliseconds, so the host's work per update (padding a
batch, sending it, one dispatch) is a large share of it; here the host sends K × batch indices per K updates.
The batches are gathered by a small program of their own (its shape is the task's), so that the update's
program is one per head kind, bucket length and K, whatever the task's size. The updates are JaxTrainer's own
(its _update_fn, the same loss through BaseTrainer.batch_loss): a block of K is K single updates within float32
rounding (bit for bit on the CPU; tests/test_jax_finetune_buckets.py). A block shorter than K (the run's last)
runs its missing steps as no-ops (lax.cond leaves the state as it is), so each bucket length compiles one
program. Several trainers of one seed (the models of one trial) train together in one update vmapped over them
(training_jax.members), sharing the block's batches.
"""
import math
import time

import jax
import numpy as np

from data.progress import ProgressLine
from finetune.batches import EXAMPLE_WEIGHT
from training_jax.finetune_buckets import training_blocks

_RESIDENT = {}  # id(features) -> (features, their arrays on the device): a task's examples uploaded once


@jax.jit
def stack(states):
    """The members' states on a leading axis: one program for the whole tree, not one per array shape."""
    return jax.tree.map(lambda *values: jax.numpy.stack(values), *states)


@jax.jit
def member(state, number):
    """One member's slice of a stacked state (`number` an input: one program for all members)."""
    return jax.tree.map(lambda value: value[number], state)


def resident_examples(features, max_seq_length):
    """A task's training features as device arrays: every sequence zero-padded to max_seq_length, each
    example's length (its input_mask is computed from it) and the per-example scalars (labels)."""
    key = id(features)
    if key not in _RESIDENT or _RESIDENT[key][0] is not features:
        sequences = features["sequences"]
        lengths = np.array([len(v) for v in sequences["input_ids"]], np.int32)
        padded = {}
        for name, values in sequences.items():
            array = np.zeros((len(values), max_seq_length), np.int32)
            for row, value in enumerate(values):
                array[row, :len(value)] = value
            padded[name] = array
        arrays = {"sequences": padded, "lengths": lengths,
                  "scalars": {name: np.asarray(values) for name, values in features["scalars"].items()}}
        _RESIDENT[key] = (features, jax.device_put(arrays))
    return _RESIDENT[key][1]


def gather_batch(examples, indices, weights, length):
    """The batch of `indices` ([rows], or [K, rows] for K batches) padded to `length` (a Python int), as
    finetune.batches.pad_batch + grow_rows give it: sequences cut to `length`, input_mask 1 on each example's
    tokens, the scalars, EXAMPLE_WEIGHT."""
    import jax.numpy as jnp

    batch = {name: values[indices, :length] for name, values in examples["sequences"].items()}
    batch["input_mask"] = (jnp.arange(length) < examples["lengths"][indices][..., None]).astype(jnp.int32)
    batch.update({name: values[indices] for name, values in examples["scalars"].items()})
    batch[EXAMPLE_WEIGHT] = weights
    return batch


# A program of its own (milliseconds to compile), so that the update's program does not depend on how many
# examples a task has: tasks of one head kind share it, as today's single updates do.
gather_block = jax.jit(gather_batch, static_argnums=3)


def block_program(update):
    """(state, batches {name: [K, rows, ...]}, active [K], schedule steps) -> (state, losses [K]), not yet
    compiled: `update` (JaxTrainer._update_fn) on each of the K batches in turn."""
    import jax.numpy as jnp

    def one(state, batch, schedule_steps):
        state, loss = update(state, batch, schedule_steps)
        return state, loss.astype(jnp.float32)

    def block(state, batches, active, schedule_steps):
        if active.shape[0] == 1:  # one update: no loop, no condition (every block of one is full)
            state, loss = one(state, jax.tree.map(lambda value: value[0], batches), schedule_steps)
            return state, loss[None]

        def body(state, step):
            batch, on = step
            return jax.lax.cond(on, lambda s: one(s, batch, schedule_steps),
                                lambda s: (s, jnp.zeros((), jnp.float32)), state)

        return jax.lax.scan(body, state, (batches, active))

    return block


def block_arrays(block, block_steps, rows):
    """The host's part of a block: indices [K, rows] (a short batch filled with its first example), weights
    (0 on the fill) and which of the K steps are real."""
    indices = np.zeros((block_steps, rows), np.int32)
    weights = np.zeros((block_steps, rows), np.float32)
    for step, batch in enumerate(block.batches):
        indices[step, :len(batch)], indices[step, len(batch):] = batch, batch[0]
        weights[step, :len(batch)] = 1.0
    active = np.arange(block_steps) < len(block.batches)
    return indices, weights, active


def block_plan(trainers, arguments):
    """(task, its examples on the device, the blocks of the trainers' training: training_blocks) for trainers of
    one task, features, steps and seed; ValueError otherwise."""
    (features_by_task, num_steps, seed, _, _), first = arguments[0], trainers[0]
    if any((a[0], a[1], a[2]) != (features_by_task, num_steps, seed) for a in arguments) or len(features_by_task) != 1:
        raise ValueError("trained in blocks together: one task, the same features, steps and seed")
    (name, features), = features_by_task.items()
    task, config = first.tasks[name], first.config
    examples = resident_examples(features, config.max_seq_length)
    lengths = [len(v) for v in features["sequences"]["input_ids"]]
    blocks = training_blocks(lengths, config.train_batch_size, num_steps, np.random.default_rng(seed),
                             first.block_steps, first.buckets, config.max_seq_length, config.bucket_pool_batches,
                             first.min_length(task))
    return task, examples, blocks


def block_calls(trainers, arguments):
    """Each block program these trainers' training will call, with its arguments' shapes and dtypes
    ([(program, (state, batches, active, schedule steps))], one per bucket length the plan uses), for
    training_jax.compile_ahead; the same plan train_in_blocks trains (trainers of one task, steps and seed)."""
    task, examples, blocks = block_plan(trainers, arguments)
    first, rows = trainers[0], trainers[0].config.train_batch_size
    together = len(trainers) > 1
    state = (jax.eval_shape(lambda states: stack(states), [t.state for t in trainers]) if together
             else jax.tree.map(_shape_of, first.state))
    block_steps = first.block_steps
    indices = jax.ShapeDtypeStruct((block_steps, rows), np.int32)
    weights = jax.ShapeDtypeStruct((block_steps, rows), np.float32)
    active = jax.ShapeDtypeStruct((block_steps,), np.bool_)
    calls = []
    for length in sorted({block.length for block in blocks}):
        batches = jax.eval_shape(lambda e, i, w, n=length: gather_batch(e, i, w, n), examples, indices, weights)
        calls.append((first.block_fn(task, length, together),
                      (state, batches, active, _shape_of(first._schedule_steps))))
    return calls


def _shape_of(value):
    return jax.ShapeDtypeStruct(value.shape, value.dtype)


def train_in_blocks(trainers, arguments):
    """Trains JaxTrainers of one task and one seed (one trainer, or the models of one trial: then one update
    vmapped over them); `arguments`: each one's trainer.train arguments (features by task, steps, seed,
    reporter, label). Returns (each one's mean loss of its last logging interval, training seconds)."""
    start = time.monotonic()
    if trainers[0].compile_ahead:  # every bucket's program at once (none left where the run compiled them ahead)
        from training_jax.compile_ahead import compile_ahead

        compile_ahead(block_calls(trainers, arguments))
    task, examples, blocks = block_plan(trainers, arguments)
    (_, num_steps, _, _, label), first, config = arguments[0], trainers[0], trainers[0].config
    together = len(trainers) > 1
    state = stack([t.state for t in trainers]) if together else first.state
    reporters = [a[3] for a in arguments]
    progress = ProgressLine(f"fine-tuning {label}".strip() + (f", {len(trainers)} models together" if together else ""),
                            num_steps, lambda done, elapsed: f"step {int(done)}/{num_steps}, {done / elapsed:.2f} steps/s")
    step, losses, means = 0, [], np.full(len(trainers), np.nan)
    for block in blocks:
        indices, weights, active = block_arrays(block, first.block_steps, config.train_batch_size)
        batches = gather_block(examples, indices, weights, block.length)
        program = first.block_fn(task, block.length, together)
        state, block_losses = program(state, batches, active, first._schedule_steps)
        count = len(block.batches)
        losses.append((block_losses, count))  # read when logged: the device is not made to wait per block
        before, step = step, step + count
        if step // config.iterations_per_loop > before // config.iterations_per_loop or step == num_steps \
                or before == 0:
            means = _mean_losses(losses, len(trainers))
            losses = []
            for number, (trainer, reporter) in enumerate(zip(trainers, reporters)):
                if reporter is not None:
                    optimizer_values = member(state[2], number) if together else state[2]
                    reporter.scalars(reporter.train_writer, step, {
                        "loss": float(means[number]), "learning_rate": trainer.learning_rate_at(optimizer_values)})
        progress.update(step, f"loss {np.mean(means):.4f}")
    for number, trainer in enumerate(trainers):
        trainer._state = member(state, number) if together else state
        trainer.finish_training()
    progress.finish(step, f"loss {np.mean(means):.4f}")
    diverged = [n for n, mean in enumerate(means) if not math.isfinite(mean)]
    if diverged:
        raise RuntimeError(f"fine-tuning diverged (model {diverged[0]}: loss {means[diverged[0]]}); lower "
                           "learning_rate")
    return means, time.monotonic() - start


def _mean_losses(losses, members):
    """Each member's mean loss over the real steps of the blocks since the last report."""
    kept = [np.asarray(values, np.float64).reshape(members, -1)[:, :count] for values, count in losses]
    return np.concatenate(kept, axis=1).mean(axis=1)
