"""bench/electric_synthetic.py: the control language really is decided by context (the bench's premise), and its
cloze pseudo-log-likelihood check sums log q over a text's own tokens."""
import random

import pytest

from bench.electric_synthetic import make_language, sentence, write_corpus


def test_every_word_is_followed_only_by_its_successors():
    words, successors = make_language()
    assert len(words) == len(set(words)) == 300
    assert all(len(set(after)) == 3 and set(after) <= set(words) for after in successors.values())
    rng = random.Random(5)
    for _ in range(100):
        tokens = sentence(rng, (words, successors)).split()
        assert tokens[-1] == "." and 8 <= len(tokens) - 1 <= 15
        assert all(b in successors[a] for a, b in zip(tokens[:-2], tokens[1:-1]))
    assert make_language() == (words, successors)  # the held-out sentences come from the same language


def test_corpus_is_plain_documents_separated_by_blank_lines(tmp_path):
    path = tmp_path / "corpus" / "language.txt"
    write_corpus(path, make_language(), documents=4)
    documents = path.read_text(encoding="utf-8").split("\n\n")
    assert documents[-1] == ""  # the file ends with a document's blank line
    assert [10 <= len(doc.splitlines()) <= 20 for doc in documents[:-1]] == [True] * 4


def test_cloze_pseudo_log_likelihood_sums_log_q_of_each_token():
    """The control's check of the comparison: Σ_t log softmax(cloze logits)[t, x_t] over a text's own tokens,
    checked by hand on a tiny Electric model (a text and the same text with two tokens exchanged)."""
    import types

    import numpy as np

    from bench.electric_synthetic import cloze_pseudo_log_likelihoods
    from tests.test_model_fixtures import CLS, MASK, SEP, tiny_pretrainer
    from training.score import batch_inputs

    pretrainer = tiny_pretrainer(electric_objective=True)
    config = types.SimpleNamespace(cls_token_id=CLS, sep_token_id=SEP, mask_token_id=MASK)
    texts = {"a": [5, 6, 7, 8], "b": [7, 6, 5, 8]}
    tokenizer = types.SimpleNamespace(encode_batch=lambda batch: [texts[text] for text in batch])
    scorer = types.SimpleNamespace(tokenizer=tokenizer, pretrainer=pretrainer, config=config)
    got = cloze_pseudo_log_likelihoods(scorer, ["a", "b"])
    for text, total in zip("ab", got):
        logits = np.asarray(pretrainer.cloze_logits(batch_inputs(config, [texts[text]]), training=False), np.float64)[0]
        log_q = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        by_hand = sum(log_q[t + 1, token] for t, token in enumerate(texts[text]))
        assert total == pytest.approx(by_hand, rel=1e-6)  # one batch of two against one of one: float32 rounding
    assert got[0] != got[1]  # the order matters to the two towers
