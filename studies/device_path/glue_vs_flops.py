"""GLUE dev score against pretraining FLOPs: every GPU run so far beside the paper's ELECTRA-Small, so that
each run adds its points and shows how far the time-boxed runs are along the paper's curve.

    python -m studies.device_path.glue_vs_flops ../shared/gpu_runs/*/ --png docs/glue_vs_flops.png \\
        --table docs/glue_vs_flops.md

Each folder is what a run brought back: python -m studies.device_path.run's (run.json, results.json, mlm/) or the
two-command plan of studies/rtd_vs_mlm (electra/ and mlm/ metrics.jsonl, finetune/<model>_step<N>.json). A model's
score is the mean over the tasks it finished of each task's primary metric (CoLA MCC, STS-B Spearman, the
others accuracy; the median over seeds), as the paper's GLUE dev score is, but over fewer tasks where a run
finished fewer: the table names them. FLOPs are configs/flops.py's count (matmuls, forward and backward),
the paper's points counted the same way (1M steps of 128 × 128 at ELECTRA-Small; the paper's own count of
those is 1.4e18).
"""
import argparse
import dataclasses
import json
import pathlib

from common.errors import InputError, exit_on_input_error

# The ELECTRA paper's Table 1, GLUE dev (docs/reproduction.md#published-numbers): ELECTRA-Small at
# 6.25% and 100% of its 1M steps of batch 128, sequence length 128.
PAPER_STEPS, PAPER_POINTS = 1_000_000, ((0.0625, 74.1), (1.0, 79.9))
LABELS = {"pretrained": "ELECTRA", "electra": "ELECTRA", "mlm": "MLM at equal FLOPs", "control": "no pretraining",
          "random_init": "no pretraining"}


@dataclasses.dataclass
class Point:
    run: str
    model: str  # a LABELS value
    steps: int
    flops: float
    scores: dict  # {task: (metric, median, trials)}
    device: str = ""

    @property
    def glue(self):
        """The mean of the tasks' primary metrics (None without any)."""
        values = [median for _, median, _ in self.scores.values() if median is not None]
        return sum(values) / len(values) if values else None


def task_scores(results):
    """{task: (primary metric, median over seeds, trials)} of fine-tuning results files."""
    scores = {}
    for result in results:
        metric = result["primary_metric"]
        scores[result["task"]] = (metric, result["summary"].get(metric, {}).get("median"), result["trials_done"])
    return dict(sorted(scores.items()))


def flops_of(config, steps):
    from configs import flops
    from configs.pretraining_config import PretrainingConfig

    return flops.train_flops_per_step(PretrainingConfig.create(config)) * steps


def run_record_of(metrics):
    """The run record (the last "split": "run" line) of a training_jax.pretrain metrics.jsonl."""
    records = [json.loads(line) for line in pathlib.Path(metrics).read_text().splitlines()
               if line.strip().startswith("{") and '"split": "run"' in line]
    if not records:
        raise InputError(f"{metrics}: no run record; pass a run folder whose pretraining finished")
    return records[-1]


def read_product_run(folder):
    """Points of a python -m studies.device_path.run folder (run.json, results.json)."""
    record = json.loads((folder / "run.json").read_text())
    results = json.loads((folder / "results.json").read_text())
    steps = record["total_steps"]
    flops = record.get("total_flops") or flops_of(record["config"], steps)
    points = [Point(folder.name, LABELS["pretrained"], steps, flops,
                    task_scores(results.get("pretrained", {}).values()), record.get("device") or "")]
    if "mlm" in record:
        points.append(Point(folder.name, LABELS["mlm"], record["mlm"]["steps"], record["mlm"]["flops"],
                            task_scores(results.get("mlm", {}).values()), record.get("device") or ""))
    points.append(Point(folder.name, LABELS["control"], 0, 0.0, task_scores(results.get("control", {}).values()),
                        record.get("device") or ""))
    return points


