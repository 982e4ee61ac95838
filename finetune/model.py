"""One shared encoder and a head per task (the original's multi-task mode; one task is the usual case).

Heads live under the TF1 scope `task_specific/<task>/`, so layer-wise LR decay sees them as the top
(depth L + 2) and exported names match the original's; a family task's `mrqa:<name>` is scoped as
`mrqa-<name>` (finetune.tasks.layer_name: TensorFlow refuses the colon).
"""
import keras
from keras import ops

from finetune.batches import task_view
from finetune.heads import ClassificationHead, SpanHead, TaggingHead
from finetune.tasks import SPAN, TAGGING

HEADS_SCOPE = "task_specific"


def make_head(task, hidden_size, config, dtype=None):
    """The task's head; `dtype`: the encoder's dtype policy (pass `encoder.dtype_policy`)."""
    if task.kind == SPAN:
        return SpanHead(hidden_size, config.qa_hidden_size, config.beam_size, dtype=dtype, name=task.layer_name)
    if task.kind == TAGGING:
        return TaggingHead(task.num_outputs, hidden_size, dtype=dtype, name=task.layer_name)
    return ClassificationHead(task.num_outputs, hidden_size, config.head_dropout, dtype=dtype, name=task.layer_name)


class FinetuningModel(keras.Model):
    """Call with (inputs, task_name); returns that task's head outputs. task_name None (a batch that
    mixes the tasks, as the original's): the encoder once, then every head on the whole batch, each
    reading its own inputs (finetune.batches.task_view); returns {task name: its head's outputs}."""

    def __init__(self, encoder, heads, name="finetuning_model", **kwargs):
        super().__init__(name=name, **kwargs)
        self.encoder = encoder
        self.heads = dict(heads)
        layer_names = [head.name for head in self.heads.values()]
        if len(set(layer_names)) != len(layer_names):
            raise ValueError(f"two heads share a layer name: {layer_names}")
        with keras.name_scope(HEADS_SCOPE):
            for head in self.heads.values():
                if not head.built:
                    head.build()
        self.built = True

    def call(self, inputs, task_name=None, training=False):
        sequence = self.encoder(inputs, training=training)
        if task_name is None:
            return {name: head(sequence, task_view(inputs, name), training=training)
                    for name, head in self.heads.items()}
        return self.heads[task_name](sequence, inputs, training=training)


class SingleTaskModel(keras.Model):
    """What load_finetuned_model returns: {"input_ids", "input_mask", "segment_ids"} → the head's output
    (logits [batch, num_labels] for classification, [batch, 1] for STS, [batch, length, num_labels] for
    tagging)."""

    def __init__(self, encoder, head, name="finetuned_model", **kwargs):
        super().__init__(name=name, **kwargs)
        self.encoder = encoder
        self.head = head
        if not head.built:
            with keras.name_scope(HEADS_SCOPE):
                head.build()
        self.built = True

    def call(self, inputs, training=False):
        inputs = {key: ops.cast(inputs[key], "int32") for key in ("input_ids", "input_mask", "segment_ids")}
        return self.head(self.encoder(inputs, training=training), inputs, training=training)
