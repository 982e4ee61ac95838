"""Per-task losses of the original, averaged over the batch (keras.ops)."""
from keras import ops

from finetune.tasks import CLASSIFICATION, REGRESSION, SPAN


def _positions_loss(logits, positions):
    log_probs = ops.log_softmax(logits, axis=-1)
    one_hot = ops.one_hot(ops.cast(positions, "int32"), ops.shape(logits)[-1])
    return -ops.sum(one_hot * log_probs, axis=-1)


def task_loss(task, outputs, batch, answerable_weight=0.5):
    if task.kind == CLASSIFICATION:
        labels = ops.cast(batch["labels"], "int32")
        return ops.mean(ops.sparse_categorical_crossentropy(labels, outputs, from_logits=True))
    if task.kind == REGRESSION:
        return ops.mean(ops.square(ops.squeeze(outputs, -1) - ops.cast(batch["labels"], "float32")))
    if task.kind == SPAN:
        losses = (_positions_loss(outputs["start_logits"], batch["start_positions"])
                  + _positions_loss(outputs["end_logits"], batch["end_positions"])) / 2.0
        impossible = ops.cast(batch["is_impossible"], "float32")
        losses += answerable_weight * ops.binary_crossentropy(impossible, outputs["answerable_logit"],
                                                              from_logits=True)
        return ops.mean(losses)
    raise ValueError(f"unknown task kind {task.kind!r}")
