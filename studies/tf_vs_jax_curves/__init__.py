"""Does training_jax.pretrain (JAX, the GPU path) train like run_pretraining.py (TensorFlow)?

    python -m studies.tf_vs_jax_curves --tf-model-dir studies/rtd_vs_mlm/results/cpu_tf_electra \
        --jax-run studies/device_curves/h100_probe/electra --out studies/tf_vs_jax_curves/tf_vs_jax_curves.png \
        --every 500

The JAX path trains with the same model, losses and optimizer as run_pretraining.py but its own
loop (a NumPy batch sampler, the model's own seed stream for masking). Given one config run by both, this
puts their curves side by side: a figure (training windows faint, held-out evaluations as markers) and a
Markdown table of every CURVES metric, averaged over the training windows that end in each span of
--every steps (both runs log windows that tile the run, so each span's mean covers the same steps; a
multiple of both runs' logging intervals, and only spans both logged to their end are compared), and
the held-out evaluations at the steps where both evaluated. The two runs share no random stream, so
their difference is at least run-to-run noise; the table gives the spread of the window values inside
each span as the yardstick.

--tf-model-dir is a model folder run_pretraining.py wrote (its logs/ are read), or a stored run that keeps
only its curves.json (save_tf_curves: the scalars read_tf_run needs, without the event files).
"""
import argparse
import json
import pathlib
import statistics

from pretrain_loop.curves import CURVES, SPLITS, curve_grid
from pretrain_loop.metrics_file import METRICS_FILE, read_metrics
from training.curves import training_curves
from common.errors import InputError, exit_on_input_error
from storage import model_folder


SOURCES = ("TensorFlow", "JAX")
CURVES_JSON = "curves.json"  # a stored run's scalars, kept instead of its event files


def read_tf_run(model_dir):
    """{"train"|"eval": {metric: [(step, value)]}} from run_pretraining.py's TensorBoard logs, or from the
    curves.json save_tf_curves wrote of them."""
    if (model_dir / "logs" / "train").is_dir():
        return {split: training_curves(model_dir, split) for split in SPLITS}
    if (model_dir / CURVES_JSON).is_file():
        stored = json.loads((model_dir / CURVES_JSON).read_text())
        return {split: {name: [tuple(point) for point in stored[split][name]] for name in CURVES} for split in SPLITS}
    raise InputError(f"{model_dir}: no logs/train nor {CURVES_JSON}; pass the model folder run_pretraining.py wrote")


def save_tf_curves(model_dir):
    """<model_dir>/curves.json: the scalars read_tf_run takes from the run's event files (exact: JSON keeps
    every float), so that a run kept for a study needs no event files."""
    curves = {split: training_curves(model_dir, split) for split in SPLITS}
    (pathlib.Path(model_dir) / CURVES_JSON).write_text(json.dumps(curves) + "\n")


def read_jax_run(run_dir):
    """(the same shape from training_jax.pretrain's metrics.jsonl, its run record or None)."""
    if not (run_dir / METRICS_FILE).is_file():
        raise InputError(f"{run_dir}: no {METRICS_FILE}; pass the arm folder training_jax.pretrain wrote")
    splits, record = read_metrics(run_dir)
    curves = {split: {name: [(r["step"], r[name]) for r in records if name in r] for name in CURVES}
              for split, records in splits.items()}
    return curves, record


def span_means(points, every):
    """{span end: (mean, spread)} of the window values whose step falls in (end - every, end]."""
    spans = {}
    for step, value in points:
        spans.setdefault(-(-step // every) * every, []).append(value)
    return {end: (statistics.fmean(values), statistics.pstdev(values)) for end, values in sorted(spans.items())}


def comparison(runs, every):
    """[{kind, step, metric: {source: (mean, spread)}}] for the spans and held-out steps both runs have."""
    rows = []
    means = {source: {name: span_means(run["train"][name], every) for name in CURVES}
             for source, run in runs.items()}
    # Spans that both runs logged to their end (a run stopped mid-span would average fewer steps there);
    # masked_lm_loss is logged by every objective.
    ends = [{step for step, _ in run["train"]["masked_lm_loss"]} for run in runs.values()]
    shared = sorted(set.intersection(*(set(m["masked_lm_loss"]) for m in means.values()), *ends))
    for end in shared:
        rows.append({"kind": "training", "step": end,
                     **{name: {s: means[s][name][end] for s in SOURCES if end in means[s][name]}
                        for name in CURVES}})
    evals = {source: {name: dict(run["eval"][name]) for name in CURVES} for source, run in runs.items()}
    shared_evals = sorted(set.intersection(*(set(e["masked_lm_loss"]) for e in evals.values())))
    for step in shared_evals:
        rows.append({"kind": "held-out", "step": step,
                     **{name: {s: (evals[s][name][step], None) for s in SOURCES if step in evals[s][name]}
                        for name in CURVES}})
    return rows


def table(rows, every):
    lines = ["| data | step | " + " | ".join(CURVES) + " |", "|---|---|" + "---|" * len(CURVES)]
    for row in rows:
        cells = []
        for name in CURVES:
            if len(row[name]) < 2:
                cells.append("—")
                continue
            (tf_mean, tf_spread), (jax_mean, jax_spread) = row[name]["TensorFlow"], row[name]["JAX"]
            cell = f"{tf_mean:.3f} / {jax_mean:.3f}"
            if tf_spread is not None:
                cell += f" (±{max(tf_spread, jax_spread):.3f})"
            cells.append(cell)
        label = f"training, steps {row['step'] - every + 1}–{row['step']}" if row["kind"] == "training" \
            else "held-out"
        lines.append(f"| {label} | {row['step']} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: TensorFlow / JAX; training rows: the mean of the logged windows in the span, in "
              "brackets the larger of the two runs' standard deviations of those windows."]
    return "\n".join(lines)


def figure(runs, out):
    labels = {"TensorFlow": "run_pretraining.py (TensorFlow, CPU)", "JAX": "training_jax.pretrain (JAX, GPU)"}
    curve_grid([(labels[source], runs[source]) for source in SOURCES], out,
               held_out_style={"marker": "o", "markersize": 3, "linewidth": 0})


@exit_on_input_error
def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.tf_vs_jax_curves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tf-model-dir", type=pathlib.Path, required=True,
                        help="the model folder run_pretraining.py wrote (its logs/ are read), or a stored run's "
                             "folder holding its curves.json")
    parser.add_argument("--jax-run", type=pathlib.Path, required=True,
                        help="the arm folder training_jax.pretrain wrote (its metrics.jsonl is read)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the PNG to write")
    parser.add_argument("--every", type=int, default=500, help="the training spans' length in steps")
    args = parser.parse_args(argv)
    jax_curves, jax_record = read_jax_run(args.jax_run)
    runs = {"TensorFlow": read_tf_run(args.tf_model_dir), "JAX": jax_curves}
    # as written then (a config of an older version need not load now): the raw JSON, by the folder's own name
    tf_config = json.loads((args.tf_model_dir / model_folder.CONFIG_FILE).read_text()) \
        if model_folder.has_config(args.tf_model_dir) else None
    if tf_config is not None and jax_record and jax_record.get("config") != tf_config:
        differing = sorted(k for k in set(tf_config) | set(jax_record["config"])
                           if tf_config.get(k) != jax_record["config"].get(k))
        print(f"note: the two runs' configs differ in {differing}")
    rows = comparison(runs, args.every)
    if not rows:
        raise InputError(f"{args.tf_model_dir} and {args.jax_run}: no step span both runs logged")
    print(table(rows, args.every))
    figure(runs, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
