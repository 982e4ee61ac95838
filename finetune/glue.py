"""The GLUE tasks: their files (columns found by the header; CoLA's headerless layout), labels, metrics
and leaderboard submission files.

Rows are split on tabs with no quote handling (GLUE's texts contain unbalanced quotes, as the original's
csv reader with quotechar=None knew). A byte-order mark (MRPC) is dropped. Unlike the original, which
logged and skipped rows it could not parse, a row with another number of columns than the header's, an
unknown label or a score that is not a number stops the run with the file and line, so a damaged
download is not trained on silently; with skip_bad_rows (--skip-bad-rows) such rows are skipped and
counted per file (finetune.bad_rows).

MNLI's model also predicts GLUE's diagnostic set (AX.tsv, which a complete submission needs). That set
is optional: found in the MNLI folder (the original's finetuning_data/mnli/diagnostic.tsv) or beside it
(GLUE's glue_data/diagnostic/diagnostic.tsv); when absent the run says so and writes the rest.
"""
import dataclasses
import pathlib
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from common import atomic
from common.errors import InputError
from finetune import metrics
from finetune.bad_rows import policy
from finetune.data_files import find_file, find_split_file, find_task_dir, split_file_candidates
from finetune.features import model_inputs
from finetune.tasks import CLASSIFICATION, REGRESSION, Example, Task

# CoLA's train and dev files have no header: source, label, original judgement, sentence.
COLA_LAYOUT = {"label": 1, "sentence": 3, "width": 4}


def read_tsv_rows(path) -> List[List[str]]:
    """Tab-separated rows, no quoting, BOM dropped; InputError for a missing, non-UTF-8 or empty file."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; check --finetuning-data-dir") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 (byte {error.start}); GLUE files are UTF-8, re-download it") from None
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.rstrip("\r").split("\t") for line in lines]


@dataclasses.dataclass(frozen=True)
class ExtraTestSet:
    """A test set of its own that a task's model predicts when its file is present (MNLI → diagnostic)."""
    name: str  # the split, and GLUE's folder and file name for it
    submission_name: str

    @property
    def file_names(self) -> Tuple[str, ...]:
        """Relative to the task folder: inside it (the original's layout) or GLUE's folder beside it."""
        return (f"{self.name}.tsv", f"../{self.name}/{self.name}.tsv")


