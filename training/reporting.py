"""Console lines and TensorBoard scalars for training and evaluation."""
import sys

import tensorflow as tf

from data.progress import format_duration

CONSOLE_METRICS = (("loss", "total_loss", 3), ("cloze_loss", "cloze_loss", 3), ("mlm_loss", "masked_lm_loss", 3),
                   ("disc_loss", "disc_loss", 4), ("mlm_acc", "masked_lm_accuracy", 3), ("disc_auc", "disc_auc", 3))


def train_line(step, total_steps, metrics, steps_per_second, tokens_per_second):
    """`step 200/2000 (10%) | loss … | 3.1 steps/s | 9,900 tokens/s | ETA 0:09:40`."""
    parts = [f"step {step}/{total_steps} ({100 * step / max(total_steps, 1):.0f}%)"]
    parts += [f"{label} {metrics[key]:.{digits}f}" for label, key, digits in CONSOLE_METRICS if key in metrics]
    eta = (total_steps - step) / steps_per_second if steps_per_second > 0 else float("nan")
    parts += [f"{steps_per_second:.2f} steps/s", f"{tokens_per_second:,.0f} tokens/s",
              f"ETA {format_duration(eta) if eta == eta else '?'}"]
    return " | ".join(parts)


def eval_line(step, metrics, num_batches):
    keys = ("total_loss", "cloze_loss", "masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc",
            "disc_accuracy", "disc_precision", "disc_recall")
    values = ", ".join(f"{key} {metrics[key]:.4f}" for key in keys if key in metrics)
    return f"eval at step {step} ({num_batches} batches): {values}"


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
