"""A pretrained model folder, the one format run_pretraining.py writes and everything else reads.

    <folder>/config.json          a PretrainingConfig (the model's shapes, objective, casing)
    <folder>/vocab.txt            or the one SentencePiece <name>.model the model was trained with
    <folder>/ckpt-N.index, .data  TF checkpoints, model weights keyed by path (model_trackable)
    <folder>/checkpoint           TensorFlow's state file naming them, newest first

Pretraining, fine-tuning, export, import, the inspector and the studies read and write folders only
through this module, so they agree on which vocabulary and which checkpoint a folder means, and a damaged
file is explained the same way everywhere. It sits below pretrain/, training/, finetune/, checkpoints/
and inference/ and imports none of them: it restores weights into a model its caller built
(pretrain.loaded_folder builds a folder's pretrainer). TensorFlow is imported only inside the functions
that read or write checkpoint files: the JAX path reads configs and vocabularies without it.

A checkpoint damaged after it was listed (a truncated copy, flipped bytes) fails its restore; the caller
then names the file and the older complete checkpoint to resume from (`explaining_damage`, around the
restore). A damaged checkpoint read only for its weights (--init-checkpoint, a folder to fine-tune or
export) names the file and the newest complete checkpoint beside it (`restore_weights`).
"""
import contextlib
import dataclasses
import functools
import logging
import os
import pathlib
import re
import shutil

from common import atomic
from common.errors import InputError, short_reason
from configs.pretraining_config import PretrainingConfig

# What the users of a folder call, by section below. The state file's parser and the damaged-checkpoint
# messages (read_state, listed_checkpoints, restore_errors, checkpoint_problem, newest_complete_checkpoint,
# damaged_*_error) and WORDPIECE_VOCAB / vocab_copy_name serve this module only.
__all__ = [
    "require_tensorflow_backend", "reads_with_tensorflow",
    # config and vocabulary
    "CONFIG_FILE", "has_config", "read_config", "write_config", "find_vocab", "require_vocab", "copy_vocab",
    "vocab_copies",
    # checkpoint names and the state file
    "CHECKPOINT_NAME", "STATE_FILE", "checkpoint_step", "checkpoint_prefix", "saved_checkpoints", "is_complete",
    "write_state", "link_checkpoint", "latest_checkpoint", "newest_saved_checkpoint", "resolve_checkpoint",
    "checkpoint_exists",
    # weights, and a damaged checkpoint explained around a restore
    "model_trackable", "write_weights", "restore_weights", "holds_half_precision_weights", "holds_optimizer_state",
    "explaining_damage", "write_weights_checkpoint",
    # whole folders
    "ModelFolderParts", "read_model_folder", "restore_folder_weights", "write_model_folder", "copy_checkpoint_folder",
]

CONFIG_FILE = "config.json"
WORDPIECE_VOCAB = "vocab.txt"
CHECKPOINT_NAME = "ckpt"
STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's list of checkpoints, newest named first


