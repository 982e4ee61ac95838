"""Tokenization in Python alone, for machines without TensorFlow (the JAX GPU image): the ids of
data/tokenization.py's TensorFlow graph, from the same rules.

BERT's character rules are defined here once (`char_masks`, from this Python's `unicodedata`, the
original's source of truth); the graph turns them into regex classes, this module into str.translate
tables filled in per character on first sight (a whole-Unicode table would hold a million entries: every
unassigned code point is a control character to BERT).

WordPiece: the graph's steps in the graph's order (drop, space, lower-case, NFD without Mn, spaces around
split characters, whitespace split), then greedy longest-match-first with `##` continuations, cached per
word. SentencePiece: the `sentencepiece` package normalises; for unigram models a Viterbi pass here picks
the pieces, because segmentations with equal float32 totals ("000" as 0|00 or 00|0) are common and the
package's own encoder breaks those ties unlike tensorflow-text's. tensorflow-text's SentencePiece sums a
candidate in double (a piece's score and the float32 best score before it) and compares it with the float32
best score already stored for that end; the first candidate wins ties; runs of unknown characters give
one unknown id. The package's encoder keeps every sum in float32 and so favours the earlier split.
"""
import array
import dataclasses
import functools
import struct
import unicodedata
from typing import Dict, List, Sequence

import numpy as np

from common import protobuf_wire
from common.errors import InputError

# BERT's max_input_chars_per_word: a longer word becomes [UNK] (counted in characters, not bytes).
MAX_INPUT_CHARS_PER_WORD = 100
SUFFIX_INDICATOR = "##"
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
ASCII_PUNCTUATION_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))
# Distinct words remembered per WordPiece tokenizer; the cache is emptied when full.
_WORD_CACHE_SIZE = 1 << 20


# ------------------------------------------------------------------------------------------------ text rules


def is_split_character(char: str) -> bool:
    """BERT punctuation or a CJK ideograph: always a word of its own."""
    cp = ord(char)
    return (unicodedata.category(char)[0] == "P"
            or any(first <= cp <= last for first, last in ASCII_PUNCTUATION_RANGES + CJK_RANGES))


@dataclasses.dataclass(frozen=True)
class CharMasks:
    """Per code point (0 to 0x10FFFF), what BERT's BasicTokenizer does with the character."""

    drop: np.ndarray  # NUL, U+FFFD and every category C* character except \t \n \r (surrogates included)
    space: np.ndarray  # what the original turns into a space: \t \n \r, Zs, other str.isspace() (not " ")
    split: np.ndarray  # BERT punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and P*) and CJK ideographs
    nonspacing_marks: np.ndarray  # category Mn, removed after NFD when stripping accents


@functools.lru_cache(maxsize=None)
def char_masks() -> CharMasks:
    """Built once per process (about half a second) from this Python's Unicode tables."""
    chars = [chr(cp) for cp in range(0x110000)]
    categories = [unicodedata.category(c) for c in chars]
    major = np.array([c[0] for c in categories])
    minor = np.array(categories)
    code_points = np.arange(0x110000)
    drop = ((major == "C") & ~np.isin(code_points, [9, 10, 13])) | np.isin(code_points, [0, 0xFFFD])
    space = ~drop & ((minor == "Zs") | np.array([c.isspace() for c in chars]))
    space[ord(" ")] = False  # already a space: matching every one would double the cost of the graph's step
    split = major == "P"
    for first, last in ASCII_PUNCTUATION_RANGES + CJK_RANGES:
        split[first:last + 1] = True
    return CharMasks(drop=drop, space=space, split=split, nonspacing_marks=minor == "Mn")


class _TableFilledOnUse(dict):
    """A str.translate table whose entries come from `rule(code point)` the first time a character is seen
    (a plain dict of the exceptions costs a KeyError per other character, which made this step 10x slower)."""

    def __init__(self, rule):
        super().__init__()
        self._rule = rule

    def __missing__(self, cp):
        value = self[cp] = self._rule(cp)
        return value


@functools.lru_cache(maxsize=None)
def _clean_table() -> _TableFilledOnUse:
    masks = char_masks()
    return _TableFilledOnUse(lambda cp: None if masks.drop[cp] else " " if masks.space[cp] else cp)


@functools.lru_cache(maxsize=None)
def _split_table(strip_accents: bool) -> _TableFilledOnUse:
    masks = char_masks()

    def rule(cp):
        if strip_accents and masks.nonspacing_marks[cp]:
            return None
        return f" {chr(cp)} " if masks.split[cp] else cp

    return _TableFilledOnUse(rule)


@functools.lru_cache(maxsize=None)
def _mark_free_table() -> _TableFilledOnUse:
    masks = char_masks()
    return _TableFilledOnUse(lambda cp: None if masks.nonspacing_marks[cp] else cp)


