"""Rows of new text to predict: CSV, TSV, JSON lines or plain text (a file, gzipped or not, or stdin),
each row with the line it starts on, so that a row that cannot be read is reported by file and line.

Columns are named by the caller (`--text-fields`) or found by defaults that follow Hugging Face's
run_glue: a sentence pair reads `sentence1`/`sentence2`, a single text `sentence`, else `text` (a file
with one column reads that column). A missing column is a fault of the whole file (InputError naming
the columns it has); a row that cannot be read (another number of fields than the header's, a JSON line
that is not an object or lacks a field, an empty text, bytes that are not UTF-8) is a `Malformed` item
for the caller to stop on or count. Nothing here imports TensorFlow: the input is checked whole before a
model is loaded.
"""
import csv
import dataclasses
import gzip
import io
import json
import pathlib
import sys
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from common.errors import InputError

FORMATS = ("csv", "tsv", "jsonl", "text")
SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".txt": "text"}

# Default columns by what the model reads, in the order tried (run_glue's sentence1/sentence2, then
# sentence, then text; GLUE's own pair names so that its dev files work as they are; run_ner's tokens;
# run_qa's question/context).
DEFAULT_FIELDS = {
    "pair": [("sentence1", "sentence2"), ("question1", "question2"), ("question", "sentence")],
    "single": [("sentence",), ("text",)],
    "words": [("tokens",), ("words",), ("sentence",), ("text",)],
    "qa": [("question", "context")],
}
# csv's default field size limit (128 KiB) would call a long context malformed.
csv.field_size_limit(min(sys.maxsize, 2 ** 31 - 1))


@dataclasses.dataclass(frozen=True)
class Row:
    line: int  # the line (1-based) the row starts on
    texts: Tuple[Union[str, List[str]], ...]  # one value per text field (a word list for "words" input)


@dataclasses.dataclass(frozen=True)
class Malformed:
    line: int
    reason: str


def input_format(path: Optional[pathlib.Path], first_line: str, fields: Optional[Sequence[str]], role: str) -> str:
    """The format by the file's suffix (under .gz), else guessed from its first line: a JSON object is JSON
    lines, a header holding the columns (given or default) is TSV or CSV, anything else plain text."""
    if path is not None:
        name = path.name[:-3] if path.name.endswith(".gz") else path.name
        suffix = pathlib.Path(name).suffix.lower()
        if suffix in SUFFIXES:
            return SUFFIXES[suffix]
    line = first_line.lstrip("\ufeff").strip()
    if line.startswith("{"):
        return "jsonl"
    wanted = [tuple(fields)] if fields else DEFAULT_FIELDS[role]
    for name, columns in (("tsv", line.split("\t")), ("csv", next(csv.reader([line]), []))):
        columns = [column.strip() for column in columns]
        if any(all(field in columns for field in group) for group in wanted):
            return name
    return "text"


def open_text(path: pathlib.Path) -> io.TextIOBase:
    """The file as text lines; bytes that are not UTF-8 are kept as surrogates for the row check to name."""
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")


def _not_utf8(values) -> bool:
    return any(any("\udc80" <= char <= "\udcff" for char in value) for value in values if isinstance(value, str))


def choose_fields(columns: Sequence[str], fields: Optional[Sequence[str]], role: str, where: str) -> Tuple[str, ...]:
    """The text columns to read from a header (or a JSON line's keys): `fields` if given, else the first
    default group present, else the only column; InputError naming the columns the file has."""
    count = 2 if role in ("pair", "qa") else 1
    have = ", ".join(columns) if columns else "none"
    if fields:
        missing = [field for field in fields if field not in columns]
        if missing:
            raise InputError(f"{where}: no column {', '.join(missing)} (its columns: {have}); name the text columns "
                             "with --text-fields")
        return tuple(fields)
    for group in DEFAULT_FIELDS[role]:
        if all(field in columns for field in group):
            return group
    if count == 1 and len(columns) == 1:
        return (columns[0],)
    defaults = " or ".join("/".join(group) for group in DEFAULT_FIELDS[role])
    raise InputError(f"{where}: none of the default text columns ({defaults}) is there (its columns: {have}); "
                     f"name the model's {count} text column{'s' if count > 1 else ''} with --text-fields")