def require_tensorflow_backend(tool):
    """The check every tool that reads or writes checkpoints makes first: they are TensorFlow checkpoint
    files, so Keras must run on its tensorflow backend (the JAX path is training_jax/)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        raise InputError(f"KERAS_BACKEND={keras.backend.backend()}: {tool} needs the tensorflow backend (it reads "
                         "and writes TensorFlow checkpoints); unset KERAS_BACKEND, or use training_jax for JAX")


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


def copy_vocab(folder, vocab_file, replace=True):
    """The vocabulary's copy in the folder under the name find_vocab looks for; replace=False keeps a copy
    already there (a resumed run's, checked against its dataset before)."""
    target = pathlib.Path(folder) / vocab_copy_name(vocab_file)
    if replace or not target.exists():
        atomic.copy_file(vocab_file, target)
    return target


def vocab_copies(folder):
    """Every vocabulary file in the folder (a resumed run checks each against its dataset)."""
    folder = pathlib.Path(folder)
    return [p for p in [folder / WORDPIECE_VOCAB, *sorted(folder.glob("*.model"))] if p.is_file()]


# --- checkpoint names and the state file --------------------------------------------------------------

def checkpoint_step(prefix):
    """N of a `…/ckpt-N` or `…/model.ckpt-N` prefix (0 when it has no number)."""
    match = re.search(r"-(\d+)$", str(prefix))
    return int(match.group(1)) if match else 0


def checkpoint_prefix(folder, step):
    """The prefix of checkpoint `step` in the folder (…/ckpt-N)."""
    return str(pathlib.Path(folder) / f"{CHECKPOINT_NAME}-{step}")


def saved_checkpoints(folder):
    """Every ckpt-N prefix in the folder that has its index file, oldest first by N, whether or not the state
    file lists it (what a damaged folder still holds; every checkpoint a study scores)."""
    indexes = pathlib.Path(folder).glob(f"{CHECKPOINT_NAME}-*.index")
    return sorted((str(index.with_suffix("")) for index in indexes), key=checkpoint_step)


def checkpoint_exists(prefix):
    """Whether the checkpoint at `prefix` has its index file (its data files are checked when read)."""
    return pathlib.Path(f"{prefix}.index").is_file()


def is_complete(folder):
    """Whether the folder's state file exists: every writer here writes it last."""
    return (pathlib.Path(folder) / STATE_FILE).is_file()


def write_state(folder, prefix_name, older=()):
    """A state file naming checkpoint `prefix_name` (and the `older` ones, oldest first), for folders written
    without a CheckpointManager (an export, a folder of hard links, a JAX run); written last, it is what makes
    the folder's checkpoint visible."""
    listed = "".join(f'all_model_checkpoint_paths: "{name}"\n' for name in [*older, prefix_name])
    atomic.write_text(pathlib.Path(folder) / STATE_FILE, f'model_checkpoint_path: "{prefix_name}"\n{listed}')


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


def reads_with_tensorflow():
    """Whether checkpoint files are read with TensorFlow (Keras on its tensorflow backend), else with NumPy
    (checkpoint_bundle) and plain file reads, as on a JAX machine that has no TensorFlow."""
    import keras

    return keras.backend.backend() == "tensorflow"


@dataclasses.dataclass
class CheckpointState:
    """The state file's two lists, paths joined to the folder as tf.train.get_checkpoint_state gives them."""
    model_checkpoint_path: str
    all_model_checkpoint_paths: list


_STATE_LINE = re.compile(r'\s*(model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"((?:[^"\\]|\\.)*)"\s*'
                         r'|\s*(last_preserved_timestamp|all_model_checkpoint_timestamps)\s*:\s*[-+.eE0-9]+\s*|\s*')


def parse_state(model_dir, text):
    """The state file's text format (what tf.train.CheckpointManager and write_state write) without
    TensorFlow; None for anything else."""
    latest, paths = None, []
    for line in text.splitlines():
        match = _STATE_LINE.fullmatch(line)
        if match is None:
            return None
        if match.group(1):
            path = re.sub(r"\\(.)", r"\1", match.group(2))
            path = path if os.path.isabs(path) else os.path.join(str(model_dir), path)
            if match.group(1) == "model_checkpoint_path":
                latest = path
            else:
                paths.append(path)
    return None if latest is None else CheckpointState(latest, paths)


def read_state(model_dir):
    """The `checkpoint` state file's contents, or None when there is none; InputError when it is damaged.

    tf.train.get_checkpoint_state logs a warning and answers None for a file it cannot parse, so a resume
    would start over at step 0 and write over the checkpoints in the folder; this stops instead.
    """
    if not reads_with_tensorflow():
        state_file = pathlib.Path(model_dir) / STATE_FILE
        if not state_file.is_file():
            return None
        try:
            state = parse_state(model_dir, state_file.read_bytes().decode("utf-8"))
        except UnicodeDecodeError:
            state = None
        if state is None:
            raise damaged_state_error(model_dir)
        return state
    import tensorflow as tf

    if not tf.io.gfile.exists(str(pathlib.Path(model_dir) / STATE_FILE)):
        return None
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # its warnings would only say less than the InputError below
    try:
        state = tf.train.get_checkpoint_state(str(model_dir))
    except ValueError:  # an empty file, or bytes that are not UTF-8
        state = None
    finally:
        logger.setLevel(level)
    if state is None:
        raise damaged_state_error(model_dir)
    return state


def listed_checkpoints(model_dir):
    """The checkpoint prefixes the `checkpoint` state file names, newest first, whether or not their
    files exist: its model_checkpoint_path, then the older entries of all_model_checkpoint_paths."""
    state = read_state(model_dir)
    if state is None:
        return []
    latest, paths = state.model_checkpoint_path, list(state.all_model_checkpoint_paths)
    older = paths[:paths.index(latest)] if latest in paths else paths
    return [latest, *reversed(older)]


def latest_checkpoint(model_dir):
    """The newest listed checkpoint whose index file exists, or None.

    tf.train.latest_checkpoint gives up (None, and a logged error) when the newest listed checkpoint's
    files are gone; this one falls back to the previous one, so that moving a damaged checkpoint's files
    out of the folder is all it takes to resume from the one before (what `explaining_damage` advises).
    """
    if not reads_with_tensorflow():
        return next((path for path in listed_checkpoints(model_dir) if checkpoint_exists(path)), None)
    import tensorflow as tf

    for path in listed_checkpoints(model_dir):
        if tf.io.gfile.exists(path + ".index"):
            return path
    return None


def newest_saved_checkpoint(folder):
    """The ckpt-N prefix with the largest N whose index file is in the folder, or None; without TensorFlow
    (the state file is not read: a bundle whose index exists is complete)."""
    return (saved_checkpoints(folder) or [None])[-1]


def resolve_checkpoint(path, flag="--init-checkpoint", latest=None):
    """A model folder (its latest checkpoint: `latest(folder)`, by default the state file's) or a checkpoint
    prefix (…/ckpt-1000) → the prefix; InputError naming `flag` when it is neither."""
    candidate = pathlib.Path(path)
    if candidate.is_dir():
        found = (latest or latest_checkpoint)(candidate)
        if not found:
            raise InputError(f"{flag} {path}: the folder holds no checkpoint; pass a model folder with weights "
                             "(pretrain it first or import weights into it) or a checkpoint prefix (…/ckpt-1000)")
        return found
    if not checkpoint_exists(candidate):
        raise InputError(f"{flag} {path}: no such checkpoint (expected {path}.index); pass a model folder or a "
                         "checkpoint prefix")
    return str(candidate)


# --- weights ----------------------------------------------------------------------------------------------

def model_trackable(model):
    """Every model weight keyed by its Keras path (TF1-style scope), for tf.train.Checkpoint.

    A Keras 3 model passed to tf.train.Checkpoint directly reaches most of its weights only through the
    optimizer, so a model-only restore (--init-checkpoint) would find nothing; keyed by path, the
    checkpoint's `model/weights_by_path/<path>` entries restore with or without an optimizer.
    """
    import tensorflow as tf

    weights = {}
    for variable in model.weights:
        path = variable.path
        if path in weights and weights[path] is not variable:
            raise ValueError(f"two model weights share the path {path!r}")
        weights[path] = variable
    module = tf.Module(name="model")
    module.weights_by_path = weights
    return module


def write_weights(model, prefix):
    """A weights-only checkpoint of `model` at `prefix` (…/ckpt), which restore_weights reads back; no
    state file (a fine-tuned model's folder names its one checkpoint itself). Without TensorFlow (another
    Keras backend) the same checkpoint is written with NumPy (checkpoint_bundle)."""
    if not reads_with_tensorflow():
        import numpy as np

        from storage import checkpoint_bundle

        return checkpoint_bundle.write_model_weights(
            prefix, {variable.path: np.asarray(variable.value) for variable in model.weights})
    import tensorflow as tf

    checkpoint = tf.train.Checkpoint(model=model_trackable(model))
    checkpoint.save_counter  # created so that the file has what a restore expects (as ckpt-N files do)
    return checkpoint.write(str(prefix))


def restore_weights(model, path, label="--init-checkpoint", fix="use the same model size and vocabulary",
                    use_other="pass --init-checkpoint {prefix}"):
    """Model weights only (a fresh optimizer): the checkpoint's model must match this one's variables.

    A shape mismatch fails inside restore(), a missing weight in the assertion: both become one line.
    `label` names the source in that line, `fix` says what to do. A damaged file (a truncated copy)
    becomes one line naming it and the newest complete checkpoint beside it, with `use_other` (formatted
    with its `prefix`, `name` and `folder`) saying how to use that one (damaged_source_error); None
    where the caller explains damage itself (a run resuming from its own folder: explaining_damage).
    Weights kept in half precision (a JAX run's, float16 by default) are widened to the variables' dtype,
    and without TensorFlow (another Keras backend) every checkpoint is read with NumPy the same way.
    """
    if holds_half_precision_weights(path) or not reads_with_tensorflow():
        return _restore_widened(model, path, label, fix, use_other)
    import tensorflow as tf

    folder = pathlib.Path(path).parent
    damage = (contextlib.nullcontext() if use_other is None else
              explaining_damage(folder, path, error=functools.partial(damaged_source_error, path, label, use_other)))
    try:
        with damage:
            status = tf.train.Checkpoint(model=model_trackable(model)).restore(path)
            status.expect_partial()  # the optimizer and counters are not wanted here
            status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        raise InputError(f"{label} {path}: its weights do not match this model ({str(error)[:200]}); "
                         f"{fix}") from None


def holds_half_precision_weights(path):
    """Whether the checkpoint's model weights are float16 or bfloat16 (a JAX run's): TensorFlow's restore
    refuses them for float32 variables. False when its index cannot be read (the restore explains that)."""
    from storage import checkpoint_bundle

    try:
        dtypes = checkpoint_bundle.model_weight_dtypes(path)
    except InputError:
        return False
    return any(dtype in ("float16", "bfloat16") for dtype in dtypes.values())


def _restore_widened(model, path, label, fix, use_other):
    """restore_weights of a half-precision checkpoint, or of any without TensorFlow: read with NumPy
    (checkpoint_bundle), checked against the model's weights by path and shape, then cast to each variable's
    dtype."""
    from storage import checkpoint_bundle

    try:
        weights = checkpoint_bundle.read_model_weights(path)
    except checkpoint_bundle.DamagedCheckpoint as error:
        if use_other is None:
            raise
        raise damaged_source_error(path, label, use_other, error.file, error.reason) from None
    variables = {variable.path: variable for variable in model.weights}
    missing = sorted(set(variables) - set(weights))
    wrong = [f"{name} has shape {weights[name].shape}, the model {tuple(variable.shape)}"
             for name, variable in variables.items()
             if name in weights and tuple(weights[name].shape) != tuple(variable.shape)]
    if missing or wrong:
        reason = f"missing {missing[:3]}" if missing else wrong[0]
        raise InputError(f"{label} {path}: its weights do not match this model ({reason}); {fix}")
    for name, variable in variables.items():
        variable.assign(weights[name].astype(variable.dtype))


def holds_optimizer_state(path):
    """False for a weights-only checkpoint (an import, a fine-tuning start): nothing to resume but weights."""
    import tensorflow as tf

    return any(name.startswith("optimizer/") for name, _ in tf.train.list_variables(path))


# --- damaged checkpoints -----------------------------------------------------------------------------------

def restore_errors():
    """What a damaged index or data file raises from a reader or a restore: OpError subclasses
    (DataLossError for a checksum, NotFoundError for a missing data file), RuntimeError for an index that
    is not an sstable, IndexError for a truncated data file ("Read less bytes than requested")."""
    import tensorflow as tf

    return tf.errors.OpError, RuntimeError, IndexError


def checkpoint_problem(path):
    """(file, reason) when the checkpoint at prefix `path` cannot be read back whole, else None.

    Opening reads the .index; reading every tensor reads the data files and checks each tensor's stored
    checksum, which is what finds bytes flipped or cut off there. It reads the whole checkpoint, so it
    runs only after a restore failed, and on the older checkpoints it would advise.
    """
    import tensorflow as tf

    data_files = sorted(pathlib.Path(path).parent.glob(pathlib.Path(path).name + ".data-*"))
    data = str(data_files[0]) if len(data_files) == 1 else f"{path}.data-*"
    try:
        reader = tf.train.load_checkpoint(path)
    except restore_errors() as error:
        reason = short_reason(error)
        return (data if ".data-" in reason else f"{path}.index"), reason
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except restore_errors() as error:
        return data, short_reason(error)
    return None


def newest_complete_checkpoint(folder, skip=None):
    """The newest checkpoint prefix in `folder` (by N of its ckpt-N.index) that reads back whole, other than
    `skip`, whether or not the state file lists it; None when there is none."""
    skip = None if skip is None else str(pathlib.Path(skip))
    return next((prefix for prefix in reversed(saved_checkpoints(folder))
                 if prefix != skip and checkpoint_problem(prefix) is None), None)


@contextlib.contextmanager
def explaining_damage(model_dir, path, error=None):
    """A failed read of checkpoint `path` becomes one InputError naming the damaged file and the way on.

    The way on (`error(file, reason)`, by default damaged_checkpoint_error for a run's own folder) is the
    newest older listed checkpoint that reads back whole: moving the newer checkpoints' files out of the
    folder makes `latest_checkpoint` resume from it. Without one, the same move starts the run over. An
    error the checkpoint's own bytes do not explain is raised as it was. Nothing in the folder is changed.
    """
    try:
        yield
    except restore_errors():
        problem = checkpoint_problem(path)
        if problem is None:
            raise
        _quiet_failed_restore()
        if error is None:
            error = functools.partial(damaged_checkpoint_error, model_dir, path)
        raise error(*problem) from None


def damaged_state_error(model_dir):
    """Says which checkpoint on disk to name in a rewritten state file (the newest that reads back whole)."""
    state_file = pathlib.Path(model_dir) / STATE_FILE
    complete = newest_complete_checkpoint(model_dir)
    if complete is None:
        way_on = f"no complete checkpoint is in the folder: delete {state_file} to start over from step 0"
    else:
        name = pathlib.Path(complete).name
        way_on = (f"{name} is the newest complete one: write the line model_checkpoint_path: \"{name}\" into "
                  f"{state_file} (and nothing else) and run the same command again to resume from it")
    return InputError(f"{state_file}: damaged (not a checkpoint state), so the latest checkpoint is unknown; "
                      f"{way_on}")


def damaged_checkpoint_error(model_dir, path, file, reason):
    """One line for a damaged checkpoint of a run's own folder: the newer checkpoints' files to move out,
    and the older complete one the run then resumes from (or that it starts over)."""
    import tensorflow as tf

    listed = listed_checkpoints(model_dir)
    older = listed[listed.index(path) + 1:] if path in listed else []
    usable = next((p for p in older if tf.io.gfile.exists(p + ".index") and checkpoint_problem(p) is None), None)
    newer = [path] + (older[:older.index(usable)] if usable else older)
    names = ", ".join(f"{pathlib.Path(p).name}.*" for p in newer if tf.io.gfile.glob(p + ".*"))
    move = f"move {names} out of {model_dir} (or delete them) and run the same command again"
    if usable:
        way_on = f"{pathlib.Path(usable).name} is complete: {move} to resume from it"
    else:
        way_on = f"no older complete checkpoint is listed: {move} to start over from step 0"
    return InputError(f"{file}: damaged ({reason}), so the run cannot resume from {pathlib.Path(path).name}; "
                      f"{way_on}")


def damaged_source_error(path, label, use_other, file, reason):
    """One line for a damaged checkpoint read only for its weights (--init-checkpoint, a model folder to
    fine-tune or export): the damaged file, and the newest complete checkpoint in its folder with how to
    use it (`use_other`, formatted with its prefix, name and folder), or that there is none."""
    folder = pathlib.Path(path).parent
    other = newest_complete_checkpoint(folder, skip=path)
    if other is None:
        way_on = (f"no complete checkpoint is in {folder}: copy {pathlib.Path(path).name}.* there again from where "
                  "they came")
    else:
        name = pathlib.Path(other).name
        way_on = (f"{name} is the newest complete checkpoint in {folder}: "
                  + use_other.format(prefix=other, name=name, folder=folder))
    return InputError(f"{file}: damaged ({reason}), so {label} {path} cannot be read; {way_on}")


# What TensorFlow logs when the objects of a restore that failed half-way are freed (at exit): noise
# after the one line that says what happened.
_UNRESTORED_WARNINGS = ("Detecting that an object or model or tf.train.Checkpoint is being deleted with unrestored",
                        "Value in checkpoint could not be found in the restored object",
                        "An attribute in the restored object could not be found in the checkpoint")


class _FailedRestoreFilter(logging.Filter):
    def filter(self, record):
        return not record.getMessage().startswith(_UNRESTORED_WARNINGS)


def _quiet_failed_restore():
    import tensorflow as tf

    logger = tf.get_logger()
    if not any(isinstance(f, _FailedRestoreFilter) for f in logger.filters):
        logger.addFilter(_FailedRestoreFilter())


# --- whole folders ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class ModelFolderParts:
    """What a model folder holds for one checkpoint, read and checked, weights not yet restored: the model
    to restore them into is built above storage (pretrain.loaded_folder)."""
    folder: pathlib.Path
    config: PretrainingConfig
    vocab_file: pathlib.Path  # vocab.txt or a SentencePiece .model
    checkpoint: str  # the checkpoint prefix to read
    step: int  # N of ckpt-N

    @property
    def is_sentencepiece(self):
        return self.vocab_file.suffix == ".model"


def read_model_folder(path, flag="--model-dir"):
    """A model folder (its latest checkpoint) or a checkpoint prefix inside one → its ModelFolderParts;
    InputError naming `flag` when the config, the checkpoint or the vocabulary is missing."""
    path = pathlib.Path(path)
    folder = path if path.is_dir() else path.parent
    if not has_config(folder):
        raise InputError(f"{flag} {path}: no {CONFIG_FILE} in {folder}; pass a model folder written by "
                         "run_pretraining.py or checkpoints.import_weights")
    config = read_config(folder)
    prefix = resolve_checkpoint(path, flag)
    vocab_file = require_vocab(folder)
    return ModelFolderParts(folder, config, vocab_file, prefix, checkpoint_step(prefix))


def restore_folder_weights(model, parts, flag="--model-dir"):
    """The weights of `parts.checkpoint` into `model` (built from `parts.config`; no optimizer), a mismatch
    or a damaged file explained in one line that names the folder and `flag`."""
    restore_weights(model, parts.checkpoint, label="checkpoint",
                    fix=f"pass the folder the checkpoint was trained in (its config is {parts.folder / CONFIG_FILE})",
                    use_other=f"pass {flag} {{prefix}}")


def write_weights_checkpoint(folder, step, weights, config, vocab_file, max_shard_bytes=None, keep=None):
    """ckpt-<step> of `weights` ({Keras path: array}, in their dtypes) in a model folder, without TensorFlow
    (checkpoint_bundle: a JAX run's folder); then config.json and the vocabulary (when given), and last the state file
    naming every checkpoint in the folder, so that a half-written checkpoint is never the one it names. With `keep`,
    only the newest `keep` are named, and the older ones' files deleted after the state file no longer names them
    (keep_checkpoint_max, as tf.train.CheckpointManager). Returns the checkpoint's prefix."""
    from storage import checkpoint_bundle

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    prefix = checkpoint_prefix(folder, step)
    checkpoint_bundle.write_model_weights(prefix, weights, max_shard_bytes=max_shard_bytes)
    write_config(folder, config)
    if vocab_file is not None:
        copy_vocab(folder, vocab_file)
    saved = [p for p in saved_checkpoints(folder) if checkpoint_step(p) <= step]
    dropped, kept = (saved[:-keep], saved[-keep:]) if keep else ([], saved)
    names = [pathlib.Path(p).name for p in kept]
    write_state(folder, names[-1], names[:-1])
    for old in dropped:
        for path in checkpoint_bundle.bundle_files(pathlib.Path(old)):
            path.unlink(missing_ok=True)
    return prefix


def copy_checkpoint_folder(prefix, folder, config, vocab_file, step, overwrite=False):
    """A model folder holding a copy of the checkpoint at `prefix` as ckpt-<step>, with config.json and the
    vocabulary, atomically (an import: the weights are checked by the caller, copied here as they are)."""
    from storage import checkpoint_bundle

    source = pathlib.Path(prefix)
    with atomic.atomic_output_dir(folder, overwrite, flag="model folder") as temp:
        write_config(temp, config)
        copy_vocab(temp, vocab_file)
        target = checkpoint_prefix(temp, step)
        for path in checkpoint_bundle.bundle_files(source):
            shutil.copyfile(path, target + path.name[len(source.name):])
        write_state(temp, pathlib.Path(target).name)
    return pathlib.Path(folder)


def write_model_folder(folder, config, pretrainer, vocab_file, step=0, overwrite=False):
    """config.json, the vocabulary and ckpt-<step> (model weights only), atomically."""
    import tensorflow as tf

    with atomic.atomic_output_dir(folder, overwrite, flag="model folder") as temp:
        write_config(temp, config)
        copy_vocab(temp, vocab_file)
        checkpoint = tf.train.Checkpoint(model=model_trackable(pretrainer))
        tf.train.CheckpointManager(checkpoint, str(temp), max_to_keep=1,
                                   checkpoint_name=CHECKPOINT_NAME).save(checkpoint_number=step)
    return pathlib.Path(folder)