def normalize_case_and_accents(text: str, lower_case: bool, strip_accents: bool) -> str:
    """str.lower() (full lower-casing, final sigma included) and NFD without Mn: the graph's
    `_tf_case_and_accents`, for SentencePiece's input and training text."""
    if lower_case:
        text = text.lower()
    if strip_accents and not text.isascii():  # ASCII has nothing to decompose
        text = unicodedata.normalize("NFD", text).translate(_mark_free_table())
    return text


def bert_words(text: str, lower_case: bool, strip_accents: bool) -> List[str]:
    """BERT's BasicTokenizer on one text, step for step as data/tokenization.py's `tf_bert_words`."""
    text = text.translate(_clean_table())  # drops lone surrogates too (category Cs)
    if lower_case:
        text = text.lower()
    if strip_accents and not text.isascii():
        text = unicodedata.normalize("NFD", text)
    return text.translate(_split_table(strip_accents)).split()  # only spaces are left as whitespace


# ------------------------------------------------------------------------------------------------ WordPiece


class WordPieceEncoder:
    """BasicTokenizer + greedy longest-match-first WordPiece; a word that cannot be spelled from the
    vocabulary, or is longer than MAX_INPUT_CHARS_PER_WORD, is one [UNK]."""

    def __init__(self, tokens: Sequence[str], unk_token: str, lower_case: bool, strip_accents: bool):
        self._first = {token: i for i, token in enumerate(tokens)}
        self._continuation = {token[len(SUFFIX_INDICATOR):]: i for i, token in enumerate(tokens)
                              if token.startswith(SUFFIX_INDICATOR)}
        self._longest = max(len(token) for token in tokens)
        self._unk = (self._first[unk_token],)
        self._lower_case, self._strip_accents = lower_case, strip_accents
        self._cache: Dict[str, tuple] = {}

    def word_ids(self, word: str) -> tuple:
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            return self._unk
        ids, start, table = [], 0, self._first
        while start < len(word):
            for end in range(min(len(word), start + self._longest), start, -1):
                piece = table.get(word[start:end])
                if piece is not None:
                    break
            else:
                return self._unk
            ids.append(piece)
            start, table = end, self._continuation
        return tuple(ids)

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return [self.encode(text) for text in texts]

    def encode(self, text: str) -> List[int]:
        cache, ids = self._cache, []
        for word in bert_words(text, self._lower_case, self._strip_accents):
            word_ids = cache.get(word)
            if word_ids is None:
                if len(cache) >= _WORD_CACHE_SIZE:
                    cache.clear()
                word_ids = cache[word] = self.word_ids(word)
            ids.extend(word_ids)
        return ids


# ------------------------------------------------------------------------------------------------ SentencePiece

# ModelProto field numbers (sentencepiece_model.proto) and SentencePiece.Type values
_PIECES, _TRAINER_SPEC = 1, 2
_PIECE_TEXT, _PIECE_SCORE, _PIECE_TYPE = 1, 2, 3
_MODEL_TYPE, _BYTE_FALLBACK = 3, 35
_NORMAL, _UNKNOWN, _USER_DEFINED, _UNUSED = 1, 2, 4, 5
_UNIGRAM = 1
_FLOAT32 = struct.Struct("<f")
_FLT_MIN, _FLT_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
SPACE_SYMBOL = "\u2581"  # "▁", SentencePiece's escaped space


def _float32(value: float) -> float:
    return _FLOAT32.unpack(_FLOAT32.pack(value))[0]


@dataclasses.dataclass(frozen=True)
class _Piece:
    text: str
    score: float  # a float32 value
    type: int


def _model_pieces(model_bytes: bytes):
    """(pieces, model type, byte fallback) read from a serialized ModelProto without its protobuf classes."""
    pieces, model_type, byte_fallback = [], _UNIGRAM, False
    for number, _, value in protobuf_wire.fields(model_bytes):
        if number == _PIECES:
            text, score, kind = "", 0.0, _NORMAL
            for field, _, item in protobuf_wire.fields(value):
                if field == _PIECE_TEXT:
                    text = item.decode("utf-8")
                elif field == _PIECE_SCORE:
                    score = _FLOAT32.unpack(struct.pack("<I", item))[0]
                elif field == _PIECE_TYPE:
                    kind = item
            pieces.append(_Piece(text, score, kind))
        elif number == _TRAINER_SPEC:
            for field, _, item in protobuf_wire.fields(value):
                if field == _MODEL_TYPE:
                    model_type = item
                elif field == _BYTE_FALLBACK:
                    byte_fallback = bool(item)
    return pieces, model_type, byte_fallback


