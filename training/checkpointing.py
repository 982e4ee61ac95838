"""Checkpoints: every N steps, keep the last K, resume from the latest, or start from other weights.

tf.train.CheckpointManager writes a checkpoint's index and data files first and only then rewrites the
`checkpoint` state file (atomically), so a run killed mid-save is resumed from the previous complete
checkpoint: a partly written one is never listed. Under MultiWorkerMirroredStrategy every worker must
save (the save is collective); only the chief writes to the model folder, the others to a scratch
folder that is deleted.
"""
import pathlib
import shutil

import tensorflow as tf

from data.errors import InputError

CHECKPOINT_NAME = "ckpt"


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


def resolve_init_checkpoint(path):
    """A checkpoint prefix, or a model folder (its latest checkpoint); InputError when neither."""
    candidate = pathlib.Path(path)
    if candidate.is_dir():
        latest = tf.train.latest_checkpoint(str(candidate))
        if not latest:
            raise InputError(f"--init-checkpoint {path}: the folder holds no checkpoint; pass a model folder "
                             "or a checkpoint prefix (…/ckpt-1000)")
        return latest
    if not pathlib.Path(str(candidate) + ".index").is_file():
        raise InputError(f"--init-checkpoint {path}: no such checkpoint (expected {path}.index); pass a model "
                         "folder or a checkpoint prefix")
    return str(candidate)


def restore_weights(model, path, label="--init-checkpoint", fix="use the same model size and vocabulary"):
    """Model weights only (a fresh optimizer): the checkpoint's model must match this one's variables.

    A shape mismatch fails inside restore(), a missing weight in the assertion: both become one line.
    `label` names the source in that line, `fix` says what to do.
    """
    try:
        status = tf.train.Checkpoint(model=model_trackable(model)).restore(path)
        status.expect_partial()  # the optimizer and counters are not wanted here
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        raise InputError(f"{label} {path}: its weights do not match this model ({str(error)[:200]}); "
                         f"{fix}") from None


def holds_optimizer_state(path):
    """False for a weights-only checkpoint (an import, a fine-tuning start): nothing to resume but weights."""
    return any(name.startswith("optimizer/") for name, _ in tf.train.list_variables(path))
