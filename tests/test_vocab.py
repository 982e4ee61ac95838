"""Vocabulary learning: format, reachability, determinism, and a low [UNK] rate on held-out Wikipedia."""
import logging
import random
import unicodedata

import numpy as np
import pytest

from data import vocab as vocab_lib
from common.errors import InputError
from data.tokenization import SPECIAL_TOKENS, SpecialIds, is_split_character, load_tokenizer
from tests.corpus_fixtures import wiki_paragraphs

WORDS = ("the of and in to a is was for on as with by he that at from his it an were are which this be "
         "or has had first one their its new after but who not they have her she two been other when there "
         "all during into school time may years more most only over city some world would where later up "
         "such used many can state about national out known university united then made Café naïve Zoë "
         "Ångström São Paulo Dvořák Straße Москва Αθήνα 東京 北京 État Über résumé jalapeño").split()


def synthetic_lines(count, seed=0):
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        words[0] = words[0].capitalize()
        lines.append(" ".join(words) + rng.choice([".", "!", "?", ", (2019).", " – 3.5%."]))
    return lines


@pytest.fixture(scope="module")
def corpus():
    return synthetic_lines(600)


@pytest.fixture(scope="module")
def learned(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("wordpiece") / "vocab.txt"
    return vocab_lib.learn_wordpiece_vocab(corpus, 300, path, seed=7)


def read_tokens(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


# ------------------------------------------------------------------------------------------------ sampling


def test_sample_lines_keeps_everything_when_it_fits():
    lines = [f"line {i}" for i in range(50)]
    assert vocab_lib.sample_lines(iter(lines), 50, seed=1) == lines


def test_sample_lines_is_a_seeded_bounded_reservoir():
    lines = [f"line {i}" for i in range(10_000)]
    first = vocab_lib.sample_lines(iter(lines), 100, seed=1)
    assert len(first) == 100 and len(set(first)) == 100 and set(first) <= set(lines)
    assert vocab_lib.sample_lines(iter(lines), 100, seed=1) == first
    assert vocab_lib.sample_lines(iter(lines), 100, seed=2) != first
    positions = sorted(int(line.split()[1]) for line in first)
    assert positions[50] > 2_000 and positions[-1] > 9_000  # drawn from the whole stream, not its head


# ------------------------------------------------------------------------------------------------ WordPiece


def test_merges_most_frequent_pair_first_ties_by_name():
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    tokens = vocab_lib.learn_wordpiece_tokens(counts, 100)
    chars = [t for t in tokens if len(t.lstrip("#")) == 1]
    merges = tokens[len(chars):]
    # ##e+##s and ##s+##t are both seen 9 times: the smaller name pair goes first
    assert merges[:4] == ["##es", "##est", "##ow", "low"]
    assert set(chars) == {"l", "n", "w", "##o", "##w", "##e", "##r", "##s", "##t", "##i", "##d", "o", "e",
                          "r", "s", "t", "i", "d", "##l", "##n"}


def test_vocab_file_format(learned):
    tokens = read_tokens(learned)
    assert tuple(tokens[:5]) == SPECIAL_TOKENS
    assert len(tokens) == 300 and len(set(tokens)) == 300
    assert all(t and t == t.strip() for t in tokens)
    assert learned.read_bytes().endswith(b"\n") and not learned.with_name("vocab.txt.tmp").exists()


def test_every_character_is_in_the_vocabulary(learned, corpus):
    tokens = set(read_tokens(learned))
    chars = {c for line in corpus for c in unicodedata.normalize("NFD", line.lower())
             if not c.isspace() and unicodedata.category(c) != "Mn"}
    assert "в" in chars and "東" in chars
    for char in chars:
        assert char in tokens, char
        assert ("##" + char in tokens) != is_split_character(char), char


def test_learned_vocab_tokenizes_its_corpus_without_unk(learned, corpus):
    tokenizer = load_tokenizer(learned)
    assert tokenizer.special_ids == SpecialIds(0, 1, 2, 3, 4)
    ids = np.concatenate(tokenizer.encode_batch(corpus))
    assert tokenizer.special_ids.unk not in ids
    assert len(ids) < 0.6 * sum(len(line) for line in corpus)  # subwords, not just characters
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("The school")) == ["the", "school"]


def test_same_input_and_seed_same_bytes(tmp_path, corpus, learned):
    again = vocab_lib.learn_wordpiece_vocab(iter(corpus), 300, tmp_path / "again.txt", seed=7)
    assert again.read_bytes() == learned.read_bytes()
    sampled = [vocab_lib.learn_wordpiece_vocab(corpus, 300, tmp_path / f"s{seed}.txt", seed=seed, max_lines=60)
               for seed in (1, 1, 2)]
    assert sampled[0].read_bytes() == sampled[1].read_bytes() != sampled[2].read_bytes()


def test_cased_vocabulary_keeps_capitals_and_accents(tmp_path, corpus):
    path = vocab_lib.learn_wordpiece_vocab(corpus, 400, tmp_path / "cased.txt", lower_case=False)
    tokens = set(read_tokens(path))
    assert {"T", "C", "##é", "Ü"} <= tokens
    tokenizer = load_tokenizer(path, lower_case=False)
    assert tokenizer.special_ids.unk not in np.concatenate(tokenizer.encode_batch(corpus))


def test_small_corpus_gives_fewer_tokens_and_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="data.vocab"):
        path = vocab_lib.learn_wordpiece_vocab(["a tiny corpus", "a tiny test"], 1000, tmp_path / "v.txt")
    tokens = read_tokens(path)
    assert len(tokens) < 1000 and "tiny" in tokens
    assert "supports only" in caplog.text and str(len(tokens)) in caplog.text


