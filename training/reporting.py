"""Console lines and TensorBoard scalars through tf.summary, for fine-tuning (run_finetuning.py). Pretraining
logs through pretrain_loop, whose console lines these are."""
import sys

import tensorflow as tf

from pretrain_loop.console import eval_line, train_line  # noqa: F401  (the console lines of both loops)


def _scalar_metadata():
    from tensorflow.core.framework import summary_pb2

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=summary_pb2.DATA_CLASS_SCALAR).SerializeToString()


def write_scalar(name, value, step):
    """tf.summary.scalar without the tensorboard package: the same event (scalars plugin, rank-0 float)."""
    tf.summary.write(name, tf.constant(float(value), tf.float32), step=step, metadata=_scalar_metadata())


class Reporter:
    """Prints lines (chief only) and writes TensorBoard scalars under logs/train and logs/eval."""

    def __init__(self, logs_dir, enabled=True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stdout
        if enabled:
            self.train_writer = tf.summary.create_file_writer(str(logs_dir / "train"))
            self.eval_writer = tf.summary.create_file_writer(str(logs_dir / "eval"))
        else:
            self.train_writer = self.eval_writer = tf.summary.create_noop_writer()

    def print(self, line, error=False):
        if self.enabled:
            print(line, file=sys.stderr if error else self.stream, flush=True)

    def scalars(self, writer, step, values):
        with writer.as_default(step=step):
            for name, value in values.items():
                write_scalar(name, value, step)
        writer.flush()

    def close(self):
        for writer in (self.train_writer, self.eval_writer):
            writer.close()
