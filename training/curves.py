"""Pretraining curves under TensorFlow: a run's TensorBoard scalars read back, and its curves PNG.

The PNG is pretrain_loop.curves' (drawn from metrics.jsonl, as the JAX run's is); a model folder trained
before run_pretraining.py wrote metrics.jsonl has its history only in its event files, so this module adds
those points under the metrics file's. The studies (studies/device_curves, studies/tf_vs_jax_curves,
studies/rtd_vs_mlm, studies/electric) read event files with `training_curves`. No TensorFlow or matplotlib
import at module level: TensorFlow is imported only to read event files, matplotlib only to draw.
"""
import pathlib

from pretrain_loop import curves as run_curves
from pretrain_loop.curves import CURVES, SPLITS


def training_curves(folder, split="train"):
    """{metric: [(step, value)]} from a pretraining run's TensorBoard logs (logs/train or logs/eval).

    A run stopped and resumed logs some steps twice (once before the stop, again after resuming from
    an earlier checkpoint): the later write wins, as it is the history the final weights have."""
    import tensorflow as tf

    latest = {name: {} for name in CURVES}  # {metric: {step: (wall_time, value)}}
    for path in sorted((pathlib.Path(folder) / "logs" / split).glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag in latest:
                    seen = latest[value.tag].get(event.step)
                    if seen is None or event.wall_time >= seen[0]:
                        latest[value.tag][event.step] = (event.wall_time, float(tf.make_ndarray(value.tensor)))
    return {name: sorted((step, value) for step, (_, value) in points.items()) for name, points in latest.items()}


def write_run_curves(model_dir, label):
    """Draws a run_pretraining.py model folder's training and held-out curves into logs/curves.png: its
    metrics.jsonl, over what its event files hold from before it (a resumed older run's figure covers the
    whole run). Returns the path, or None with the reason when there is nothing to draw or no matplotlib."""
    from_metrics = run_curves.metrics_curves(model_dir)
    merged = {}
    for split in SPLITS:
        from_events = training_curves(model_dir, split)
        merged[split] = {name: sorted({**dict(from_events[name]), **dict(from_metrics[split][name])}.items())
                         for name in CURVES}
    return run_curves.write_run_curves(model_dir, label, merged)