def _value(value, field, role) -> Tuple[Optional[object], Optional[str]]:
    """(the text, None) or (None, why the row is malformed)."""
    if role == "words":
        if isinstance(value, list) and all(isinstance(word, str) for word in value):
            words = [word for word in value if word.strip()]
        elif isinstance(value, str):
            words = value.split()
        else:
            return None, f"field {field!r} is {type(value).__name__}, not text or a list of words"
        return (words, None) if words else (None, f"field {field!r} holds no word")
    if not isinstance(value, str):
        return None, f"field {field!r} is {type(value).__name__}, not text"
    if not value.strip():
        return None, f"field {field!r} is empty"
    return value, None


def _row(line, record, fields, role):
    texts = []
    for field in fields:
        value, problem = _value(record[field], field, role)
        if problem:
            return Malformed(line, problem)
        texts.append(value)
    if _not_utf8(texts if role != "words" else [w for words in texts for w in words]):
        return Malformed(line, "not UTF-8 text")
    return Row(line, tuple(texts))


def read_rows(handle: io.TextIOBase, fmt: str, fields: Optional[Sequence[str]], role: str,
              where: str) -> Iterator[Union[Row, Malformed]]:
    """Rows in input order (blank lines are no rows); InputError for a fault of the whole input."""
    if fmt not in FORMATS:
        raise ValueError(fmt)
    if fmt == "text":
        if fields:
            raise InputError(f"{where}: plain text (one text per line) has no columns for --text-fields; give a "
                             "CSV, TSV or JSON lines file")
        if role in ("pair", "qa"):
            raise InputError(f"{where}: plain text holds one text per line, and this model reads two "
                             f"({'/'.join(DEFAULT_FIELDS[role][0])}); give a CSV, TSV or JSON lines file")
        yield from _text_rows(handle, role)
    elif fmt == "jsonl":
        yield from _json_rows(handle, fields, role, where)
    else:
        yield from _table_rows(handle, fmt, fields, role, where)


def _text_rows(handle, role):
    for number, line in enumerate(handle, 1):
        text = line.rstrip("\r\n")
        if number == 1:
            text = text.lstrip("\ufeff")
        if text.strip():
            yield _row(number, {"line": text}, ("line",), role)


def _json_rows(handle, fields, role, where):
    chosen = None
    for number, line in enumerate(handle, 1):
        if number == 1:
            line = line.lstrip("\ufeff")
        if not line.strip():
            continue
        if _not_utf8([line]):
            yield Malformed(number, "not UTF-8 text")
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            yield Malformed(number, f"not JSON ({error.msg} at column {error.colno})")
            continue
        if not isinstance(record, dict):
            yield Malformed(number, f"a JSON {type(record).__name__}, not an object")
            continue
        if chosen is None:  # the columns of the first object decide the defaults
            chosen = choose_fields(list(record), fields, role, f"{where} line {number}")
        missing = [field for field in chosen if field not in record]
        if missing:
            yield Malformed(number, f"no field {', '.join(repr(f) for f in missing)}")
            continue
        yield _row(number, record, chosen, role)


class _CountingLines:
    """Feeds csv.reader line by line and counts the lines it took, so a row knows where it started."""

    def __init__(self, handle):
        self.handle, self.count = handle, 0

    def __iter__(self):
        return self

    def __next__(self):
        line = next(self.handle)
        self.count += 1
        return line.lstrip("\ufeff") if self.count == 1 else line


def _table_rows(handle, fmt, fields, role, where):
    lines = _CountingLines(handle)
    if fmt == "tsv":  # GLUE's TSVs: no quoting (their texts hold unbalanced quotes)
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(lines, strict=True)
    header, chosen, indices = None, None, None
    while True:
        start = lines.count + 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            yield Malformed(start, f"not a {fmt.upper()} row ({error})")
            continue
        if not values or (len(values) == 1 and not values[0].strip()):
            continue  # a blank line
        if header is None:
            header = [value.strip() for value in values]
            chosen = choose_fields(header, fields, role, f"{where} (header, line {start})")
            indices = {field: header.index(field) for field in chosen}
            continue
        if len(values) != len(header):
            yield Malformed(start, f"{len(values)} fields where the header has {len(header)}")
            continue
        yield _row(start, {field: values[index] for field, index in indices.items()}, chosen, role)
    if header is None:
        raise InputError(f"{where}: empty; a {fmt.upper()} file starts with a header naming its columns")