def test_character_budget_keeps_the_frequent_ones(tmp_path, caplog):
    lines = ["abc abc abc"] * 5 + [chr(0x0400 + i) for i in range(200)]  # 200 rare Cyrillic letters
    with caplog.at_level(logging.WARNING, logger="data.vocab"):
        tokens = read_tokens(vocab_lib.learn_wordpiece_vocab(lines, 105, tmp_path / "v.txt"))
    single = [t for t in tokens[5:] if len(t.lstrip("#")) == 1]
    assert len(single) == 50 and {"a", "##b", "##c"} <= set(single)  # half of the 100 learnable
    assert tokens[5 + 50:] == ["##bc", "abc"]
    assert "left out" in caplog.text


@pytest.mark.parametrize("size, lines, words", [(5, ["some text"], "no room"), (100, ["", "  "], "empty")])
def test_wordpiece_bad_input(tmp_path, size, lines, words):
    with pytest.raises(InputError, match=words):
        vocab_lib.learn_wordpiece_vocab(lines, size, tmp_path / "v.txt")
    assert not (tmp_path / "v.txt").exists()


# ------------------------------------------------------------------------------------------------ SentencePiece


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory, corpus):
    prefix = tmp_path_factory.mktemp("spm") / "spm"
    return vocab_lib.learn_sentencepiece_model(corpus, 200, prefix, seed=3)


def test_sentencepiece_files_and_special_pieces(spm_model):
    assert spm_model.name == "spm.model" and spm_model.is_file()
    vocab_lines = spm_model.with_name("spm.vocab").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in vocab_lines[:5]] == list(SPECIAL_TOKENS)
    tokenizer = load_tokenizer(spm_model=spm_model)
    assert tokenizer.kind == "sentencepiece" and 100 < tokenizer.vocab_size == len(vocab_lines) <= 200
    assert tokenizer.special_ids == SpecialIds(0, 1, 2, 3, 4)
    assert tokenizer.convert_ids_to_tokens(range(5)) == list(SPECIAL_TOKENS)
    # control symbols: text spelling "[MASK]" does not produce the [MASK] id
    assert not set(tokenizer.encode("[MASK] [CLS] [SEP] [PAD]").tolist()) & {0, 2, 3, 4}


def test_sentencepiece_lower_cases_and_strips_accents(spm_model):
    tokenizer = load_tokenizer(spm_model=spm_model)
    assert tokenizer.encode("THE CAFÉ SCHOOL").tolist() == tokenizer.encode("the cafe school").tolist()
    cased = load_tokenizer(spm_model=spm_model, lower_case=False)
    assert cased.encode("THE CAFÉ").tolist() != cased.encode("the cafe").tolist()


def test_sentencepiece_tf_tokenize_equals_encode_batch(spm_model, corpus):
    import tensorflow as tf

    texts = corpus[:50] + ["ΟΔΟΣ İstanbul Straße", "", "東京 ﬁne"]
    for lower_case in (True, False):
        tokenizer = load_tokenizer(spm_model=spm_model, lower_case=lower_case)
        ragged = tokenizer.tf_tokenize(tf.constant(texts))
        assert [r.tolist() for r in ragged.numpy()] == [a.tolist() for a in tokenizer.encode_batch(texts)]


