"""What the user says about a task of their own files: from run_finetuning.py's flags (named as Hugging
Face's run_glue and run_ner examples name theirs, so their scripts translate) or a --task-spec JSON file.

A spec is checked whole before anything is read: the task type, the files (which must exist), their
formats (from each file's name, or the spec's "format"), the text and label fields (names for CSV, TSV
and JSON lines; column numbers from 0 for CoNLL-style column files), the label order and the score
range. Every fault is one InputError line naming the flag or the spec file and the fix.
"""
import dataclasses
import json
import pathlib
import re
from typing import List, Optional, Sequence, Tuple

from common.errors import InputError

CLASSIFICATION, REGRESSION, TAGGING = "classification", "regression", "tagging"
TASK_TYPES = (CLASSIFICATION, REGRESSION, TAGGING)
TABLE_FORMATS = ("csv", "tsv", "jsonl")  # a row per example, fields by name
COLUMN_FORMAT = "conll"  # a token per line, fields by number, a blank line between sentences
FORMATS = TABLE_FORMATS + (COLUMN_FORMAT,)
SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl",
                  ".ndjson": "jsonl"}
# run_glue's default text fields: a pair when the file has both, else one of these (the first found).
PAIR_DEFAULT = ("sentence1", "sentence2")
SINGLE_DEFAULTS = ("sentence", "text")
LABEL_DEFAULT = "label"
WORD_COLUMN_DEFAULT, TAG_COLUMN_DEFAULT = 0, -1  # the first field and the last, as CoNLL-2000 is read
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SPEC_KEYS = ("name", "task_type", "train_file", "dev_file", "test_file", "text_fields", "label_field",
             "label_names", "score_range", "unordered_pairs", "format")


