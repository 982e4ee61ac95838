"""A pretrained model folder (`<data-dir>/models/NAME/`): its config, vocabulary and latest weights.

Our pretraining runs write these folders, and imported official or Hugging Face weights arrive as the
same kind of folder. Only the discriminator ("electra") is read: its variables are restored by path
from the checkpoint's `model/weights_by_path/...` entries, the generator is not built. A discriminator
pretrained with gradient-disentangled embeddings (gdes_embeddings) is fine-tuned on its merged word
table (shared + residual), the table it actually read, as one ordinary variable.
"""
import dataclasses
import pathlib
from typing import Optional

import keras

from configs.finetuning_config import size_of
from configs.model_config import ModelConfig
from common.errors import InputError
from data.tokenization import load_tokenizer
from model.encoder import BertEncoder
from storage import model_folder

ENCODER_NAME = "electra"
# Fine-tuning's Keras dtype policy, given to the encoder and heads explicitly, so a policy set earlier in
# the process (or a mixed-precision pretraining run before) cannot change it. The original fine-tuned in
# float32 and no option switches it.
FINETUNING_DTYPE = "float32"


@dataclasses.dataclass(frozen=True)
class PretrainedModel:
    folder: pathlib.Path
    model_config: ModelConfig
    recipe_size: str  # "small" | "base" | "large": picks the fine-tuning recipe
    vocab_file: Optional[pathlib.Path]
    sp_model: Optional[pathlib.Path]
    do_lower_case: bool
    checkpoint: str
    gdes_embeddings: bool = False

    def tokenizer(self):
        return load_tokenizer(vocab_file=self.vocab_file, spm_model=self.sp_model, lower_case=self.do_lower_case)


def read_model_folder(folder) -> PretrainedModel:
    """Checks the folder (config, vocabulary, a checkpoint) before any work; InputError naming the gap."""
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such model folder; pass --model-name of a pretrained model under "
                         "<data-dir>/models/ (or check --data-dir)")
    config = model_folder.read_config(folder)
    vocab = model_folder.require_vocab(folder)
    checkpoint = model_folder.resolve_checkpoint(folder, flag="model folder")
    model_config = config.model_config()
    is_sentencepiece = vocab.suffix == ".model"
    return PretrainedModel(
        folder=folder, model_config=model_config,
        recipe_size=size_of(config.model_size, model_config.hidden_size),
        vocab_file=None if is_sentencepiece else vocab, sp_model=vocab if is_sentencepiece else None,
        do_lower_case=config.do_lower_case, checkpoint=checkpoint,
        gdes_embeddings=config.electra_objective and config.gdes_embeddings)


def build_encoder(model_config: ModelConfig, dtype=FINETUNING_DTYPE) -> BertEncoder:
    """The discriminator encoder with the TF1 variable paths of a pretraining checkpoint (electra/...)."""
    encoder = BertEncoder.from_model_config(model_config, name=ENCODER_NAME, dtype=dtype)
    with keras.name_scope(ENCODER_NAME):
        encoder.embeddings.build()
    encoder.build()
    return encoder


def load_encoder(pretrained: PretrainedModel, dtype=FINETUNING_DTYPE) -> BertEncoder:
    """The discriminator encoder with the folder's weights (a gdes residual merged into the word table);
    `dtype` its Keras dtype policy (mixed_bfloat16 on an accelerator under JAX)."""
    return restored_encoder(pretrained.model_config, pretrained.gdes_embeddings,
                            lambda model: restore_by_path(model, pretrained.checkpoint, what="encoder"), dtype)


def restored_encoder(model_config: ModelConfig, gdes_embeddings: bool, restore,
                     dtype=FINETUNING_DTYPE) -> BertEncoder:
    """The discriminator encoder, its weights set by `restore(model)` (from a checkpoint here, from
    arrays on the JAX path); under gdes_embeddings the pretrained layout is restored and merged."""
    encoder = build_encoder(model_config, dtype)
    if not gdes_embeddings:
        restore(encoder)
        return encoder
    source = _build_gdes_encoder(model_config, dtype)
    restore(source)
    by_path = {variable.path: variable for variable in source.weights}
    for variable in encoder.weights:
        variable.assign(by_path[variable.path])
    encoder.embeddings.word_embeddings.assign(source.merged_word_embeddings())
    return encoder


def _build_gdes_encoder(model_config, dtype):
    """The discriminator as pretraining built it under gdes_embeddings: shared table + its residual."""
    from pretrain.builder import shared_embeddings

    embeddings = shared_embeddings(model_config, dtype)
    with keras.name_scope(ENCODER_NAME):
        embeddings.build()
    encoder = BertEncoder.from_model_config(model_config, name=ENCODER_NAME, embeddings=embeddings,
                                            gdes_embeddings=True, dtype=dtype)
    encoder.build()
    return encoder


def restore_by_path(model, checkpoint, what="model"):
    """Restores every weight of `model` from `checkpoint` (keys `model/weights_by_path/<path>`)."""
    model_folder.restore_weights(model, checkpoint, label=f"{what} checkpoint",
                                 fix="use the config.json saved with these weights",
                                 use_other='write the line model_checkpoint_path: "{name}" into {folder}/checkpoint '
                                           "(the checkpoint it reads) and run the same command again")
