"""SQuAD JSON (1.1 and 2.0, plain or gzipped) → one example per question, split into whitespace words
with a character → word map, exactly as the original (BERT's read_squad_examples)."""
import dataclasses
import gzip
import json
import pathlib
from typing import List, Optional

from common.errors import InputError


def is_whitespace(char):
    return char in " \t\r\n" or ord(char) == 0x202F


@dataclasses.dataclass
class Paragraph:
    context: str
    doc_tokens: List[str]
    char_to_word: List[int]


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question: str
    paragraph: Paragraph
    answers: List[str]  # every gold answer text ([] when unanswerable)
    answer_text: str  # the first answer ("" when unanswerable)
    start_word: int  # its first and last whitespace word (-1 when unanswerable)
    end_word: int
    is_impossible: bool
    answer_found: bool = True  # the answer's words contain its text (the original skips others in training)


def split_words(context):
    doc_tokens, char_to_word, previous_is_space = [], [], True
    for char in context:
        if is_whitespace(char):
            previous_is_space = True
        else:
            if previous_is_space:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            previous_is_space = False
        char_to_word.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word


def load_json(path) -> dict:
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; check --finetuning-data-dir")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            value = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as error:
        raise InputError(f"{path}: not a readable SQuAD JSON file ({str(error)[:80]}); re-download it") from None
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        raise InputError(f"{path}: no top-level \"data\" list; pass an official SQuAD file")
    return value


def read_squad(path, dataset: Optional[dict] = None) -> List[SquadExample]:
    """Examples in file order; InputError for a malformed file or an answer outside its context."""
    dataset = dataset if dataset is not None else load_json(path)
    examples = []
    try:
        for article in dataset["data"]:
            for entry in article["paragraphs"]:
                context = entry["context"]
                paragraph = Paragraph(context, *split_words(context))
                for qa in entry["qas"]:
                    answers = qa.get("answers", [])
                    impossible = bool(qa.get("is_impossible", False)) or not answers
                    start = end = -1
                    text = ""
                    if not impossible:
                        first = answers[0]
                        text, offset = first["text"], int(first["answer_start"])
                        if offset < 0 or offset + len(text) > len(context):
                            raise InputError(f"{path}: question {qa['id']}: answer_start {offset} is outside its "
                                             "context; repair the file")
                        start = paragraph.char_to_word[offset]
                        end = paragraph.char_to_word[offset + len(text) - 1]
                    found = impossible or " ".join(text.split()) in " ".join(paragraph.doc_tokens[start:end + 1])
                    examples.append(SquadExample(qa["id"], qa["question"], paragraph,
                                                 [a["text"] for a in answers], text, start, end, impossible, found))
    except (KeyError, TypeError) as error:
        raise InputError(f"{path}: malformed SQuAD entry (missing {error}); pass an official SQuAD file") from None
    if not examples:
        raise InputError(f"{path}: no questions; pass a complete SQuAD file")
    return examples
