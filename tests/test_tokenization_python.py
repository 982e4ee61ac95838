"""The tokenizer's Python engine (data/python_tokenization.py) against its TensorFlow graph: the same ids for
WordPiece and SentencePiece on hard strings, on every code point and on the real data, and the engine runs
where TensorFlow is not installed (the GPU image's Python 3.12 stand-in, and an image-like Python 3.11 with
sentencepiece).

The real-data tier reads whole files (GLUE's six tasks' train and dev lines, SQuAD dev questions and
contexts, CoNLL-2000 sentences, MRQA dev questions and contexts: 148k texts, 17.7M characters) for
uncased WordPiece, the official vocabulary's mode; every 4th text cased, and every 16th for SentencePiece,
whose Python unigram search is ~5x slower than tensorflow-text's: the tier stays near 30 s.
"""
import gzip
import json
import os
import subprocess
import textwrap
import unicodedata

import numpy as np
import pytest

from common.errors import InputError
from data.tokenization import MAX_INPUT_CHARS_PER_WORD, SPECIAL_TOKENS, default_engine, load_tokenizer
from tests.conftest import REPO_ROOT

MODES = [(True, True), (False, False), (True, False), (False, True)]  # (lower_case, strip_accents)
LONG = MAX_INPUT_CHARS_PER_WORD
HARD = [
    "Ça coûte 3,50 € — n'est-ce pas? «Très» cher! Über-größe STRAẞE, Øre, Łódź, Ǆ ǅ ǆ",
    "ρΣ ΣΊΣΥΦΟΣ, ΌΡΟΣ. Σ ΣΣ (ΑΣ)",  # final sigma, and sigma alone
    "o\u0308 vs \u00f6, n\u0303 vs \u00f1, \u212b \u2126, a\u0301\u0327\u0308 stacked marks, \u0301 alone",
    "中文句子，日本語の文。한국어 문장！ 𠀋𪚲 kana カタカナ ｶﾀｶﾅ",
    "nul\x00in\x00word, del\x7f, bell\x07, esc\x1b[1m, \ufffd\ufffd replaced, \ufeffbom, soft\u00adhyphen",
    "tabs\tand\nlines\r\nand\x0bvertical\x0cfeed\x1cfs\x85nel\u2028ls\u2029ps\u00a0nbsp\u3000ideo\u200bzwsp",
    "punct: ¡¿‽ ‘’ “” ‹› 「」 『』 【】 〈〉 ・ ‥ … ‐‑‒–—― § ¶ † ‡ • ′ ″ ※ ⁂ @#$%^&*_+=|~`",
    "symbols not split: © ® ™ ° ± × ÷ € £ ¥ ₹ ∞ ≠ ≤ √ ☃ ♥ ✓ 😀🇩🇪👩‍👩‍👧 ﬁﬂ ½ ² ㎞",
    "w" * LONG + " " + "w" * (LONG + 1) + " " + "ü" * LONG + "x " + "ü" * (LONG - 1) + "x " + "語" * (LONG + 5),
    "İIıi ǰ ŉ ẞß ﬀ Ⅷ ⓐ Ꙋ ꙋ ᲐᲑ \U00010400\U00010428 unknown \u0378\ue000\U000f0000 chars",
    "",
    " \t\n\r\x00\ufffd\u200b ",
    "[CLS] [MASK] ##s un##aff ##",
    "ab\ud800cd lone surrogate",
]


