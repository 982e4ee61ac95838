"""Name-based (TF1) checkpoints: the format of the original release, google-research/bert and the tools
that read them (`tf.train.load_checkpoint`, Hugging Face's converters). The export of a model folder in
the original's names (`export_tf1`) and the import's reader (`TF1Source`).

A TF2 object-based checkpoint stores `…/.ATTRIBUTES/VARIABLE_VALUE` keys that those tools cannot read, so
the writer calls the SaveV2 op directly with the plain names.
"""
import pathlib

import numpy as np
import tensorflow as tf

from checkpoints import names as names_lib
from common.atomic import atomic_output_dir
from common.errors import InputError
from storage import model_folder

# Our PretrainingConfig, written beside an exported TF1 checkpoint (the original had no config file): the
# importer reads the attention heads and other settings that tensors do not show from it.
CONFIG_COPY = "electra_config.json"
TF1_CHECKPOINT = "model.ckpt-{step}"  # what the original's TPUEstimator wrote


def write_tf1_checkpoint(folder, prefix, tensors, global_step):
    """Writes `<folder>/<prefix>.{index,data-…}` holding `tensors` ({name: array}) and `global_step`, and
    the `checkpoint` state file that tf.train.latest_checkpoint reads."""
    folder = pathlib.Path(folder)
    ordered = sorted(tensors)
    values = [tf.constant(tensors[name]) for name in ordered]
    ordered.append(names_lib.GLOBAL_STEP)
    values.append(tf.constant(global_step, dtype=tf.int64))
    tf.raw_ops.SaveV2(prefix=str(folder / prefix), tensor_names=ordered, shape_and_slices=[""] * len(ordered),
                      tensors=values)
    model_folder.write_state(folder, prefix)
    return folder / prefix


def export_tf1(model, output, overwrite=False):
    """The original's names for discriminator and generator, global_step, the vocabulary and our config, from
    a loaded model folder (pretrain.loaded_folder.ModelFolder); returns the number of tensors written."""
    tensors = names_lib.export_tensors(model.pretrainer)
    with atomic_output_dir(output, overwrite) as temp:
        write_tf1_checkpoint(temp, TF1_CHECKPOINT.format(step=model.step), tensors, model.step)
        model_folder.copy_vocab(temp, model.vocab_file)  # named as in a model folder: the import finds it there
        model.config.save(temp / CONFIG_COPY)
    return len(tensors)


def resolve_tf1_prefix(path):
    """A checkpoint prefix, or a folder: its `checkpoint` state file's latest, else its one *.index."""
    path = pathlib.Path(path)
    if path.is_dir():
        latest = model_folder.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(path.glob("*.index"))
        if len(indexes) == 1:
            return str(indexes[0])[:-len(".index")]
        raise InputError(f"--source {path}: the folder holds {'no' if not indexes else len(indexes)} checkpoint "
                         "index files and no `checkpoint` file; pass the checkpoint prefix (…/model.ckpt-N)")
    if not pathlib.Path(f"{path}.index").is_file():
        raise InputError(f"--source {path}: no such checkpoint (expected {path}.index) and not a Hugging Face "
                         "folder (config.json + model.safetensors); check the path")
    return str(path)


class TF1Source:
    """Reads tensors by TF1 name from a name-based checkpoint (optimizer slots and global_step ignored)."""

    kind = "TF1 checkpoint"

    def __init__(self, prefix):
        self.prefix = str(prefix)
        try:
            self._reader = tf.train.load_checkpoint(self.prefix)
        except (tf.errors.OpError, ValueError) as error:
            raise InputError(f"--source {prefix}: not a readable TensorFlow checkpoint "
                             f"({str(error).splitlines()[0][:160]}); check the path") from None
        self._shapes = {name: tuple(shape) for name, shape in self._reader.get_variable_to_shape_map().items()}
        if any(".ATTRIBUTES" in name for name in self._shapes):
            raise InputError(f"--source {prefix}: an object-based (TF2) checkpoint, not a TF1 name-based one; "
                             "if it is one of our model folders, use it directly (no import needed)")
        self.folder = pathlib.Path(self.prefix).parent
        self.hf_config = None

    def has(self, name):
        return name in self._shapes

    def shape(self, name):
        return self._shapes[name]

    def get(self, name):
        return np.asarray(self._reader.get_tensor(name))

    def unused_keys(self, used_names):
        """Tensors no used name reads, optimizer slots and global_step excepted."""
        return sorted(name for name in set(self._shapes) - set(used_names)
                      if not names_lib.is_optimizer_state(name))

    @property
    def step(self):
        return int(self.get(names_lib.GLOBAL_STEP)) if self.has(names_lib.GLOBAL_STEP) else 0

    def describe(self, name):
        return f"{self.prefix}: tensor {name}"
