"""A pretrained model folder, the one format run_pretraining.py writes and everything else reads.

    <folder>/config.json          a PretrainingConfig (the model's shapes, objective, casing)
    <folder>/vocab.txt            or the one SentencePiece <name>.model the model was trained with
    <folder>/ckpt-N.index, .data  TF checkpoints, model weights keyed by path (training.checkpointing)
    <folder>/checkpoint           TensorFlow's state file naming them, newest first

Fine-tuning, export, the inspector, imports and the studies read and write folders only through this
module, so they agree on which vocabulary and which checkpoint a folder means. TensorFlow is imported
only where checkpoint files are read or written: the JAX path reads configs and vocabularies without it.
"""
import dataclasses
import os
import pathlib
import re

from common import atomic
from common.errors import InputError
from configs.pretraining_config import PretrainingConfig

CONFIG_FILE = "config.json"
WORDPIECE_VOCAB = "vocab.txt"
CHECKPOINT_NAME = "ckpt"
STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints, newest named first


# --- config and vocabulary ----------------------------------------------------------------------------

def has_config(folder):
    return (pathlib.Path(folder) / CONFIG_FILE).is_file()


def read_config(folder) -> PretrainingConfig:
    path = pathlib.Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing; a pretrained model folder holds the config.json that "
                         "run_pretraining.py (or an import) wrote")
    return PretrainingConfig.load(path)


def write_config(folder, config):
    config.save(pathlib.Path(folder) / CONFIG_FILE)


def find_vocab(folder):
    """The folder's vocab.txt, else its one SentencePiece *.model; None when it has neither. Several
    *.model files are ambiguous: which one the model was trained with cannot be told, so it stops."""
    folder = pathlib.Path(folder)
    if (folder / WORDPIECE_VOCAB).is_file():
        return folder / WORDPIECE_VOCAB
    models = sorted(folder.glob("*.model"))
    if len(models) > 1:
        raise InputError(f"{folder}: {len(models)} SentencePiece models ({', '.join(m.name for m in models)}) "
                         "and no vocab.txt; keep only the one the model was trained with")
    return models[0] if models else None


def require_vocab(folder):
    found = find_vocab(folder)
    if found is None:
        raise InputError(f"{folder}: no vocabulary (vocab.txt or a SentencePiece *.model); copy the one the "
                         "model was pretrained with into the folder")
    return found


def vocab_copy_name(vocab_file):
    """A WordPiece vocabulary is always vocab.txt in a folder; a SentencePiece model keeps its name."""
    vocab_file = pathlib.Path(vocab_file)
    return vocab_file.name if vocab_file.suffix == ".model" else WORDPIECE_VOCAB


def copy_vocab(folder, vocab_file):
    target = pathlib.Path(folder) / vocab_copy_name(vocab_file)
    atomic.copy_file(vocab_file, target)
    return target


def vocab_copies(folder):
    """Every vocabulary file in the folder (a resumed run checks each against its dataset)."""
    folder = pathlib.Path(folder)
    return [p for p in [folder / WORDPIECE_VOCAB, *sorted(folder.glob("*.model"))] if p.is_file()]


# --- checkpoints ----------------------------------------------------------------------------------------

def checkpoint_step(prefix):
    """N of a `…/ckpt-N` or `…/model.ckpt-N` prefix (0 when it has no number)."""
    match = re.search(r"-(\d+)$", str(prefix))
    return int(match.group(1)) if match else 0


def latest_checkpoint(folder):
    """The newest checkpoint the folder's state file lists whose files exist, or None (see
    training.checkpointing.latest_checkpoint: it falls back past a checkpoint whose files were moved out)."""
    from training.checkpointing import latest_checkpoint as listed_latest

    return listed_latest(folder)


def resolve_checkpoint(path, flag="--init-checkpoint"):
    """A model folder (its latest checkpoint) or a checkpoint prefix (…/ckpt-1000) → the prefix;
    InputError naming `flag` when it is neither."""
    candidate = pathlib.Path(path)
    if candidate.is_dir():
        latest = latest_checkpoint(candidate)
        if not latest:
            raise InputError(f"{flag} {path}: the folder holds no checkpoint; pass a model folder with weights "
                             "(pretrain it first or import weights into it) or a checkpoint prefix (…/ckpt-1000)")
        return latest
    if not pathlib.Path(f"{candidate}.index").is_file():
        raise InputError(f"{flag} {path}: no such checkpoint (expected {path}.index); pass a model folder or a "
                         "checkpoint prefix")
    return str(candidate)


def is_complete(folder):
    """Whether the folder's state file exists: every writer here writes it last."""
    return (pathlib.Path(folder) / STATE_FILE).is_file()


def write_state(folder, prefix_name):
    """A state file naming one checkpoint, for folders written without a CheckpointManager (an export, a
    folder of hard links); written last, it is what makes the folder's checkpoint visible."""
    atomic.write_text(pathlib.Path(folder) / STATE_FILE,
                      f'model_checkpoint_path: "{prefix_name}"\nall_model_checkpoint_paths: "{prefix_name}"\n')


def link_checkpoint(source, step, folder):
    """A model folder holding only checkpoint `step` of the one at `source`: config and vocabulary copied,
    the checkpoint's files hard-linked (no extra disk). Returns the folder; an existing complete one is kept."""
    source, folder = pathlib.Path(source), pathlib.Path(folder)
    if is_complete(folder):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    atomic.copy_file(source / CONFIG_FILE, folder / CONFIG_FILE)
    copy_vocab(folder, require_vocab(source))
    for path in source.glob(f"{CHECKPOINT_NAME}-{step}.*"):
        if not (folder / path.name).exists():
            os.link(path, folder / path.name)
    write_state(folder, f"{CHECKPOINT_NAME}-{step}")
    return folder


# --- whole folders ----------------------------------------------------------------------------------------

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


def load_model_folder(path, flag="--model-dir"):
    """A model folder (its latest checkpoint) or a checkpoint prefix inside one → ModelFolder with the
    pretrainer built and its weights restored (no optimizer)."""
    from pretrain.builder import build_pretrainer
    from training.checkpointing import restore_weights

    path = pathlib.Path(path)
    folder = path if path.is_dir() else path.parent
    if not has_config(folder):
        raise InputError(f"{flag} {path}: no {CONFIG_FILE} in {folder}; pass a model folder written by "
                         "run_pretraining.py or checkpoints.import_weights")
    config = read_config(folder)
    prefix = resolve_checkpoint(path, flag)
    vocab_file = require_vocab(folder)
    pretrainer = build_pretrainer(config)
    restore_weights(pretrainer, prefix, label="checkpoint",
                    fix=f"pass the folder the checkpoint was trained in (its config is {folder / CONFIG_FILE})",
                    use_other=f"pass {flag} {{prefix}}")
    return ModelFolder(config, pretrainer, vocab_file, prefix, checkpoint_step(prefix))


def write_model_folder(folder, config, pretrainer, vocab_file, step=0, overwrite=False):
    """config.json, the vocabulary and ckpt-<step> (model weights only), atomically."""
    import tensorflow as tf

    from training.checkpointing import model_trackable

    with atomic.atomic_output_dir(folder, overwrite, flag="model folder") as temp:
        write_config(temp, config)
        copy_vocab(temp, vocab_file)
        checkpoint = tf.train.Checkpoint(model=model_trackable(pretrainer))
        tf.train.CheckpointManager(checkpoint, str(temp), max_to_keep=1,
                                   checkpoint_name=CHECKPOINT_NAME).save(checkpoint_number=step)
    return pathlib.Path(folder)
