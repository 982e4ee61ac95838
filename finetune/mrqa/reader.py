"""MRQA shared-task files (JSON lines, plain or gzipped: a header line, then one context per line with its
questions) → SquadExample objects, so SQuAD 1.1's featurisation and decoding apply unchanged.

A question's training target is its first detected answer, read by one of two rules (`answer_end`,
the fine-tuning config's mrqa_answer_end):
- "text_length" (the original's, the default): the detected `text` and len(text) characters from its
  first char span's start; trained on only if those whole words contain the text (case aside), else
  skipped in training as the original skipped it;
- "char_span": the first char span itself (its end inclusive) and the context's characters there.
They differ where the detected text differs from the span's characters (MRQA found answers by
normalised match: "The Broncos" found as "Broncos"; the shared SQuAD, NewsQA and DROP dev sets: 576 of
41,858 spans, see docs/finetuning.md, MRQA): the original's rule overshoots such spans and mostly skips
them. Scoring uses every question's `answers`, as the official evaluation does.

Unlike the original, which read whatever parsed, a malformed line, a missing header or a span outside
its context stops the run with the file and line. With skip_bad_rows (--skip-bad-rows) a context line
that cannot be read (malformed JSON or record, a span outside the context, a question without answers or
with a repeated id) is skipped with its questions and counted (finetune.bad_rows); a missing header, an
empty or undecodable file still stop.
"""
import gzip
import json
import pathlib
from typing import List, Optional

from common.errors import InputError, short_reason
from configs.finetuning_config import MRQA_ANSWER_ENDS as ANSWER_ENDS
from finetune.bad_rows import policy
from finetune.squad.reader import Paragraph, SquadExample, split_words

FORMAT_HINT = "pass a file in the MRQA shared task's format"


def _lines(path):
    """(line number, text) for each line; InputError where the file cannot be decompressed or decoded."""
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                yield number, line
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: line {number + 1}: unreadable ({short_reason(error)[:80]}); re-download the "
                         "file (a gzipped one must end in .gz)") from None


def _parse(path, number, line):
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: line {number}: malformed JSON ({error.msg}, column {error.colno}); repair the "
                         "line or re-download the file") from None


def _check_header(path, record, split):
    if not isinstance(record, dict) or "header" not in record:
        raise InputError(f"{path}: line 1: no MRQA header (expected {{\"header\": {{\"dataset\": ..., \"split\": "
                         f"...}}}}); add the header line or {FORMAT_HINT}")
    header = record["header"]
    found = header.get("split") if isinstance(header, dict) else None
    if split is not None and found not in (None, split):
        raise InputError(f"{path}: line 1: the header says split {found!r}, but the file was found as the {split} "
                         f"split; move it to a {found}/ folder or name it {found}.jsonl")


def _target(paragraph, detected, answer_end):
    """(answer text, first word, last word, found) of a detected answer under the rule `answer_end`."""
    context, char_to_word = paragraph.context, paragraph.char_to_word
    start, end = detected["char_spans"][0]
    if answer_end == "char_span":
        text = context[start:end + 1]
        start_word, end_word = char_to_word[start], char_to_word[end]
        found = bool(text.strip()) and " ".join(text.split()) in " ".join(paragraph.doc_tokens[start_word:end_word + 1])
        return text, start_word, end_word, found
    text = str(detected["text"])
    last = start + len(text) - 1
    if not text or last >= len(context):  # the original: "End position is out of document!"
        return text, char_to_word[start], char_to_word[-1], False
    start_word, end_word = char_to_word[start], char_to_word[last]
    words = " ".join(paragraph.doc_tokens[start_word:end_word + 1]).lower()
    return text, start_word, end_word, " ".join(text.split()).lower() in words


def _examples(path, number, record, seen_ids, answer_end):
    """The context line's questions as SquadExample objects sharing one Paragraph; their ids join
    `seen_ids` once the whole line has been read."""
    context = record["context"]
    paragraph = Paragraph(context, *split_words(context))
    examples, line_ids = [], set()
    for qa in record["qas"]:
        qid, question, answers = qa["qid"], qa["question"], [str(answer) for answer in qa["answers"]]
        if qid in seen_ids or qid in line_ids:
            raise InputError(f"{path}: line {number}: question id {qid} repeats an earlier one; give every "
                             "question its own qid (predictions are keyed by it)")
        line_ids.add(qid)
        if not answers:
            raise InputError(f"{path}: line {number}: question {qid} has no answers to score against; add them "
                             "or drop the question")
        spans = [(int(start), int(end)) for detected in qa["detected_answers"] for start, end in detected["char_spans"]]
        for start, end in spans:
            if not 0 <= start <= end < len(context):
                raise InputError(f"{path}: line {number}: question {qid}: char span [{start}, {end}] lies outside "
                                 f"its context of {len(context)} characters; repair the span (its end is "
                                 "inclusive) or drop the question")
        text, start_word, end_word, found = "", -1, -1, False
        if spans:
            first = next(detected for detected in qa["detected_answers"] if detected["char_spans"])
            text, start_word, end_word, found = _target(paragraph, first, answer_end)
        examples.append(SquadExample(qid, question, paragraph, answers, text, start_word, end_word,
                                     is_impossible=False, answer_found=found))
    seen_ids.update(line_ids)
    return examples


def read_mrqa(path, split: Optional[str] = None, bad_rows=None, answer_end="text_length") -> List[SquadExample]:
    """Examples in file order. `split`: the header must not name another one (for a file found by its
    official name, which train and dev share). InputError with the file and line for bad input;
    `bad_rows` (finetune.bad_rows.BadRows) may skip a malformed context line instead; `answer_end`: the
    training target's rule (ANSWER_ENDS, see above)."""
    if answer_end not in ANSWER_ENDS:
        raise ValueError(f"answer_end {answer_end!r} is not one of {ANSWER_ENDS}")
    bad_rows = policy(bad_rows)
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; check --finetuning-data-dir")
    examples, seen_ids, number = [], set(), 0
    for number, line in _lines(path):
        if number > 1 and not line.strip():
            continue
        if number == 1:
            _check_header(path, _parse(path, number, line), split)
            continue
        try:
            examples += _examples(path, number, _parse(path, number, line), seen_ids, answer_end)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            reason = f"missing {error}" if isinstance(error, KeyError) else short_reason(error)[:80]
            bad_rows.reject(path, number, f"{path}: line {number}: malformed MRQA context ({reason}); {FORMAT_HINT} "
                            "or pass --skip-bad-rows", unit="lines")
        except InputError as error:
            bad_rows.reject(path, number, str(error), unit="lines")
    if number == 0:
        raise InputError(f"{path}: line 1: the file is empty; {FORMAT_HINT}")
    if not examples:
        skipped = f" ({bad_rows.count(path)} malformed lines skipped)" if bad_rows.count(path) else ""
        raise InputError(f"{path}: line {number}: no question after the header{skipped}; pass a complete MRQA file")
    return examples
