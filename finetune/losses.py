"""Per-task losses of the original, one value per example, and how a batch's values are combined.

The original (run_finetuning.py, FinetuningModel) sums the examples' losses over the batch and clips the
gradient of that sum (batch size times the mean's) to global norm 1.0, which is where the two differ
under Adam; `loss_reduction: "mean"` is the usual mean (Hugging Face's) as a named option.

A batch that mixes several tasks (mixed_loss) is the original's multi-task loss: every head's example
losses on the whole batch, each example's taken from its own task's head (by its task_id), summed.
"""
from keras import ops

from finetune.batches import task_view
from finetune.tasks import CLASSIFICATION, REGRESSION, SPAN, TAGGING


def _positions_loss(logits, positions):
    log_probs = ops.log_softmax(logits, axis=-1)
    one_hot = ops.one_hot(ops.cast(positions, "int32"), ops.shape(logits)[-1])
    return -ops.sum(one_hot * log_probs, axis=-1)


def example_losses(task, outputs, batch, answerable_weight=0.5):
    """[batch] losses: cross-entropy, squared error (STS, on the task's normalised targets), the span
    head's (start + end) / 2 plus answerable_weight × the answerability cross-entropy, or (tagging) the
    cross-entropy summed over the labelled positions (tag_mask), as the original summed over words."""
    if task.kind == CLASSIFICATION:
        labels = ops.cast(batch["labels"], "int32")
        return ops.sparse_categorical_crossentropy(labels, outputs, from_logits=True)
    if task.kind == REGRESSION:
        return ops.square(ops.squeeze(outputs, -1) - ops.cast(batch["labels"], "float32"))
    if task.kind == SPAN:
        losses = (_positions_loss(outputs["start_logits"], batch["start_positions"])
                  + _positions_loss(outputs["end_logits"], batch["end_positions"])) / 2.0
        impossible = ops.cast(batch["is_impossible"], "float32")
        return losses + answerable_weight * ops.binary_crossentropy(impossible, outputs["answerable_logit"],
                                                                    from_logits=True)
    if task.kind == TAGGING:
        losses = ops.sparse_categorical_crossentropy(ops.cast(batch["tag_ids"], "int32"), outputs, from_logits=True)
        return ops.sum(losses * ops.cast(batch["tag_mask"], "float32"), axis=-1)
    raise ValueError(f"unknown task kind {task.kind!r}")


def task_loss(task, outputs, batch, answerable_weight=0.5, reduction="sum"):
    """The batch's loss: the sum of example_losses (the original's), or their mean."""
    losses = example_losses(task, outputs, batch, answerable_weight)
    return ops.sum(losses) if reduction == "sum" else ops.mean(losses)


def mixed_example_losses(tasks, outputs, batch, answerable_weight=0.5):
    """[batch] losses of a mixed batch: row r's loss from the head of tasks[task_id[r]] (the original's
    reduce_sum(stack(task losses) * one_hot(task_id)), run_finetuning.py FinetuningModel). `outputs`:
    {task name: that head's outputs on the whole batch}; each head reads its own targets (task_view),
    which are zeros on other tasks' rows, so its losses there are finite and then dropped."""
    task_id = batch["task_id"]
    losses = 0.0
    for number, task in enumerate(tasks):
        mine = example_losses(task, outputs[task.name], task_view(batch, task.name), answerable_weight)
        losses = losses + ops.where(ops.equal(task_id, number), mine, ops.zeros_like(mine))
    return losses


def mixed_loss(tasks, outputs, batch, answerable_weight=0.5, reduction="sum"):
    """A mixed batch's loss: the sum of its rows' losses (the original's), or their mean over the rows."""
    losses = mixed_example_losses(tasks, outputs, batch, answerable_weight)
    return ops.sum(losses) if reduction == "sum" else ops.mean(losses)
