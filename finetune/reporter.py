"""Fine-tuning's TensorBoard scalars (loss and learning rate under <logs>/train, dev metrics under <logs>/eval),
written without TensorFlow (pretrain_loop.event_file), so run_finetuning.py logs the same files under either
Keras backend and a machine without TensorFlow still gets its curves."""
import pathlib

from pretrain_loop.event_file import ScalarWriter


class Reporter:
    """The reporter TrialRunner and the trainers call: reporter.scalars(reporter.train_writer or
    reporter.eval_writer, step, {name: value}); close() when the trial ends."""

    def __init__(self, logs_dir):
        logs_dir = pathlib.Path(logs_dir)
        self.train_writer = ScalarWriter(logs_dir / "train")
        self.eval_writer = ScalarWriter(logs_dir / "eval")

    def scalars(self, writer, step, values):
        writer.scalars(int(step), {name: float(value) for name, value in values.items()})

    def close(self):
        """Each scalar is appended and the file closed as it is written: nothing is left to flush."""
