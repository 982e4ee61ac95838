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
    # [batch, seq] the RTD labels: 1 where the input differs from the original (Electric: every position
    # a sample was written to, equal or not)
    is_fake_tokens: Any
    sampled_tokens: Any  # int32 [batch, N] the generator's draw for every masking slot


class PretrainingOutputs(NamedTuple):
    total_loss: Any  # differentiable: gen_weight · MLM (two-tower generator: cloze) + disc_weight · RTD
    stats: Dict[str, Any]  # metric sufficient statistics (sums, all-reduced with SUM)
    masked_inputs: Dict[str, Any]  # pretrain.masking.mask_inputs' result
    mlm: HeadOutput  # the generator (the MLM-only model itself) at the masked slots
    fake: Optional[FakedData] = None  # None for the MLM-only objective
    # None for the MLM-only objective; Electric: logits = energy + stop_gradient(log q) + log(p / (1 - p))
    disc: Optional[HeadOutput] = None
    # a two-tower (Electric) generator: its logits [batch, seq, V] at every position and its loss over
    # every candidate token (the generator's training loss); `mlm` then holds those logits at the slots
    cloze: Optional[HeadOutput] = None
    energies: Any = None  # Electric: the energy head's output [batch, seq] (disc.logits without the noise terms)
