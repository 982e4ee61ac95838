"""Electric's generator: a two-tower cloze model (docs/reproduction.md#electric).

The original's TwoTowerClozeTransformer (run_pretraining.py): a left-to-right and a right-to-left
transformer (TF1 scopes `generator_ltr/` and `generator_rtl/`, the generator's size, the shared
`electra/embeddings` unless untied_generator_embeddings) read the UNMASKED input. Each tower's output is
shifted by one position so that position t holds what the ltr tower computed at t-1 (it saw tokens < t)
and what the rtl tower computed at t+1 (it saw tokens > t); the two are concatenated to [batch, seq, 2·Hg].
Position t's representation therefore never depends on token t, except through the wrap-around of the
shifts at the first and last positions ([CLS], and the last padding or [SEP]), which the original keeps and
the cloze loss never reads (those positions are not candidates).
"""
import keras
from keras import ops


def shift_right(sequence):
    """[batch, seq, dim] → position t holds position t-1 (position 0 the last one): the original's
    roll(x, -1)."""
    return ops.roll(sequence, 1, axis=1)


def shift_left(sequence):
    """[batch, seq, dim] → position t holds position t+1 (the last position holds position 0): the
    original's roll(x, 1)."""
    return ops.roll(sequence, -1, axis=1)


class TwoTowerEncoder(keras.Model):
    """Holds the two causal BertEncoders it receives (built with causal="ltr" and "rtl").

    Call with {"input_ids", "input_mask", "segment_ids"}; returns [batch, seq, 2·Hg], float32. The tied
    output table of its head is the ltr tower's word table (the shared one unless the towers own theirs).
    `hidden_size` is the width of that output (what a head on it reads).
    """

    def __init__(self, ltr, rtl, name="generator", **kwargs):
        kwargs.setdefault("dtype", ltr.dtype_policy)
        super().__init__(name=name, **kwargs)
        if (ltr.causal, rtl.causal) != ("ltr", "rtl"):
            raise ValueError(f"the towers must be causal 'ltr' and 'rtl', not {ltr.causal!r} and {rtl.causal!r}")
        self.ltr = ltr
        self.rtl = rtl
        self.tower_hidden_size = ltr.hidden_size
        self.hidden_size = ltr.hidden_size + rtl.hidden_size
        self.vocab_size = ltr.vocab_size
        self.embedding_size = ltr.embedding_size
        self.initializer_range = ltr.initializer_range
        self.layer_norm_epsilon = ltr.layer_norm_epsilon

    @property
    def towers(self):
        return (self.ltr, self.rtl)

    @property
    def embeddings(self):
        return self.ltr.embeddings

    @property
    def embedding_table(self):
        return self.ltr.embedding_table

    def build(self, input_shape=None):
        for tower in self.towers:
            if not tower.built:
                tower.build()
        self.built = True

    def tower_outputs(self, inputs, training=False):
        """(ltr output, rtl output) before the shifts, [batch, seq, Hg] each."""
        return self.ltr(inputs, training=training), self.rtl(inputs, training=training)

    def call(self, inputs, training=False):
        ltr, rtl = self.tower_outputs(inputs, training=training)
        return ops.concatenate([shift_right(ltr), shift_left(rtl)], axis=-1)
