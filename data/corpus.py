"""Documents from corpus files, streamed: plain text, WikiExtractor output, JSON lines or Parquet.

A document is a list of non-empty, stripped lines (one sentence or paragraph each), which is what the
original builder fed its packer. In JSON lines and Parquet a record's text is one document and its
newlines separate its lines exactly as in the plain format, so the same documents give the same examples
whatever the format. Text files may be gzipped (.gz) or zstd-compressed (.zst). Nothing here holds more
than one document (or, for Parquet, one batch of a row group) in memory.
"""
import dataclasses
import glob
import gzip
import io
import json
import os
import pathlib
import zlib
from typing import Iterator, List, Optional, Sequence, Tuple

from common.errors import InputError

CORPUS_FORMATS = ("plain", "wikiextractor", "jsonl", "parquet")
RECORD_FORMATS = ("jsonl", "parquet")  # formats whose documents are records with a --text-field
DEFAULT_TEXT_FIELD = "text"
COMPRESSED_SUFFIXES = (".gz", ".zst")
_JSONL_SUFFIXES = tuple(base + compressed for base in (".jsonl", ".json", ".ndjson")
                        for compressed in ("",) + COMPRESSED_SUFFIXES)
# What a folder is searched for, by format.
FOLDER_SUFFIXES = {
    "plain": (".txt",) + COMPRESSED_SUFFIXES,
    "wikiextractor": (".txt",) + COMPRESSED_SUFFIXES,
    "jsonl": _JSONL_SUFFIXES,
    "parquet": (".parquet",),
}
CORPUS_SUFFIXES = FOLDER_SUFFIXES["plain"]
PARQUET_BATCH_ROWS = 1024  # rows decoded at a time within a row group
_MAX_NAMES_SHOWN = 12
_ZSTD_READ_BYTES = 1 << 17


