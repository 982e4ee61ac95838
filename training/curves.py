"""Pretraining curves: read a run's TensorBoard scalars and draw them, training and held-out, as a PNG.

run_pretraining.py calls write_run_curves at the end of a run (<model folder>/logs/curves.png); the
studies (studies/device_curves, studies/tf_vs_jax_curves, studies/rtd_vs_mlm) draw and read with the
same functions. No TensorFlow or matplotlib import at module level: TensorFlow is imported only to read
event files, matplotlib only to draw, so the JAX-side scripts can import this module.
"""
import pathlib

from common.atomic import atomic_path

CURVES = ("masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc", "disc_precision", "disc_recall")
CURVES_FILE = "curves.png"
SPLITS = ("train", "eval")


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


def curve_grid(series, out, held_out_style, title=None):
    """One panel per CURVES metric; series: [(label, {"train"|"eval": {metric: [(step, value)]}})], each
    in its own colour, training windows faint, held-out evaluations drawn with held_out_style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    for index, (label, curves) in enumerate(series):
        for ax, name in zip(axes.flat, CURVES):
            for split, style in (("train", {"alpha": 0.35, "linewidth": 0.8}), ("eval", held_out_style)):
                points = curves[split].get(name)
                if points:
                    ax.plot(*zip(*points), color=f"C{index}", **style,
                            label=f"{label}, {'held-out' if split == 'eval' else 'training'}")
            ax.set_title(name)
            ax.set_xlabel("step")
    axes.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def write_run_curves(model_dir, label):
    """Draws a run_pretraining.py model folder's training and held-out curves into logs/curves.png, read
    back from its TensorBoard event files (so a resumed run's figure covers the whole run). Returns the
    path, or None with the reason when there is nothing to draw or matplotlib is not installed."""
    model_dir = pathlib.Path(model_dir)
    curves = {split: training_curves(model_dir, split) for split in SPLITS}
    if not any(points for split in curves.values() for points in split.values()):
        return None, "no training or held-out scalars were logged"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None, "matplotlib is not installed (pip install -r requirements.txt)"
    out = model_dir / "logs" / CURVES_FILE
    last = max(step for split in curves.values() for points in split.values() for step, _ in points)
    with atomic_path(out, suffix=".png") as temp:  # matplotlib picks the format from the extension
        curve_grid([(label, curves)], temp, held_out_style={"marker": "o", "markersize": 3, "linewidth": 1.2},
                   title=f"{label}: training (faint) and held-out (markers) metrics up to step {last}")
    return out, None
