"""Pretraining curves of training_jax.pretrain runs: a figure and a table of the held-out evaluations.

    python -m studies.device_curves studies/device_curves/h100_probe --out studies/device_curves/h100_probe_curves.png \
        --every 500

RUNS_DIR holds one folder per arm (electra/, mlm/), each with the metrics.jsonl that
training_jax.pretrain wrote. The figure plots the held-out evaluations (solid) and the training windows
(faint) of every metric of pretrain_loop.curves.CURVES against step; the table (printed, Markdown) lists the
first held-out evaluation at or after every multiple of --every steps, and the last.
"""
import argparse
import pathlib
import sys


from pretrain_loop.metrics_file import METRICS_FILE, read_metrics
from studies.rtd_vs_mlm.plan import ARMS
from pretrain_loop.curves import CURVES, curve_grid


LABELS = {"electra": "ELECTRA (replaced-token detection)", "mlm": "MLM only (BERT objective)"}


def read_runs(runs_dir):
    """{arm: {"run": the run record ({} while unfinished), "train": [records], "eval": [records]}}."""
    runs = {}
    for arm in ARMS:
        if (runs_dir / arm / METRICS_FILE).is_file():
            splits, run = read_metrics(runs_dir / arm)
            runs[arm] = {"run": run or {}, **splits}
    return runs


def table(runs, every):
    lines = ["| objective | step | " + " | ".join(CURVES) + " |", "|---|---|" + "---|" * len(CURVES)]
    for arm, run in runs.items():
        chosen, next_multiple = [], every
        for position, record in enumerate(run["eval"]):  # the first evaluation at or after each multiple
            if record["step"] >= next_multiple or position == len(run["eval"]) - 1:
                chosen.append(record)
                next_multiple = (record["step"] // every + 1) * every
        for record in chosen:
            cells = [f"{record[name]:.3f}" if name in record else "—" for name in CURVES]
            lines.append(f"| {arm} | {record['step']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(runs, out):
    series = [(LABELS[arm], {split: {name: [(r["step"], r[name]) for r in run[split] if name in r]
                                     for name in CURVES} for split in ("train", "eval")})
              for arm, run in runs.items()]
    curve_grid(series, out, held_out_style={"linewidth": 1.6})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.device_curves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs_dir", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the PNG to write")
    parser.add_argument("--every", type=int, default=500,
                        help="table rows: the first held-out evaluation at or after each multiple")
    args = parser.parse_args(argv)
    runs = read_runs(args.runs_dir)
    if not runs:
        sys.exit(f"error: {args.runs_dir}: no <arm>/{METRICS_FILE}; pass the folder training_jax.pretrain "
                 "wrote its arms into")
    for arm, run in runs.items():
        info = run["run"]
        print(f"{arm}: {info.get('num_train_steps')} steps on {info.get('device')}, "
              f"{info.get('steps_per_second')} steps/s after a {info.get('compile_seconds')} s first step, "
              f"{info.get('wall_clock_seconds')} s in all")
    print(table(runs, args.every))
    figure(runs, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
