"""Tokenizer: BERT's rules exactly (against Hugging Face), tf_tokenize == encode_batch, clear input errors.

Two Hugging Face references, because each deviates from the original BERT code in one place:
`BertTokenizer` (Rust) lower-cases character by character, so a final capital sigma becomes "σ" where
Python's str.lower() (the original) gives "ς"; `BertTokenizerLegacy` (Python, the original code) adds an
NFC step, which changes ids only when accents are kept. So the Rust one is the reference for text
without a capital sigma and for cased text, the Python one for uncased text.
"""
import unicodedata

import numpy as np
import pytest
import transformers

from common.errors import InputError
from data.tokenization import (MAX_INPUT_CHARS_PER_WORD, SPECIAL_TOKENS, SpecialIds, Tokenizer, file_sha256,
                               load_tokenizer)
from tests.corpus_fixtures import wiki_paragraphs

TRICKY = [
    "Hello, World! It's 3.14 -- isn't it? unaffable hellos",
    "Café au lait, naïve Zoë, Ångström, Ærø, São Paulo, Dvořák, CAFÉ",
    "e\u0301 decomposed vs \u00e9 composed, A\u030a vs \u00c5, \u2126 ohm \u212b angstrom",
    "東京は日本の首都です。北京 and 서울 and ひらがな カタカナ 𠀀𪜀",
    "emoji 😀👍🏽 and flags 🇫🇷, symbols © ® ™ ° ± § ¶ € £ ¥",
    "control\x00chars\x07here\x1b[0m and\ttabs\nnewlines\rreturns\x0bvt\x0cff\x85nel\x7fdel",
    "non\u00a0breaking\u2009thin\u3000ideographic\u202fnarrow space\u2028line\u2029para sep",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u00adsoft\u2060wj\u200ertl mark",
    "mixed: ¿qué? ¡sí! «guillemets» „quotes“ …ellipsis… (a) [x] {y} <z> #h $5 ^c `t` ~t_u @a|b \\c",
    "long " + "a" * MAX_INPUT_CHARS_PER_WORD + " and " + "b" * (MAX_INPUT_CHARS_PER_WORD + 1) + " words",
    "multibyte " + "é" * MAX_INPUT_CHARS_PER_WORD + " and " + "東" * 3 + "ж" * (MAX_INPUT_CHARS_PER_WORD + 1),
    "İstanbul straße ﬁne ﬀ Ⅻ ① ㎏ ½ ǅ ẞ Ω",
    "math: x² + y³ = z⁴, km², H₂O, 1⁄2, ϕ φ",
    "Ελληνικά, русский язык, עברית, العربية, हिन्दी, ไทย, ქართული",
    "fullwidth ＡＢＣ１２３ ｱｲｳ and compatibility ideographs \uf900\uf901\U0002F800",
    "\ufffd replacement and lone marks \u0301\u0308 at start, a\u0301\u0301 twice",
    "",
    "   \t\n ",
]
SIGMA = ["ΟΔΟΣ ΑΘΗΝΑΣ, ΣΟΦΟΣ. Σ ΑΣ-ΒΣ (ΟΣ)", "ὈΔΥΣΣΕΎΣ"]
# lower_case, strip_accents: the original BERT's (True, True) and (False, False), and the two mixed ones
MODES = [(True, True), (False, False), (True, False), (False, True)]


def _variants(text):
    """Every spelling a character can take under the modes above."""
    lowered = text.lower()
    for variant in (text, lowered, unicodedata.normalize("NFD", text), unicodedata.normalize("NFD", lowered),
                    unicodedata.normalize("NFC", text), unicodedata.normalize("NFC", lowered)):
        yield variant


@pytest.fixture(scope="module")
def rich_vocab(tmp_path_factory):
    """Special tokens, a few words and subwords, and every character of the test strings, bare and as a
    continuation: with nothing missing, a normalisation difference shows up as a different id, not as
    [UNK] on both sides."""
    words = ["hello", "world", "##s", "it", "un", "##aff", "##able", "café", "cafe", "Café", "Cafe", "οδος",
             "οδοσ", "##ος", "##οσ", "mask", "##ing", "the", "The", "qu", "##é"]
    chars = sorted({c for text in TRICKY + SIGMA for variant in _variants(text) for c in variant
                    if not c.isspace() and unicodedata.category(c)[0] != "C"})
    tokens = list(SPECIAL_TOKENS) + words
    tokens += [t for c in chars for t in (c, "##" + c) if t not in tokens]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizers(rich_vocab):
    return {mode: load_tokenizer(rich_vocab, lower_case=mode[0], strip_accents=mode[1]) for mode in MODES}