@dataclasses.dataclass
class ReadStats:
    """Counters a reader updates as it goes; the builder reports them for progress and metadata."""

    disk_bytes: int = 0  # bytes consumed from the file on disk (compressed for .gz): drives the ETA
    text_bytes: int = 0  # bytes of decoded text: drives MB/s
    lines: int = 0  # lines of a text file; records (lines, rows) of JSON lines and Parquet
    documents: int = 0
    bad_utf8_lines: int = 0

    def add(self, other: "ReadStats") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def _either(names: Sequence[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _check_format(corpus_format: str) -> None:
    if corpus_format not in CORPUS_FORMATS:
        raise InputError(f"unknown corpus format {corpus_format!r}; use one of {', '.join(CORPUS_FORMATS)}")


def resolve_corpus_files(specs: Sequence[str], corpus_format: str = "plain") -> List[pathlib.Path]:
    """Expands files, folders (searched recursively for the format's suffixes) and globs into a sorted
    file list."""
    _check_format(corpus_format)
    suffixes = FOLDER_SUFFIXES[corpus_format]
    found = set()
    for spec in specs:
        path = pathlib.Path(spec).expanduser()
        if path.is_dir():
            matches = [p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes)]
            if not matches:
                raise InputError(f"{path}: folder has no {_either(suffixes)} files; point --corpus-dir at "
                                 "your corpus files, or pass the --corpus-format that matches them")
        elif path.is_file():
            matches = [path]
        elif glob.has_magic(spec):
            matches = [pathlib.Path(p) for p in glob.glob(os.path.expanduser(spec), recursive=True)]
            matches = [p for p in matches if p.is_file()]
            if not matches:
                raise InputError(f"{spec}: no files match this pattern; check the path given to --corpus-dir")
        else:
            raise InputError(f"{spec}: no such file or folder; check the path given to --corpus-dir")
        found.update(p.resolve() for p in matches)
    if not found:
        raise InputError("no corpus files given; pass --corpus-dir with files, folders or globs")
    return sorted(found)


def check_corpus_files(files: Sequence[pathlib.Path], corpus_format: str,
                       text_field: str = DEFAULT_TEXT_FIELD) -> None:
    """Catches the common mistakes before any work or any deletion: a Parquet file without the text
    column (its footer is read) or a JSON-lines file whose first record lacks the text field."""
    for path in files:
        if corpus_format == "parquet":
            _open_parquet(pathlib.Path(path), text_field)
        elif corpus_format == "jsonl":
            for _ in _jsonl_documents(CorpusPart(pathlib.Path(path)), ReadStats(), text_field, first_only=True):
                pass


@dataclasses.dataclass(frozen=True)
class CorpusPart:
    """A file, or a range of a large file that starts and ends at document boundaries, so that several
    processes can share one big file: byte offsets for text and JSON lines, row-group indices for Parquet
    (whose `disk_size` is then the bytes on disk those row groups take)."""

    path: pathlib.Path
    start: int = 0
    end: Optional[int] = None  # None: to the end of the file
    disk_size: Optional[int] = None  # set for Parquet parts; else the byte range's length

    @property
    def size(self) -> int:
        if self.disk_size is not None:
            return self.disk_size
        end = self.end if self.end is not None else os.path.getsize(self.path)
        return end - self.start


def split_large_files(files: Sequence[pathlib.Path], corpus_format: str, blanks_separate_docs: bool,
                      part_bytes: int, text_field: str = DEFAULT_TEXT_FIELD) -> List[CorpusPart]:
    """Cuts files holding more than `part_bytes` of text at document boundaries near every `part_bytes`.

    A cut is placed after a blank line (plain format with blank-line documents), before a `<doc` line
    (WikiExtractor), after any line (JSON lines) or between row groups (Parquet, by the text column's
    uncompressed size). Compressed text files and one-document-per-file corpora cannot be cut and stay
    whole.
    """
    parts: List[CorpusPart] = []
    splittable = corpus_format in ("wikiextractor", "jsonl") or blanks_separate_docs
    for path in files:
        if corpus_format == "parquet":
            parts.extend(_parquet_parts(pathlib.Path(path), part_bytes, text_field))
            continue
        size = os.path.getsize(path)
        if not splittable or path.name.endswith(COMPRESSED_SUFFIXES) or size <= part_bytes:
            parts.append(CorpusPart(path))
            continue
        cuts = []
        with open(path, "rb") as f:
            for target in range(part_bytes, size, part_bytes):
                if cuts and target <= cuts[-1]:
                    continue
                cut = _next_document_boundary(f, target, corpus_format)
                if cut is None or cut >= size:
                    break
                cuts.append(cut)
        bounds = [0] + cuts + [None]
        parts.extend(CorpusPart(path, start, end) for start, end in zip(bounds[:-1], bounds[1:]))
    return parts


def _next_document_boundary(f, offset: int, corpus_format: str) -> Optional[int]:
    f.seek(offset)
    f.readline()  # finish the line the offset fell in
    if corpus_format == "jsonl":  # every line is a document
        position = f.tell()
        return position if f.read(1) else None
    while True:
        position = f.tell()
        raw = f.readline()
        if not raw:
            return None
        if corpus_format == "wikiextractor":
            if raw.startswith(b"<doc"):
                return position
        elif not raw.strip():
            return f.tell()


# --- reading text files (plain, WikiExtractor, JSON lines) ---------------------------------------------

class _ZstdReader(io.RawIOBase):
    """A zstd stream (one frame or several, as pzstd writes) that fails on a truncated or damaged file
    instead of ending early, which zstandard's own stream_reader does silently."""

    def __init__(self, disk_file):
        import zstandard

        self._zstd = zstandard
        self._file = disk_file
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = None  # the decompressobj of the frame being read
        self._pending = b""

    def readable(self):
        return True

    def readinto(self, buffer):
        while not self._pending:
            raw = self._file.read(_ZSTD_READ_BYTES)
            if not raw:
                if self._frame is not None and not self._frame.eof:
                    raise EOFError("the zstd stream ends in the middle of a frame (truncated file)")
                return 0
            self._pending = self._decompress(raw)
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    def _decompress(self, raw: bytes) -> bytes:
        out = []
        try:
            while raw:
                if self._frame is None or self._frame.eof:
                    self._frame = self._decompressor.decompressobj()
                out.append(self._frame.decompress(raw))
                raw = self._frame.unused_data if self._frame.eof else b""
        except self._zstd.ZstdError as error:
            raise OSError(f"not a valid zstd stream: {error}") from None
        return b"".join(out)


def _open_stream(path: pathlib.Path, disk_file):
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=disk_file, mode="rb")
    if path.name.endswith(".zst"):
        return io.BufferedReader(_ZstdReader(disk_file), buffer_size=1 << 20)
    return disk_file


def _raw_lines(part: "CorpusPart", stats: ReadStats) -> Iterator[Tuple[int, int, bytes]]:
    """Yields (line number, byte offset in the decompressed stream, raw line) of a file or byte range;
    counts lines and disk bytes; a damaged compressed file is an InputError."""
    path = part.path
    with open(path, "rb") as disk_file:
        stream = _open_stream(path, disk_file)
        if stream is disk_file:
            disk_file.seek(part.start)
        position, disk_position = part.start, part.start
        end = part.end if part.end is not None else float("inf")
        try:
            for line_number, raw in enumerate(stream, start=1):
                if position >= end:
                    break
                position += len(raw)
                stats.lines += 1
                if line_number % 256 == 0:
                    now = disk_file.tell() if stream is not disk_file else position
                    stats.disk_bytes += now - disk_position
                    disk_position = now
                yield line_number, position - len(raw), raw
        except (OSError, EOFError, zlib.error) as error:  # corrupt or truncated .gz / .zst
            raise InputError(f"{path}: cannot be read ({_one_line(error)}); check or re-download the "
                             "file") from None
        stats.disk_bytes += part.start + part.size - disk_position


