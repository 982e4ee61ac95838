"""One fine-tuning trial's loop: train the shared encoder and the task heads, then predict; any backend.

The loop is NumPy and Keras only. With several tasks, by default (multitask_batches "mixed") every batch
is drawn from the examples of all tasks together, as the original's: the encoder runs once, every head
on the whole batch, and each example's loss comes from its own task's head (finetune.losses.mixed_loss);
one optimizer, one clip and one schedule for all. "per_task" makes each update one task's batch, the
batches of all tasks shuffled together, so each task is still seen in proportion to its training set.
With one task the two are the same. Prediction is per task: it batches a split by length and puts the
outputs back in feature order. What is compiled, one update and one forward pass, belongs to a backend's
subclass: finetune.tf_trainer.TFTrainer (tf.function, what run_finetuning.py uses) and
training_jax.finetune.JaxTrainer (jax.jit, for machines without TensorFlow). Both compute the same loss
through BaseTrainer.batch_loss, so a change to it reaches both.
"""
import math

import keras
import numpy as np

from data.progress import ProgressLine
from finetune import batches as batches_lib
from finetune.losses import example_losses, mixed_example_losses, mixed_loss, task_loss
from finetune.tasks import SPAN
from model.optimizers import create_optimizer


def count_steps(train_counts, config):
    """Updates for the run, the original's (finetune/preprocessing.py, _serialize_dataset): the training
    features of all tasks together, padded up to a whole number of batches, int(batches × epochs), so
    that a whole number of epochs is whole batches; at least one; capped by max_train_steps when set."""
    batches = _num_batches(sum(train_counts), config.train_batch_size)
    steps = max(1, int(batches * config.num_train_epochs))
    return min(steps, config.max_train_steps) if config.max_train_steps > 0 else steps


def build_optimizer(config, num_steps, num_layers):
    decay = config.layerwise_lr_decay or None
    return create_optimizer(
        config.learning_rate, num_steps, int(config.warmup_proportion * num_steps),
        weight_decay_rate=config.weight_decay_rate, lr_decay_power=config.lr_decay_power,
        epsilon=config.adam_epsilon, clip_norm=config.clip_norm, layerwise_lr_decay=decay,
        num_layers=num_layers, layerwise_variant=config.layerwise_lr_variant)


def min_length(task, config):
    return config.beam_size if task.kind == SPAN else 1


def task_batches(task, features, config, rng=None, training=False):
    return batches_lib.iterate_batches(
        features["sequences"], features["scalars"] if training else {},
        config.train_batch_size if training else config.eval_batch_size, config.max_seq_length, rng=rng,
        bucketing=config.length_bucketing, pool_batches=config.bucket_pool_batches,
        min_length=min_length(task, config), pad_to_multiple=config.pad_to_multiple)


class MixedTasks:
    """All the tasks at once: what a mixed batch trains (its compiled step is keyed by `name`)."""

    def __init__(self, tasks):
        self.tasks = list(tasks)
        self.name = "+".join(task.name for task in self.tasks)


def model_inputs(batch):
    """A batch without its bookkeeping ("index"): what a compiled step takes."""
    return {key: value for key, value in batch.items() if key != "index"}