def word_vocabulary(texts, modes=MODES):
    """Special tokens, a few words and continuations, and every character the texts can become under the modes
    (bare and after ##): with nothing missing, a rule that differs shows as a different id, not as [UNK]
    on both sides."""
    chars = set()
    for text in texts:
        for lower_case, strip_accents in modes:
            form = text.lower() if lower_case else text
            form = unicodedata.normalize("NFD", form) if strip_accents else form
            chars.update(c for c in form if not c.isspace() and unicodedata.category(c)[0] != "C")
    words = ["ca", "coute", "cher", "tres", "##s", "uber", "gr", "##oß", "##e", "word", "un", "##aff", "vs",
             "w" * 40, "##" + "w" * 30, "ü" * 7, "##ü", "##xü", "stacked", "mark", "kana", "σοφος", "##ος"]
    tokens = list(SPECIAL_TOKENS) + words
    return tokens + sorted({t for c in chars for t in (c, "##" + c)} - set(tokens))


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in word_vocabulary(HARD)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ascii_vocab_file(tmp_path_factory):
    """Printable ASCII only: every other character makes its word [UNK], some words spell in part first."""
    path = tmp_path_factory.mktemp("ascii_vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in word_vocabulary([chr(c) for c in range(33, 127)], [(False, False)])),
                    encoding="utf-8")
    return path


def both_engines(**kwargs):
    return load_tokenizer(engine="tensorflow", **kwargs), load_tokenizer(engine="python", **kwargs)


def differences(graph, python, texts):
    """(text, graph's tokens, Python's tokens) of every text on which the engines disagree."""
    want, got = graph.encode_batch(texts), python.encode_batch(texts)
    assert [a.dtype for a in got] == [np.int32] * len(texts)
    return [(text, graph.convert_ids_to_tokens(a), python.convert_ids_to_tokens(b))
            for text, a, b in zip(texts, want, got) if a.tolist() != b.tolist()]


# ------------------------------------------------------------------------------------------------ WordPiece


@pytest.mark.parametrize("vocab", ["vocab_file", "ascii_vocab_file"], ids=["every-character", "ascii"])
@pytest.mark.parametrize("mode", MODES, ids=["uncased", "cased", "lower-keep-accents", "strip-accents-only"])
def test_wordpiece_engines_agree_on_hard_strings(request, vocab, mode):
    graph, python = both_engines(vocab_file=request.getfixturevalue(vocab), lower_case=mode[0], strip_accents=mode[1])
    assert differences(graph, python, HARD) == []
    ids = np.concatenate(python.encode_batch(HARD))
    assert len(ids) > 200 and ((ids == python.special_ids.unk).mean() > 0.2) == (vocab == "ascii_vocab_file")


def test_every_code_point_splits_as_in_the_graph():
    """Each code point between two letters, lower-cased and accent-stripped: the graph's words, except the
    documented letters that TensorFlow's older ICU does not lower-case."""
    import tensorflow as tf

    from data.python_tokenization import bert_words
    from data.tokenization import tf_bert_words

    def graph_words(texts):
        return [[word.decode() for word in words]
                for words in tf_bert_words(tf.constant(texts), lower_case=True, strip_accents=True).to_list()]

    def python_words(text):
        return bert_words(text, lower_case=True, strip_accents=True)

    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    chunks = [code_points[i:i + 512] for i in range(0, len(code_points), 512)]
    texts = ["".join(f"a{chr(cp)}b " for cp in chunk) for chunk in chunks]
    suspects = [f"a{chr(cp)}b" for chunk, text, words in zip(chunks, texts, graph_words(texts))
                if words != python_words(text) for cp in chunk]
    differing = [text[1] for text, words in zip(suspects, graph_words(suspects)) if words != python_words(text)]
    assert len(differing) == 40  # Unicode 14's new capitals, e.g. U+2C2F, U+A7C0 (data/tokenization.py)
    lowered_by_tensorflow = tf.strings.lower(tf.constant(differing), encoding="utf-8").numpy()
    assert all(b.decode() == c for b, c in zip(lowered_by_tensorflow, differing))  # TensorFlow keeps them
    assert all(c.lower() != c and python_words(c) == [c.lower()] for c in differing)  # Python lowers them


