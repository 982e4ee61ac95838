"""CoNLL-format files → sentences: one token per line (`word POS chunk-tag` in CoNLL-2000), a blank line
between sentences, `-DOCSTART-` lines skipped, fields separated by whitespace; by default the word is the
first field and the tag the last, as the original read them. Other column files (CoNLL-2003's `word POS
chunk NER`) name their word and tag columns (`word_column`, `tag_column`: numbers from 0, negative from
the end), so the one reader serves chunking and a user's own tagging files (finetune.custom).

Unlike the original, which took the first and last field of whatever it found, every token line must
have as many fields as the file's first one, and every tag must pass the task's check (`tag_problem`);
anything else (and a file that is not UTF-8 or holds no sentence) stops with the file and line. With
skip_bad_rows (--skip-bad-rows) a sentence with such a token line is skipped whole and counted
(finetune.bad_rows).
"""
import dataclasses
import pathlib
from typing import Callable, Collection, List, Optional, Tuple

from common.errors import InputError
from finetune.bad_rows import policy


@dataclasses.dataclass(frozen=True)
class Sentence:
    guid: str  # the sentence's number in its file, from 0
    words: Tuple[str, ...]
    tags: Optional[Tuple[str, ...]]  # as written in the file (IOB2 in CoNLL-2000); None: words only
    line: int  # where it starts in the file, for messages

    @property
    def label(self):
        """A sentence has no label of its own (its tags are per word): None, so that a task export
        (studies.device_path.task_arrays) carries only its guid."""
        return None


def _decode(path: pathlib.Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file; check --finetuning-data-dir") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: not UTF-8 (byte {error.start}); convert the file to UTF-8 "
                         "(CoNLL-2000's files are plain ASCII) or re-download it") from None


def unknown_chunk_tag(known_tags: Collection[str]) -> Callable[[str], Optional[str]]:
    """CoNLL-2000's tag check: what is wrong with a tag outside `known_tags` (None when it is known)."""
    def problem(tag):
        if tag in known_tags:
            return None
        return (f"unknown chunk tag {tag!r} (expected O or B-, I-, E-, S- with a CoNLL-2000 chunk type); repair "
                "the line, check the file or pass --skip-bad-rows")
    return problem


def _column_fits(column: int, width: int) -> bool:
    return column < width if column >= 0 else -column <= width


def read_conll(path, known_tags: Optional[Collection[str]], need_tags: bool, fix: str, bad_rows=None,
               word_column: int = 0, tag_column: int = -1,
               tag_problem: Optional[Callable[[str], Optional[str]]] = None,
               layout: str = "word POS chunk-tag") -> List[Sentence]:
    """The file's sentences. A file is tagged when its first token line has the tag column and more than
    one field; otherwise it holds words alone (a test file without gold), which is an error when
    `need_tags`. `fix` ends the message for an empty file (which download to use); `bad_rows`
    (finetune.bad_rows.BadRows) may skip a sentence with a malformed line instead of stopping. A tag is
    checked by `tag_problem` (a message, or None when the tag is fine), by default against `known_tags`
    (None: any tag); `layout` names the expected fields in messages. A sentence's guid is its number in
    the file, skipped sentences counted."""
    bad_rows = policy(bad_rows)
    path = pathlib.Path(path)
    if tag_problem is None:
        tag_problem = unknown_chunk_tag(known_tags) if known_tags is not None else (lambda tag: None)
    sentences, words, tags, first_line, width, tagged = [], [], [], 0, None, False
    number_in_file, bad = 0, False  # the sentence's number in the file; whether it holds a bad line
    for number, line in enumerate(_decode(path).split("\n") + [""], start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words and not bad:
                sentences.append(Sentence(str(number_in_file), tuple(words), tuple(tags) if tagged else None,
                                          first_line))
            number_in_file += bool(words)
            words, tags, bad = [], [], False
            continue
        if width is None:
            width = len(fields)
            tagged = width > 1 and _column_fits(tag_column, width)
            if not tagged and need_tags:
                if width == 1:
                    raise InputError(f"{path}: line {number} has a word but no chunk tag; this split needs "
                                     f"`{layout}` lines")
                raise InputError(f"{path}: line {number} has {width} fields, no tag column {tag_column} (numbers "
                                 "from 0); check the file or the tag column (--label-field)")
            if not _column_fits(word_column, width):
                raise InputError(f"{path}: line {number} has {width} fields, no word column {word_column} "
                                 "(numbers from 0); check the file or the word column (--text-fields)")
        if not words:
            first_line = number
        if bad:  # the rest of a sentence being skipped: not checked
            pass
        elif len(fields) != width:
            bad = True
            bad_rows.reject(path, number, f"{path}: line {number} has {len(fields)} fields, the file's first "
                            f"token line has {width} ({layout}); repair the line or pass "
                            "--skip-bad-rows", unit="sentences")
        elif tagged and tag_problem(fields[tag_column]) is not None:
            bad = True
            bad_rows.reject(path, number, f"{path}: line {number}: {tag_problem(fields[tag_column])}",
                            unit="sentences")
        words.append(fields[word_column] if not bad else "")
        tags.append(fields[tag_column] if tagged and not bad else "")
    if not sentences:
        if bad_rows.count(path):
            raise InputError(f"{path}: no sentences left after skipping {bad_rows.count(path)} malformed ones; "
                             f"{fix}")
        raise InputError(f"{path}: no sentences (the file is empty); {fix}")
    return sentences
