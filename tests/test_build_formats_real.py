"""Real-data tier: the same Wikipedia documents written as plain text, JSON lines (.jsonl, .jsonl.gz,
.jsonl.zst) and Parquet (small row groups, another column name) build byte-identical shards, with 1 and
2 processes.

With 2 processes the two workers' shares run one after the other in this process instead of in a pool
(tests/corpus_fixtures.workers_in_turn): a worker's shards depend only on its index and the parts the real
code gives it, and a pool would cost two TensorFlow imports per build."""
import itertools

import pytest

from data.corpus import iter_documents
from tests.corpus_fixtures import FORMATS, build, format_args, shard_bytes, workers_in_turn, write_documents

TEXT_BYTES = 400_000  # a slice of one shared shard: a second or two of packing per build
MAX_DOCUMENT_BYTES = 12_000  # shorter articles: more documents (and row groups) in the slice


@pytest.fixture(scope="module")
def wiki_files(wiki_shards):
    """The first short articles of a shared shard, about TEXT_BYTES of text, as two files of clearly
    different sizes (2/3 and 1/3), so that the builder's size-balanced assignment is the same in every
    format."""
    documents, size = [], 0
    for document in iter_documents(wiki_shards[0], "wikiextractor"):
        length = sum(len(line) + 1 for line in document)
        if length > MAX_DOCUMENT_BYTES:
            continue
        documents.append(document)
        size += length
        if size >= TEXT_BYTES:
            break
    sizes = list(itertools.accumulate(sum(len(line) + 1 for line in d) for d in documents))
    cut = next(i for i, s in enumerate(sizes) if s >= 2 * size / 3) + 1
    return [documents[:cut], documents[cut:]]


@pytest.mark.parametrize("processes", [1, 2])
def test_wikipedia_in_every_format_builds_the_same_shards(tmp_path, wiki_files, bert_vocab_file, processes,
                                                          monkeypatch):
    import data.build

    monkeypatch.setattr(data.build, "_run_in_pool", workers_in_turn)
    built = {}
    for name in FORMATS:
        corpus = write_documents(tmp_path / f"corpus_{name}", wiki_files, name, parquet_row_group=4)
        small, large = sorted(corpus.iterdir(), key=lambda p: p.stat().st_size)
        assert large.name.startswith("part00"), f"{name}: the first file stays the larger one"
        output, metadata = build(tmp_path, corpus, bert_vocab_file, *format_args(name), "--max-seq-length", "128",
                                 "--num-processes", str(processes), name=f"out_{name}")
        assert metadata["num_processes"] == processes
        built[name] = shard_bytes(output), metadata["counts"]
    shards, counts = built["plain"]
    assert counts["documents"] == sum(map(len, wiki_files)) > 50 and counts["examples"] > 500
    assert counts["bad_utf8_lines"] == 0
    for name in FORMATS:
        assert built[name][0] == shards, f"{name} with {processes} process(es) builds other shards than plain text"
        assert built[name][1]["documents"] == counts["documents"]
        assert built[name][1]["examples"] == counts["examples"]
