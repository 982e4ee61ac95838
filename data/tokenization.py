"""One tokenizer interface over BERT's WordPiece and SentencePiece.

WordPiece reproduces the original BERT/ELECTRA `tokenization.py` (BasicTokenizer + WordpieceTokenizer)
id for id, as a handful of TensorFlow ops per batch: control characters are dropped, whitespace becomes a
space, optional lower-casing and accent stripping, CJK characters and punctuation get spaces around them
(regex replacements whose character classes come from Python's `unicodedata`, the original's source of
truth), a whitespace split, and tensorflow-text's `FastWordpieceTokenizer` (greedy longest-match-first,
`##` continuations) on the words. tensorflow-text's end-to-end `FastBertTokenizer` measured no faster
here and is not exact: its normaliser applies compatibility decomposition and case folding ("km²" →
"km2", "…" → "...", "ς" → "σ"). Its `BertTokenizer` case-folds (NFKC) too.

Both kinds tokenize with one graph: `encode_batch` runs it over batches, `tf_tokenize` places it in the
caller's graph (a SavedModel serving raw strings), so the two agree by construction.

Machines without TensorFlow (the JAX GPU image) get the same ids from a second engine in Python alone,
data/python_tokenization.py, which holds the character rules both engines read. `load_tokenizer` picks the
graph under the TensorFlow backend (KERAS_BACKEND unset or "tensorflow", with TensorFlow and
tensorflow-text installed) and Python otherwise; `engine=` overrides. `tf_tokenize` is always the graph.
Importing this module imports no TensorFlow.

Known limit: TensorFlow's ICU lower-cases by an older Unicode table than Python 3.11's, so ~40 letters
added in Unicode 14 (e.g. U+2C2F, U+A7C0) keep their upper case in the graph; the Python engine lower-cases
them, as the original does.
"""
import abc
import dataclasses
import functools
import hashlib
import importlib.util
import os
import pathlib
import sys
from typing import List, Optional, Sequence

import numpy as np

from common.errors import InputError
from data.python_tokenization import (MAX_INPUT_CHARS_PER_WORD, SUFFIX_INDICATOR, SentencePieceEncoder,
                                      WordPieceEncoder, char_masks, is_split_character,
                                      load_sentencepiece_processor, normalize_case_and_accents)

