"""Tasks of the user's own files (finetune.custom.spec says which files and fields): sentence or
sentence-pair classification and regression from CSV, TSV or JSON lines, and tagging from CoNLL-style
column files with any tag set. They are Tasks like the built-in ones, so the original's recipe, trials,
results, saved models and --do-predict apply unchanged.

Featurisation is GLUE's (finetune.features: [CLS] A [SEP] (B [SEP]), BERT's pair truncation) and the
head is GLUE's, so a GLUE task written to a CSV file trains and scores exactly as the built-in task on
the same rows and seed when its labels come in the built-in order (sorted, as here) and, for MRPC and
STS, the spec says `unordered_pairs` (the original trained their pairs both ways).

Labels: the training file's, sorted as Hugging Face's run_glue sorts them (as numbers when every label is
an integer, else as strings), or the spec's `label_names` in their order. Regression targets are STS-B's
normalisation, (score - min) / max, with (min, max) the training file's scores or the spec's
`score_range`. Tagging with span tags (O and B-, I-, E-, S- or BILOU's L-, U- with a type; IOB1, IOB2,
BIOES or BILOU) learns BIOES labels over the training file's types and is scored by span F1; any other
tag set (part of speech) is learnt tag for tag and scored by word accuracy.
"""
import pathlib
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from common import atomic
from common.errors import InputError
from finetune import metrics
from finetune.bad_rows import policy
from finetune.custom import spec as spec_lib
from finetune.custom.tables import read_rows
from finetune.features import model_inputs
from finetune.tagging.reader import Sentence, read_conll
from finetune.tagging.spans import OUTSIDE
from finetune.tagging.task import TaggingTask
from finetune.tasks import CLASSIFICATION, REGRESSION, Example, Task

RECIPE_NAME = "custom"  # the recipe's task name: the original's default (128 tokens, 3 epochs) for any name
ID_FIELDS = ("index", "idx", "id")  # a row's id in test predictions, when the file has one of these
INTEGER = re.compile(r"^[+-]?\d+$")


class RowError(ValueError):
    """One row's fault (the message after `path: line N: `)."""


def sort_labels(labels) -> List[str]:
    """run_glue's order: sorted, as numbers when every label is an integer ("2" before "10")."""
    labels = sorted(set(labels))
    if labels and all(INTEGER.match(label) for label in labels):
        return sorted(labels, key=int)
    return labels


