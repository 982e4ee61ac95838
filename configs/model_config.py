"""Transformer architecture hyperparameters (the original's BertConfig, plus embedding_size)."""
import dataclasses
import json
import pathlib

from configs import loading
from common.errors import InputError

MODEL_SIZES_DIR = pathlib.Path(__file__).resolve().parent / "model_sizes"


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One encoder tower. Defaults are ELECTRA-Small's discriminator with the BERT uncased vocabulary."""

    vocab_size: int = 30522
    hidden_size: int = 256
    num_layers: int = 12
    num_heads: int = 4
    intermediate_size: int = 1024
    embedding_size: int = 128
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12

    def __post_init__(self):
        if self.hidden_size % self.num_heads:
            raise InputError(
                f"model config: hidden_size {self.hidden_size} is not divisible by num_heads "
                f"{self.num_heads}; change one of them")

    def generator_config(self, hidden_fraction: float, layers_fraction: float = 1.0) -> "ModelConfig":
        """The generator tower as the original's get_generator_config derives it.

        hidden = round(H·f) (Python's round, as the original), heads = max(1, hidden // 64), FFN = 4·hidden,
        layers = round(L·layers_fraction). Embedding size stays the shared E.
        """
        hidden = int(round(self.hidden_size * hidden_fraction))
        return dataclasses.replace(
            self,
            hidden_size=hidden,
            num_layers=int(round(self.num_layers * layers_fraction)),
            intermediate_size=4 * hidden,
            num_heads=max(1, hidden // 64),
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict, source: str = "model config") -> "ModelConfig":
        return loading.dataclass_from_dict(cls, values, source)


def available_model_sizes() -> list:
    return sorted(path.stem for path in MODEL_SIZES_DIR.glob("*.json"))


def read_model_size(name: str) -> dict:
    """The size file `configs/model_sizes/<name>.json`: {"model": {...}, "pretraining": {...}}."""
    path = MODEL_SIZES_DIR / f"{name}.json"
    if not path.is_file():
        raise InputError(
            f"model size {name!r}: no file {path}; choose one of {', '.join(available_model_sizes())}")
    values = json.loads(path.read_text(encoding="utf-8"))
    unknown = sorted(set(values) - {"description", "model", "pretraining"})
    if unknown:
        raise InputError(f"{path}: unknown top-level key(s) {', '.join(unknown)}; "
                         "use description, model and pretraining")
    ModelConfig.from_dict(values.get("model", {}), source=str(path))  # validate early
    return values
