"""Fine-tuning's updates K at a time: one dispatch runs a block of K updates (lax.scan over the block's batches, as
training_jax.pretrain does for pretraining), the batches padded to the block's bucket length
(training_jax.finetune_buckets).

Why: at GLUE's batch of 32 a small model's update takes milliseconds, so the host's work per update (padding a
batch, sending it, one dispatch) is a large share of it; here the host sends one block of K batches per K
updates, gathered with NumPy from the task's examples padded once (K × 32 × 128 ids: under a megabyte). Nothing
of that is a compiled program, so the only programs a task adds are its block updates: one per head kind,
bucket length and K, whatever the task's size. The updates are JaxTrainer's own (its _update_fn, the same loss
through BaseTrainer.batch_loss): a block of K is K single updates within float32 rounding (bit for bit on the
CPU; tests/test_jax_finetune_buckets.py). A block shorter than K (the run's last) runs its missing steps as
no-ops (lax.cond leaves the state as it is), so each bucket length compiles one program. Several trainers of one
seed (the models of one trial) train together in one update vmapped over them (studies.device_path.members), sharing
the block's batches; the state is read from the variables (and stacked, and split) on the host, which compiles
nothing either. Over several devices (JaxTrainer's placement) the state is replicated and each block's batches
split along their rows ([K, rows, ...]): the same program, partitioned by jit (tests/test_jax_finetune_devices.py).
"""
import math
import time

import jax
import numpy as np

from data.progress import ProgressLine
from finetune.batches import EXAMPLE_WEIGHT
from training_jax.finetune_buckets import training_blocks

_PADDED = {}  # id(features) -> (features, their padded arrays): a task's examples padded once


def state_variables(trainer):
    """The variables of a training state: (trainable, non-trainable, optimizer)."""
    return trainer.model.trainable_variables, trainer.model.non_trainable_variables, trainer.optimizer.variables


def initial_state(trainers):
    """The training state read from the trainers' variables, stacked on a leading member axis when there are
    several: built on the host and sent once (fresh buffers the update may donate), so no program is compiled
    for it, where copying each variable on the device would compile one per shape."""
    values = [tuple([np.asarray(v.value) for v in group] for group in state_variables(t)) for t in trainers]
    state = values[0] if len(trainers) == 1 else jax.tree.map(lambda *members: np.stack(members), *values)
    return jax.device_put(state) if trainers[0].spread is None else trainers[0].spread.put(state)  # or replicated


def member(state, number):
    """One member's slice of a stacked state, on the host (no program compiled)."""
    return jax.tree.map(lambda value: np.asarray(value)[number], state)


def task_examples(features, max_seq_length):
    """A task's training features as arrays: every sequence zero-padded to max_seq_length, each example's
    length (its input_mask is computed from it) and the per-example scalars (labels) in 32 bits, as the
    device takes them (so that a batch's shapes and dtypes are those a program was compiled for)."""
    key = id(features)
    if key not in _PADDED or _PADDED[key][0] is not features:
        sequences = features["sequences"]
        lengths = np.array([len(v) for v in sequences["input_ids"]], np.int32)
        padded = {}
        for name, values in sequences.items():
            array = np.zeros((len(values), max_seq_length), np.int32)
            for row, value in enumerate(values):
                array[row, :len(value)] = value
            padded[name] = array
        arrays = {"sequences": padded, "lengths": lengths,
                  "scalars": {name: _in_32_bits(np.asarray(values)) for name, values in features["scalars"].items()}}
        _PADDED[key] = (features, arrays)
    return _PADDED[key][1]


def _in_32_bits(values):
    if values.dtype.kind == "f":
        return values.astype(np.float32)
    if values.dtype.kind in "iu":
        return values.astype(np.int32)
    return values