def hf_rust(vocab, mode):
    return transformers.BertTokenizer(str(vocab), do_lower_case=mode[0], strip_accents=mode[1])


def hf_python_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def tokens(tokenizer, text):
    return tokenizer.convert_ids_to_tokens(tokenizer.encode(text))


# ------------------------------------------------------------------------------------------------ unit tier


@pytest.mark.parametrize("mode", MODES)
def test_matches_hugging_face_on_tricky_strings(rich_vocab, tokenizers, mode):
    ours = [ids.tolist() for ids in tokenizers[mode].encode_batch(TRICKY)]
    reference = hf_rust(rich_vocab, mode)(TRICKY, add_special_tokens=False)["input_ids"]
    for text, got, want in zip(TRICKY, ours, reference):
        assert got == want, (text, tokenizers[mode].convert_ids_to_tokens(got),
                             tokenizers[mode].convert_ids_to_tokens(want))


def test_uncased_matches_the_original_python_code_including_final_sigma(rich_vocab, tokenizers):
    legacy = transformers.BertTokenizerLegacy(str(rich_vocab), do_lower_case=True)
    for text in TRICKY + SIGMA:
        assert tokenizers[(True, True)].encode(text).tolist() == hf_python_ids(legacy, text), text


def test_final_sigma_follows_python_lower(tokenizers):
    assert tokens(tokenizers[(True, True)], "ΟΔΟΣ ΟΔΟΣ.") == ["οδος", "οδος", "."]
    assert tokens(tokenizers[(True, True)], "ΟΔΟΣΑ") == ["οδοσ", "##α"]  # not final: σ


def test_casing_and_accents_switch_independently(tokenizers):
    assert tokens(tokenizers[(True, True)], "Café CAFÉ") == ["cafe", "cafe"]
    assert tokens(tokenizers[(True, False)], "Café CAFÉ") == ["café", "café"]
    assert tokens(tokenizers[(False, True)], "Café") == ["Cafe"]
    assert tokens(tokenizers[(False, False)], "Café") == ["Café"]
    assert tokens(tokenizers[(False, False)], "hello Hello") == ["hello", "H", "##e", "##l", "##l", "##o"]


def test_punctuation_cjk_and_wordpieces(tokenizers):
    tokenizer = tokenizers[(True, True)]
    assert tokens(tokenizer, "hello,world!") == ["hello", ",", "world", "!"]
    assert tokens(tokenizer, "$5^`~") == ["$", "5", "^", "`", "~"]  # ASCII symbols count as punctuation
    assert tokens(tokenizer, "a©b") == ["a", "##©", "##b"]  # a Unicode symbol (So) is not punctuation
    assert tokens(tokenizer, "¿qué?") == ["¿", "qu", "##e", "?"]
    assert tokens(tokenizer, "北京ひら") == ["北", "京", "ひ", "##ら"]  # CJK split, kana not
    assert tokens(tokenizer, "unaffable hellos") == ["un", "##aff", "##able", "hello", "##s"]
    # Hugging Face keeps its special tokens whole; the original splits them like any brackets
    assert tokens(tokenizer, "[MASK]") == ["[", "mask", "]"]


def test_control_and_whitespace_characters(tokenizers):
    tokenizer = tokenizers[(True, True)]
    assert tokens(tokenizer, "hel\x00lo wor\u200bld\ufeff \x07") == ["hello", "world"]
    assert tokens(tokenizer, "hello\u00a0world\u2028it\u3000un\tthe\r\nworld") == [
        "hello", "world", "it", "un", "the", "world"]


def test_unknown_and_over_long_words(tokenizers):
    tokenizer = tokenizers[(False, False)]
    assert tokens(tokenizer, "hello \u0378 world") == ["hello", "world"]  # unassigned: a control character
    assert tokens(tokenizer, "hello world\u2603") == ["hello", "[UNK]"]  # ☃ is in no token: the word is [UNK]
    for char in "aéж":  # 1 and 2 bytes: the limit counts characters, not bytes
        assert tokens(tokenizer, char * MAX_INPUT_CHARS_PER_WORD) == [char] + ["##" + char] * 99
        assert tokens(tokenizer, char * (MAX_INPUT_CHARS_PER_WORD + 1)) == ["[UNK]"]
    assert tokens(tokenizer, "東" * 101) == ["東"] * 101  # CJK: every character is a word


