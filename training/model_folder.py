"""Our pretrained model folder: config.json (a PretrainingConfig), the vocabulary, TF checkpoints ckpt-N.

`load_model_folder` builds the pretrainer a folder describes and restores its weights (no optimizer);
`write_model_folder` writes one from a pretrainer, in the format run_pretraining.py writes, so that
`--init-checkpoint <folder>` (training/checkpointing.restore_weights) and fine-tuning read an imported
model like any other.
"""
import dataclasses
import pathlib
import re
import shutil

import tensorflow as tf

from configs.pretraining_config import PretrainingConfig
from common.errors import InputError
from training.checkpointing import CHECKPOINT_NAME, model_trackable, resolve_init_checkpoint, restore_weights
from training.run_config import CONFIG_FILE
from common.atomic import atomic_output_dir

WORDPIECE_VOCAB = "vocab.txt"


@dataclasses.dataclass
class ModelFolder:
    config: PretrainingConfig
    pretrainer: object  # pretrain.pretrainer.ElectraPretrainer, weights restored
    vocab_file: pathlib.Path  # vocab.txt or a SentencePiece .model
    checkpoint: str  # the checkpoint prefix read
    step: int  # N of ckpt-N

    @property
    def is_sentencepiece(self):
        return self.vocab_file.suffix == ".model"


def find_vocab(folder):
    """The folder's vocab.txt or its one SentencePiece *.model; None when it has neither."""
    folder = pathlib.Path(folder)
    if (folder / WORDPIECE_VOCAB).is_file():
        return folder / WORDPIECE_VOCAB
    models = sorted(folder.glob("*.model"))
    return models[0] if len(models) == 1 else None


def checkpoint_step(prefix):
    """N of a `…/ckpt-N` or `…/model.ckpt-N` prefix (0 when it has no number)."""
    match = re.search(r"-(\d+)$", str(prefix))
    return int(match.group(1)) if match else 0


def load_model_folder(path):
    """A model folder (its latest checkpoint) or a checkpoint prefix inside one → ModelFolder."""
    from pretrain.builder import build_pretrainer

    path = pathlib.Path(path)
    folder = path if path.is_dir() else path.parent
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise InputError(f"--model-dir {path}: no {CONFIG_FILE} in {folder}; pass a model folder written by "
                         "run_pretraining.py or checkpoints.import_weights")
    config = PretrainingConfig.load(config_path)
    prefix = resolve_init_checkpoint(path)
    vocab_file = find_vocab(folder)
    if vocab_file is None:
        raise InputError(f"--model-dir {folder}: no vocab.txt or single SentencePiece .model in the folder; "
                         "copy the model's vocabulary there")
    pretrainer = build_pretrainer(config)
    restore_model_weights(pretrainer, prefix, config_path)
    return ModelFolder(config, pretrainer, vocab_file, prefix, checkpoint_step(prefix))


def restore_model_weights(pretrainer, prefix, config_path):
    restore_weights(pretrainer, prefix, label="checkpoint",
                    fix=f"pass the folder the checkpoint was trained in (its config is {config_path})")


def write_model_folder(folder, config, pretrainer, vocab_file, step=0, overwrite=False):
    """config.json, the vocabulary and ckpt-<step> (model weights only), atomically."""
    vocab_file = pathlib.Path(vocab_file)
    with atomic_output_dir(folder, overwrite, flag="model folder") as temp:
        config.save(temp / CONFIG_FILE)
        name = vocab_file.name if vocab_file.suffix == ".model" else WORDPIECE_VOCAB
        shutil.copyfile(vocab_file, temp / name)
        checkpoint = tf.train.Checkpoint(model=model_trackable(pretrainer))
        tf.train.CheckpointManager(checkpoint, str(temp), max_to_keep=1,
                                   checkpoint_name=CHECKPOINT_NAME).save(checkpoint_number=step)
    return pathlib.Path(folder)
