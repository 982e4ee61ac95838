"""studies/electric/synthetic.py: the control language really is decided by context (the study's premise)."""
import random

from studies.electric.synthetic import make_language, sentence, write_corpus


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