def test_wordpiece_words_pieces_and_unknowns(vocab_file, monkeypatch):
    import data.python_tokenization as python_tokenization

    tokenizer = load_tokenizer(vocab_file, lower_case=False, engine="python")

    def tokens(text):
        return tokenizer.convert_ids_to_tokens(tokenizer.encode(text))

    assert tokens("word\u263a word") == ["[UNK]", "word"]  # a word with an unspellable part is one [UNK]
    assert tokens("w" * 70) == ["w" * 40, "##" + "w" * 30]  # longest first
    assert tokens("w" * LONG) == ["w" * 40] + ["##" + "w" * 30] * 2 and tokens("w" * (LONG + 1)) == ["[UNK]"]
    assert tokens("ü" * LONG) == ["ü" * 7] + ["##ü"] * 93  # the limit counts characters, not bytes
    assert tokens("[MASK] un##aff") == ["[", "M", "##A", "##S", "##K", "]", "un", "#", "#", "a", "##f", "##f"]
    assert tokens("") == [] and tokens("\x00 \u200b") == []
    monkeypatch.setattr(python_tokenization, "_WORD_CACHE_SIZE", 2)  # emptied when full: the same ids
    small_cache = load_tokenizer(vocab_file, lower_case=False, engine="python")
    assert [a.tolist() for a in small_cache.encode_batch(HARD)] == [a.tolist() for a in tokenizer.encode_batch(HARD)]


# ------------------------------------------------------------------------------------------------ SentencePiece

NUMBERS = [f"In {1000 + 37 * i} the {i % 7}th fleet had {i * 1000} ships, {i * 111}.{i % 10}00 tons and "
           f"{'3000' if i % 2 else '100000'} men." for i in range(60)]


@pytest.fixture(scope="module")
def sentencepiece_models(tmp_path_factory):
    """{(model type, lower_case): model file} learned from the hard strings and sentences full of numbers."""
    from data.vocab import learn_sentencepiece_model

    root = tmp_path_factory.mktemp("spm")
    lines = [text for text in HARD + NUMBERS if text.strip() and "\ud800" not in text] * 3
    return {(model_type, lower_case): learn_sentencepiece_model(lines, 300, root / f"{model_type}_{lower_case}",
                                                                model_type=model_type, lower_case=lower_case)
            for model_type in ("unigram", "bpe") for lower_case in (True, False)}


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_sentencepiece_engines_agree_on_hard_strings(sentencepiece_models, model_type, lower_case):
    graph, python = both_engines(spm_model=sentencepiece_models[model_type, lower_case], lower_case=lower_case)
    texts = HARD + NUMBERS + ["a\x00b", "\x00", "   spaced   out   "]  # the graph's lower-casing ends at a NUL
    assert differences(graph, python, texts) == []


def test_unigram_ties_break_as_in_tensorflow_text(tmp_path):
    """"x000" as ▁x 0 00 or ▁x 00 0: both total -37.83 in exact arithmetic. tensorflow-text compares the
    later split's double sum (-37.83) with the float32 already stored for the earlier one (-37.830002) and
    takes it; the sentencepiece package compares two float32 sums, equal, and keeps the earlier."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    kinds = model_pb2.ModelProto.SentencePiece
    proto = model_pb2.ModelProto()
    pieces = [("[PAD]", kinds.CONTROL), ("[UNK]", kinds.UNKNOWN)] + [(p, kinds.CONTROL) for p in SPECIAL_TOKENS[2:]]
    pieces += [("\u2581x", -20.0), ("0", -9.0), ("00", -8.83), ("\u2581", -500.0), ("x", -500.0)]
    for piece, score_or_kind in pieces:
        entry = proto.pieces.add(piece=piece)
        if isinstance(score_or_kind, float):
            entry.score = score_or_kind
        else:
            entry.type = score_or_kind
    proto.trainer_spec.model_type, proto.trainer_spec.unk_id = model_pb2.TrainerSpec.UNIGRAM, 1
    proto.normalizer_spec.add_dummy_prefix = proto.normalizer_spec.remove_extra_whitespaces = True
    proto.normalizer_spec.escape_whitespaces = True
    model = tmp_path / "ties.model"
    model.write_bytes(proto.SerializeToString())
    graph, python = both_engines(spm_model=model, lower_case=False)
    assert graph.convert_ids_to_tokens(graph.encode("x000")) == ["\u2581x", "00", "0"]
    assert differences(graph, python, ["x000", "x000 x000", "x0000000", "x 0 00 000"]) == []


# ------------------------------------------------------------------------------------------------ selection


def test_the_backend_picks_the_engine(vocab_file, monkeypatch):
    import data.tokenization as tokenization

    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    assert default_engine() == "tensorflow" and load_tokenizer(vocab_file).engine == "tensorflow"
    for backend, engine in (("tensorflow", "tensorflow"), ("jax", "python"), ("torch", "python")):
        monkeypatch.setenv("KERAS_BACKEND", backend)
        assert load_tokenizer(vocab_file).engine == engine
    assert load_tokenizer(vocab_file, engine="tensorflow").engine == "tensorflow"  # an override wins
    with pytest.raises(ValueError, match="use one of tensorflow, python"):
        load_tokenizer(vocab_file, engine="rust")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.setattr(tokenization, "_tensorflow_installed", lambda: False)
    assert load_tokenizer(vocab_file).engine == "python"
    with pytest.raises(InputError, match="needs TensorFlow and tensorflow-text") as error:
        load_tokenizer(vocab_file, engine="tensorflow")
    assert "\n" not in str(error.value)


ENCODE_WITHOUT_TENSORFLOW = """
import json, sys
from common.errors import InputError
from data.tokenization import load_tokenizer
out = {}
for lower_case in (True, False):
    tokenizer = load_tokenizer(sys.argv[1], lower_case=lower_case)
    ids = tokenizer.encode_batch(json.loads(sys.argv[2]))
    out[str(lower_case)] = [tokenizer.engine] + [a.tolist() for a in ids]
