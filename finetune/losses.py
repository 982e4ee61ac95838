"""Per-task losses of the original, one value per example, and how a batch's values are combined.

The original (run_finetuning.py, FinetuningModel) sums the examples' losses over the batch and clips the
gradient of that sum (batch size times the mean's) to global norm 1.0, which is where the two differ
under Adam; `loss_reduction: "mean"` is the usual mean (Hugging Face's) as a named option.
"""
from keras import ops

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
