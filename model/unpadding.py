"""The real tokens' rows only: the encoder's `skip_padding` attribute (off on a new encoder, as in the original;
on under TensorFlow in fine-tuning (configs/finetuning_config.py), inference.predict and the SavedModel exports).

In a transformer layer only the attention mixes positions; its projections, GELU, LayerNorm and dropout work on
each position alone. So they can run on the real tokens' rows, [tokens, hidden], instead of [batch, seq, hidden],
and only the attention needs the padded layout, which a scatter of its query, key and value gives it.
Fine-tuning's random batches are padded to their longest: on SST-2 about a third of the positions are real
tokens, so two thirds of those products were padding (nine tenths at the original's fixed length of 128).

A real token's output is the same function of the inputs as without the option: the attention's padding keys are
masked either way, and no row reads another's. Within float32 rounding, not bit for bit (the products' shapes
differ), and dropout draws its masks for the rows it has, so a trained run's random numbers differ from the padded
encoder's. Padding positions' outputs are zeros instead of what the padded encoder computes for them: a head that
reads them unmasked would change (the fine-tuning heads mask them or read the first token only), and so would a
causal encoder, whose padding queries' outputs are used (model/attention.py), so the encoder refuses that pairing.

The number of real tokens is known only when the step runs: TensorFlow's graphs and eager calls can take it; a
jitted JAX program cannot (its shapes are fixed when it compiles), so the option is TensorFlow's.
"""
from keras import ops


def real_token_rows(input_mask):
    """int32 [tokens]: the flat positions (in [batch * seq]) of the real tokens of a 0/1 [batch, seq] mask."""
    return ops.nonzero(ops.reshape(input_mask, (-1,)))[0]


def gather_rows(padded, rows):
    """[batch, seq, width] → [tokens, width]: the real tokens' rows."""
    width = ops.shape(padded)[-1]
    return ops.take(ops.reshape(padded, (-1, width)), rows, axis=0)


def scatter_rows(values, rows, input_mask):
    """[tokens, width] → [batch, seq, width], zeros at the padding positions (gather_rows undone)."""
    batch, seq = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
    width = ops.shape(values)[-1]
    padded = ops.scatter(ops.expand_dims(rows, -1), values, (batch * seq, width))
    return ops.reshape(padded, (batch, seq, width))
