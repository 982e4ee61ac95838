"""Documents from corpus files: plain text or WikiExtractor output, optionally gzipped, streamed.

A document is a list of non-empty, stripped lines (one sentence or paragraph each), which is what the
original builder fed its packer. Nothing here holds more than one document in memory.
"""
import dataclasses
import glob
import gzip
import os
import pathlib
from typing import Iterator, List, Sequence

from data.errors import InputError

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


def _decoded_lines(path: pathlib.Path, stats: ReadStats, strict: bool) -> Iterator[str]:
    """Yields stripped lines; invalid UTF-8 is replaced and counted, or an InputError under strict."""
    with open(path, "rb") as disk_file:
        stream = gzip.GzipFile(fileobj=disk_file, mode="rb") if path.name.endswith(".gz") else disk_file
        position = 0
        try:
            for line_number, raw in enumerate(stream, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    if strict:
                        raise InputError(
                            f"{path}:{line_number}: not valid UTF-8 ({error.reason} at byte {error.start}); "
                            "re-encode the file as UTF-8, or drop --strict to replace bad bytes"
                        ) from None
                    line = raw.decode("utf-8", errors="replace")
                    stats.bad_utf8_lines += 1
                stats.lines += 1
                stats.text_bytes += len(raw)
                if line_number % 256 == 0:
                    now = disk_file.tell()
                    stats.disk_bytes += now - position
                    position = now
                yield line.strip()
        except (OSError, EOFError) as error:  # corrupt or truncated gzip
            raise InputError(f"{path}: cannot be read ({error}); check or re-download the file") from None
        stats.disk_bytes += os.path.getsize(path) - position


def iter_documents(
    path: pathlib.Path,
    corpus_format: str = "plain",
    blanks_separate_docs: bool = True,
    stats: ReadStats = None,
    strict: bool = False,
) -> Iterator[List[str]]:
    """Yields each document of one file as a list of non-empty lines.

    plain: a blank line ends a document when blanks_separate_docs, otherwise the whole file is one.
    wikiextractor: `<doc ...>` opens an article, its first line (the title) is dropped, `</doc>` closes it.
    """
    if corpus_format not in CORPUS_FORMATS:
        raise InputError(f"unknown corpus format {corpus_format!r}; use one of {', '.join(CORPUS_FORMATS)}")
    stats = stats if stats is not None else ReadStats()
    lines = _decoded_lines(path, stats, strict)
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