@dataclasses.dataclass(frozen=True)
class GlueTask(Task):
    name: str
    glue_name: str
    text_columns: Tuple[str, ...]  # header names of text_a (and text_b)
    label_column: str
    labels: Tuple[str, ...]  # () for regression
    metric_fns: Tuple[Tuple[str, Callable], ...]
    primary_metric: str
    submission_names: Tuple[str, ...]  # one per test split
    id_column: str = "index"
    headerless: Optional[dict] = None  # the layout of files without a header
    splits: Tuple[Tuple[str, str], ...] = (("dev", ""),)
    tests: Tuple[str, ...] = ("test",)
    extra_tests: Tuple[ExtraTestSet, ...] = ()  # optional: skipped with a note when absent
    # Regression: the score range (min, max). The model regresses the original's normalised target
    # (score − min) / max, and its outputs are mapped back to scores for metrics and submissions.
    score_range: Tuple[float, float] = (0.0, 1.0)

    @property
    def kind(self):
        return CLASSIFICATION if self.labels else REGRESSION

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def label_names(self) -> List[str]:
        return list(self.labels)

    def eval_splits(self) -> Dict[str, str]:
        return dict(self.splits)

    def test_splits(self) -> List[str]:
        return list(self.tests) + [extra.name for extra in self.extra_tests]

    def missing_test_splits(self, data_root) -> Dict[str, str]:
        folder, missing = self.folder(data_root), {}
        for extra in self.extra_tests:
            if find_file(folder, extra.file_names) is None:
                looked = ", ".join(str(p) for p in split_file_candidates(folder, extra.file_names))
                missing[extra.name] = (f"{self.name}: no {extra.name} set, so no {extra.submission_name} "
                                       f"(looked for {looked}); put GLUE's {extra.name}/{extra.name}.tsv at "
                                       "one of those paths for a complete GLUE submission")
        return missing

    def folder(self, data_root) -> pathlib.Path:
        return find_task_dir(data_root, self.name, (self.glue_name,))

    def split_file(self, data_root, split) -> pathlib.Path:
        extra = self._extra_test(split)
        names = extra.file_names if extra else (f"{split}.tsv",)
        return find_split_file(self.folder(data_root), split, names, self.name)

    def _extra_test(self, split) -> Optional[ExtraTestSet]:
        return next((extra for extra in self.extra_tests if extra.name == split), None)

    def _download_name(self, split) -> str:
        """GLUE's name for the download a split's file comes from (for the fix in an error message)."""
        extra = self._extra_test(split)
        return extra.name if extra else self.glue_name

    # ------------------------------------------------------------------ reading
    def read(self, data_root, split, bad_rows=None, config=None) -> List[Example]:
        """The split's examples; `bad_rows` (finetune.bad_rows.BadRows): stop at a malformed row (None,
        the default) or skip it."""
        bad_rows = policy(bad_rows)
        path = self.split_file(data_root, split)
        rows = read_tsv_rows(path)
        is_test, download = split in self.test_splits(), self._download_name(split)
        columns, start = self._columns(rows, path, is_test, download)
        width = columns.pop("_width")
        examples = []
        for number, row in enumerate(rows[start:], start=start + 1):
            if len(row) != width:
                bad_rows.reject(path, number, f"{path}: line {number} has {len(row)} tab-separated columns, "
                                f"the file's layout has {width}; repair the line, re-download {download} "
                                "or pass --skip-bad-rows")
                continue
            texts = [row[columns[c]] for c in self.text_columns]
            guid = row[columns["_id"]] if "_id" in columns else str(number - start - 1)
            try:
                label = None if is_test else self._label(row[columns[self.label_column]], path, number)
            except InputError as error:
                bad_rows.reject(path, number, str(error))
                continue
            examples.append(Example(guid, texts[0], texts[1] if self.is_pair else None, label))
        if not examples:
            raise InputError(f"{path}: the {split} split has no examples; use the full {download} file")
        return examples

    def _columns(self, rows, path, is_test, download):
        """{column name: index, "_width": n, "_id": index?} and the first data row."""
        if not rows:
            raise InputError(f"{path}: the file is empty; use the full {download} file")
        header = [cell.strip() for cell in rows[0]]
        needed = list(self.text_columns) + ([] if is_test else [self.label_column])
        if all(name in header for name in needed):
            columns = {name: header.index(name) for name in needed}
            if self.id_column in header:
                columns["_id"] = header.index(self.id_column)
            columns["_width"] = len(header)
            return columns, 1
        if self.headerless and not is_test:
            layout = self.headerless
            columns = {self.text_columns[0]: layout["sentence"], self.label_column: layout["label"],
                       "_width": layout["width"]}
            return columns, 0
        missing = [name for name in needed if name not in header]
        raise InputError(f"{path}: the header lacks the column(s) {', '.join(missing)} (header: "
                         f"{' | '.join(header)[:120]}); use GLUE's {download} files")

    def _label(self, text, path, number):
        text = text.strip()
        if not self.labels:
            try:
                return float(text)
            except ValueError:
                raise InputError(f"{path}: line {number}: score {text!r} is not a number; repair the "
                                 "line or pass --skip-bad-rows") from None
        if text not in self.labels:
            raise InputError(f"{path}: line {number}: unknown label {text!r} (expected one of "
                             f"{', '.join(self.labels)}); repair the line, check the task or pass --skip-bad-rows")
        return text

    # ------------------------------------------------------------------ features
    def featurize(self, examples, tokenizer, config, training=False):
        """Model inputs: {"sequences": {input_ids, segment_ids}, "scalars": {labels}, ...}."""
        return model_inputs(self, examples, tokenizer, config, training)

    def evaluate(self, features, outputs, config, suffix=""):
        """Metric values (0–100) on an evaluated split; `outputs` are the head's, in feature order."""
        return self.score(features["examples"], outputs, suffix), None

    # ------------------------------------------------------------------ labels and scores
    def label_ids(self, examples) -> np.ndarray:
        """Label ids (classification) or scores (regression), as the metrics compare them."""
        if not self.labels:
            return np.array([e.label for e in examples], np.float32)
        index = {label: i for i, label in enumerate(self.labels)}
        return np.array([index[e.label] for e in examples], np.int32)

    def targets(self, examples) -> np.ndarray:
        """What the head is trained on: label ids, or the normalised score (score − min) / max."""
        labels = self.label_ids(examples)
        if self.labels:
            return labels
        low, high = self.score_range
        return ((labels - low) / high).astype(np.float32)

    def predictions(self, outputs) -> np.ndarray:
        """Model outputs [n, num_outputs] → label ids (classification) or scores (regression)."""
        outputs = np.asarray(outputs)
        if self.labels:
            return outputs.argmax(-1)
        low, high = self.score_range
        return outputs.reshape(-1) * high + low

    def score(self, examples, outputs, suffix="") -> Dict[str, float]:
        labels, predictions = self.label_ids(examples), self.predictions(outputs)
        return {name + suffix: fn(labels, predictions) for name, fn in self.metric_fns}

    def majority_baseline(self, train_examples, eval_examples, suffix="") -> Dict[str, float]:
        """The scores of always predicting the training set's most frequent label (mean score for STS)."""
        train_labels = self.label_ids(train_examples)
        if self.labels:
            constant = np.bincount(train_labels, minlength=len(self.labels)).argmax()
            outputs = np.eye(len(self.labels))[np.full(len(eval_examples), constant)]
        else:
            outputs = np.full((len(eval_examples), 1), float(np.mean(self.targets(train_examples))))
        return self.score(eval_examples, outputs, suffix)

    # ------------------------------------------------------------------ submission files
    def write_test_predictions(self, folder, split, features, outputs):
        """`folder/<GLUE name>.tsv` (MNLI: MNLI-m.tsv, MNLI-mm.tsv and AX.tsv), ready to zip for the
        leaderboard."""
        extra = self._extra_test(split)
        name = extra.submission_name if extra else self.submission_names[self.tests.index(split)]
        path = pathlib.Path(folder) / name
        atomic.write_text(path, "\n".join(self.submission_lines(features["examples"], outputs)) + "\n")
        return path

    def submission_lines(self, examples, outputs) -> List[str]:
        """GLUE's format: a header `index\tprediction`, then one line per test row."""
        predictions = self.predictions(outputs)
        lines = ["index\tprediction"]
        for example, prediction in zip(examples, predictions):
            if not self.labels:
                value = f"{min(max(float(prediction), self.score_range[0]), self.score_range[1]):.3f}"
            else:
                value = self.labels[int(prediction)]
            lines.append(f"{example.guid}\t{value}")
        return lines


