"""Checkpoints: every N steps, keep the last K, resume from the latest, or start from other weights.

tf.train.CheckpointManager writes a checkpoint's index and data files first and only then rewrites the
`checkpoint` state file (atomically), so a run killed mid-save is resumed from the previous complete
checkpoint: a partly written one is never listed. Under MultiWorkerMirroredStrategy every worker must
save (the save is collective); only the chief writes to the model folder, the others to a scratch
folder that is deleted.

A checkpoint damaged after it was listed (a truncated copy, flipped bytes) fails its restore; the run
then names the file and the older complete checkpoint to resume from (`explaining_damage`, around the
restore). A damaged checkpoint read only for its weights (--init-checkpoint, a folder to fine-tune or
export) names the file and the newest complete checkpoint beside it (`restore_weights`).
"""
import contextlib
import functools
import logging
import pathlib
import shutil

import tensorflow as tf

from common.errors import InputError, short_reason
from training.model_folder import CHECKPOINT_NAME, STATE_FILE, checkpoint_step



def model_trackable(pretrainer):
    """Every model weight keyed by its Keras path (TF1-style scope), for tf.train.Checkpoint.

    A Keras 3 model passed to tf.train.Checkpoint directly reaches most of its weights only through the
    optimizer, so a model-only restore (--init-checkpoint) would find nothing; keyed by path, the
    checkpoint's `model/weights_by_path/<path>` entries restore with or without an optimizer.
    """
    weights = {}
    for variable in pretrainer.weights:
        path = variable.path
        if path in weights and weights[path] is not variable:
            raise ValueError(f"two model weights share the path {path!r}")
        weights[path] = variable
    module = tf.Module(name="model")
    module.weights_by_path = weights
    return module


class Checkpoints:
    def __init__(self, model_dir, checkpoint, keep, chief=True, worker_id=0):
        self.model_dir = pathlib.Path(model_dir)
        self.chief = chief
        directory = self.model_dir if chief else self.model_dir / ".worker_scratch" / f"worker_{worker_id}"
        self.scratch = None if chief else directory
        self.checkpoint = checkpoint
        self.manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=keep or None,
                                                  checkpoint_name=CHECKPOINT_NAME)
        # Non-chief workers resume from the chief's checkpoints.
        self.reader = tf.train.CheckpointManager(checkpoint, str(self.model_dir), max_to_keep=None,
                                                 checkpoint_name=CHECKPOINT_NAME) if not chief else self.manager

    @property
    def latest(self):
        return latest_checkpoint(self.model_dir)

    @property
    def listed_latest(self):
        """The newest checkpoint the state file names, whether or not its files are still there."""
        return self.reader.latest_checkpoint

    def restore_latest(self):
        """Restores model, optimizer (slots, iterations) and loss scale; returns the path or None."""
        path = self.latest
        if path:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        return path

    def save(self, step):
        path = self.manager.save(checkpoint_number=step)
        return path

    def cleanup(self):
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def restore_weights(model, path, label="--init-checkpoint", fix="use the same model size and vocabulary",
                    use_other="pass --init-checkpoint {prefix}"):
    """Model weights only (a fresh optimizer): the checkpoint's model must match this one's variables.

    A shape mismatch fails inside restore(), a missing weight in the assertion: both become one line.
    `label` names the source in that line, `fix` says what to do. A damaged file (a truncated copy)
    becomes one line naming it and the newest complete checkpoint beside it, with `use_other` (formatted
    with its `prefix`, `name` and `folder`) saying how to use that one (damaged_source_error); None
    where the caller explains damage itself (a run resuming from its own folder: explaining_damage).
    """
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


def holds_optimizer_state(path):
    """False for a weights-only checkpoint (an import, a fine-tuning start): nothing to resume but weights."""
    return any(name.startswith("optimizer/") for name, _ in tf.train.list_variables(path))


# --- listed and damaged checkpoints ------------------------------------------------------------------

def read_state(model_dir):
    """The `checkpoint` state file's contents, or None when there is none; InputError when it is damaged.

    tf.train.get_checkpoint_state logs a warning and answers None for a file it cannot parse, so a resume
    would start over at step 0 and write over the checkpoints in the folder; this stops instead.
    """
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


def newest_complete_checkpoint(folder, skip=None):
    """The newest checkpoint prefix in `folder` (by N of its ckpt-N.index) that reads back whole, other than
    `skip`, whether or not the state file lists it; None when there is none."""
    indexes = pathlib.Path(folder).glob(f"{CHECKPOINT_NAME}-*.index")
    on_disk = sorted((str(index.with_suffix("")) for index in indexes), key=checkpoint_step, reverse=True)
    skip = None if skip is None else str(pathlib.Path(skip))
    return next((prefix for prefix in on_disk if prefix != skip and checkpoint_problem(prefix) is None), None)


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
    for path in listed_checkpoints(model_dir):
        if tf.io.gfile.exists(path + ".index"):
            return path
    return None


# What a damaged index or data file raises from a reader or a restore: OpError subclasses (DataLossError
# for a checksum, NotFoundError for a missing data file), RuntimeError for an index that is not an
# sstable, IndexError for a truncated data file ("Read less bytes than requested").
RESTORE_ERRORS = (tf.errors.OpError, RuntimeError, IndexError)


def checkpoint_problem(path):
    """(file, reason) when the checkpoint at prefix `path` cannot be read back whole, else None.

    Opening reads the .index; reading every tensor reads the data files and checks each tensor's stored
    checksum, which is what finds bytes flipped or cut off there. It reads the whole checkpoint, so it
    runs only after a restore failed, and on the older checkpoints it would advise.
    """
    data_files = sorted(pathlib.Path(path).parent.glob(pathlib.Path(path).name + ".data-*"))
    data = str(data_files[0]) if len(data_files) == 1 else f"{path}.data-*"
    try:
        reader = tf.train.load_checkpoint(path)
    except RESTORE_ERRORS as error:
        reason = short_reason(error)
        return (data if ".data-" in reason else f"{path}.index"), reason
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except RESTORE_ERRORS as error:
        return data, short_reason(error)
    return None


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
    except RESTORE_ERRORS:
        problem = checkpoint_problem(path)
        if problem is None:
            raise
        _quiet_failed_restore()
        if error is None:
            error = functools.partial(damaged_checkpoint_error, model_dir, path)
        raise error(*problem) from None


def damaged_checkpoint_error(model_dir, path, file, reason):
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
    logger = tf.get_logger()
    if not any(isinstance(f, _FailedRestoreFilter) for f in logger.filters):
        logger.addFilter(_FailedRestoreFilter())
