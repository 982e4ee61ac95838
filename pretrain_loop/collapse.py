"""Warns when the discriminator has stopped learning (it calls every token "original").

Only ~6% of tokens are replaced, so accuracy stays ~94% for a useless discriminator; recall near 0 or
AUC near 0.5 well past warmup is the signal. Small models also show it for their first few thousand
steps (a plateau, not a defect: docs/pretraining.md), which the message says.
"""
import dataclasses
from typing import Mapping, Optional

LIKELY_CAUSES = ("the generator is too strong (lower generator_hidden_size, e.g. 0.25-0.33 of the "
                 "discriminator)", "the learning rate is too high (lower learning_rate or lengthen "
                 "num_warmup_steps)", "the batch is too small (raise train_batch_size or "
                 "gradient_accumulation_steps)")


@dataclasses.dataclass
class CollapseDetector:
    """check(step, metrics) returns a one-line warning or None; repeats at most every `every` intervals."""

    num_warmup_steps: int
    min_steps: int = 500
    recall_threshold: float = 0.05
    auc_threshold: float = 0.55
    every: int = 10
    _intervals_since_warning: Optional[int] = None

    @property
    def first_step(self) -> int:
        """Checks start well past warmup: twice the warmup, and at least min_steps."""
        return max(2 * self.num_warmup_steps, self.min_steps)

    def collapsed(self, step: int, metrics: Mapping[str, float]) -> bool:
        if step < self.first_step or "disc_recall" not in metrics:
            return False
        return (metrics["disc_recall"] < self.recall_threshold
                or metrics.get("disc_auc", 1.0) < self.auc_threshold)

    def check(self, step: int, metrics: Mapping[str, float]) -> Optional[str]:
        if self._intervals_since_warning is not None:
            self._intervals_since_warning += 1
        if not self.collapsed(step, metrics):
            return None
        if self._intervals_since_warning is not None and self._intervals_since_warning < self.every:
            return None
        self._intervals_since_warning = 0
        return (f"warning: the discriminator looks collapsed at step {step} (disc_recall "
                f"{metrics['disc_recall']:.3f}, disc_auc {metrics.get('disc_auc', float('nan')):.3f}): it "
                f"is not telling replaced tokens apart. Small models sit on this plateau for the first "
                f"thousands of steps, once the generator has learned word frequencies (the original recipe "
                f"does the same: docs/pretraining.md); if it lasts, likely causes: {'; '.join(LIKELY_CAUSES)}.")


ELECTRIC_NOTE = ("Note: no collapse warnings for Electric: its disc_auc and disc_recall score the noise-contrastive "
                 "classifier (energy + log q), which labels every written position fake, so they sit near or "
                 "below 0.5 while the energies learn (docs/reproduction.md#electric); python -m "
                 "studies.electric measures what an Electric model has learned.")


def collapse_detector(config):
    """The detector for a pretraining config, or None where its metrics do not measure a collapse
    (Electric: a context-blind energy plus log q ranks real tokens above fakes, AUC < 0.5 early on)."""
    return None if config.electric_objective else CollapseDetector(config.num_warmup_steps)
