"""metrics.jsonl: one JSON line per log window ({"split": "train", "step", metric...}), per held-out
evaluation ({"split": "eval", ...}) and, last, the run record ({"split": "run", ...}: the config, device,
steps, wall-clock and throughput), which marks the run complete. Both backends write it in the folder they
train into (a model folder, a JAX run's --out), so what reads one reads the other."""
import json
import pathlib

METRICS_FILE = "metrics.jsonl"
LEGACY_RUN_FILE = "run.json"  # where the first JAX runs (studies/device_curves/h100_probe) wrote the run record
SPLITS = ("train", "eval")
RUN = "run"


class MetricsFile:
    """Appends records to a metrics.jsonl; `enabled` False (a worker that is not the chief) writes nothing."""

    def __init__(self, path, enabled=True):
        self.path, self.enabled = pathlib.Path(path), enabled

    def append(self, record):
        if self.enabled:
            with self.path.open("a") as out:
                out.write(json.dumps(record) + "\n")

    def size(self):
        return self.path.stat().st_size if self.path.is_file() else 0

    def start_over(self):
        if self.enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")

    def truncate(self, size):
        """Back to `size` bytes, what it held when a resumable state was saved: the lines written after it
        are written again by the resumed run."""
        if self.enabled:
            with self.path.open("r+") as out:
                out.truncate(size)

    def keep_until(self, step):
        """Keeps the windows and evaluations up to `step` (a resume from a checkpoint of that step: the run
        logs the later ones again) and drops an earlier run record (a finished run trained further)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [line for line, record in zip(*_lines_and_records(self.path))
                if record is not None and record.get("split") != RUN and record.get("step", 0) <= step]
        self.path.write_text("".join(line + "\n" for line in kept))


def _lines_and_records(path):
    lines = [line for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a last line cut off by a kill
            records.append(None)
    return lines, records


def copy_history(records, folder, step):
    """Another run's records as the history of a model folder that holds its weights of `step` (an import): its
    windows and evaluations up to `step` into <folder>/metrics.jsonl, with its run record when `step` ended it,
    and the same values as TensorBoard scalars under <folder>/logs. Returns the records written."""
    from pretrain_loop.event_file import ScalarWriter

    kept = [record for record in records if record.get("split") in SPLITS and record["step"] <= step
            or record.get("split") == RUN and record.get("num_train_steps") == step]
    folder = pathlib.Path(folder)
    (folder / METRICS_FILE).write_text("".join(json.dumps(record) + "\n" for record in kept))
    for split in SPLITS:
        lines = [record for record in kept if record.get("split") == split]
        if lines:
            writer = ScalarWriter(folder / "logs" / split)
            for record in lines:
                writer.scalars(record["step"], {key: value for key, value in record.items()
                                                if key not in ("split", "step") and isinstance(value, (int, float))})
    return kept


def read_records(path):
    """The records of a metrics.jsonl, without a last line cut off by a kill."""
    return [record for record in _lines_and_records(path)[1] if record is not None]


def read_metrics(folder):
    """({"train": [...], "eval": [...]}, the run record or None while unfinished) of a run's folder."""
    path = pathlib.Path(folder) / METRICS_FILE
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    splits = {split: [r for r in records if r["split"] == split] for split in SPLITS}
    runs = [r for r in records if r["split"] == RUN]
    legacy = pathlib.Path(folder) / LEGACY_RUN_FILE
    run = runs[-1] if runs else json.loads(legacy.read_text()) if legacy.is_file() else None
    return splits, run


def curves_of(records, names):
    """{split: {metric: [(step, value)]}} of `names` from metrics records; a step logged twice (a run resumed
    from an earlier save logs the steps after it again) takes the later record, the history the weights have."""
    latest = {split: {name: {} for name in names} for split in SPLITS}
    for record in records:
        points = latest.get(record.get("split"))
        if points is None:
            continue
        for name in names:
            if name in record:
                points[name][record["step"]] = float(record[name])
    return {split: {name: sorted(points.items()) for name, points in metrics.items()}
            for split, metrics in latest.items()}
