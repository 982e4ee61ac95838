"""Fine-tuning heads of the original (keras.ops only), built under TF1 scope `task_specific/<task>/`.

* `ClassificationHead`: the raw [CLS] hidden state (no pooler) → dropout → dense(num_labels), Glorot
  init; STS uses it with one output and an MSE loss.
* `SpanHead`: the XLNet-style SQuAD module of the original's qa_tasks.py: start logits masked to the
  context and [CLS]; end logits from dense(512, gelu) over [start state; token state], conditioned on
  the gold start in training and on each of the top `beam_size` starts at inference; an answerability
  classifier on [CLS] and the start-probability-weighted state (its logit is the "null odds").
* `TaggingHead`: the original's tagging module: dense(num_labels) on every token's hidden state, no
  dropout; the loss and the scores read it only at each word's first sub-token.
"""
import keras
from keras import ops

from model.initializers import glorot_uniform
from model.matmul import Dense

NEG = 1000.0  # the original's additive mask


class ClassificationHead(keras.layers.Layer):
    def __init__(self, num_outputs, hidden_size, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.hidden_size = hidden_size
        self.dropout_rate = dropout
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = Dense(num_outputs, kernel_initializer=glorot_uniform(), dtype=self.dtype_policy,
                           name="dense")

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, inputs=None, training=False):
        cls = sequence_output[:, 0]
        return ops.cast(self.dense(self.dropout(cls, training=training)), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, hidden_size=self.hidden_size, dropout=self.dropout_rate)
        return config


class TaggingHead(keras.layers.Layer):
    """Logits [batch, length, num_outputs] for every position (float32)."""

    def __init__(self, num_outputs, hidden_size, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.hidden_size = hidden_size
        self.dense = Dense(num_outputs, kernel_initializer=glorot_uniform(), dtype=self.dtype_policy,
                           name="dense")

    def build(self, input_shape=None):
        self.dense.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, inputs=None, training=False):
        return ops.cast(self.dense(sequence_output), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, hidden_size=self.hidden_size)
        return config


def answer_mask(inputs, length):
    """1 on the context (segment 1, unpadded) and on [CLS], else 0: the positions an answer may use."""
    mask = ops.cast(inputs["input_mask"], "float32") * ops.cast(inputs["segment_ids"], "float32")
    return mask + ops.one_hot(ops.zeros((ops.shape(mask)[0],), "int32"), length)


class SpanHead(keras.layers.Layer):
    """Call with the sequence output and the inputs (which, in training, hold "start_positions").

    Training returns {"start_logits", "end_logits", "answerable_logit"} for the loss; inference (which
    needs sequences of at least beam_size positions) returns the beams {"start_top_log_probs", "start_top_index" [b, k], "end_top_log_probs", "end_top_index"
    [b, k, k], "answerable_logit"}.
    """

    def __init__(self, hidden_size, qa_hidden_size=512, beam_size=20, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.qa_hidden_size = qa_hidden_size
        self.beam_size = beam_size
        def dense(units, name, activation=None):
            return Dense(units, activation=activation, kernel_initializer=glorot_uniform(),
                         dtype=self.dtype_policy, name=name)

        self.start_dense = dense(1, "start_logits")
        self.qa_hidden = dense(qa_hidden_size, "qa_hidden", "gelu")
        self.qa_logits = dense(1, "qa_logits")
        self.answerable_hidden = dense(qa_hidden_size, "answerable_hidden", "gelu")
        self.answerable_logit = dense(1, "answerable_logit")

    def build(self, input_shape=None):
        h = self.hidden_size
        self.start_dense.build((None, None, h))
        self.qa_hidden.build((None, None, 2 * h))
        self.qa_logits.build((None, None, self.qa_hidden_size))
        self.answerable_hidden.build((None, 2 * h))
        self.answerable_logit.build((None, self.qa_hidden_size))
        self.built = True

    def _end_logits(self, start_states, end_states):
        return ops.squeeze(self.qa_logits(self.qa_hidden(ops.concatenate([start_states, end_states], -1))), -1)

    def call(self, sequence_output, inputs, training=False):
        hidden = ops.cast(sequence_output, "float32")
        length = ops.shape(hidden)[1]
        mask = answer_mask(inputs, length)
        start_logits = ops.squeeze(self.start_dense(hidden), -1) + NEG * (mask - 1.0)
        start_probs = ops.softmax(start_logits, axis=-1)
        start_feature = ops.sum(start_probs[:, :, None] * hidden, axis=1)
        answerable = ops.squeeze(self.answerable_logit(self.answerable_hidden(
            ops.concatenate([hidden[:, 0], start_feature], -1))), -1)
        if training:
            start_index = ops.one_hot(ops.cast(inputs["start_positions"], "int32"), length)
            start_states = ops.sum(start_index[:, :, None] * hidden, axis=1)
            start_states = ops.broadcast_to(start_states[:, None, :], ops.shape(hidden))
            end_logits = self._end_logits(start_states, hidden) + NEG * (mask - 1.0)
            return {"start_logits": start_logits, "end_logits": end_logits, "answerable_logit": answerable}
        start_log_probs = ops.log_softmax(start_logits, axis=-1)
        start_top_log_probs, start_top_index = ops.top_k(start_log_probs, k=self.beam_size)
        # [b, k, hidden]: the state at each top start; [b, k, seq, hidden] for the end logits.
        start_states = ops.take_along_axis(hidden, start_top_index[:, :, None], axis=1)
        shape = (ops.shape(hidden)[0], self.beam_size, length, self.hidden_size)
        start_states = ops.broadcast_to(start_states[:, :, None, :], shape)
        end_states = ops.broadcast_to(hidden[:, None, :, :], shape)
        end_logits = self._end_logits(start_states, end_states) + NEG * (mask[:, None, :] - 1.0)
        end_top_log_probs, end_top_index = ops.top_k(ops.log_softmax(end_logits, axis=-1), k=self.beam_size)
        return {"start_top_log_probs": start_top_log_probs, "start_top_index": start_top_index,
                "end_top_log_probs": end_top_log_probs, "end_top_index": end_top_index,
                "answerable_logit": answerable}

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, qa_hidden_size=self.qa_hidden_size, beam_size=self.beam_size)
        return config
