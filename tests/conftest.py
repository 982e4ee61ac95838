"""Shared fixtures.

The real-data tier reads ../shared/data through ELECTRA_SHARED_DATA: unset, those tests skip; set (as CI
does), missing data is a failure, never a skip.
"""
import os
import pathlib

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from training.cpu_features import turn_on_onednn  # noqa: E402

turn_on_onednn(quiet=True)  # as the run scripts do: the suite runs ~2x faster on AVX2-only CPUs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    root = os.environ.get("ELECTRA_SHARED_DATA")
    if not root:
        pytest.skip("ELECTRA_SHARED_DATA is not set: real-data tier skipped")
    path = pathlib.Path(root).resolve()
    required = [
        path / "vocab" / "bert-base-uncased-vocab.txt",
        path / "corpus" / "enwiki_wikiextractor" / "enwiki_part00.txt.gz",
    ]
    missing = [str(p) for p in required if not p.exists()]
    if missing:
        pytest.fail(f"ELECTRA_SHARED_DATA={root} but these files are missing: {missing}")
    return path


@pytest.fixture(scope="session")
def bert_vocab_file(shared_data) -> pathlib.Path:
    return shared_data / "vocab" / "bert-base-uncased-vocab.txt"


@pytest.fixture(scope="session")
def wiki_shards(shared_data) -> list:
    return sorted((shared_data / "corpus" / "enwiki_wikiextractor").glob("enwiki_part*.txt.gz"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A 60-token vocabulary whose special ids are the tiny config's ([CLS] 1, [SEP] 2, [MASK] 3): the
    checkpoint tests' micro model folders (tests/checkpoint_fixtures.model_folder). A test module that
    defines its own `tokenizer` fixture gets its own."""
    from data.tokenization import load_tokenizer
    from tests.model_fixtures import VOCAB_SIZE

    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    tokens = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + [f"word{i}" for i in range(VOCAB_SIZE - 5)]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return load_tokenizer(vocab_file=path)
