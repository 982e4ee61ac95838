"""Documents from corpus files: plain text or WikiExtractor output, optionally gzipped, streamed.

A document is a list of non-empty, stripped lines (one sentence or paragraph each), which is what the
original builder fed its packer. Nothing here holds more than one document in memory.
"""
import dataclasses
import glob
import gzip
import os
import pathlib
from typing import Iterator, List, Optional, Sequence

from common.errors import InputError

CORPUS_FORMATS = ("plain", "wikiextractor")
CORPUS_SUFFIXES = (".txt", ".gz")


@dataclasses.dataclass
class ReadStats:
    """Counters a reader updates as it goes; the builder reports them for progress and metadata."""

    disk_bytes: int = 0  # bytes consumed from the file on disk (compressed for .gz): drives the ETA
    text_bytes: int = 0  # bytes of decoded text: drives MB/s
    lines: int = 0
    documents: int = 0
    bad_utf8_lines: int = 0

    def add(self, other: "ReadStats") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def resolve_corpus_files(specs: Sequence[str]) -> List[pathlib.Path]:
    """Expands files, folders (searched recursively for .txt/.gz) and globs into a sorted file list."""
    found = set()
    for spec in specs:
        path = pathlib.Path(spec).expanduser()
        if path.is_dir():
            matches = [p for p in path.rglob("*") if p.is_file() and p.name.endswith(CORPUS_SUFFIXES)]
            if not matches:
                raise InputError(f"{path}: folder has no .txt or .gz files; point --corpus-dir at your text files")
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


@dataclasses.dataclass(frozen=True)
class CorpusPart:
    """A file, or a byte range of a large uncompressed file that starts and ends at document boundaries,
    so that several processes can share one big file."""

    path: pathlib.Path
    start: int = 0
    end: Optional[int] = None  # None: to the end of the file

    @property
    def size(self) -> int:
        end = self.end if self.end is not None else os.path.getsize(self.path)
        return end - self.start


def split_large_files(files: Sequence[pathlib.Path], corpus_format: str, blanks_separate_docs: bool,
                      part_bytes: int) -> List[CorpusPart]:
    """Cuts uncompressed files larger than `part_bytes` at document boundaries near every `part_bytes`.

    A cut is placed after a blank line (plain format with blank-line documents) or before a `<doc` line
    (WikiExtractor). Gzipped files and one-document-per-file corpora cannot be cut and stay whole.
    """
    parts: List[CorpusPart] = []
    splittable = corpus_format == "wikiextractor" or blanks_separate_docs
    for path in files:
        size = os.path.getsize(path)
        if not splittable or path.name.endswith(".gz") or size <= part_bytes:
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


def _decoded_lines(part: CorpusPart, stats: ReadStats, strict: bool) -> Iterator[str]:
    """Yields stripped lines; invalid UTF-8 is replaced and counted, or an InputError under strict."""
    path = part.path
    with open(path, "rb") as disk_file:
        if path.name.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=disk_file, mode="rb")
        else:
            stream = disk_file
            disk_file.seek(part.start)
        position, disk_position = part.start, part.start
        end = part.end if part.end is not None else float("inf")
        try:
            for line_number, raw in enumerate(stream, start=1):
                if position >= end:
                    break
                position += len(raw)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    if strict:
                        where = f"{path}:{line_number}" if part.start == 0 else f"{path} (byte {position - len(raw)})"
                        raise InputError(
                            f"{where}: not valid UTF-8 ({error.reason} at byte {error.start} of the line); "
                            "re-encode the file as UTF-8, or drop --strict to replace bad bytes"
                        ) from None
                    line = raw.decode("utf-8", errors="replace")
                    stats.bad_utf8_lines += 1
                stats.lines += 1
                stats.text_bytes += len(raw)
                if line_number % 256 == 0:
                    now = disk_file.tell() if stream is not disk_file else position
                    stats.disk_bytes += now - disk_position
                    disk_position = now
                yield line.strip()
        except (OSError, EOFError) as error:  # corrupt or truncated gzip
            raise InputError(f"{path}: cannot be read ({error}); check or re-download the file") from None
        stats.disk_bytes += part.start + part.size - disk_position


def iter_documents(
    path,
    corpus_format: str = "plain",
    blanks_separate_docs: bool = True,
    stats: ReadStats = None,
    strict: bool = False,
) -> Iterator[List[str]]:
    """Yields each document of one file (a path) or CorpusPart as a list of non-empty lines.

    plain: a blank line ends a document when blanks_separate_docs, otherwise the whole file is one.
    wikiextractor: `<doc ...>` opens an article, its first line (the title) is dropped, `</doc>` closes it.
    """
    if corpus_format not in CORPUS_FORMATS:
        raise InputError(f"unknown corpus format {corpus_format!r}; use one of {', '.join(CORPUS_FORMATS)}")
    stats = stats if stats is not None else ReadStats()
    part = path if isinstance(path, CorpusPart) else CorpusPart(pathlib.Path(path))
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
