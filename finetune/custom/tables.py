"""Rows of a user's table: CSV, TSV or JSON lines (`.gz` too) → (line number, {field: value}).

CSV is read with Python's csv module, strictly (quotes around fields holding commas or line breaks,
doubled quotes inside them: what pandas, `datasets` and spreadsheets write); a row may span lines and is
numbered by the line it starts on. TSV is read as GLUE's files are and the original read them: lines
split on tabs, no quoting, so a quote character is text. Both need a header row naming the fields. JSON lines:
one object per line, its keys the fields; blank lines are skipped.

A row that cannot be parsed (another number of cells than the header's, malformed quoting, a line that
is not a JSON object) goes to `bad_rows` (finetune.bad_rows): it stops the run, or is skipped and counted
with --skip-bad-rows. File-level faults stop either way: a missing, empty or non-UTF-8 file, a table
without a header.
"""
import csv
import gzip
import io
import json
import pathlib
from typing import Iterator, List, Tuple

from common.errors import InputError
from finetune.bad_rows import policy

csv.field_size_limit(2 ** 31 - 1)  # a long document in one cell is text, not a fault


def read_text(path) -> str:
    """The file's text (gunzipped for `.gz`), a byte-order mark dropped; InputError for a missing or
    non-UTF-8 file, naming the line of the first bad byte."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, EOFError) as error:
        raise InputError(f"{path}: not a readable gzip file ({error}); compress it again or pass it "
                         "uncompressed") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: not UTF-8 (byte {error.start}); save the file as UTF-8") from None


Row = Tuple[int, dict]


def _tsv_reader(text):
    """GLUE's way (finetune.glue.read_tsv_rows): lines split on newlines, cells on tabs, no quoting; an
    object with csv.reader's `line_num`, so that the two share _table_rows."""
    class Reader:
        line_num = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.line_num >= len(lines):
                raise StopIteration
            self.line_num += 1
            return lines[self.line_num - 1].rstrip("\r").split("\t")

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return Reader()


def _table_rows(path, text, delimiter, quoting, bad_rows) -> Tuple[List[str], Iterator[Row]]:
    if quoting == csv.QUOTE_NONE:
        reader, kind = _tsv_reader(text), "TSV"
    else:
        reader, kind = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True), "CSV"
    try:
        header = next(reader, None)
    except csv.Error as error:
        raise InputError(f"{path}: line 1: the header is not a {kind} row ({error}); repair it") from None
    if not header or not any(cell.strip() for cell in header):
        raise InputError(f"{path}: the file is empty or its first line is blank; the first line names the "
                         f"fields ({'sentence,label' if kind == 'CSV' else 'sentence<TAB>label'})")
    header = [cell.strip() for cell in header]
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InputError(f"{path}: line 1: the header names {', '.join(repeated)} twice; name each field once")

    def rows():
        line = reader.line_num + 1
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                bad_rows.reject(path, line, f"{path}: line {line}: not a {kind} row ({error}); quote fields that "
                                "hold the delimiter or line breaks, double the quotes inside them, or pass "
                                "--skip-bad-rows")
                line = reader.line_num + 1
                continue
            if cells and any(cell.strip() for cell in cells):  # blank lines are not rows
                if len(cells) != len(header):
                    bad_rows.reject(path, line, f"{path}: line {line} has {len(cells)} {kind} fields, the header "
                                    f"has {len(header)} ({', '.join(header)}); repair the line or pass "
                                    "--skip-bad-rows")
                else:
                    yield line, dict(zip(header, cells))
            line = reader.line_num + 1

    return header, rows()


def _jsonl_rows(path, text, bad_rows) -> Tuple[List[str], Iterator[Row]]:
    """The fields are the first object's keys (for the messages about a missing field)."""
    lines = text.split("\n")

    def parse(number, line):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            return None, f"{path}: line {number}: not JSON ({error.msg} at column {error.colno})"
        if not isinstance(value, dict):
            return None, (f"{path}: line {number}: a JSON {type(value).__name__}, not an object; JSON lines hold "
                          "one object per line (a file holding one JSON array is not JSON lines: convert it)")
        return value, None

    if not text.strip():
        raise InputError(f"{path}: the file is empty; JSON lines hold one object per line")
    first_fields = []
    for number, line in enumerate(lines, start=1):
        value = parse(number, line)[0] if line.strip() else None
        if value is not None:
            first_fields = list(value)
            break

    def rows():
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            value, problem = parse(number, line)
            if problem:
                bad_rows.reject(path, number, f"{problem}; repair the line or pass --skip-bad-rows")
                continue
            yield number, value

    return first_fields, rows()


def read_rows(path, file_format, bad_rows=None) -> Tuple[List[str], Iterator[Row]]:
    """(the file's fields, its rows as (line number, {field: value})); values are strings for CSV and
    TSV, any JSON value for JSON lines. Rows are parsed as they are iterated."""
    bad_rows = policy(bad_rows)
    path = pathlib.Path(path)
    text = read_text(path)
    if file_format == "csv":
        return _table_rows(path, text, ",", csv.QUOTE_MINIMAL, bad_rows)
    if file_format == "tsv":
        return _table_rows(path, text, "\t", csv.QUOTE_NONE, bad_rows)
    if file_format == "jsonl":
        return _jsonl_rows(path, text, bad_rows)
    raise ValueError(f"not a table format: {file_format!r}")