def test_encode_batch_shapes_and_types(tokenizers):
    tokenizer = tokenizers[(True, True)]
    out = tokenizer.encode_batch(["hello world", "", "  ", "hello"])
    assert [a.dtype for a in out] == [np.int32] * 4
    assert [len(a) for a in out] == [2, 0, 0, 1]
    assert tokenizer.encode_batch([]) == []
    assert tokenizer.encode_batch(iter(["hello"]))[0].tolist() == tokenizer.encode("hello").tolist()
    with pytest.raises(TypeError):
        tokenizer.encode_batch("hello")
    # a lone surrogate (category Cs) is dropped, as the original drops control characters
    assert tokens(tokenizer, "hel\ud800lo") == ["hello"]


def test_batches_larger_than_one_call(tokenizers, monkeypatch):
    import data.tokenization as tokenization

    monkeypatch.setattr(tokenization, "_CHUNK_LINES", 3)
    texts = [f"hello {'world ' * i}" for i in range(8)]
    assert [len(a) for a in tokenizers[(True, True)].encode_batch(texts)] == [1 + i for i in range(8)]


@pytest.mark.parametrize("mode", MODES)
def test_tf_tokenize_equals_encode_batch(tokenizers, mode):
    import tensorflow as tf

    tokenizer = tokenizers[mode]
    texts = TRICKY + SIGMA
    ragged = tokenizer.tf_tokenize(tf.constant(texts))
    assert ragged.dtype == tf.int32
    assert [row.tolist() for row in ragged.numpy()] == [a.tolist() for a in tokenizer.encode_batch(texts)]


def test_first_use_inside_a_tf_function(rich_vocab):
    import tensorflow as tf

    tokenizer = load_tokenizer(rich_vocab)
    in_graph = tf.function(lambda s: tokenizer.tf_tokenize(s).flat_values)(tf.constant(["hello world"]))
    eager = tokenizer.tf_tokenize(tf.constant(["hello world"])).flat_values
    assert in_graph.numpy().tolist() == eager.numpy().tolist() == tokenizer.encode("hello world").tolist()


def test_attributes(rich_vocab, tokenizers):
    tokenizer = tokenizers[(True, False)]
    assert isinstance(tokenizer, Tokenizer) and tokenizer.kind == "wordpiece"
    assert tokenizer.vocab_file == str(rich_vocab)
    assert tokenizer.vocab_size == len(rich_vocab.read_text(encoding="utf-8").splitlines())
    assert tokenizer.special_ids == SpecialIds(0, 1, 2, 3, 4)
    assert tokenizer.special_ids.as_dict() == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert tokenizer.fingerprint == file_sha256(rich_vocab) and len(tokenizer.fingerprint) == 64
    assert (tokenizer.lower_case, tokenizer.strip_accents) == (True, False)
    assert load_tokenizer(rich_vocab, lower_case=False).strip_accents is False  # follows lower_case


def test_special_ids_come_from_the_vocabulary(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[UNK]\nhello\n[SEP]\n[PAD]\n[MASK]\n[CLS]\n", encoding="utf-8")
    tokenizer = load_tokenizer(vocab)
    assert tokenizer.special_ids == SpecialIds(pad=3, unk=0, cls=5, sep=2, mask=4)
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("hello bye")) == ["hello", "[UNK]"]


# ------------------------------------------------------------------------------------------------ bad input


def _vocab_bytes(tokens):
    return "".join(t + "\n" for t in tokens).encode("utf-8")


@pytest.mark.parametrize("content, words", [
    (None, "not found"),
    (b"", "empty"),
    (b"\n \n", "empty"),
    (_vocab_bytes(SPECIAL_TOKENS) + b"caf\xe9\n", "not UTF-8"),
    (_vocab_bytes([t for t in SPECIAL_TOKENS if t != "[MASK]"] + ["hello"]), "lacks [MASK]"),
    (_vocab_bytes(["hello", "[PAD]", "[UNK]"]), "lacks [CLS], [SEP], [MASK]"),
    (_vocab_bytes(list(SPECIAL_TOKENS) + ["hello", "world", "hello"]), "'hello' appears twice"),
    (_vocab_bytes(list(SPECIAL_TOKENS) + ["hello", "", "world"]), "line 7"),
])
def test_bad_wordpiece_vocabulary(tmp_path, content, words):
    path = tmp_path / "vocab.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as error:
        load_tokenizer(vocab_file=path)
    message = str(error.value)
    assert str(path) in message and words in message and "\n" not in message


