"""CoNLL-format files → sentences: one token per line (`word POS chunk-tag` in CoNLL-2000), a blank line
between sentences, `-DOCSTART-` lines skipped; the word is the first field and the tag the last, as the
original read them.

Unlike the original, which took the first and last field of whatever it found, every token line must
have as many fields as the file's first one, and every tag must be one the task knows; anything else
(and a file that is not UTF-8 or holds no sentence) stops with the file and line. With skip_bad_rows
(--skip-bad-rows) a sentence with such a token line is skipped whole and counted (finetune.bad_rows).
"""
import dataclasses
import pathlib
from typing import Collection, List, Optional, Tuple

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
        (finetune.arrays) carries only its guid."""
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


def read_conll(path, known_tags: Collection[str], need_tags: bool, fix: str, bad_rows=None) -> List[Sentence]:
    """The file's sentences. `need_tags`: a file of words alone (one field per line) is an error, else
    it is read as untagged; `fix` ends the message for an empty file (which download to use);
    `bad_rows` (finetune.bad_rows.BadRows) may skip a sentence with a malformed line instead of stopping.
    A sentence's guid is its number in the file, skipped sentences counted."""
    bad_rows = policy(bad_rows)
    path = pathlib.Path(path)
    sentences, words, tags, first_line, width = [], [], [], 0, None
    number_in_file, bad = 0, False  # the sentence's number in the file; whether it holds a bad line
    for number, line in enumerate(_decode(path).split("\n") + [""], start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words and not bad:
                sentences.append(Sentence(str(number_in_file), tuple(words), tuple(tags) if width > 1 else None,
                                          first_line))
            number_in_file += bool(words)
            words, tags, bad = [], [], False
            continue
        if width is None:
            width = len(fields)
            if width == 1 and need_tags:
                raise InputError(f"{path}: line {number} has a word but no chunk tag; this split needs "
                                 "`word POS chunk-tag` lines")
        if not words:
            first_line = number
        if bad:  # the rest of a sentence being skipped: not checked
            pass
        elif len(fields) != width:
            bad = True
            bad_rows.reject(path, number, f"{path}: line {number} has {len(fields)} fields, the file's first "
                            f"token line has {width} (word POS chunk-tag); repair the line or pass "
                            "--skip-bad-rows", unit="sentences")
        elif width > 1 and fields[-1] not in known_tags:
            bad = True
            bad_rows.reject(path, number, f"{path}: line {number}: unknown chunk tag {fields[-1]!r} (expected O "
                            "or B-, I-, E-, S- with a CoNLL-2000 chunk type); repair the line, check the file "
                            "or pass --skip-bad-rows", unit="sentences")
        words.append(fields[0])
        tags.append(fields[-1])
    if not sentences:
        if bad_rows.count(path):
            raise InputError(f"{path}: no sentences left after skipping {bad_rows.count(path)} malformed ones; "
                             f"{fix}")
        raise InputError(f"{path}: no sentences (the file is empty); {fix}")
    return sentences
