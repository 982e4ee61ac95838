"""Pretraining curves as a PNG: training windows (faint) and held-out evaluations, one panel per metric.

Drawn from a run's metrics.jsonl, which both backends write, so no TensorFlow is needed; matplotlib is
imported only to draw. training.curves adds what TensorFlow reads (the event files of runs older than
their metrics.jsonl) and the studies draw their comparisons with `curve_grid`.
"""
import pathlib

from common.atomic import atomic_path
from pretrain_loop.metrics_file import METRICS_FILE, SPLITS, curves_of, read_records

CURVES = ("masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc", "disc_precision", "disc_recall")
CURVES_FILE = "curves.png"


def metrics_curves(folder):
    """{split: {metric: [(step, value)]}} of CURVES from the folder's metrics.jsonl (empty ones without it)."""
    path = pathlib.Path(folder) / METRICS_FILE
    records = read_records(path) if path.is_file() else []
    return curves_of(records, CURVES)


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
    labelled = [ax for ax in axes.flat if ax.get_legend_handles_labels()[0]]
    if labelled:  # on the first panel that has a curve
        labelled[0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def write_run_curves(folder, label, curves=None):
    """Draws a run's training and held-out curves (default: its metrics.jsonl's) into <folder>/logs/curves.png.
    Returns (the path, None), or (None, the reason) when there is nothing to draw or no matplotlib."""
    folder = pathlib.Path(folder)
    curves = metrics_curves(folder) if curves is None else curves
    if not any(points for split in curves.values() for points in split.values()):
        return None, "no training or held-out scalars were logged"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None, "matplotlib is not installed (pip install -r requirements.txt)"
    out = folder / "logs" / CURVES_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    last = max(step for split in curves.values() for points in split.values() for step, _ in points)
    with atomic_path(out, suffix=".png") as temp:  # matplotlib picks the format from the extension
        curve_grid([(label, curves)], temp, held_out_style={"marker": "o", "markersize": 3, "linewidth": 1.2},
                   title=f"{label}: training (faint) and held-out (markers) metrics up to step {last}")
    return out, None


__all__ = ["CURVES", "CURVES_FILE", "SPLITS", "curve_grid", "metrics_curves", "write_run_curves"]