def read_two_call_run(folder):
    """Points of the two-command plan of studies/rtd_vs_mlm as it came back (electra/, mlm/ and finetune/)."""
    points = []
    for path in sorted((folder / "finetune").glob("*.json")):
        model = path.stem.split("_step")[0]
        results = json.loads(path.read_text()).values()
        if model == "random_init":
            points.append(Point(folder.name, LABELS[model], 0, 0.0, task_scores(results)))
            continue
        record = run_record_of(folder / model / "metrics.jsonl")
        steps = record["num_train_steps"]  # the run's (sized) steps; its config may be the unsized export's
        points.append(Point(folder.name, LABELS.get(model, model), steps, flops_of(record["config"], steps),
                            task_scores(results), record.get("device") or ""))
    devices = [p.device for p in points if p.device]
    for point in points:  # the control was fine-tuned on the same device
        point.device = point.device or (devices[0] if devices else "")
    return points


def read_run(folder):
    folder = pathlib.Path(folder)
    if (folder / "run.json").is_file():
        return read_product_run(folder)
    if (folder / "finetune").is_dir():
        return read_two_call_run(folder)
    raise InputError(f"{folder}: neither run.json (python -m studies.device_path.run) nor finetune/ (the two-command plan); "
                     "pass the folder a GPU run's files came back to")


def paper_points():
    """The paper's ELECTRA-Small points, counted as configs/flops.py counts this project's runs."""
    per_run = flops_of({"model_size": "electra_small", "train_batch_size": 128, "max_seq_length": 128}, PAPER_STEPS)
    return [(fraction * per_run, score, fraction) for fraction, score in PAPER_POINTS]


def table(points):
    """A markdown table: one row per model and run, the paper's rows last."""
    lines = ["| run | device | model | steps | pretraining FLOPs | GLUE dev (mean of the tasks) | "
             "tasks: metric, median (seeds) |", "|---|---|---|---|---|---|---|"]
    for p in points:
        glue = "n/a" if p.glue is None else f"{p.glue:.1f}"
        tasks = ", ".join(f"{t} {m} {v:.1f} ({n})" for t, (m, v, n) in p.scores.items() if v is not None) or "none"
        lines.append(f"| {p.run} | {p.device or '-'} | {p.model} | {p.steps:,} | {p.flops:.3g} | {glue} | {tasks} |")
    for flops, score, fraction in paper_points():
        lines.append(f"| the paper | V100 | ELECTRA-Small | {int(fraction * PAPER_STEPS):,} | {flops:.3g} | "
                     f"{score} | GLUE dev, 8 tasks |")
    return "\n".join(lines) + "\n"


def plot(points, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    paper = paper_points()
    axes.plot([f for f, _, _ in paper], [s for _, s, _ in paper], "k*--", markersize=11,
              label="paper: ELECTRA-Small (8 tasks)")
    markers = {LABELS["pretrained"]: "o", LABELS["mlm"]: "s"}
    for model, marker in markers.items():
        chosen = [p for p in points if p.model == model and p.glue is not None]
        if chosen:
            axes.plot([p.flops for p in chosen], [p.glue for p in chosen], marker, linestyle="none", markersize=8,
                      label=f"{model}: GPU runs (tasks they finished)")
    for index, p in enumerate(p for p in points if p.model == LABELS["control"] and p.glue is not None):
        axes.axhline(p.glue, color="grey", linestyle=":", label="no pretraining (same tasks)" if not index else None)
    axes.set_xscale("log")
    axes.set_xlabel("pretraining FLOPs (configs/flops.py: matmuls, forward + backward)")
    axes.set_ylabel("GLUE dev score")
    axes.set_title("GLUE dev score against pretraining compute")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="center right")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=pathlib.Path, nargs="+", help="the folders the GPU runs' files came back to")
    parser.add_argument("--png", type=pathlib.Path, required=True, help="the figure")
    parser.add_argument("--table", type=pathlib.Path, default=None, help="also write the markdown table here")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    points = [point for folder in args.runs for point in read_run(folder)]
    text = table(points)
    plot(points, args.png)
    if args.table:
        args.table.write_text(text)
    print(text + f"wrote {args.png}", flush=True)
    return points


if __name__ == "__main__":
    main()
