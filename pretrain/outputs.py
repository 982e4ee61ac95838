"""What a pretraining forward pass returns, by name (as the original's FakedData and DiscOutput).

NamedTuples, so tf.nest, JAX's pytrees and Keras' tree utilities see through them like through dicts
(a traced step can return one), while readers write `outputs.disc.logits` instead of a string key.
"""
from typing import Any, Dict, NamedTuple, Optional


class LossTerms(NamedTuple):
    """A loss as a sum over a batch and what it is divided by, so replicas can share one denominator."""
    numerator: Any  # Σ weight · per_token
    denominator: Any  # Σ weight
    per_token: Any  # the unweighted loss at each slot or token


class HeadOutput(NamedTuple):
    logits: Any  # float32; generator: [batch, N, V] at the masked slots, discriminator: [batch, seq]
    loss: Any  # this batch's numerator / denominator (for logs; training uses the global denominator)
    terms: LossTerms


class FakedData(NamedTuple):
    """The discriminator's input: the generator's samples written over the masked positions."""
    input_ids: Any  # int32 [batch, seq]
    is_fake_tokens: Any  # [batch, seq] 1 where the input differs from the original: the RTD labels
    sampled_tokens: Any  # int32 [batch, N] the generator's draw for every masking slot


class PretrainingOutputs(NamedTuple):
    total_loss: Any  # differentiable: gen_weight · MLM + disc_weight · RTD
    stats: Dict[str, Any]  # metric sufficient statistics (sums, all-reduced with SUM)
    masked_inputs: Dict[str, Any]  # pretrain.masking.mask_inputs' result
    mlm: HeadOutput  # the generator (the MLM-only model itself)
    fake: Optional[FakedData] = None  # None for the MLM-only objective
    disc: Optional[HeadOutput] = None  # None for the MLM-only objective