def label_text(value) -> str:
    """A classification label as text: JSON numbers and booleans as written (1, 1.0 → "1", true)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value.strip() if isinstance(value, str) else str(value)


def score_value(value) -> float:
    if isinstance(value, bool):
        raise RowError(f"score {value!r} is not a number")
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise RowError(f"score {value!r} is not a number") from None
    if not np.isfinite(score):
        raise RowError(f"score {value!r} is not a finite number")
    return score


class FilesTask(Task):
    """What both kinds share: the spec, the split files, the label set learnt from the training file."""

    recipe_name = RECIPE_NAME

    def __init__(self, spec: spec_lib.TaskSpec):
        self.spec = spec
        self.name = spec.name
        self._learnt = None  # what the training file says: labels, score range, fields

    def eval_splits(self) -> Dict[str, str]:
        return {"dev": ""}

    def test_splits(self) -> List[str]:
        return ["test"]

    def split_file(self, data_root, split) -> pathlib.Path:
        path = dict(self.spec.files()).get(split)
        if path is None:
            flag = "--test-file" if self.spec.source == "flags" else f"--task-spec {self.spec.source} \"test_file\""
            raise InputError(f"task {self.name}: no {split} file; pass it with {flag}")
        return path

    def missing_test_splits(self, data_root) -> Dict[str, str]:
        """Without a test file, --do-predict skips the task with a note (run_finetuning.py refuses
        --do-predict for a task of the flags without --test-file, where it can only be an oversight)."""
        if self.spec.test_file is not None:
            return {}
        flag = "--test-file" if self.spec.source == "flags" else f"\"test_file\" in {self.spec.source}"
        return {"test": f"{self.name}: no test file, so no test predictions (give one with {flag})"}

    def learnt(self, bad_rows=None):
        """What the training file says (read once; read here when a split other than train comes first)."""
        if self._learnt is None:
            self.read(None, "train", bad_rows)
        return self._learnt

    def describe(self) -> dict:
        """The spec and what was learnt from the files (written to the results JSON)."""
        return {**self.spec.to_dict(), **self.saved_info()}


class TableTask(FilesTask):
    """Classification or regression of one text or a pair of texts per row."""

    def __init__(self, spec):
        super().__init__(spec)
        self.kind = CLASSIFICATION if spec.task_type == spec_lib.CLASSIFICATION else REGRESSION
        self.primary_metric = "accuracy" if self.kind == CLASSIFICATION else "spearman"

    @property
    def text_fields(self) -> Tuple[str, ...]:
        return self.learnt()["text_fields"]

    @property
    def label_field(self) -> str:
        return self.spec.label_field or spec_lib.LABEL_DEFAULT

    @property
    def is_pair(self) -> bool:
        return len(self.text_fields) == 2

    @property
    def unordered_pairs(self) -> bool:
        """Training pairs also swapped (the original's double_unordered, when the config keeps it on)."""
        return self.spec.unordered_pairs

    @property
    def label_names(self) -> List[str]:
        return list(self.learnt()["labels"]) if self.kind == CLASSIFICATION else []

    @property
    def score_range(self) -> Tuple[float, float]:
        return tuple(self.learnt()["score_range"])

    def saved_info(self) -> dict:
        """Kept with the fine-tuned model (finetuning_info.json): which fields a prediction reads."""
        return {"text_fields": list(self.text_fields), "label_field": self.label_field}

    # ------------------------------------------------------------------ reading
    def _resolve_text_fields(self, path, fields) -> Tuple[str, ...]:
        """The spec's, else run_glue's defaults: sentence1 and sentence2 when both are there, else sentence
        or text."""
        if self.spec.text_fields:
            return self.spec.text_fields
        if all(name in fields for name in spec_lib.PAIR_DEFAULT):
            return spec_lib.PAIR_DEFAULT
        for name in spec_lib.SINGLE_DEFAULTS:
            if name in fields:
                return (name,)
        raise InputError(f"{path}: no text field: neither sentence1 and sentence2, nor sentence, nor text (the "
                         f"file has {', '.join(fields) or 'no fields'}); name yours with --text-fields, e.g. "
                         f"--text-fields {','.join(fields[:2]) or 'question,sentence'}")

    def read(self, data_root, split, bad_rows=None, config=None) -> List[Example]:
        bad_rows = policy(bad_rows)
        path = self.split_file(data_root, split)
        fields, rows = read_rows(path, self.spec.format_of(path), bad_rows)
        if split == "train":
            text_fields = self._resolve_text_fields(path, fields)
        else:
            text_fields = self.learnt(bad_rows)["text_fields"]
        with_label = split != "test"
        needed = list(text_fields) + ([self.label_field] if with_label else [])
        missing = [name for name in needed if name not in fields]
        if missing:
            flag = "--label-field" if missing == [self.label_field] else "--text-fields"
            raise InputError(f"{path}: no field {', '.join(missing)} (the file has {', '.join(fields) or 'none'}); "
                             f"name the right one with {flag} or fix the file's "
                             f"{'header' if self.spec.format_of(path) != 'jsonl' else 'first line'}")
        id_field = next((name for name in ID_FIELDS if name in fields and name not in needed), None)
        known = None if split == "train" else self.learnt(bad_rows)
        examples = []
        for line, row in rows:
            try:
                examples.append(self._example(row, line, len(examples), text_fields, with_label, id_field, known))
            except RowError as error:
                bad_rows.reject(path, line, f"{path}: line {line}: {error}")
        if not examples:
            skipped = f" left after skipping {bad_rows.count(path)} malformed rows" if bad_rows.count(path) else ""
            raise InputError(f"{path}: no examples{skipped}; give the {split} split its rows")
        if split == "train":
            self._learnt = self._learn(path, examples, text_fields)
        return examples

    def _example(self, row, line, number, text_fields, with_label, id_field, known) -> Example:
        texts = []
        for name in text_fields:
            value = row.get(name)
            if value is None:
                what = "is null" if name in row else f"is missing (the row has {', '.join(row) or 'none'})"
                raise RowError(f"field {name!r} {what}; repair the line or pass --skip-bad-rows")
            if not isinstance(value, str):
                raise RowError(f"field {name!r} is a JSON {type(value).__name__}, not text; repair the line or "
                               "pass --skip-bad-rows")
            if not value.strip():
                raise RowError(f"the text in {name!r} is empty; fill it in, drop the row or pass --skip-bad-rows")
            texts.append(value)
        label = None
        if with_label:
            value = row.get(self.label_field)
            if value is None:
                raise RowError(f"no label in {self.label_field!r}; repair the line or pass --skip-bad-rows")
            label = label_text(value) if self.kind == CLASSIFICATION else score_value(value)
            if self.kind == CLASSIFICATION and not label:
                raise RowError(f"the label in {self.label_field!r} is empty; repair the line or pass --skip-bad-rows")
            self._check_label(label, known)
        guid = label_text(row[id_field]) if id_field and row.get(id_field) is not None else str(number)
        return Example(guid, texts[0], texts[1] if len(texts) > 1 else None, label)

    def _check_label(self, label, known):
        if self.kind != CLASSIFICATION:
            return
        names = self.spec.label_names if known is None else known["labels"]
        if names is not None and label not in names:
            if known is None:  # the training file against --label-names
                raise RowError(f"label {label!r} is not one of --label-names ({', '.join(names)}); add it there, "
                               "repair the line or pass --skip-bad-rows")
            raise RowError(f"label {label!r} is not among the training file's labels ({', '.join(names)}), so the "
                           "model cannot predict it; add examples of it to the training file (or list it in "
                           "--label-names), repair the line or pass --skip-bad-rows")

    def _learn(self, path, examples, text_fields) -> dict:
        learnt = {"text_fields": tuple(text_fields)}
        if self.kind == CLASSIFICATION:
            labels = self.spec.label_names or sort_labels(e.label for e in examples)
            if len(labels) < 2:
                raise InputError(f"{path}: every example has the label {labels[0]!r}; classification needs two or "
                                 "more labels (or name them all with --label-names)")
            learnt["labels"] = tuple(labels)
        else:
            scores = [e.label for e in examples]
            low, high = self.spec.score_range or (min(scores), max(scores))
            if self.spec.score_range is None and (low == high or high == 0):
                raise InputError(f"{path}: the training scores run from {low:g} to {high:g}; the targets are "
                                 "(score - min) / max (STS-B's), so give the range with --score-range MIN,MAX "
                                 "(MIN < MAX, MAX not 0)")
            learnt["score_range"] = (float(low), float(high))
        return learnt

    # ------------------------------------------------------------------ features and scores
    def featurize(self, examples, tokenizer, config, training=False):
        return model_inputs(self, examples, tokenizer, config, training)

    def label_ids(self, examples) -> np.ndarray:
        if self.kind == REGRESSION:
            return np.array([e.label for e in examples], np.float32)
        index = {label: i for i, label in enumerate(self.label_names)}
        return np.array([index[e.label] for e in examples], np.int32)

    def targets(self, examples) -> np.ndarray:
        """Label ids, or the normalised score (score - min) / max, as STS-B's."""
        labels = self.label_ids(examples)
        if self.kind == CLASSIFICATION:
            return labels
        low, high = self.score_range
        return ((labels - low) / high).astype(np.float32)

    def predictions(self, outputs) -> np.ndarray:
        outputs = np.asarray(outputs)
        if self.kind == CLASSIFICATION:
            return outputs.argmax(-1)
        low, high = self.score_range
        return outputs.reshape(-1) * high + low

    def score(self, examples, outputs, suffix="") -> Dict[str, float]:
        """Accuracy and macro-F1 (and MCC for two classes); Spearman and Pearson for scores."""
        labels, predictions = self.label_ids(examples), self.predictions(outputs)
        if self.kind == REGRESSION:
            values = {"spearman": metrics.spearman(labels, predictions),
                      "pearson": metrics.pearson(labels, predictions)}
        else:
            values = {"accuracy": metrics.accuracy(labels, predictions),
                      "macro_f1": metrics.f1_macro(labels, predictions)}
            if len(self.label_names) == 2:
                values["mcc"] = metrics.matthews_corrcoef(labels, predictions)
        return {name + suffix: value for name, value in values.items()}

    def evaluate(self, features, outputs, config, suffix=""):
        return self.score(features["examples"], outputs, suffix), None

    def majority_baseline(self, train_examples, eval_examples, suffix="") -> Dict[str, float]:
        """Always the training set's most frequent label (its mean score for regression)."""
        if self.kind == CLASSIFICATION:
            constant = np.bincount(self.label_ids(train_examples), minlength=len(self.label_names)).argmax()
            outputs = np.eye(len(self.label_names))[np.full(len(eval_examples), constant)]
        else:
            outputs = np.full((len(eval_examples), 1), float(np.mean(self.targets(train_examples))))
        return self.score(eval_examples, outputs, suffix)

    def write_test_predictions(self, folder, split, features, outputs):
        """`<task>_<split>.tsv`: `index<TAB>prediction` per row, in the file's order, as run_glue writes its
        predict_results (the index: the row's `index`, `idx` or `id` field, else its number from 0; the
        prediction: the label, or the score unclipped)."""
        lines = ["index\tprediction"]
        for example, prediction in zip(features["examples"], self.predictions(outputs)):
            value = self.label_names[int(prediction)] if self.kind == CLASSIFICATION else f"{float(prediction):.6g}"
            lines.append(f"{example.guid}\t{value}")
        path = pathlib.Path(folder) / f"{self.file_stem}_{split}.tsv"
        atomic.write_text(path, "\n".join(lines) + "\n")
        return path


SPAN_TAG = re.compile(r"^([BIESLU])-(.+)$")
BILOU = {"L": "E", "U": "S"}  # BILOU's last and unit tags are BIOES's E and S


class ColumnTaggingTask(FilesTask, TaggingTask):
    """A tag per word from CoNLL-style column files: the word and tag columns from the spec (the first and
    the last field by default), any tag set (TaggingTask: span labels or tags as they are)."""

    def __init__(self, spec):
        FilesTask.__init__(self, spec)

    @property
    def span_labels(self) -> bool:
        return self.learnt()["span_labels"]

    @property
    def output_scheme(self) -> str:
        return self.learnt()["output_scheme"]

    @property
    def label_names(self) -> List[str]:
        return list(self.learnt()["labels"])

    def saved_info(self) -> dict:
        learnt = self.learnt()
        return {"word_column": self.spec.word_column, "tag_column": self.spec.tag_column,
                "tag_scheme": "span" if learnt["span_labels"] else "tags", "output_scheme": learnt["output_scheme"]}

    def read(self, data_root, split, bad_rows=None, config=None) -> List[Sentence]:
        bad_rows = policy(bad_rows)
        path = self.split_file(data_root, split)
        known = None if split == "train" else self.learnt(bad_rows)
        problem = (lambda tag: None) if known is None else (lambda tag: self._tag_problem(tag, known))
        sentences = read_conll(path, None, need_tags=split != "test", bad_rows=bad_rows,
                               fix="give the split its sentences: a word and its tag per line, a blank line "
                                   "between sentences", word_column=self.spec.word_column,
                               tag_column=self.spec.tag_column, tag_problem=problem, layout="the same fields")
        if split == "train":
            sentences = self._learn(path, sentences, bad_rows)
        elif known["span_labels"]:
            sentences = [_with_tags(s, [_bioes_prefix(t) for t in s.tags]) if s.tags else s for s in sentences]
        return sentences

    def _tag_problem(self, tag, known) -> Optional[str]:
        """A dev or test tag the model cannot have learnt."""
        if not known["span_labels"]:
            if tag in known["labels"]:
                return None
            return (f"tag {tag!r} is not among the training file's tags ({', '.join(known['labels'][:12])}"
                    f"{', ...' if len(known['labels']) > 12 else ''}); add examples of it to the training file, "
                    "repair the line or pass --skip-bad-rows")
        match = SPAN_TAG.match(tag)
        if tag == OUTSIDE or (match and match.group(2) in known["types"]):
            return None
        if match:
            return (f"tag {tag!r}: type {match.group(2)!r} is not among the training file's "
                    f"({', '.join(known['types'])}); add examples of it to the training file, repair the line or "
                    "pass --skip-bad-rows")
        return (f"tag {tag!r} is neither O nor a span tag (B-, I-, E-, S-, L- or U- and a type) like the training "
                "file's; repair the line or pass --skip-bad-rows")

    def _learn(self, path, sentences, bad_rows) -> List[Sentence]:
        """Span labels when any training tag is a span tag; then every tag must be O or one."""
        tags = {tag for sentence in sentences for tag in sentence.tags}
        span = any(SPAN_TAG.match(tag) for tag in tags)
        if not span:
            labels = sorted(tags)
            if len(labels) < 2:
                raise InputError(f"{path}: every word has the tag {labels[0]!r}; tagging needs two or more tags")
            self._learnt = {"span_labels": False, "labels": tuple(labels), "output_scheme": "tags", "types": ()}
            return sentences
        kept = []
        for sentence in sentences:
            bad = next((i for i, tag in enumerate(sentence.tags) if tag != OUTSIDE and not SPAN_TAG.match(tag)), None)
            if bad is None:
                kept.append(_with_tags(sentence, [_bioes_prefix(tag) for tag in sentence.tags]))
                continue
            line = sentence.line + bad  # a sentence's token lines are consecutive
            bad_rows.reject(path, line, f"{path}: line {line}: tag {sentence.tags[bad]!r} is neither O nor a span "
                            "tag (B-, I-, E-, S-, L- or U- and a type) as the file's other tags are; repair the line "
                            "or pass --skip-bad-rows", unit="sentences")
        if not kept:
            raise InputError(f"{path}: no sentences left after skipping {bad_rows.count(path)} malformed ones; "
                             "give the training split its sentences")
        types = sorted({SPAN_TAG.match(tag).group(2) for s in kept for tag in s.tags if tag != OUTSIDE})
        labels = sorted([OUTSIDE] + [f"{prefix}-{kind}" for prefix in "BIES" for kind in types])
        bioes = any(SPAN_TAG.match(tag).group(1) in "ESLU" for tag in tags if tag != OUTSIDE)
        self._learnt = {"span_labels": True, "labels": tuple(labels), "types": tuple(types),
                        "output_scheme": "BIOES" if bioes else "IOB2"}
        return kept

    def featurize(self, sentences, tokenizer, config, training=False):
        features = TaggingTask.featurize(self, sentences, tokenizer, config, training)
        cut = sum(int(mask.sum()) < len(s.words) for s, mask in zip(sentences, features["sequences"]["tag_mask"]))
        if cut:
            print(f"{self.name}: {cut} of {len(sentences)} sentences are longer than max_seq_length "
                  f"{config.max_seq_length} tokens: their last words are neither trained on nor scored (raise "
                  "max_seq_length with --hparams to keep them)")
        return features


def _bioes_prefix(tag: str) -> str:
    """BILOU's L- and U- as BIOES's E- and S- (the span decoders read B, I, E, S)."""
    match = SPAN_TAG.match(tag)
    return f"{BILOU[match.group(1)]}-{match.group(2)}" if match and match.group(1) in BILOU else tag


def _with_tags(sentence: Sentence, tags) -> Sentence:
    return Sentence(sentence.guid, sentence.words, tuple(tags), sentence.line)


def make_task(spec: spec_lib.TaskSpec) -> Task:
    return ColumnTaggingTask(spec) if spec.task_type == spec_lib.TAGGING else TableTask(spec)