def file_format(path) -> Optional[str]:
    """The format a file's name says (`.gz` looked through), or None for any other name."""
    path = pathlib.Path(path)
    suffix = pathlib.Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    return SUFFIX_FORMATS.get(suffix.lower())


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task of the user's files. `text_fields` and `label_field`: None for the defaults (names for
    tables, column numbers as strings for column files); `label_names`: the classes in the head's order
    (None: the training file's, sorted); `score_range`: (min, max) of the regression scores (None: the
    training file's); `unordered_pairs`: train pairs also swapped, as the original did for MRPC and STS;
    `file_format`: one of FORMATS for every file (None: from each file's name). `source` names where the
    spec came from in messages ("--train-file" style flags, or the spec file)."""
    name: str
    task_type: str
    train_file: pathlib.Path
    dev_file: pathlib.Path
    test_file: Optional[pathlib.Path] = None
    text_fields: Optional[Tuple[str, ...]] = None
    label_field: Optional[str] = None
    label_names: Optional[Tuple[str, ...]] = None
    score_range: Optional[Tuple[float, float]] = None
    unordered_pairs: bool = False
    file_format: Optional[str] = None
    source: str = "flags"

    def format_of(self, path) -> str:
        """The file's format: the spec's, else from its name (tagging: a column file, whatever its name, but
        JSON lines, which it does not read), else an InputError saying how to name it."""
        if self.file_format:
            return self.file_format
        found = file_format(path)
        if self.task_type == TAGGING:
            if found == "jsonl":
                raise InputError(f"{path}: tagging reads CoNLL-style column files (a word and its tag per line, a "
                                 "blank line between sentences), not JSON lines; write the file in that layout")
            return COLUMN_FORMAT
        if found is None:
            raise InputError(f"{path}: cannot tell the format from the name; name it .csv, .tsv or .jsonl (.gz "
                             f"too), or give \"format\" in a --task-spec file ({', '.join(TABLE_FORMATS)})")
        return found

    @property
    def word_column(self) -> int:
        return int(self.text_fields[0]) if self.text_fields else WORD_COLUMN_DEFAULT

    @property
    def tag_column(self) -> int:
        return int(self.label_field) if self.label_field is not None else TAG_COLUMN_DEFAULT

    def files(self) -> List[Tuple[str, pathlib.Path]]:
        return [(split, path) for split, path in (("train", self.train_file), ("dev", self.dev_file),
                                                  ("test", self.test_file)) if path is not None]

    def to_dict(self) -> dict:
        """The spec as JSON (in the results file, so a run says which files and fields it read)."""
        values = {key: getattr(self, key) for key in ("name", "task_type", "text_fields", "label_field",
                                                      "label_names", "score_range", "unordered_pairs")}
        values.update({f"{split}_file": str(path) for split, path in self.files()})
        values["format"] = self.file_format
        return {key: list(value) if isinstance(value, tuple) else value for key, value in values.items()}


def split_list(text, flag) -> Optional[Tuple[str, ...]]:
    """"a,b" (or a JSON list) → ("a", "b"); None for None; an InputError for an empty item."""
    if text is None:
        return None
    items = [str(item).strip() for item in (text.split(",") if isinstance(text, str) else text)]
    if not items or any(not item for item in items):
        raise InputError(f"{flag} {text!r}: an empty name; separate names by commas, e.g. question,sentence")
    return tuple(items)


def check_spec(spec: TaskSpec, builtin_names: Sequence[str], flag) -> TaskSpec:
    """The spec, checked: InputError (naming `flag(key)`, the flag or spec field of a key) for the first
    fault found."""
    if not NAME_PATTERN.match(spec.name):
        raise InputError(f"{flag('name')} {spec.name!r}: a task name is letters, digits, _, . and -, starting "
                         "with a letter or digit (it names the results file and the head)")
    if spec.name.lower() in builtin_names:
        raise InputError(f"{flag('name')} {spec.name!r} is a built-in task, which reads its own files; give "
                         f"your task another name (e.g. my_{spec.name.lower()})")
    if spec.task_type not in TASK_TYPES:
        raise InputError(f"{flag('task_type')} {spec.task_type!r}: choose one of {', '.join(TASK_TYPES)}")
    if spec.file_format is not None and spec.file_format not in FORMATS:
        raise InputError(f"{flag('format')} {spec.file_format!r}: choose one of {', '.join(FORMATS)}")
    if spec.file_format is not None and (spec.file_format == COLUMN_FORMAT) != (spec.task_type == TAGGING):
        raise InputError(f"{flag('format')} {spec.file_format!r} does not suit task type {spec.task_type}: "
                         f"tagging reads {COLUMN_FORMAT} column files, the others {', '.join(TABLE_FORMATS)}")
    for split, path in spec.files():
        if not path.is_file():
            raise InputError(f"{flag(split + '_file')} {path}: no such file")
        spec.format_of(path)  # a name that says no format stops here
    if spec.task_type == TAGGING:
        for key, value in (("text_fields", spec.text_fields), ("label_field", spec.label_field)):
            values = value if isinstance(value, tuple) else (value,) if value is not None else ()
            if any(not re.fullmatch(r"-?\d+", item) for item in values):
                raise InputError(f"{flag(key)} {','.join(values)}: a column file's fields are column numbers "
                                 "from 0 (negative from the end), e.g. --text-fields 0 --label-field 3")
        if spec.text_fields is not None and len(spec.text_fields) != 1:
            raise InputError(f"{flag('text_fields')} {','.join(spec.text_fields)}: tagging reads one word column")
        if spec.word_column == spec.tag_column:
            raise InputError(f"{flag('label_field')} {spec.tag_column}: the tag column is the word column; "
                             "name two different columns")
    elif spec.text_fields is not None and len(spec.text_fields) not in (1, 2):
        raise InputError(f"{flag('text_fields')} {','.join(spec.text_fields)}: one or two text fields (a "
                         "sentence, or a pair)")
    if spec.label_names is not None:
        if spec.task_type != CLASSIFICATION:
            raise InputError(f"{flag('label_names')}: only a classification task takes its labels' order (a "
                             f"{spec.task_type} task's labels come from its files)")
        if len(set(spec.label_names)) != len(spec.label_names) or len(spec.label_names) < 2:
            raise InputError(f"{flag('label_names')} {','.join(spec.label_names)}: name two or more labels, "
                             "each once")
    if spec.score_range is not None:
        if spec.task_type != REGRESSION:
            raise InputError(f"{flag('score_range')}: only a regression task has a score range")
        low, high = spec.score_range
        if not low < high or high == 0:
            raise InputError(f"{flag('score_range')} {low:g},{high:g}: give MIN,MAX with MIN < MAX and MAX not 0 "
                             "(targets are (score - MIN) / MAX, as STS-B's)")
    if spec.unordered_pairs and spec.task_type == TAGGING:
        raise InputError(f"{flag('unordered_pairs')}: a tagging task has no sentence pairs")
    return spec


def parse_range(value, flag) -> Optional[Tuple[float, float]]:
    if value is None:
        return None
    try:
        items = [float(item) for item in (value.split(",") if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        items = []
    if len(items) != 2:
        raise InputError(f"{flag} {value!r}: give the scores' MIN,MAX, e.g. 0,5")
    return items[0], items[1]


def default_task_type(train_file) -> str:
    """Without --task-type: a table (CSV, TSV, JSON lines) is classification, any other file tagging."""
    return CLASSIFICATION if file_format(train_file) else TAGGING


def from_flags(name, train_file, dev_file, test_file=None, text_fields=None, label_field=None, task_type=None,
               label_names=None, score_range=None, builtin_names=()) -> TaskSpec:
    """The spec run_finetuning.py's flags give (paths as given, relative to the working folder)."""
    flags = {"name": "--task", "task_type": "--task-type", "train_file": "--train-file", "dev_file": "--dev-file",
             "test_file": "--test-file", "text_fields": "--text-fields", "label_field": "--label-field",
             "label_names": "--label-names", "score_range": "--score-range", "format": "--task-spec format",
             "unordered_pairs": "--task-spec unordered_pairs"}
    if train_file is None or dev_file is None:
        raise InputError(f"--task {name}: a task of your own files needs --train-file and --dev-file "
                         f"(built-in tasks: {', '.join(builtin_names)})")
    spec = TaskSpec(
        name=name, task_type=task_type or default_task_type(train_file), train_file=pathlib.Path(train_file),
        dev_file=pathlib.Path(dev_file), test_file=pathlib.Path(test_file) if test_file else None,
        text_fields=split_list(text_fields, "--text-fields"), label_field=label_field,
        label_names=split_list(label_names, "--label-names"), score_range=parse_range(score_range, "--score-range"))
    return check_spec(spec, builtin_names, flags.get)


def read_spec_file(path, builtin_names=()) -> List[TaskSpec]:
    """The tasks a --task-spec JSON file describes: one object, or a list of them (each with its "name").
    Paths in it are relative to the file's folder."""
    path = pathlib.Path(path)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--task-spec {path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"--task-spec {path}: not JSON ({error}); write one object (or a list of them) with "
                         f"the keys {', '.join(SPEC_KEYS)}") from None
    objects = values if isinstance(values, list) else [values]
    specs = []
    for number, item in enumerate(objects):
        where = f"--task-spec {path}" + (f" (task {number + 1})" if isinstance(values, list) else "")
        if not isinstance(item, dict):
            raise InputError(f"{where}: not a JSON object; write one object per task")
        unknown = sorted(set(item) - set(SPEC_KEYS))
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(unknown)}; the keys are {', '.join(SPEC_KEYS)}")
        for key in ("name", "train_file", "dev_file"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise InputError(f"{where}: \"{key}\" is missing or not a string; every task needs name, "
                                 "train_file and dev_file")

        def flag(key, where=where):
            return f"{where} \"{key}\""

        def relative(value, key):
            if value is None:
                return None
            if not isinstance(value, str):
                raise InputError(f"{flag(key)}: not a string; give a path")
            return path.parent / value

        label_field = item.get("label_field")
        text_fields = item.get("text_fields")
        if isinstance(text_fields, int) or (isinstance(text_fields, list) and text_fields
                                            and all(isinstance(v, int) for v in text_fields)):
            text_fields = [str(v) for v in (text_fields if isinstance(text_fields, list) else [text_fields])]
        if not isinstance(item.get("unordered_pairs", False), bool):
            raise InputError(f"{flag('unordered_pairs')}: true or false")
        spec = TaskSpec(
            name=item["name"], task_type=item.get("task_type") or default_task_type(item["train_file"]),
            train_file=relative(item["train_file"], "train_file"), dev_file=relative(item["dev_file"], "dev_file"),
            test_file=relative(item.get("test_file"), "test_file"),
            text_fields=split_list(text_fields, flag("text_fields")),
            label_field=None if label_field is None else str(label_field),
            label_names=split_list(item.get("label_names"), flag("label_names")),
            score_range=parse_range(item.get("score_range"), flag("score_range")),
            unordered_pairs=item.get("unordered_pairs", False), file_format=item.get("format"), source=str(path))
        specs.append(check_spec(spec, builtin_names, flag))
    names = [spec.name.lower() for spec in specs]
    if len(set(names)) != len(names):
        raise InputError(f"--task-spec {path}: a task name is used twice; name each task once")
    return specs