ACCURACY = (("accuracy", metrics.accuracy),)
ACCURACY_F1 = (("accuracy", metrics.accuracy), ("f1", metrics.f1_binary))
BINARY = ("0", "1")

GLUE_TASKS = [
    GlueTask("cola", "CoLA", ("sentence",), "label", BINARY,
             (("mcc", metrics.matthews_corrcoef), ("accuracy", metrics.accuracy)), "mcc", ("CoLA.tsv",),
             headerless=COLA_LAYOUT),
    GlueTask("sst", "SST-2", ("sentence",), "label", BINARY, ACCURACY, "accuracy", ("SST-2.tsv",)),
    GlueTask("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", BINARY, ACCURACY_F1, "accuracy",
             ("MRPC.tsv",)),
    GlueTask("sts", "STS-B", ("sentence1", "sentence2"), "score", (),
             (("spearman", metrics.spearman), ("pearson", metrics.pearson)), "spearman", ("STS-B.tsv",),
             score_range=(0.0, 5.0)),
    GlueTask("qqp", "QQP", ("question1", "question2"), "is_duplicate", BINARY, ACCURACY_F1, "accuracy",
             ("QQP.tsv",), id_column="id"),
    GlueTask("mnli", "MNLI", ("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"),
             ACCURACY, "accuracy", ("MNLI-m.tsv", "MNLI-mm.tsv"),
             splits=(("dev_matched", ""), ("dev_mismatched", "_mm")), tests=("test_matched", "test_mismatched"),
             extra_tests=(ExtraTestSet("diagnostic", "AX.tsv"),)),
    GlueTask("qnli", "QNLI", ("question", "sentence"), "label", ("entailment", "not_entailment"), ACCURACY,
             "accuracy", ("QNLI.tsv",)),
    GlueTask("rte", "RTE", ("sentence1", "sentence2"), "label", ("entailment", "not_entailment"), ACCURACY,
             "accuracy", ("RTE.tsv",)),
    GlueTask("wnli", "WNLI", ("sentence1", "sentence2"), "label", BINARY, ACCURACY, "accuracy", ("WNLI.tsv",)),
]
TASKS = GLUE_TASKS  # what finetune.registry lists