class UnigramViterbi:
    """tensorflow-text's unigram segmentation of SentencePiece-normalised text (see the module docstring).

    The pieces that match where (the lattice) are found once per word and cached, as SentencePiece's
    pieces never span a word's leading "▁"; the scores are then added along the whole text, in the order
    and precision that decide ties."""

    def __init__(self, pieces: Sequence[_Piece]):
        normal = [p.score for p in pieces if p.type == _NORMAL]
        max_score = max([_FLT_MIN] + normal)  # SentencePiece starts the maximum at FLT_MIN
        self._unk_score = _float32(min([_FLT_MAX] + normal) - 10.0)
        self._unk_id = next(i for i, p in enumerate(pieces) if p.type == _UNKNOWN)
        # the pieces SentencePiece matches: normal and user-defined ones (its trie holds unused ones too, skipped)
        self._trie: dict = {}
        for i, piece in enumerate(pieces):
            if piece.type in (_NORMAL, _USER_DEFINED):
                node = self._trie
                for char in piece.text:
                    node = node.setdefault(char, {})
                # a user-defined piece gets SentencePiece's bonus that always selects it
                node[None] = (i, piece.score if piece.type == _NORMAL
                              else _float32(len(piece.text.encode("utf-8")) * max_score) - 0.1)
        self._by_word = all(SPACE_SYMBOL not in p.text[1:] for p in pieces if p.type in (_NORMAL, _USER_DEFINED))
        self._lattices: Dict[str, tuple] = {}

    def _lattice(self, word: str) -> tuple:
        """Per position of `word`: ((length, id, score), ...) of the pieces starting there, shortest first,
        then (1, unknown id, None) where no piece is one character long."""
        lattice = []
        for start in range(len(word)):
            node, matches = self._trie, []
            for end in range(start, len(word)):
                node = node.get(word[end])
                if node is None:
                    break
                if None in node:
                    matches.append((end + 1 - start, *node[None]))
            if not matches or matches[0][0] != 1:
                matches.append((1, self._unk_id, None))
            lattice.append(tuple(matches))
        return tuple(lattice)

    def _words(self, normalized: str) -> List[str]:
        if not self._by_word:
            return [normalized]
        parts = normalized.split(SPACE_SYMBOL)
        return ([parts[0]] if parts[0] else []) + [SPACE_SYMBOL + part for part in parts[1:]]

    def encode(self, normalized: str) -> List[int]:
        """The piece ids of one normalised text."""
        size = len(normalized)
        best = array.array("f", bytes(4 * (size + 1)))  # the best score of a path ending here, float32 on store
        starts = [-1] * (size + 1)  # where the last piece of that path starts
        ids = [0] * (size + 1)
        unknown = array.array("f", [0.0])  # an unknown character's candidate, summed in float32
        lattices, unk_score, offset = self._lattices, self._unk_score, 0
        for word in self._words(normalized):
            lattice = lattices.get(word)
            if lattice is None:
                if len(lattices) >= _WORD_CACHE_SIZE:
                    lattices.clear()
                lattice = lattices[word] = self._lattice(word)
            for start, matches in enumerate(lattice, offset):
                here = best[start]
                for length, piece, score in matches:
                    end = start + length
                    if score is not None:
                        candidate = score + here  # in double, as SentencePiece's `auto` makes it
                    else:
                        unknown[0] = unk_score + here
                        candidate = unknown[0]
                    if starts[end] == -1 or candidate > best[end]:
                        best[end], starts[end], ids[end] = candidate, start, piece
            offset += len(word)
        path, end = [], size
        while end > 0:
            path.append(ids[end])
            end = starts[end]
        out = []
        for piece in reversed(path):
            if not (piece == self._unk_id and out and out[-1] == self._unk_id):  # one id per run of unknowns
                out.append(piece)
        return out


class SentencePieceEncoder:
    """Our case and accent rules, then SentencePiece's normaliser (the `sentencepiece` package) and, for
    unigram models without byte fallback, `UnigramViterbi`; other models (bpe) encode with the package,
    which gives tensorflow-text's ids."""

    def __init__(self, processor, model_bytes: bytes, lower_case: bool, strip_accents: bool):
        pieces, model_type, byte_fallback = _model_pieces(model_bytes)
        self._processor = processor
        exact = model_type == _UNIGRAM and not byte_fallback and hasattr(processor, "normalize")  # since 0.1.99
        self._viterbi = UnigramViterbi(pieces) if exact else None
        self._lower_case, self._strip_accents = lower_case, strip_accents

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        if self._lower_case:  # tf.strings.lower ends a text at its first NUL: the graph's ids stop there too
            texts = [text.partition("\x00")[0] for text in texts]
        texts = [_without_surrogates(normalize_case_and_accents(t, self._lower_case, self._strip_accents))
                 for t in texts]
        if self._viterbi is None:
            return self._processor.encode(texts)
        return [self._viterbi.encode(self._processor.normalize(t)) for t in texts]


def _without_surrogates(text: str) -> str:
    """A lone surrogate cannot be UTF-8: dropped, as data/tokenization.py drops it for TensorFlow."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "ignore").decode("utf-8")


def load_sentencepiece_processor():
    """The `sentencepiece` package, or one InputError line saying how to get it."""
    try:
        import sentencepiece
    except ImportError:
        raise InputError("a SentencePiece model (--spm-model) needs the sentencepiece package, which is not "
                         "installed here; pip install sentencepiece") from None
    return sentencepiece.SentencePieceProcessor()