def gather_batch(examples, indices, weights, length):
    """The batch of `indices` ([rows], or [K, rows] for K batches) padded to `length`, as finetune.batches.pad_batch
    + grow_rows give it: sequences cut to `length`, input_mask 1 on each example's tokens, the scalars,
    EXAMPLE_WEIGHT (NumPy, from task_examples)."""
    batch = {name: values[indices, :length] for name, values in examples["sequences"].items()}
    batch["input_mask"] = (np.arange(length) < examples["lengths"][indices][..., None]).astype(np.int32)
    batch.update({name: values[indices] for name, values in examples["scalars"].items()})
    batch[EXAMPLE_WEIGHT] = weights
    return batch


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
    """(task, its padded examples, the blocks of the trainers' training: training_blocks) for trainers of one
    task, features, steps and seed; ValueError otherwise."""
    (features_by_task, num_steps, seed, _, _), first = arguments[0], trainers[0]
    if any((a[0], a[1], a[2]) != (features_by_task, num_steps, seed) for a in arguments) or len(features_by_task) != 1:
        raise ValueError("trained in blocks together: one task, the same features, steps and seed")
    (name, features), = features_by_task.items()
    task, config = first.tasks[name], first.config
    examples = task_examples(features, config.max_seq_length)
    lengths = [len(v) for v in features["sequences"]["input_ids"]]
    blocks = training_blocks(lengths, config.train_batch_size, num_steps, np.random.default_rng(seed),
                             first.block_steps, first.buckets, config.max_seq_length, config.bucket_pool_batches,
                             first.min_length(task))
    return task, examples, blocks


def block_calls(trainers, arguments):
    """Each block program these trainers' training can call, with its arguments' shapes and dtypes
    ([(program, (state, batches, active, schedule steps))], one per bucket length the task can use: those its
    plan uses and every other bucket at or above its shortest length), for training_jax.compile_ahead; the same
    plan train_in_blocks trains (trainers of one task, steps and seed). The lengths this plan does not use cost one
    more lowering here and a compile in a thread beside the others, and spare the next task, trial or seed of the
    same head kind its own: the second H200 window compiled RTE's two lengths ahead, then CoLA's 32 for ~30 s."""
    task, examples, blocks = block_plan(trainers, arguments)
    first, rows = trainers[0], trainers[0].config.train_batch_size
    together = len(trainers) > 1
    spread = first.spread  # several devices: the shapes carry the shardings the calls' arguments will have
    replicated, rows_split = (None, None) if spread is None else (spread.replicated, spread.rows(axis=1))
    state = tuple([jax.ShapeDtypeStruct(((len(trainers),) if together else ()) + tuple(v.shape), v.value.dtype,
                                        sharding=replicated)
                   for v in group] for group in state_variables(first))
    block_steps = first.block_steps
    indices = np.zeros((block_steps, rows), np.int32)
    weights = np.zeros((block_steps, rows), np.float32)
    active = jax.ShapeDtypeStruct((block_steps,), np.bool_, sharding=replicated)
    calls = []
    shortest = first.min_length(task)
    for length in sorted({block.length for block in blocks} | {n for n in first.buckets or () if n >= shortest}):
        batches = jax.tree.map(lambda value: _shape_of(value, rows_split),
                               gather_batch(examples, indices, weights, length))
        calls.append((first.block_fn(task, length, together),
                      (state, batches, active, _shape_of(first._schedule_steps, replicated))))
    return calls


def _shape_of(value, sharding=None):
    return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding)


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
    state = initial_state(trainers)
    reporters = [a[3] for a in arguments]
    progress = ProgressLine(f"fine-tuning {label}".strip() + (f", {len(trainers)} models together" if together else ""),
                            num_steps, lambda done, elapsed: f"step {int(done)}/{num_steps}, {done / elapsed:.2f} steps/s")
    step, losses, means = 0, [], np.full(len(trainers), np.nan)
    for block in blocks:
        indices, weights, active = block_arrays(block, first.block_steps, config.train_batch_size)
        batches = first.on_devices(gather_batch(examples, indices, weights, block.length), rows_axis=1)
        program = first.block_fn(task, block.length, together)
        state, block_losses = program(state, batches, first.on_devices(active), first._schedule_steps)
        count = len(block.batches)
        losses.append((block_losses, count))  # read when logged: the device is not made to wait per block
        before, step = step, step + count
        if step // config.iterations_per_loop > before // config.iterations_per_loop or step == num_steps \
                or before == 0:
            means = _mean_losses(losses, len(trainers))
            losses = []
            for number, (trainer, reporter) in enumerate(zip(trainers, reporters)):
                if reporter is not None:
                    iterations = state[2][trainer.iterations_index]  # the schedule's one input
                    reporter.scalars(reporter.train_writer, step, {
                        "loss": float(means[number]),
                        "learning_rate": trainer.learning_rate_after(np.asarray(iterations)[number] if together
                                                                     else iterations)})
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