class BaseTrainer:
    """Trains a FinetuningModel on its tasks and predicts with it; subclasses supply `step` (one update
    on one padded batch, returning the loss) and `predict_batch` (the head's outputs for one batch).
    A training batch belongs to a task, or to a MixedTasks (a batch of several tasks' examples)."""

    def __init__(self, model, tasks, optimizer, config):
        self.model, self.optimizer, self.config = model, optimizer, config
        self.tasks = {task.name: task for task in tasks}
        optimizer.build(model.trainable_variables)

    def loss(self, task, outputs, inputs):
        """One task's batch loss (task_loss with the config's reduction)."""
        return task_loss(task, outputs, inputs, self.config.answerable_weight, self.config.loss_reduction)

    def batch_loss(self, task, inputs):
        """The loss of one training batch, the model called in training mode: a task's batch through its
        head (`loss`), or a mixed batch through every head (mixed_loss). Both backends' steps call this.
        A batch with EXAMPLE_WEIGHT (rows added by batches.grow_rows) counts only its weighted rows:
        `weighted_loss`, the same sum or mean as the batch without the added rows."""
        mixed = isinstance(task, MixedTasks)
        outputs = _in_float32(self.model(inputs, task_name=None if mixed else task.name, training=True))
        config = self.config
        if batches_lib.EXAMPLE_WEIGHT in inputs:
            losses = (mixed_example_losses(task.tasks, outputs, inputs, config.answerable_weight) if mixed
                      else example_losses(task, outputs, inputs, config.answerable_weight))
            return weighted_loss(losses, inputs[batches_lib.EXAMPLE_WEIGHT], config.loss_reduction)
        if mixed:
            return mixed_loss(task.tasks, outputs, inputs, config.answerable_weight, config.loss_reduction)
        return self.loss(task, outputs, inputs)

    def trained_variables(self, task):
        """The encoder and this task's head: other heads get no gradient from this task's batches. A mixed
        batch trains everything (a head whose task has no row in it gets a zero gradient, as in the
        original, where every head is in the one loss)."""
        if isinstance(task, MixedTasks):
            return list(self.model.trainable_variables)
        other_heads = {id(v) for name, head in self.model.heads.items() if name != task.name
                       for v in head.trainable_variables}
        return [v for v in self.model.trainable_variables if id(v) not in other_heads]

    def step(self, task, batch):
        """One update on one padded batch; returns the loss (a backend scalar, read when logged)."""
        raise NotImplementedError

    def predict_batch(self, task, batch):
        """The head's outputs for one padded batch (a backend tensor, or a dict of them for span tasks)."""
        raise NotImplementedError

    def current_learning_rate(self):
        return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

    def finish_training(self):
        """Called after the last update: a subclass that trains on copies writes them back here."""

    def mixed_tasks(self, names):
        """The MixedTasks for training on the tasks `names` together, in the order the trainer was given
        them (their task ids); None when batches are one task's (per_task, or a single task)."""
        tasks = [task for name, task in self.tasks.items() if name in names]
        if self.config.multitask_batches != "mixed" or len(tasks) < 2:
            return None
        return MixedTasks(tasks)

    def epoch_batches(self, train_features, rng):
        """One epoch of training batches as (task or MixedTasks, padded batch); every training feature of
        every task once. Mixed: finetune.batches.mixed_batches over all tasks' features. Per task: each
        task's batches (lazily padded), in an order that shuffles the tasks' batches together."""
        config = self.config
        mixed = self.mixed_tasks(train_features)
        if mixed is not None:
            batches = batches_lib.mixed_batches(
                [train_features[task.name] for task in mixed.tasks], [task.name for task in mixed.tasks],
                config.train_batch_size, config.max_seq_length, rng, bucketing=config.length_bucketing,
                min_length=max(min_length(task, config) for task in mixed.tasks),
                pad_to_multiple=config.pad_to_multiple)
            for batch in batches:
                yield mixed, batch
            return
        batches = {name: task_batches(self.tasks[name], features, config, rng, training=True)
                   for name, features in train_features.items()}
        counts = {name: _num_batches(features["count"], config.train_batch_size)
                  for name, features in train_features.items()}
        order = [name for name, count in counts.items() for _ in range(count)]
        for name in (order[i] for i in rng.permutation(len(order))):
            yield self.tasks[name], next(batches[name])

    def train(self, train_features, num_steps, seed, reporter=None, label=""):
        """`num_steps` updates over `train_features` ({task name: features}); returns the mean loss of
        the last logging interval."""
        rng = np.random.default_rng(seed)
        config = self.config
        progress = ProgressLine(f"fine-tuning {label}".strip(), num_steps,
                                lambda done, elapsed: f"step {int(done)}/{num_steps}, {done / elapsed:.2f} steps/s")
        step, losses, last_mean = 0, [], float("nan")
        while step < num_steps:
            for task, batch in self.epoch_batches(train_features, rng):
                losses.append(self.step(task, batch))  # read when logged, so an asynchronous
                step += 1  # backend is not made to wait after every update
                if step % config.iterations_per_loop == 0 or step == num_steps or step == 1:
                    last_mean = float(np.mean([float(loss) for loss in losses]))
                    if reporter is not None:
                        reporter.scalars(reporter.train_writer, step,
                                         {"loss": last_mean, "learning_rate": self.current_learning_rate()})
                    losses = []
                progress.update(step, f"loss {last_mean:.4f}")
                if step >= num_steps:
                    break
        self.finish_training()
        progress.finish(step, f"loss {last_mean:.4f}")
        if not math.isfinite(last_mean):
            raise RuntimeError(f"fine-tuning diverged (loss {last_mean}); lower learning_rate")
        return last_mean

    def predict(self, task, features):
        """The head's outputs for every feature, in feature order (NumPy; a dict for span tasks)."""
        collected, indices = [], []
        count = features["count"]
        progress = ProgressLine(f"predicting {task.name}", count,  # shown for long splits (SQuAD, MNLI)
                                lambda done, elapsed: f"{int(done)}/{count} features, {done / elapsed:.0f}/s"
                                ) if count > 5000 else None
        for batch in task_batches(task, features, self.config):
            collected.append(keras.tree.map_structure(np.asarray, self.predict_batch(task, batch)))
            indices.append(batch["index"])
            if progress is not None:
                progress.update(sum(len(i) for i in indices))
        order = np.argsort(np.concatenate(indices), kind="stable")
        if isinstance(collected[0], dict):
            return {key: _concatenate([c[key] for c in collected])[order] for key in collected[0]}
        return _concatenate(collected)[order]


def weighted_loss(losses, weights, reduction="sum"):
    """The loss of the rows whose weight is 1 (the others weigh 0): their sum, or their mean (divided by
    the weights' sum, the number of real rows, not by the padded batch size)."""
    total = keras.ops.sum(losses * keras.ops.cast(weights, losses.dtype))
    return total if reduction == "sum" else total / keras.ops.sum(keras.ops.cast(weights, losses.dtype))


def _in_float32(outputs):
    """The heads' outputs as float32 (bf16 fine-tuning computes its losses in float32); float32 unchanged."""
    return keras.tree.map_structure(
        lambda value: value if keras.backend.standardize_dtype(value.dtype) == "float32"
        else keras.ops.cast(value, "float32"), outputs)


def _num_batches(count, batch_size):
    return -(-count // batch_size)


def _concatenate(parts):
    """The batches' outputs as one array; per-token outputs ([batch, length, ...], each batch its own
    length) are padded with zeros to the longest."""
    shape = np.max([part.shape for part in parts], axis=0)
    return np.concatenate([np.pad(part, [(0, 0)] + [(0, size - now) for size, now in zip(shape[1:], part.shape[1:])])
                           for part in parts])