if len(sys.argv) > 3:
    try:
        spm = load_tokenizer(spm_model=sys.argv[3])
        out["spm"] = [ids.tolist() for ids in spm.encode_batch(json.loads(sys.argv[2]))]
    except InputError as error:
        out["spm"] = str(error)
out["tensorflow imported"] = sorted(name for name in sys.modules if name.startswith("tensorflow"))
print(json.dumps(out))
"""


def run_without_tensorflow(command, env, *args, cwd=None):
    completed = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, timeout=300, env=env,
                               cwd=cwd)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.splitlines()[-1])


def expected_ids(vocab_file, texts):
    return {str(lower_case): ["python"] + [ids.tolist() for ids in load_tokenizer(
        vocab_file, lower_case=lower_case, engine="tensorflow").encode_batch(texts)] for lower_case in (True, False)}


@pytest.mark.parametrize("backend", ["jax", None], ids=["KERAS_BACKEND=jax", "KERAS_BACKEND-unset"])
def test_the_gpu_image_python_tokenizes_without_tensorflow(vocab_file, sentencepiece_models, backend):
    from tests.helpers import image_python

    python, _ = image_python()
    env = {key: value for key, value in os.environ.items() if key not in ("KERAS_BACKEND", "PYTHONPATH")}
    env.update(PYTHONPATH=str(REPO_ROOT), **({"KERAS_BACKEND": backend} if backend else {}))
    texts = [t for t in HARD if "\ud800" not in t]  # a lone surrogate cannot travel as JSON argv
    spm_model = sentencepiece_models["unigram", True]
    got = run_without_tensorflow([python, "-c", ENCODE_WITHOUT_TENSORFLOW], env, vocab_file, json.dumps(texts),
                                 spm_model)
    assert got.pop("tensorflow imported") == []
    assert got.pop("spm") == ("a SentencePiece model (--spm-model) needs the sentencepiece package, which is not "
                              "installed here; pip install sentencepiece")  # the stand-in has none
    assert got == expected_ids(vocab_file, texts)


def test_an_image_like_python_with_sentencepiece_tokenizes_without_tensorflow(tmp_path, vocab_file,
                                                                                sentencepiece_models):
    """This interpreter limited to the GPU image's distributions (tests/helpers.accelerator_python): TensorFlow
    cannot be imported, sentencepiece can."""
    from tests.helpers import accelerator_python

    shim = accelerator_python(tmp_path / "python") / "python3"
    (tmp_path / "encode_check.py").write_text(textwrap.dedent(ENCODE_WITHOUT_TENSORFLOW), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in ("KERAS_BACKEND", "PYTHONPATH")}
    env.update(PYTHONPATH=str(REPO_ROOT), KERAS_BACKEND="jax")
    texts = [t for t in HARD if "\ud800" not in t] + NUMBERS
    spm_model = sentencepiece_models["unigram", True]
    got = run_without_tensorflow([shim, "-m", "encode_check"], env, vocab_file, json.dumps(texts), spm_model,
                                 cwd=tmp_path)  # the shim runs `python3 -m MODULE` from its current folder
    assert got.pop("tensorflow imported") == []
    graph = load_tokenizer(spm_model=spm_model, engine="tensorflow")
    assert got.pop("spm") == [ids.tolist() for ids in graph.encode_batch(texts)]
    assert got == expected_ids(vocab_file, texts)


# ------------------------------------------------------------------------------------------------ real data


@pytest.fixture(scope="module")
def real_texts(shared_data):
    """Every text of the shared data's fine-tuning files: GLUE lines (all fields), SQuAD and MRQA questions and
    contexts, CoNLL-2000 sentences (their words joined by spaces)."""
    texts = []
    for task in ("CoLA", "SST-2", "MRPC", "STS-B", "RTE", "WNLI"):
        for split in ("train", "dev"):
            texts += (shared_data / "glue" / task / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
    for name in ("dev-v1.1.json.gz", "dev-v2.0.reconstructed.json.gz"):
        with gzip.open(shared_data / "squad" / name, "rt", encoding="utf-8") as f:
            paragraphs = [p for article in json.load(f)["data"] for p in article["paragraphs"]]
        texts += [t for p in paragraphs for t in [p["context"]] + [q["question"] for q in p["qas"]]]
    for name in ("train.txt", "test.txt"):
        sentences = (shared_data / "conll2000" / name).read_text(encoding="utf-8").split("\n\n")
        texts += [" ".join(line.split(" ")[0] for line in s.splitlines()) for s in sentences]
    for name in ("SQuAD.jsonl.gz", "NewsQA.jsonl.gz", "DROP.jsonl"):
        path = shared_data / "mrqa" / name
        with (gzip.open(path, "rt", encoding="utf-8") if name.endswith(".gz") else open(path, encoding="utf-8")) as f:
            rows = [json.loads(line) for line in f][1:]  # a header line first
        texts += [t for row in rows for t in [row["context"]] + [q["question"] for q in row["qas"]]]
    assert len(texts) > 140_000 and sum(map(len, texts)) > 17_000_000
    return texts


def test_real_data_wordpiece_engines_agree(bert_vocab_file, real_texts):
    """The official vocabulary uncased on every text; cased (the uncased vocabulary's [UNK]s) on every 4th."""
    graph, python = both_engines(vocab_file=bert_vocab_file)
    assert differences(graph, python, real_texts) == []
    graph, python = both_engines(vocab_file=bert_vocab_file, lower_case=False)
    assert differences(graph, python, real_texts[::4]) == []


def test_real_data_sentencepiece_engines_agree(tmp_path, wiki_shards, real_texts):
    """Every 16th text, through a unigram model learned from Wikipedia (used cased and uncased) and a bpe one."""
    from data.vocab import learn_sentencepiece_model
    from tests.corpus_fixtures import wiki_paragraphs

    lines = wiki_paragraphs(wiki_shards[0], 1000)
    texts = real_texts[::16]
    unigram = learn_sentencepiece_model(lines, 1000, tmp_path / "unigram", lower_case=False)
    bpe = learn_sentencepiece_model(lines, 1000, tmp_path / "bpe", model_type="bpe")
    for model, lower_case in ((unigram, False), (unigram, True), (bpe, True)):
        graph, python = both_engines(spm_model=model, lower_case=lower_case)
        assert differences(graph, python, texts) == [], (model.name, lower_case)