def test_a_folder_is_not_a_vocabulary(tmp_path):
    with pytest.raises(InputError, match="a folder"):
        load_tokenizer(vocab_file=tmp_path)


def test_exactly_one_vocabulary(rich_vocab):
    with pytest.raises(InputError, match="exactly one"):
        load_tokenizer()
    with pytest.raises(InputError, match="exactly one"):
        load_tokenizer(vocab_file=rich_vocab, spm_model=rich_vocab)


def test_bad_sentencepiece_model(tmp_path, rich_vocab):
    for path, words in ((tmp_path / "missing.model", "not found"), (rich_vocab, "not a SentencePiece model")):
        with pytest.raises(InputError) as error:
            load_tokenizer(spm_model=path)
        assert str(path) in str(error.value) and words in str(error.value)


def test_sentencepiece_model_without_special_pieces(tmp_path):
    import sentencepiece

    prefix = tmp_path / "plain"
    lines = [f"the {w} jumps over the lazy dog number {i}" for i, w in enumerate(["fox", "cat", "cow"] * 30)]
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix),
                                             vocab_size=40, minloglevel=2)
    with pytest.raises(InputError) as error:
        load_tokenizer(spm_model=f"{prefix}.model")
    assert f"{prefix}.model" in str(error.value) and "[PAD], [UNK], [CLS], [SEP], [MASK]" in str(error.value)


# ------------------------------------------------------------------------------------------------ SavedModel


def test_tf_tokenize_in_a_saved_model(tmp_path, tokenizers):
    import tensorflow as tf

    tokenizer = tokenizers[(True, True)]
    module = tf.Module()
    module.tokenizer = tokenizer.tf_module
    module.serve = tf.function(lambda strings: tokenizer.tf_tokenize(strings).to_tensor(),
                               input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    texts = ["Hello, World! Café ΟΔΟΣ", "北京 " + "a" * 101]
    padded = loaded.serve(tf.constant(texts)).numpy()
    for row, ids in zip(padded, tokenizer.encode_batch(texts)):
        assert row[:len(ids)].tolist() == ids.tolist() and not row[len(ids):].any()


# ------------------------------------------------------------------------------------------------ real data


@pytest.fixture(scope="module")
def wiki_lines(wiki_shards):
    """3,000 paragraphs from each shard, from the start and from the middle: 12,000 lines."""
    assert len(wiki_shards) >= 2
    lines = []
    for index, shard in enumerate(wiki_shards[:4]):
        lines += wiki_paragraphs(shard, 12_000 // min(4, len(wiki_shards)), skip=20_000 * (index % 2))
    assert len(lines) >= 10_000
    return lines


def test_real_wikipedia_uncased_identical_to_hugging_face(bert_vocab_file, wiki_lines):
    ours = [a.tolist() for a in load_tokenizer(bert_vocab_file, lower_case=True).encode_batch(wiki_lines)]
    legacy = transformers.BertTokenizerLegacy(str(bert_vocab_file), do_lower_case=True)
    assert [text for text, got in zip(wiki_lines, ours) if got != hf_python_ids(legacy, text)] == []
    rust = hf_rust(bert_vocab_file, (True, True))(wiki_lines, add_special_tokens=False)["input_ids"]
    assert [text for text, got, want in zip(wiki_lines, ours, rust) if got != want and "Σ" not in text] == []


def test_real_wikipedia_cased_identical_to_hugging_face(bert_vocab_file, wiki_lines):
    ours = load_tokenizer(bert_vocab_file, lower_case=False, strip_accents=False).encode_batch(wiki_lines)
    rust = hf_rust(bert_vocab_file, (False, False))(wiki_lines, add_special_tokens=False)["input_ids"]
    differences = [text for text, got, want in zip(wiki_lines, ours, rust) if got.tolist() != want]
    assert differences == []


def test_real_wikipedia_tf_tokenize_equals_encode_batch(bert_vocab_file, wiki_lines):
    import tensorflow as tf

    tokenizer = load_tokenizer(bert_vocab_file)
    lines = wiki_lines[::6]
    ragged = tokenizer.tf_tokenize(tf.constant(lines))
    assert [row.tolist() for row in ragged.numpy()] == [a.tolist() for a in tokenizer.encode_batch(lines)]
