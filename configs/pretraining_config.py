"""Every pretraining hyperparameter of the original configure_pretraining.py, plus our named options.

Precedence: the defaults below (the original's) < the model size's "pretraining" block < --hparams.
Derived values (max_predictions_per_seq, the generator tower) are computed after all overrides, so
overriding mask_prob or max_seq_length changes them as it did in the original.
"""
import dataclasses
import pathlib
from typing import Optional

from configs import loading
from configs.finetuning_config import MATMUL_DTYPES
from configs.model_config import ModelConfig, read_model_size
from common.errors import InputError
from configs.objective import ObjectiveSettings

DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    # --- run identity and locations
    model_name: str = ""  # folder under <data_dir>/models/; empty → the model size's name
    data_dir: str = "electra_data"
    model_size: str = "electra_small"  # a file in configs/model_sizes/
    model_hparam_overrides: dict = dataclasses.field(default_factory=dict)  # ModelConfig fields
    debug: bool = False  # the original's quick mode: batch 8, 20 steps
    do_train: bool = True
    do_eval: bool = False
    seed: int = 0  # initial weights, dropout, masking and data order

    # --- objective
    electra_objective: bool = True  # False: MLM only (BERT trained by the same code), unless Electric
    electric_objective: bool = False  # Electric (energy-based cloze model); turns on two_tower_generator and
    # electra_objective (the original's README passes electra_objective false with it)
    gen_weight: float = 1.0
    disc_weight: float = 50.0
    mask_prob: float = 0.15
    dedup_masking: bool = False  # option: draw positions without replacement (original: with)

    # --- optimisation
    optimizer: str = "adamw"  # "adamw" (the original's, no bias correction) or "lamb"
    learning_rate: float = 5e-4
    lr_decay_power: float = 1.0
    weight_decay_rate: float = 0.01
    num_warmup_steps: int = 10000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1

    # --- training loop
    iterations_per_loop: int = 200  # steps per host loop / log line
    save_checkpoints_steps: int = 1000
    extra_checkpoint_steps: tuple = ()  # also save (and, with do_eval, evaluate) at these steps: budgets of a study
    num_train_steps: int = 1000000
    num_eval_steps: int = 100
    keep_checkpoint_max: int = 5  # 0 keeps all
    mixed_precision: str = "float32"  # a Keras dtype policy name
    # "bfloat16": under mixed_precision float32, every dense projection's and the generator's vocabulary matmul
    # take bfloat16 operands, the rest stays float32 (model/matmul.py); under a 16-bit mixed_precision the
    # matmuls already take 16-bit operands and it changes nothing
    matmul_dtype: str = "float32"
    use_xla: bool = True  # jit-compile the forward/backward pass (see training/step.py for CPU)
    # option: XLA fuses only the elementwise ops, the matmuls stay oneDNN's (training/xla_fusion.py); where
    # use_xla does not compile the step (CPU hosts)
    xla_fuse_elementwise: bool = False
    eval_holdout_shards: int = 1  # with do_eval and >= 2 shards: the last N shards are eval-only
    eval_every_steps: int = 0  # with do_eval: evaluate every N steps (0: at each checkpoint)

    # --- vocabulary and model
    vocab_size: int = 30522
    do_lower_case: bool = True
    embedding_size: Optional[int] = None  # None: the model size's
    cls_token_id: int = 101
    sep_token_id: int = 102
    mask_token_id: int = 103

    # --- generator
    uniform_generator: bool = False  # sample fakes uniformly at random (no generator network)
    two_tower_generator: bool = False  # a two-tower cloze generator (Electric's; set by electric_objective)
    untied_generator_embeddings: bool = False
    untied_generator: bool = True  # False: generator and discriminator are the same network
    generator_layers: float = 1.0  # fraction of discriminator layers
    generator_hidden_size: float = 0.25  # fraction of discriminator hidden size
    disallow_correct: bool = False  # the generator may not sample the original token
    temperature: float = 1.0
    gdes_embeddings: bool = False  # DeBERTa-v3 gradient-disentangled embedding sharing

    # --- batches and lengths
    max_seq_length: int = 128
    train_batch_size: int = 128  # global batch
    eval_batch_size: int = 128
    max_predictions_per_seq: Optional[int] = None  # None: int((mask_prob + 0.005) * max_seq_length)

    def __post_init__(self):
        if self.mixed_precision not in DTYPE_POLICIES:
            raise InputError(f"pretraining config: mixed_precision {self.mixed_precision!r} is not one "
                             f"of {', '.join(DTYPE_POLICIES)}")
        if self.matmul_dtype not in MATMUL_DTYPES:
            raise InputError(f"pretraining config: matmul_dtype {self.matmul_dtype!r} is not one of "
                             f"{', '.join(MATMUL_DTYPES)}")
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"pretraining config: optimizer {self.optimizer!r} is not one of "
                             f"{', '.join(OPTIMIZERS)}")
        for name in ("iterations_per_loop", "save_checkpoints_steps", "num_train_steps",
                     "gradient_accumulation_steps", "train_batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise InputError(f"pretraining config: {name} {getattr(self, name)} must be at least 1")
        for name in ("eval_holdout_shards", "eval_every_steps", "keep_checkpoint_max", "num_eval_steps",
                     "num_warmup_steps"):
            if getattr(self, name) < 0:
                raise InputError(f"pretraining config: {name} {getattr(self, name)} must be 0 or more")
        if any(step < 1 for step in self.extra_checkpoint_steps):
            raise InputError(f"pretraining config: extra_checkpoint_steps {list(self.extra_checkpoint_steps)} must "
                             "all be at least 1")

    # ---------------------------------------------------------------- building
    @classmethod
    def create(cls, hparams=None, source="--hparams") -> "PretrainingConfig":
        """Defaults < size file < hparams (a dict, inline JSON or a .json path); then derived values."""
        overrides = loading.parse_hparams(hparams, source)
        loading.check_known_keys(cls, overrides, source)
        size_name = overrides.get("model_size", cls.model_size)
        size = read_model_size(size_name)
        config = loading.update_dataclass(cls(), size.get("pretraining", {}), f"model size {size_name}")
        config = loading.update_dataclass(config, overrides, source)
        return config.with_derived_values()

    def with_derived_values(self) -> "PretrainingConfig":
        changes = {}
        if not self.model_name:
            changes["model_name"] = self.model_size
        if self.max_predictions_per_seq is None:
            changes["max_predictions_per_seq"] = int((self.mask_prob + 0.005) * self.max_seq_length)
        if self.debug:
            changes.update(train_batch_size=8, num_train_steps=20, eval_batch_size=4,
                           iterations_per_loop=1, num_eval_steps=2)
        if self.electric_objective:
            changes["two_tower_generator"] = True  # as the original: Electric needs the two-tower generator
            # The original tests `electra_objective or electric_objective` wherever it builds or scores the
            # discriminator, and its README's Electric command sets electra_objective false: that spelling
            # builds the same model, so it resolves to the same config.
            changes["electra_objective"] = True
        config = dataclasses.replace(self, **changes)
        config.objective_settings()  # the objective's own checks, once, as one-line input errors
        config.check_two_tower()
        config.model_config()  # validate the architecture overrides now, not at step 0
        return config

    def check_two_tower(self):
        """The combinations the original's two-tower generator (and so Electric) supports."""
        if not self.two_tower_generator:
            return
        what = "electric_objective" if self.electric_objective else "two_tower_generator"
        conflicts = [name for name, bad in (("electra_objective false", not self.electra_objective),
                                            ("uniform_generator", self.uniform_generator),
                                            ("untied_generator false", not self.untied_generator),
                                            ("gdes_embeddings", self.gdes_embeddings)) if bad]
        if conflicts:
            raise InputError(f"pretraining config: {what} needs its own two-tower generator network beside the "
                             f"discriminator, which {' and '.join(conflicts)} rule(s) out; drop "
                             f"{'it' if len(conflicts) == 1 else 'them'} from --hparams")

    def objective_settings(self) -> ObjectiveSettings:
        """The pretrainer's objective (pretrain.objective.ObjectiveSettings): the fields of the same names."""
        try:
            return ObjectiveSettings(**{name: getattr(self, name) for name in ObjectiveSettings.field_names()})
        except ValueError as error:
            raise InputError(f"pretraining config: {error}") from None

    # ---------------------------------------------------------------- towers
    def model_config(self) -> ModelConfig:
        """The discriminator (or, MLM-only, the main model): size file < embedding_size/vocab < overrides."""
        size = read_model_size(self.model_size)
        values = dict(size.get("model", {}))
        values["vocab_size"] = self.vocab_size
        if self.embedding_size is not None:
            values["embedding_size"] = self.embedding_size
        loading.check_known_keys(ModelConfig, self.model_hparam_overrides, "model_hparam_overrides")
        values.update(self.model_hparam_overrides)
        return ModelConfig.from_dict(values, source=f"model size {self.model_size} + model_hparam_overrides")

    def generator_model_config(self) -> ModelConfig:
        """The generator tower (each of the two with two_tower_generator); with untied generator embeddings
        its embedding size is its hidden size."""
        base = self.model_config()
        if not self.electra_objective or not self.untied_generator:
            return base
        generator = base.generator_config(self.generator_hidden_size, self.generator_layers)
        if self.untied_generator_embeddings:
            generator = dataclasses.replace(generator, embedding_size=generator.hidden_size)
        return generator

    # ---------------------------------------------------------------- files
    @property
    def model_dir(self) -> pathlib.Path:
        return pathlib.Path(self.data_dir) / "models" / self.model_name

    @property
    def pretrain_tfrecords(self) -> str:
        return str(pathlib.Path(self.data_dir) / "pretrain_tfrecords" / "pretrain_data.tfrecord*")

    @property
    def vocab_file(self) -> pathlib.Path:
        return pathlib.Path(self.data_dir) / "vocab.txt"

    def to_dict(self) -> dict:
        """As JSON holds it (tuples as lists), so a config read back from a file compares equal."""
        values = dataclasses.asdict(self)
        return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}

    def save(self, path) -> None:
        loading.save_json(self.to_dict(), path)

    @classmethod
    def load(cls, path) -> "PretrainingConfig":
        """Reads a saved (already resolved) config; unknown keys are rejected."""
        values = loading.read_json_file(path)
        return loading.dataclass_from_dict(cls, values, str(path)).with_derived_values()
