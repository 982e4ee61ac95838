"""The weights training_jax.pretrain writes ({Keras variable path: array} in .npz files), split into shards
small enough to copy back from a GPU machine, read back whole, and set into a pretrainer. Backend-neutral
(no TensorFlow): a device scores with them, checkpoints.import_jax turns them into a model folder."""
import pathlib
import re

from common.errors import InputError
from training_jax.arrays import read_weights as read_npz

SHARD_BYTES = 15 * 2 ** 20  # what a run brings back: files of at most 16 MiB, small to copy


def weights_file_step(name):
    """The step of a weights file's name (weights-<step>.npz, or a shard weights-<step>.part<k>of<n>.npz),
    or None for any other name."""
    match = re.fullmatch(r"weights-(\d+)(\.part\d+of\d+)?\.npz", name)
    return int(match.group(1)) if match else None


def shard_name(name, index, count):
    return name.replace(".npz", f".part{index}of{count}.npz")


def write_shards(values, folder, name, max_bytes=SHARD_BYTES):
    """`values` as <name>.part<k>of<n>.npz files of at most max_bytes each (whole arrays per file)."""
    import numpy as np

    groups, current, size = [], {}, 0
    for key in sorted(values):
        nbytes = values[key].nbytes
        if current and size + nbytes > max_bytes:
            groups.append(current)
            current, size = {}, 0
        current[key], size = values[key], size + nbytes
    groups.append(current)
    for index, group in enumerate(groups, 1):
        np.savez(pathlib.Path(folder) / shard_name(name, index, len(groups)), **group)


def weights_paths(folder, name):
    """The files holding <folder>/<name>: itself, or all its shards; [] when neither is there; InputError
    when some shards are missing."""
    folder = pathlib.Path(folder)
    if (folder / name).is_file():
        return [folder / name]
    shards = sorted(folder.glob(shard_name(name, "*", "*")))
    if not shards:
        return []
    count = int(re.search(r"of(\d+)\.npz$", shards[0].name).group(1))
    if len(shards) != count:
        raise InputError(f"{folder}: {len(shards)} of the {count} shards of {name}; copy the missing ones back")
    return shards


def read_weights(folder, name):
    """{key: array} of <folder>/<name>, or of its shards when the whole file did not come back; None if
    neither is there."""
    paths = weights_paths(folder, name)
    return {key: value for key, (value, _) in read_npz(paths).items()} if paths else None


def assign_weights(pretrainer, weights, path):
    """The pretrainer with every variable set from `weights` ({Keras path: array}, as saved by
    training_jax.pretrain); InputError naming `path` when the names or shapes are another model's."""
    variables = {variable.path: variable for variable in pretrainer.weights}
    if set(variables) != set(weights):
        missing, extra = sorted(set(variables) - set(weights)), sorted(set(weights) - set(variables))
        raise InputError(f"{path}: its weights do not match the config's model (missing {missing[:3]}, "
                         f"unexpected {extra[:3]}); pass the config the weights were trained with")
    for name, variable in variables.items():
        value = weights[name]
        if tuple(value.shape) != tuple(variable.shape):
            raise InputError(f"{path}: {name} has shape {value.shape}, the model {variable.shape}; pass the config "
                             "the weights were trained with")
        variable.assign(value.astype(variable.dtype))
    return pretrainer


def pretrainer_with_weights(config, weights, path):
    """The config's pretrainer holding the weights saved by training_jax.pretrain. Built in float32, not the
    config's precision: it only holds weights, which are float32 either way."""
    from pretrain.builder import build_pretrainer

    return assign_weights(build_pretrainer(config, dtype="float32"), weights, path)
