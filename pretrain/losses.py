"""The two pretraining losses, as numerator/denominator pairs, all in float32.

Both losses are ratios of sums over the batch (MLM over predicted slots, RTD over real tokens). Under
data parallelism each replica returns its numerator and the caller divides by the GLOBAL denominator
(the all-reduced sum of the replicas' denominators); summing the replicas' losses and gradients then
equals one replica on the whole batch. `combine_losses` does that division in one place.
"""
from keras import ops

from pretrain.outputs import LossTerms

DENOMINATOR_EPSILON = 1e-6  # the original's "+ 1e-6"


def ratio(numerator, denominator):
    return numerator / (denominator + DENOMINATOR_EPSILON)


def masked_lm_loss_terms(logits, target_ids, weights):
    """Softmax cross-entropy over the predicted slots.

    logits [batch, n, V], target_ids int32 [batch, n], weights [batch, n].
    Returns LossTerms: numerator = Σ w·nll, denominator = Σ w, per_token = nll [batch, n]. The fused sparse cross-entropy
    keeps the backward pass to one softmax-minus-one-hot, where gathering the target's log-probability
    built a dense [batch, n, V] scatter (a quarter of a small model's step on CPU).
    """
    nll = ops.sparse_categorical_crossentropy(ops.cast(target_ids, "int32"), ops.cast(logits, "float32"),
                                              from_logits=True)
    weights = ops.cast(weights, "float32")
    return LossTerms(ops.sum(weights * nll), ops.sum(weights), nll)


def sigmoid_cross_entropy(logits, labels):
    """tf.nn.sigmoid_cross_entropy_with_logits, written out so every backend computes the same."""
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "float32")
    return ops.relu(logits) - logits * labels + ops.log1p(ops.exp(-ops.abs(logits)))


def replaced_token_loss_terms(logits, labels, input_mask):
    """Sigmoid cross-entropy over every real token ([CLS] and [SEP] included).

    Returns LossTerms: numerator = Σ bce·mask, denominator = Σ mask, per_token = bce [batch, seq].
    """
    mask = ops.cast(input_mask, "float32")
    bce = sigmoid_cross_entropy(logits, labels)
    return LossTerms(ops.sum(bce * mask), ops.sum(mask), bce)


def combine_losses(mlm_numerator, mlm_denominator, gen_weight, disc_weight=0.0, rtd_numerator=None,
                   rtd_denominator=None):
    """gen_weight · MLM + disc_weight · RTD (the RTD term only when its parts are given).

    Pass global denominators to get this replica's share of the global loss.
    """
    total = gen_weight * ratio(mlm_numerator, mlm_denominator)
    if rtd_numerator is not None:
        total = total + disc_weight * ratio(rtd_numerator, rtd_denominator)
    return total
