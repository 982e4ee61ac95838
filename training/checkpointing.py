"""Checkpoints during training: every N steps, keep the last K, resume from the latest.

tf.train.CheckpointManager writes a checkpoint's index and data files first and only then rewrites the
`checkpoint` state file (atomically), so a run killed mid-save is resumed from the previous complete
checkpoint: a partly written one is never listed. Under MultiWorkerMirroredStrategy every worker must
save (the save is collective); only the chief writes to the model folder, the others to a scratch
folder that is deleted. What a folder holds, which checkpoint is the latest, restoring weights and the
messages for damaged files are the storage layer's (storage.model_folder); this is only the saver.
"""
import pathlib
import shutil

import tensorflow as tf

from storage.model_folder import CHECKPOINT_NAME, latest_checkpoint


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