def _where(part: CorpusPart, line_number: int, offset: int) -> str:
    """file:line, or the byte offset in a part that does not start the file (its line numbers unknown)."""
    return f"{part.path}:{line_number}" if part.start == 0 else f"{part.path} (byte {offset})"


def _decoded_lines(part: CorpusPart, stats: ReadStats, strict: bool) -> Iterator[str]:
    """Yields stripped lines; invalid UTF-8 is replaced and counted, or an InputError under strict."""
    for line_number, offset, raw in _raw_lines(part, stats):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            if strict:
                raise InputError(
                    f"{_where(part, line_number, offset)}: not valid UTF-8 ({error.reason} at byte {error.start} "
                    "of the line); re-encode the file as UTF-8, or drop --strict to replace bad bytes"
                ) from None
            line = raw.decode("utf-8", errors="replace")
            stats.bad_utf8_lines += 1
        stats.text_bytes += len(raw)
        yield line.strip()


def _text_lines(text: str) -> List[str]:
    """A record's text as the plain format reads a document: split at newlines, stripped, blanks dropped."""
    return [line for line in (piece.strip() for piece in text.split("\n")) if line]


def _json_type(value) -> str:
    return {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number",
            str: "a string", type(None): "null"}.get(type(value), type(value).__name__)


def _names(names) -> str:
    names = [str(name) for name in names]
    shown = ", ".join(names[:_MAX_NAMES_SHOWN])
    return shown + (f", … ({len(names)} in all)" if len(names) > _MAX_NAMES_SHOWN else "") if names else "none"


def _jsonl_documents(part: CorpusPart, stats: ReadStats, text_field: str,
                     first_only: bool = False) -> Iterator[List[str]]:
    """One document per JSON line, its text in `text_field`. JSON is UTF-8 by definition (RFC 8259), so
    other bytes stop the build like any malformed line; a null or empty text is an empty document."""
    for line_number, offset, raw in _raw_lines(part, stats):
        if not raw.strip():
            continue
        where = _where(part, line_number, offset)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{where}: not valid UTF-8 ({error.reason} at byte {error.start} of the line); "
                             "JSON lines must be UTF-8: re-encode the file") from None
        try:
            record = json.loads(line.strip())
        except json.JSONDecodeError as error:
            at = "" if error.msg.endswith(" at") else " at"
            raise InputError(f"{where}: not valid JSON ({error.msg}{at} column {error.colno}); each line must be "
                             f"one JSON object such as {{\"{text_field}\": \"...\"}}") from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: holds {_json_type(record)}, not a JSON object; each line must be one "
                             f"object such as {{\"{text_field}\": \"...\"}}")
        if text_field not in record:
            raise InputError(f"{where}: no field {text_field!r} (the line has fields: {_names(record)}); pass "
                             "--text-field with the field that holds the text")
        text = record[text_field]
        if text is not None and not isinstance(text, str):
            raise InputError(f"{where}: field {text_field!r} is {_json_type(text)}, not a string; pass --text-field "
                             "with the field that holds the text")
        stats.text_bytes += len(text.encode("utf-8")) if text else 0
        document = _text_lines(text) if text else []
        if document:
            yield document
        if first_only:
            return


# --- Parquet ---------------------------------------------------------------------------------------------

def _one_line(error) -> str:
    return " ".join(str(error).split())


