"""Layer-wise learning-rate decay for fine-tuning: lower layers get smaller learning rates.

Only fine-tuning switches it on, but it lives beside the optimizers, not in finetune/ (which imports
model/, never the reverse): `create_optimizer` builds it from `layerwise_lr_decay`, and an optimizer
config holding one (registered as `electra>LayerwiseLRDecay`) must deserialize wherever
`model.optimizers` is imported.

The default variant reproduces the original's off-by-one (the top layer gets d², not d).
"""
import re
from typing import Iterable

import keras

SERIALIZATION_PACKAGE = "electra"  # registered as electra>LayerwiseLRDecay: keep it so
_LAYER_COMPONENT = re.compile(r"layer_(\d+)")
_EMBEDDING_SCOPES = ("embeddings", "embeddings_project")


def layer_depth(path: str, num_layers: int) -> int | None:
    """Depth of a variable for layer-wise decay: 0 embeddings, i + 1 encoder layer i, None otherwise.

    Matching rule (on `/`-separated components of the path):
    * a component that is exactly `layer_<i>` → encoder layer i (so `layer_norm`, `layer_10` vs
      `layer_1` cannot be confused);
    * else a scope component (not the last one, which is the variable's own name — a Keras
      Embedding's table is itself called `embeddings`) equal to `embeddings`, `embeddings_project` or
      ending in `_embeddings` → the embeddings;
    * anything else (task heads, discriminator head) → None, which callers treat as the top.
    """
    components = path.split("/")
    for component in components:
        match = _LAYER_COMPONENT.fullmatch(component)
        if match:
            index = int(match.group(1))
            if index >= num_layers:
                raise ValueError(
                    f"Variable {path!r} is in encoder layer {index} but num_layers={num_layers}; "
                    "pass the encoder's real number of layers."
                )
            return index + 1
    for component in components[:-1]:
        if component in _EMBEDDING_SCOPES or component.endswith("_embeddings"):
            return 0
    return None


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class LayerwiseLRDecay:
    """`path -> multiplier` for layer-wise LR decay; an object (not a dict) so the optimiser can be
    created before the model's variables exist, and still serialise.

    variant "original" (as coded in the release, needed to reproduce its numbers): head depth L + 2,
    multiplier d^(L + 2 − depth): head 1, top layer d², embeddings d^(L+2).
    variant "intended" (the authors' stated intent): head depth L + 1: head 1, top layer d,
    embeddings d^(L+1).
    """

    VARIANTS = ("original", "intended")

    def __init__(self, num_layers: int, decay: float, variant: str = "original"):
        if variant not in self.VARIANTS:
            raise ValueError(f"variant must be one of {self.VARIANTS}, got {variant!r}.")
        if num_layers <= 0:
            raise ValueError(f"num_layers must be positive, got {num_layers}.")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"layer-wise decay must be in (0, 1], got {decay}.")
        self.num_layers = int(num_layers)
        self.decay = float(decay)
        self.variant = variant

    def __call__(self, path: str) -> float:
        top = self.num_layers + (2 if self.variant == "original" else 1)
        depth = layer_depth(path, self.num_layers)
        if depth is None:
            depth = top
        return self.decay ** (top - depth)

    def get_config(self):
        return {"num_layers": self.num_layers, "decay": self.decay, "variant": self.variant}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def layerwise_lr_multipliers(
    variable_paths: Iterable[str], num_layers: int, decay: float, variant: str = "original"
) -> dict[str, float]:
    """`{path: multiplier}` for the given variable paths; see `LayerwiseLRDecay` for the rule."""
    rule = LayerwiseLRDecay(num_layers, decay, variant)
    return {path: rule(path) for path in variable_paths}
