"""Electric (Clark, Luong, Le and Manning, EMNLP 2020, "Pre-Training Transformers as Energy-Based Cloze
Models"): the noise terms of its discriminator logit and its sentence score (docs/reproduction.md#electric).

The discriminator's head outputs an energy E(x)_t per position. Training is noise-contrastive estimation
with the two-tower cloze model q as the noise distribution: the logit that position t is fake (sampled from
q) is E(x)_t + log q(x_t | x_\\t) + log(k / (n - k)), where k / n = mask_prob is the fraction of positions
replaced, and q's term carries no gradient (the original's _get_discriminator_output). With a good fit,
exp(-E(x)_t) is proportional to p(x_t | x_\\t), so -Σ_t E(x)_t scores a whole text in one forward pass of
the discriminator alone (the paper's pseudo-log-likelihood estimate; the generator is not needed).
"""
import math

from keras import ops


def noise_log_odds(mask_prob):
    """log(k / (n - k)) = log(mask_prob / (1 - mask_prob)): the prior odds that a position was replaced."""
    return math.log(mask_prob / (1.0 - mask_prob))


def log_noise_probs(cloze_logits, token_ids):
    """stop_gradient(log softmax(cloze_logits)) at `token_ids`: float32 [batch, seq] from logits
    [batch, seq, V] and ids [batch, seq]."""
    logits = ops.stop_gradient(ops.cast(cloze_logits, "float32"))
    chosen = ops.take_along_axis(logits, ops.cast(token_ids, "int32")[..., None], axis=-1)[..., 0]
    return chosen - ops.logsumexp(logits, axis=-1)


def discriminator_logits(energies, cloze_logits, token_ids, mask_prob):
    """The logit of "position t is fake" at every position: E + sg(log q(token)) + log(p / (1 - p)).
    `token_ids` are the discriminator's input (the original's fake_data.inputs.input_ids)."""
    return (ops.cast(energies, "float32") + log_noise_probs(cloze_logits, token_ids)
            + noise_log_odds(mask_prob))


def text_scores(energies, weights):
    """-Σ_t weights_t · E(x)_t per sequence: float32 [batch] (higher: more likely). Pass the candidate
    mask (real tokens other than [CLS], [SEP], [MASK]) as `weights` to score a text's own tokens."""
    return -ops.sum(ops.cast(weights, "float32") * ops.cast(energies, "float32"), axis=-1)
