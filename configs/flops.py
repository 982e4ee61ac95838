"""Analytic FLOPs of one pretraining step of a PretrainingConfig (matmuls only, 2·m·n·k each; backward = 2 ×
forward): the product's unit of compute (studies.device_path.run's equal-FLOPs MLM baseline and run.json's FLOPs,
the GLUE-against-FLOPs figure). The method, and a check against the traced model, are in bench/flops.py."""
import dataclasses


BACKWARD_FACTOR = 2.0  # backward = 2 × forward


@dataclasses.dataclass(frozen=True)
class Tower:
    """The sizes that matter for FLOPs."""
    hidden_size: int
    num_layers: int
    intermediate_size: int
    embedding_size: int

    @classmethod
    def from_model_config(cls, c):
        return cls(c.hidden_size, c.num_layers, c.intermediate_size, c.embedding_size)


def matmul(m, n, k):
    return 2 * m * n * k


def encoder_forward_flops(tower, seq_length):
    """{part: forward FLOPs} of one encoder (no heads) for one sequence."""
    s, h, f, e = seq_length, tower.hidden_size, tower.intermediate_size, tower.embedding_size
    per_layer_projections = 4 * matmul(s, h, h)
    per_layer_attention = 2 * matmul(s, s, h)
    per_layer_ffn = 2 * matmul(s, h, f)
    return {
        "embeddings_project": matmul(s, e, h) if e != h else 0,
        "attention projections (QKV + output)": tower.num_layers * per_layer_projections,
        "attention scores + context": tower.num_layers * per_layer_attention,
        "feed-forward": tower.num_layers * per_layer_ffn,
    }


def generator_head_forward_flops(tower, num_predictions, vocab_size):
    n, hg, e = num_predictions, tower.hidden_size, tower.embedding_size
    return {"head dense (masked positions)": matmul(n, hg, e),
            "vocabulary projection (masked positions)": matmul(n, e, vocab_size)}


def cloze_head_forward_flops(tower, seq_length, vocab_size):
    """The cloze head of a two-tower generator on the towers' concatenated outputs, at every position."""
    s, hg, e = seq_length, tower.hidden_size, tower.embedding_size
    return {"cloze head dense (every position)": matmul(s, 2 * hg, e),
            "vocabulary projection (every position)": matmul(s, e, vocab_size)}


def discriminator_head_forward_flops(tower, seq_length):
    s, h = seq_length, tower.hidden_size
    return {"head dense": matmul(s, h, h), "head dense_1 (logit)": matmul(s, h, 1)}


def step_breakdown(discriminator, generator, seq_length, num_predictions, vocab_size, two_tower=False):
    """{(tower, part): forward FLOPs per sequence}; generator None = uniform generator (no network);
    two_tower: a two-tower cloze generator (`generator` is the size of each of its two towers)."""
    parts = {}
    if generator is not None and two_tower:
        for tower in ("generator_ltr", "generator_rtl"):
            for part, value in encoder_forward_flops(generator, seq_length).items():
                parts[(tower, part)] = value
        for part, value in cloze_head_forward_flops(generator, seq_length, vocab_size).items():
            parts[("cloze head", part)] = value
    elif generator is not None:
        for part, value in encoder_forward_flops(generator, seq_length).items():
            parts[("generator", part)] = value
        for part, value in generator_head_forward_flops(generator, num_predictions, vocab_size).items():
            parts[("generator", part)] = value
    for part, value in encoder_forward_flops(discriminator, seq_length).items():
        parts[("discriminator", part)] = value
    for part, value in discriminator_head_forward_flops(discriminator, seq_length).items():
        parts[("discriminator", part)] = value
    return parts


def mlm_step_breakdown(model, seq_length, num_predictions, vocab_size):
    """The MLM-only objective (BERT by the same code): one full-size tower and the MLM head, no
    discriminator head."""
    parts = {("mlm", part): value for part, value in encoder_forward_flops(model, seq_length).items()}
    for part, value in generator_head_forward_flops(model, num_predictions, vocab_size).items():
        parts[("mlm", part)] = value
    return parts


def forward_flops(breakdown):
    return float(sum(breakdown.values()))


def train_flops(breakdown):
    """Forward + backward per sequence."""
    return (1.0 + BACKWARD_FACTOR) * forward_flops(breakdown)


def towers_for(config):
    """(discriminator Tower, generator Tower or None) of a PretrainingConfig."""
    discriminator = Tower.from_model_config(config.model_config())
    generator = None
    if config.electra_objective and not config.uniform_generator:
        generator_config = (config.generator_model_config() if config.untied_generator
                            else config.model_config())
        if not config.untied_generator_embeddings:  # shared embeddings: E is the discriminator's
            generator_config = dataclasses.replace(generator_config,
                                                   embedding_size=config.model_config().embedding_size)
        generator = Tower.from_model_config(generator_config)
    return discriminator, generator


def config_breakdown(config, seq_length=None):
    """The breakdown for a PretrainingConfig at seq_length (default: its max_seq_length)."""
    seq_length = seq_length or config.max_seq_length
    num_predictions = config.max_predictions_per_seq
    if seq_length != config.max_seq_length:
        num_predictions = int((config.mask_prob + 0.005) * seq_length)
    discriminator, generator = towers_for(config)
    if not config.electra_objective:
        return mlm_step_breakdown(discriminator, seq_length, num_predictions, config.vocab_size)
    return step_breakdown(discriminator, generator, seq_length, num_predictions, config.vocab_size,
                          two_tower=config.two_tower_generator)


def train_flops_per_sequence(config, seq_length=None):
    return train_flops(config_breakdown(config, seq_length))


def train_flops_per_step(config):
    """Forward + backward FLOPs of one update: a batch of train_batch_size sequences."""
    return train_flops_per_sequence(config) * config.train_batch_size


def steps_at_equal_flops(config, other):
    """How many steps of `other` cost what one step of `config` costs (the MLM baseline's steps per ELECTRA step)."""
    return train_flops_per_step(config) / train_flops_per_step(other)
