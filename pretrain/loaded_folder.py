"""A model folder loaded as a pretrainer: storage reads the folder, the builder builds the model, and the
folder's checkpoint is restored into it.

It lives in pretrain/ because it is the one place that both reads a folder and builds a model: storage/
sits below it (reading and writing files, building nothing) and every user of a loaded folder sits above
it (checkpoints/, inference/, the studies). It is not part of pretrain.builder, which the JAX trainer
imports to build a model from a config alone, without any folder.
"""
import dataclasses

from pretrain.builder import build_pretrainer
from storage import model_folder


@dataclasses.dataclass
class ModelFolder(model_folder.ModelFolderParts):
    """A folder's parts (config, vocabulary, checkpoint, step) and its pretrainer with those weights."""
    pretrainer: object  # pretrain.pretrainer.ElectraPretrainer, weights restored

    @property
    def main_encoder(self):
        """The encoder named "electra": the discriminator, or the MLM-only model's one encoder."""
        pretrainer = self.pretrainer
        return pretrainer.discriminator if pretrainer.discriminator is not None else pretrainer.generator

    def tokenizer(self):
        """The folder's WordPiece vocabulary or SentencePiece model, cased as the model was trained."""
        from data.tokenization import load_tokenizer

        vocab = "spm_model" if self.is_sentencepiece else "vocab_file"
        return load_tokenizer(**{vocab: self.vocab_file}, lower_case=self.config.do_lower_case)


def load_model_folder(path, flag="--model-dir"):
    """A model folder (its latest checkpoint) or a checkpoint prefix inside one → ModelFolder with the
    pretrainer built and its weights restored (no optimizer). Needs Keras' tensorflow backend (the weights
    are TensorFlow checkpoint files).

    Args:
        path: the folder, or a checkpoint prefix in it (…/ckpt-1000).
        flag: the command-line flag that named `path`, for the one-line error when it is not a model folder.
    """
    parts = model_folder.read_model_folder(path, flag)
    pretrainer = build_pretrainer(parts.config)
    model_folder.restore_folder_weights(pretrainer, parts, flag)
    return ModelFolder(**vars(parts), pretrainer=pretrainer)