def _open_parquet(path: pathlib.Path, text_field: str):
    """The ParquetFile (its footer read), checked for a string column named `text_field`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: cannot be read as Parquet ({_one_line(error)}); check the file, or pass the "
                         "--corpus-format that matches it") from None
    schema = parquet.schema_arrow
    if text_field not in schema.names:
        raise InputError(f"{path}: no column {text_field!r} (its columns: {_names(schema.names)}); pass "
                         "--text-field with the column that holds the text")
    kind = schema.field(text_field).type
    value_kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    if not (pa.types.is_string(value_kind) or pa.types.is_large_string(value_kind)
            or pa.types.is_string_view(value_kind)):
        raise InputError(f"{path}: column {text_field!r} holds {kind}, not strings; pass --text-field with the "
                         "column that holds the text")
    return parquet


def _row_group_sizes(parquet, text_field: str) -> Tuple[List[int], List[int]]:
    """Per row group: (bytes on disk, all columns; uncompressed bytes of the text column)."""
    metadata = parquet.metadata
    disk, text = [], []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        columns = [group.column(c) for c in range(group.num_columns)]
        disk.append(sum(c.total_compressed_size for c in columns))
        text.append(sum(c.total_uncompressed_size for c in columns if c.path_in_schema == text_field))
    return disk, text


def _parquet_parts(path: pathlib.Path, part_bytes: int, text_field: str) -> List[CorpusPart]:
    """Consecutive row groups holding about `part_bytes` of text each; their disk sizes add up to the
    file's (the header and footer count to the last part)."""
    parquet = _open_parquet(path, text_field)
    disk, text = _row_group_sizes(parquet, text_field)
    bounds, held = [0], 0
    for index, size in enumerate(text[:-1]):
        held += size
        if held >= part_bytes:
            bounds.append(index + 1)
            held = 0
    if len(bounds) == 1:
        return [CorpusPart(path)]
    bounds.append(len(text))
    parts = [CorpusPart(path, start, end if end < len(text) else None, sum(disk[start:end]))
             for start, end in zip(bounds[:-1], bounds[1:])]
    rest = os.path.getsize(path) - sum(disk)
    parts[-1] = dataclasses.replace(parts[-1], disk_size=parts[-1].disk_size + rest)
    return parts


def _parquet_documents(part: CorpusPart, stats: ReadStats, text_field: str) -> Iterator[List[str]]:
    """One document per row, read a row group at a time (only the text column, in batches)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parquet = _open_parquet(part.path, text_field)
    disk, _ = _row_group_sizes(parquet, text_field)
    end = part.end if part.end is not None else len(disk)
    disk_done = 0
    for group in range(part.start, end):
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, row_groups=[group],
                                              columns=[text_field], use_threads=False):
                column = batch.column(0)
                if pa.types.is_dictionary(column.type):
                    column = column.dictionary_decode()
                stats.lines += len(column)
                stats.text_bytes += pc.sum(pc.binary_length(column)).as_py() or 0
                for text in column.to_pylist():
                    document = _text_lines(text) if text else []
                    if document:
                        yield document
        except (pa.ArrowException, OSError) as error:
            raise InputError(f"{part.path}: row group {group} (counting from 0) cannot be read "
                             f"({_one_line(error)}); check or re-export the file") from None
        stats.disk_bytes += disk[group]
        disk_done += disk[group]
    stats.disk_bytes += part.size - disk_done  # the header and footer


# --- documents ---------------------------------------------------------------------------------------------

def iter_documents(
    path,
    corpus_format: str = "plain",
    blanks_separate_docs: bool = True,
    stats: ReadStats = None,
    strict: bool = False,
    text_field: str = DEFAULT_TEXT_FIELD,
) -> Iterator[List[str]]:
    """Yields each document of one file (a path) or CorpusPart as a list of non-empty lines.

    plain: a blank line ends a document when blanks_separate_docs, otherwise the whole file is one.
    wikiextractor: `<doc ...>` opens an article, its first line (the title) is dropped, `</doc>` closes it.
    jsonl: each line is a JSON object, its `text_field` one document. parquet: each row's `text_field`
    column is one document. Records with an empty or null text give no document.
    """
    _check_format(corpus_format)
    stats = stats if stats is not None else ReadStats()
    part = path if isinstance(path, CorpusPart) else CorpusPart(pathlib.Path(path))
    if corpus_format == "jsonl":
        documents = _jsonl_documents(part, stats, text_field)
    elif corpus_format == "parquet":
        documents = _parquet_documents(part, stats, text_field)
    else:
        lines = _decoded_lines(part, stats, strict)
        documents = _wikiextractor_documents(lines) if corpus_format == "wikiextractor" else _plain_documents(
            lines, blanks_separate_docs)
    for document in documents:
        stats.documents += 1
        yield document


def _plain_documents(lines: Iterator[str], blanks_separate_docs: bool) -> Iterator[List[str]]:
    document: List[str] = []
    for line in lines:
        if line:
            document.append(line)
        elif blanks_separate_docs and document:
            yield document
            document = []
    if document:
        yield document


def _wikiextractor_documents(lines: Iterator[str]) -> Iterator[List[str]]:
    document: List[str] = []
    in_article = False
    title_pending = False
    for line in lines:
        if line.startswith("<doc ") or line == "<doc>":
            in_article, title_pending, document = True, True, []
        elif line == "</doc>":
            if document:
                yield document
            in_article, document = False, []
        elif in_article and line:
            if title_pending:
                title_pending = False
            else:
                document.append(line)
    if in_article and document:  # a file cut off inside an article still yields what it has
        yield document
