"""Dynamic masking, exactly as the original pretrain_helpers.mask (docs/reproduction.md#masking).

Candidates are real tokens other than [CLS], [SEP], [MASK]. Each sequence predicts
max(1, min(N, round(real_tokens · mask_prob))) slots (round half to even, like tf.round); the N slot
positions are drawn from a uniform categorical over candidates WITH replacement, unused slots point at
position 0 with weight 0. 85% of chosen positions become [MASK], 15% stay unchanged; no random tokens.
`dedup=True` (an option, not the original) draws positions without replacement.
"""
from keras import ops
from keras import random

from model.heads import gather_positions
from pretrain.sequence_ops import scatter_update

_EXCLUDED_LOGIT = -1e9
MASK_TOKEN_PROB = 0.85


def max_predictions_per_seq(mask_prob, max_seq_length):
    """N of the original configure_pretraining: 19 at 128/0.15, 79 at 512/0.15, 130 at 512/0.25."""
    return int((mask_prob + 0.005) * max_seq_length)


def candidate_mask(input_ids, input_mask, special_token_ids):
    """bool [batch, seq]: real tokens that are not one of `special_token_ids`."""
    candidates = ops.cast(input_mask, "bool")
    for token_id in special_token_ids:
        candidates = ops.logical_and(candidates, ops.not_equal(input_ids, token_id))
    return candidates


def num_to_mask(input_mask, mask_prob, max_predictions):
    """int32 [batch]: max(1, min(N, round(sum(input_mask) · mask_prob)))."""
    num_tokens = ops.sum(ops.cast(input_mask, "float32"), axis=-1)
    rounded = ops.cast(ops.round(num_tokens * mask_prob), "int32")
    return ops.maximum(1, ops.minimum(max_predictions, rounded))


def slot_weights(input_ids, input_mask, *, mask_prob, max_predictions, special_token_ids, dedup=False):
    """float32 [batch, N]: 1 for the slots each sequence predicts (a pure function of the batch).

    Sequences without a single candidate predict nothing (the original divided by zero there).
    Deduplicated masking cannot choose more slots than there are candidates.
    """
    count = num_to_mask(input_mask, mask_prob, max_predictions)
    num_candidates = ops.sum(ops.cast(candidate_mask(input_ids, input_mask, special_token_ids), "int32"),
                             axis=-1)
    if dedup:
        count = ops.minimum(count, num_candidates)
    count = ops.where(num_candidates > 0, count, 0)
    return ops.cast(ops.arange(max_predictions)[None, :] < count[:, None], "float32")


def sample_positions(candidates, max_predictions, seed, dedup=False):
    """int32 [batch, N] positions drawn uniformly over candidates (with replacement unless dedup)."""
    logits = ops.where(candidates, 0.0, _EXCLUDED_LOGIT)
    if not dedup:
        return ops.cast(random.categorical(logits, max_predictions, seed=seed), "int32")
    uniform = random.uniform(ops.shape(logits), minval=0.0, maxval=1.0, dtype="float32", seed=seed)
    gumbel = -ops.log(-ops.log(uniform + 1e-9) + 1e-9)
    _, positions = ops.top_k(logits + gumbel, max_predictions)
    return ops.cast(positions, "int32")


def mask_inputs(input_ids, input_mask, *, mask_prob, max_predictions, mask_token_id, special_token_ids,
                seed, dedup=False, mask_token_prob=MASK_TOKEN_PROB):
    """Chooses and masks positions; returns a dict of int32/float32 tensors:

    input_ids [batch, seq] (with [MASK]s), masked_lm_positions [batch, N], masked_lm_ids [batch, N]
    (the original tokens; 0 in unused slots), masked_lm_weights [batch, N] float32.
    `seed`: a keras.random.SeedGenerator (or a seed tensor) so it runs under tf.function, XLA and JAX.
    """
    input_ids = ops.cast(input_ids, "int32")
    weights = slot_weights(input_ids, input_mask, mask_prob=mask_prob, max_predictions=max_predictions,
                           special_token_ids=special_token_ids, dedup=dedup)
    candidates = candidate_mask(input_ids, input_mask, special_token_ids)
    positions = sample_positions(candidates, max_predictions, seed, dedup) * ops.cast(weights, "int32")
    masked_lm_ids = ops.squeeze(gather_positions(input_ids[:, :, None], positions), -1)
    masked_lm_ids = masked_lm_ids * ops.cast(weights, "int32")
    batch = ops.shape(input_ids)[0]
    use_mask_token = random.uniform((batch, max_predictions), dtype="float32", seed=seed) < mask_token_prob
    mask_positions = positions * ops.cast(use_mask_token, "int32")
    masked_input_ids, _ = scatter_update(
        input_ids, ops.full((batch, max_predictions), mask_token_id, dtype="int32"), mask_positions)
    return {
        "input_ids": ops.stop_gradient(masked_input_ids),
        "masked_lm_positions": positions,
        "masked_lm_ids": masked_lm_ids,
        "masked_lm_weights": weights,
    }
