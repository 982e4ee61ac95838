"""A JAX run's weights: written as a model folder's checkpoints (ckpt-<step>, TensorFlow's format written by
storage.checkpoint_bundle without TensorFlow, float16 by default), read back from one, and set into a
pretrainer. Backend-neutral: a device scores with them, studies.device_path.import_jax copies them into a data
directory, and TensorFlow's readers take the folder as it is.

The older format, in one place below: .npz files of {Keras variable path: array}, whole (weights-<step>.npz,
what runs wrote before their output was a model folder) or in shards of at most 16 MiB (what GPU runs
brought back before studies.device_path.run's archive, and the RTD-vs-MLM study's collect still does,
weights-<step>.part<k>of<n>.npz). Every reader here takes both.
"""
import pathlib
import re

from common.errors import InputError
from training_jax.arrays import read_weights as read_npz

SHARD_BYTES = 15 * 2 ** 20  # what a run brings back: files of at most 16 MiB, small to copy


# --- the model folder's checkpoints -----------------------------------------------------------------------

def model_values(model, dtype):
    """{Keras path: value} of the model's weights, in model.weights order; floats cast to `dtype`, integer
    state (seed generators) as is."""
    import numpy as np

    values = {}
    for variable in model.weights:
        value = np.asarray(variable.value)
        values[variable.path] = value.astype(dtype) if np.issubdtype(value.dtype, np.floating) else value
    return values


def save_checkpoint(folder, step, model, dtype, config, vocab_file, keep=None):
    """ckpt-<step> of the model's weights (floats in `dtype`) in the model folder `folder`, with its config
    and vocabulary; the state file, written last, names it (and the `keep` - 1 before it, when given). Returns the
    checkpoint's prefix."""
    from storage.model_folder import write_weights_checkpoint

    return write_weights_checkpoint(folder, step, model_values(model, dtype), config, vocab_file, keep=keep)


def checkpoint_of(path, flag="--init-from"):
    """A model folder (its newest checkpoint: the largest N of its ckpt-N.index) or a checkpoint prefix
    (…/ckpt-N) → the prefix, without TensorFlow; InputError naming `flag` when it is neither."""
    from storage.model_folder import newest_saved_checkpoint, resolve_checkpoint

    return resolve_checkpoint(path, flag, latest=newest_saved_checkpoint)


def checkpoint_steps(folder):
    """The steps N of the ckpt-N checkpoints in `folder`, oldest first ([] when there is none)."""
    from storage.model_folder import checkpoint_step, saved_checkpoints

    return [checkpoint_step(prefix) for prefix in saved_checkpoints(folder)] if pathlib.Path(folder).is_dir() else []


def read_weight_files(sources, flag="--weights"):
    """{Keras path: (array, source)} of weights given on a command line: model folders or checkpoint prefixes,
    or .npz files of the older format (a later source's key wins; the source is kept for error messages)."""
    from storage.checkpoint_bundle import read_model_weights

    weights = {}
    for source in sources:
        if str(source).endswith(".npz"):
            weights.update(read_npz([source]))
        else:
            prefix = checkpoint_of(source, flag)
            weights.update({key: (value, prefix) for key, value in read_model_weights(prefix).items()})
    return weights


def read_checkpoint(path, flag="--weights"):
    """{Keras path: array} of one model's weights: a model folder or checkpoint prefix, or the older .npz (or
    the name of one whose shards lie beside it); InputError when none is there."""
    path = pathlib.Path(path)
    if path.suffix == ".npz":
        weights = read_weights(path.parent, path.name)
        if weights is None:
            raise InputError(f"{flag} {path}: no such file and no shards of it beside; copy them here")
        return weights
    return {key: value for key, (value, _) in read_weight_files([path], flag).items()}


def assign_weights(pretrainer, weights, path):
    """The pretrainer with every variable set from `weights` ({Keras path: array}, as a JAX run saved them);
    InputError naming `path` when the names or shapes are another model's."""
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
    """The config's pretrainer holding a JAX run's weights. Built in float32, not the config's precision: it
    only holds weights, which are float32 either way."""
    from pretrain.builder import build_pretrainer

    return assign_weights(build_pretrainer(config, dtype="float32"), weights, path)


# --- the older format: .npz files, whole or in shards ------------------------------------------------------

def weights_file(step):
    """The older format's name of a run's weights of `step`."""
    return f"weights-{step}.npz"


def weights_file_step(name):
    """The step of a weights file's name (weights-<step>.npz, or a shard weights-<step>.part<k>of<n>.npz),
    or None for any other name."""
    match = re.fullmatch(r"weights-(\d+)(\.part\d+of\d+)?\.npz", name)
    return int(match.group(1)) if match else None


def save_npz_weights(path, model, dtype):
    """The older format's whole file: model_values as one .npz (what runs wrote before model folders)."""
    import numpy as np

    from common.atomic import atomic_path

    with atomic_path(path, suffix=".npz") as temp:
        np.savez(temp, **model_values(model, dtype))


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
