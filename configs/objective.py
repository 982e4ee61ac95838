"""ObjectiveSettings: every setting of the pretraining objective, in one frozen value.

PretrainingConfig.objective_settings() produces it (its fields are named as the config's, so a JSON
hparams key and a field here are the same word), ElectraPretrainer takes it whole and serialises it whole
in get_config. It is checked once, here, on construction. Plain Python: no Keras, no TensorFlow.
"""
import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class ObjectiveSettings:
    """What the pretrainer's masking, sampling and losses read (the defaults are the original's).

    Args:
      electra_objective: replaced-token detection; False is MLM only (BERT trained by the same code).
      electric_objective: Electric's noise-contrastive discriminator (needs a two-tower generator). It
        implies electra_objective: the original's README passes electra_objective false with it, and
        that spelling resolves to the same settings.
      mask_prob, max_predictions_per_seq: the masking rule (at most N slots per sequence).
      dedup_masking: draw positions without replacement (our option; the original draws with).
      mask_token_id, cls_token_id, sep_token_id: from the vocabulary; [CLS]/[SEP]/[MASK] are never masked.
      gen_weight, disc_weight: total = gen_weight · MLM + disc_weight · RTD.
      temperature: of the Gumbel sampling of fakes.
      disallow_correct: the generator may not sample the original token.
      uniform_generator: sample fakes uniformly at random (no generator network).
      vocab_size: needed only with uniform_generator and no generator (else the networks').
      seed: seeds the masking and sampling SeedGenerator (None: Keras' global seed).
    """
    electra_objective: bool = True
    electric_objective: bool = False
    mask_prob: float = 0.15
    max_predictions_per_seq: int = 19
    dedup_masking: bool = False
    mask_token_id: int = 103
    cls_token_id: int = 101
    sep_token_id: int = 102
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    temperature: float = 1.0
    disallow_correct: bool = False
    uniform_generator: bool = False
    vocab_size: Optional[int] = None
    seed: Optional[int] = None

    def __post_init__(self):
        if self.electric_objective and not self.electra_objective:
            object.__setattr__(self, "electra_objective", True)  # the README's spelling of Electric
        if not 0.0 < self.mask_prob < 1.0:
            raise ValueError(f"mask_prob {self.mask_prob} must be in (0, 1)")
        if self.max_predictions_per_seq is None or self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq {self.max_predictions_per_seq} must be at least 1")
        if self.uniform_generator and not self.electra_objective:
            raise ValueError("uniform_generator needs the ELECTRA objective: the MLM-only objective trains "
                             "a real generator")

    @property
    def special_token_ids(self):
        """(cls, sep, mask): the ids masking never chooses."""
        return (self.cls_token_id, self.sep_token_id, self.mask_token_id)

    @classmethod
    def field_names(cls):
        return tuple(field.name for field in dataclasses.fields(cls))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values) -> "ObjectiveSettings":
        """From to_dict's output (a pretrainer's get_config()["objective"]); unknown keys are an error."""
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown objective settings {unknown}; known: {list(cls.field_names())}")
        return cls(**values)