def test_sentencepiece_in_a_saved_model(tmp_path, spm_model):
    import tensorflow as tf

    tokenizer = load_tokenizer(spm_model=spm_model)
    module = tf.Module()
    module.tokenizer = tokenizer.tf_module
    module.serve = tf.function(lambda strings: tokenizer.tf_tokenize(strings).to_tensor(),
                               input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    row = tf.saved_model.load(str(tmp_path / "saved")).serve(tf.constant(["The Café"])).numpy()[0]
    assert row.tolist() == tokenizer.encode("The Café").tolist()


def test_sentencepiece_same_seed_same_bytes(tmp_path, corpus, spm_model):
    again = vocab_lib.learn_sentencepiece_model(iter(corpus), 200, tmp_path / "again", seed=3)
    assert again.read_bytes() == spm_model.read_bytes()
    assert again.with_suffix(".vocab").read_bytes() == spm_model.with_suffix(".vocab").read_bytes()


def test_sentencepiece_bpe(tmp_path, corpus):
    model = vocab_lib.learn_sentencepiece_model(corpus, 150, tmp_path / "bpe", model_type="bpe")
    tokenizer = load_tokenizer(spm_model=model)
    assert tokenizer.special_ids == SpecialIds(0, 1, 2, 3, 4) and tokenizer.vocab_size == 150


@pytest.mark.parametrize("kwargs, words", [({"model_type": "wordpiece"}, "model type"),
                                           ({"lines": ["", " "]}, "empty")])
def test_sentencepiece_bad_input(tmp_path, kwargs, words):
    lines = kwargs.pop("lines", ["some text here"] * 10)
    with pytest.raises(InputError, match=words):
        vocab_lib.learn_sentencepiece_model(lines, 100, tmp_path / "m", **kwargs)
    assert not (tmp_path / "m.model").exists()


# ------------------------------------------------------------------------------------------------ real data


@pytest.fixture(scope="module")
def wiki_split(wiki_shards):
    """20,000 training paragraphs from two shards; 3,000 held-out ones from another shard."""
    train = wiki_paragraphs(wiki_shards[0], 10_000) + wiki_paragraphs(wiki_shards[1], 10_000)
    held_out = wiki_paragraphs(wiki_shards[-1], 3_000, skip=5_000)
    return train, held_out


def test_real_wordpiece_vocab_has_few_unknowns_on_held_out_text(tmp_path, wiki_split):
    train, held_out = wiki_split
    path = vocab_lib.learn_wordpiece_vocab(train, 8000, tmp_path / "vocab.txt")
    tokens = read_tokens(path)
    assert len(tokens) == 8000 and tuple(tokens[:5]) == SPECIAL_TOKENS
    tokenizer = load_tokenizer(path)
    ids = np.concatenate(tokenizer.encode_batch(held_out))
    unk_rate = float(np.mean(ids == tokenizer.special_ids.unk))
    assert unk_rate < 0.01, unk_rate
    assert len(ids) < 1.8 * sum(len(line.split()) for line in held_out)  # subwords, not characters


def test_real_sentencepiece_model(tmp_path, wiki_split):
    import tensorflow as tf

    train, held_out = wiki_split
    model = vocab_lib.learn_sentencepiece_model(train[:6000], 4000, tmp_path / "spm", seed=1)
    again = vocab_lib.learn_sentencepiece_model(train[:6000], 4000, tmp_path / "again", seed=1)
    assert model.read_bytes() == again.read_bytes()
    tokenizer = load_tokenizer(spm_model=model)
    assert tokenizer.vocab_size == 4000 and tokenizer.special_ids == SpecialIds(0, 1, 2, 3, 4)
    lines = held_out[:1000]
    encoded = tokenizer.encode_batch(lines)
    ids = np.concatenate(encoded)
    assert np.mean(ids == tokenizer.special_ids.unk) < 0.01 and ids.max() < 4000
    assert not set(ids.tolist()) & {0, 2, 3, 4}  # [PAD] [CLS] [SEP] [MASK] never come from text
    ragged = tokenizer.tf_tokenize(tf.constant(lines))
    assert [r.tolist() for r in ragged.numpy()] == [a.tolist() for a in encoded]