__all__ = ["SPECIAL_TOKENS", "MAX_INPUT_CHARS_PER_WORD", "SUFFIX_INDICATOR", "ENGINES", "SpecialIds", "Tokenizer",
           "WordPieceTokenizer", "SentencePieceTokenizer", "load_tokenizer", "default_engine", "file_sha256",
           "is_split_character", "normalize_case_and_accents", "tf_bert_words"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
ENGINES = ("tensorflow", "python")
# Lines per TF call: large enough to amortise the call, small enough to bound memory.
_CHUNK_LINES = 4096


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Tokenizer(abc.ABC):
    """Text → ids without [CLS]/[SEP]; the packer adds those. TensorFlow starts on first use, not on
    loading, so that worker processes can set its thread counts first. `engine` says who encodes:
    "tensorflow" (the graph) or "python" (data/python_tokenization.py)."""

    kind: str

    def __init__(self, vocab_file, vocab_size: int, special_ids: SpecialIds, lower_case: bool,
                 strip_accents: bool, engine: Optional[str] = None):
        self.vocab_file = str(vocab_file)
        self.vocab_size = vocab_size
        self.special_ids = special_ids
        self.lower_case = lower_case
        self.strip_accents = strip_accents
        self.engine = _checked_engine(engine)
        self.fingerprint = file_sha256(vocab_file)
        self._module = None
        self._encode = None
        self._python_encoder = None

    def encode_batch(self, texts: Sequence[str]) -> List[np.ndarray]:
        """One int32 id array per text."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch takes a sequence of strings; use encode() for one string")
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        if self.engine == "python":
            if self._python_encoder is None:
                self._python_encoder = self._build_python_encoder()
            return [np.array(ids, dtype=np.int32) for ids in self._python_encoder.encode_batch(texts)]
        if self._encode is None:
            import tensorflow as tf

            # autograph off: tensorflow-text's code needs no conversion, which took a third of the first encode
            self._encode = tf.function(self.tf_tokenize, input_signature=[tf.TensorSpec([None], tf.string)],
                                       autograph=False)
        out: List[np.ndarray] = []
        for start in range(0, len(texts), _CHUNK_LINES):
            ragged = self._encode(_to_tf_strings(texts[start:start + _CHUNK_LINES]))
            out.extend(np.split(ragged.flat_values.numpy(), ragged.row_splits.numpy()[1:-1]))
        return out

    def encode(self, text: str) -> np.ndarray:
        return self.encode_batch([text])[0]

    @abc.abstractmethod
    def convert_ids_to_tokens(self, ids) -> List[str]:
        ...

    @abc.abstractmethod
    def tf_tokenize(self, strings):
        """In-graph tokenization of a rank-1 string tensor: an int32 RaggedTensor [batch, (tokens)],
        the same ids as `encode_batch`. For a SavedModel, attach `tf_module` to the exported module so
        that the tokenizer's TensorFlow objects are saved with it."""

    @property
    def tf_module(self):
        """The tf.Module that holds this tokenizer's TensorFlow objects."""
        if self._module is None:
            import tensorflow as tf

            with tf.init_scope():  # eager even when first reached inside a tf.function, so reusable
                module = tf.Module(name=f"{self.kind}_tokenizer")
                module.tokenizer = self._build_tf_tokenizer()
            self._module = module
        return self._module

    @abc.abstractmethod
    def _build_tf_tokenizer(self):
        ...

    @abc.abstractmethod
    def _build_python_encoder(self):
        """An object whose encode_batch(texts) gives one list of ids per text, as the graph does."""

    def __repr__(self):
        return (f"{type(self).__name__}({self.vocab_file!r}, vocab_size={self.vocab_size}, "
                f"lower_case={self.lower_case}, strip_accents={self.strip_accents}, engine={self.engine!r})")


def load_tokenizer(vocab_file=None, spm_model=None, lower_case: bool = True,
                   strip_accents: Optional[bool] = None, engine: Optional[str] = None) -> Tokenizer:
    """`strip_accents=None` follows `lower_case`, as in the original BERT; `engine=None` is
    `default_engine()`."""
    if (vocab_file is None) == (spm_model is None):
        raise InputError("give exactly one vocabulary: a WordPiece vocab.txt (--vocab-file) or a SentencePiece "
                         f"model (--spm-model); got vocab_file={vocab_file!r}, spm_model={spm_model!r}")
    if strip_accents is None:
        strip_accents = lower_case
    if vocab_file is not None:
        return WordPieceTokenizer(vocab_file, lower_case, strip_accents, engine=engine)
    return SentencePieceTokenizer(spm_model, lower_case, strip_accents, engine=engine)


def default_engine() -> str:
    """"tensorflow" under the TensorFlow backend (KERAS_BACKEND unset counts: the scripts default to it) where
    TensorFlow and tensorflow-text are installed, "python" otherwise. Asks without importing TensorFlow."""
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return "python"
    return "tensorflow" if _tensorflow_installed() else "python"


def _tensorflow_installed() -> bool:
    return all(name in sys.modules or importlib.util.find_spec(name) is not None
               for name in ("tensorflow", "tensorflow_text"))


def _checked_engine(engine: Optional[str]) -> str:
    if engine is None:
        return default_engine()
    if engine not in ENGINES:
        raise ValueError(f"tokenizer engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "tensorflow" and not _tensorflow_installed():
        raise InputError("the tensorflow tokenizer engine needs TensorFlow and tensorflow-text, which are not "
                         "installed here; use engine='python' (the same ids without TensorFlow)")
    return engine


# ------------------------------------------------------------------------------------------------ text rules


@dataclasses.dataclass(frozen=True)
class _CharClasses:
    """RE2 character classes for BERT's BasicTokenizer rules (data/python_tokenization.char_masks)."""

    drop: str
    space: str
    split: str
    nonspacing_marks: str


def _ranges(mask: np.ndarray):
    """Runs of True in a per-code-point mask, as inclusive (first, last) pairs."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return list(zip(edges[0::2].tolist(), (edges[1::2] - 1).tolist()))


def _re2_class(ranges) -> str:
    return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges) + "]"


@functools.lru_cache(maxsize=None)
def _char_classes() -> _CharClasses:
    masks = char_masks()
    surrogate = np.zeros(0x110000, bool)
    surrogate[0xD800:0xE000] = True  # never in UTF-8 text, and not allowed in an RE2 class
    return _CharClasses(drop=_re2_class(_ranges(masks.drop & ~surrogate)), space=_re2_class(_ranges(masks.space)),
                        split=_re2_class(_ranges(masks.split)),
                        nonspacing_marks=_re2_class(_ranges(masks.nonspacing_marks)))


def _tf_case_and_accents(strings, lower_case: bool, strip_accents: bool):
    """str.lower() (ICU's full lower-casing, final sigma included) and NFD without Mn, in graph."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    if lower_case:
        strings = tf.strings.lower(strings, encoding="utf-8")
    if strip_accents:
        strings = tf_text.normalize_utf8(strings, "NFD")
        strings = tf.strings.regex_replace(strings, _char_classes().nonspacing_marks, "")
    return strings


def tf_bert_words(strings, lower_case: bool, strip_accents: bool):
    """BERT's BasicTokenizer in graph: a string tensor [batch] → RaggedTensor of words [batch, (words)].

    The original lower-cases word by word after splitting off CJK characters; lower-casing the whole
    line first is the same, because whitespace and CJK ideographs are neither cased nor case-ignorable,
    so the final-sigma context never crosses them."""
    import tensorflow as tf

    classes = _char_classes()
    strings = tf.strings.regex_replace(strings, classes.drop, "")
    strings = tf.strings.regex_replace(strings, classes.space, " ")
    strings = _tf_case_and_accents(strings, lower_case, strip_accents)
    strings = tf.strings.regex_replace(strings, classes.split, r" \0 ")
    return tf.strings.split(strings)  # only spaces are left as whitespace


def _to_tf_strings(texts: Sequence[str]):
    """Python strings → a string tensor; a lone surrogate (which the original drops as category Cs) is
    dropped here too rather than failing the batch."""
    import tensorflow as tf

    try:
        return tf.constant(texts, dtype=tf.string)
    except (UnicodeEncodeError, ValueError):  # TensorFlow reports a surrogate as a ValueError
        return tf.constant([t.encode("utf-8", "ignore") for t in texts], dtype=tf.string)


# ------------------------------------------------------------------------------------------------ input files


def _read_input_file(path, what: str, fix: str) -> bytes:
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"{path}: {what} not found ({'a folder' if path.is_dir() else 'no such file'}); {fix}")
    data = path.read_bytes()
    if not data.strip():
        raise InputError(f"{path}: {what} is empty; {fix}")
    return data


def _read_wordpiece_vocab(path) -> List[str]:
    """vocab.txt: one token per line, line number = id (BERT's format). Rejects what would silently
    change ids: non-UTF-8 bytes, blank lines, duplicates, missing special tokens."""
    fix = "pass a BERT-style vocab.txt (one UTF-8 token per line) or learn one with data/vocab.py"
    data = _read_input_file(path, "WordPiece vocabulary", fix)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: WordPiece vocabulary is not UTF-8 (byte {error.start}); {fix} "
                         "(a SentencePiece .model goes to --spm-model instead)") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    tokens, first_line = [], {}
    for number, line in enumerate(lines, start=1):
        token = line.strip()  # the original strips each line
        if not token:
            raise InputError(f"{path}: line {number} of the WordPiece vocabulary is blank; remove it "
                             "(every line is a token and its line number its id)")
        if token in first_line:
            raise InputError(f"{path}: token {token!r} appears twice in the WordPiece vocabulary (lines "
                             f"{first_line[token]} and {number}); remove one of them")
        first_line[token] = number
        tokens.append(token)
    missing = [t for t in SPECIAL_TOKENS if t not in first_line]
    if missing:
        raise InputError(f"{path}: the WordPiece vocabulary lacks {', '.join(missing)}; add "
                         f"{'it' if len(missing) == 1 else 'them'} (the model needs all of "
                         f"{' '.join(SPECIAL_TOKENS)})")
    return tokens


# ------------------------------------------------------------------------------------------------ WordPiece


class WordPieceTokenizer(Tokenizer):
    kind = "wordpiece"

    def __init__(self, vocab_file, lower_case: bool = True, strip_accents: bool = True,
                 engine: Optional[str] = None):
        self._tokens = _read_wordpiece_vocab(vocab_file)
        ids = {token: i for i, token in enumerate(self._tokens)}
        special = SpecialIds(*(ids[t] for t in SPECIAL_TOKENS))
        super().__init__(vocab_file, len(self._tokens), special, lower_case, strip_accents, engine)

    def _build_python_encoder(self):
        return WordPieceEncoder(self._tokens, "[UNK]", self.lower_case, self.strip_accents)

    def _build_tf_tokenizer(self):
        import tensorflow as tf
        import tensorflow_text as tf_text

        # Longer words are replaced by the unknown token first, so the byte limit only has to admit
        # 100 four-byte characters.
        return tf_text.FastWordpieceTokenizer(
            vocab=self._tokens, suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD,
            token_out_type=tf.int32, unknown_token="[UNK]", no_pretokenization=True)

    def tf_tokenize(self, strings):
        import tensorflow as tf

        words = tf_bert_words(strings, self.lower_case, self.strip_accents)
        flat = words.flat_values
        # No word contains "[" after punctuation splitting, so the literal "[UNK]" is unambiguous.
        flat = tf.where(tf.strings.length(flat, unit="UTF8_CHAR") > MAX_INPUT_CHARS_PER_WORD, "[UNK]", flat)
        return words.with_flat_values(self.tf_module.tokenizer.tokenize(flat)).merge_dims(-2, -1)

    def convert_ids_to_tokens(self, ids) -> List[str]:
        return [self._tokens[int(i)] for i in ids]


# ------------------------------------------------------------------------------------------------ SentencePiece


class SentencePieceTokenizer(Tokenizer):
    """Ids from tensorflow-text's SentencePiece, or the same ids in Python: the `sentencepiece` package's
    own encoder breaks ties between equal-scoring unigram segmentations differently (".222" → "2" "22"
    versus "22" "2"), so the Python engine runs tensorflow-text's Viterbi on the package's normalised
    text (data/python_tokenization.py)."""

    kind = "sentencepiece"

    def __init__(self, model_file, lower_case: bool = True, strip_accents: bool = True,
                 engine: Optional[str] = None):
        fix = "pass a SentencePiece .model file or learn one with data/vocab.py"
        self._model_bytes = _read_input_file(model_file, "SentencePiece model", fix)
        self._sp = load_sentencepiece_processor()
        try:
            self._sp.LoadFromSerializedProto(self._model_bytes)
        except Exception:  # sentencepiece raises RuntimeError or OSError depending on the damage
            raise InputError(f"{model_file}: not a SentencePiece model; {fix} (a vocab.txt goes to "
                             "--vocab-file instead)") from None
        ids = [self._sp.piece_to_id(piece) for piece in SPECIAL_TOKENS]
        missing = [piece for piece, i in zip(SPECIAL_TOKENS, ids) if self._sp.id_to_piece(i) != piece]
        if missing:
            raise InputError(f"{model_file}: the SentencePiece model lacks the pieces {', '.join(missing)}; "
                             "train it with these as pad/unk pieces and control symbols (data/vocab.py "
                             "learn_sentencepiece_model does)")
        super().__init__(model_file, self._sp.get_piece_size(), SpecialIds(*ids), lower_case, strip_accents, engine)

    def _build_python_encoder(self):
        return SentencePieceEncoder(self._sp, self._model_bytes, self.lower_case, self.strip_accents)

    def _build_tf_tokenizer(self):
        import tensorflow as tf
        import tensorflow_text as tf_text

        return tf_text.SentencepieceTokenizer(model=self._model_bytes, out_type=tf.int32)

    def tf_tokenize(self, strings):
        strings = _tf_case_and_accents(strings, self.lower_case, self.strip_accents)
        return self.tf_module.tokenizer.tokenize(strings)

    def convert_ids_to_tokens(self, ids) -> List[str]:
        return [self._sp.id_to_piece(int(i)) for i in ids]
