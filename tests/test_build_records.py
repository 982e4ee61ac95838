"""The builder on JSON-lines and Parquet corpora: the same documents give the same shards as plain text,
Parquet row groups are shared by processes, and bad records stop the build with nothing left looking
complete."""
import pyarrow.parquet as pq
import pytest

from data import tfrecords
from data.corpus import iter_documents
from tests.corpus_fixtures import FORMATS, build, format_args, shard_bytes, workers_in_turn, write_documents
from tests.helpers import write_corpus, write_vocab


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """Two files of real English documents (Python's language-reference topics) and a vocabulary."""
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), num_files=2, max_documents=60)
    vocab = write_vocab(corpus, tmp_path_factory.mktemp("vocab") / "vocab.txt")
    files = [list(iter_documents(path, "plain")) for path in sorted(corpus.glob("*.txt"))]
    return files, vocab


def test_the_same_documents_build_the_same_shards_in_every_format(tmp_path, documents):
    files, vocab = documents
    built = {}
    for name in ("plain", "jsonl.zst", "parquet"):
        corpus = write_documents(tmp_path / f"corpus_{name}", files, name)
        output, metadata = build(tmp_path, corpus, vocab, *format_args(name), name=f"out_{name}")
        built[name] = shard_bytes(output), metadata
    plain_shards, plain_meta = built["plain"]
    assert plain_meta["counts"]["examples"] > 50
    for name in ("jsonl.zst", "parquet"):
        shards, metadata = built[name]
        assert shards == plain_shards, f"{name} builds other shards than plain text"
        assert metadata["counts"]["documents"] == plain_meta["counts"]["documents"]
        assert metadata["corpus_format"] == FORMATS[name][0]
    assert built["parquet"][1]["text_field"] == "article_body" and "text_field" not in plain_meta


def test_one_parquet_file_is_shared_by_two_processes(tmp_path, documents, monkeypatch):
    import data.build

    monkeypatch.setattr(data.build, "_run_in_pool", workers_in_turn)
    files, vocab = documents
    corpus = write_documents(tmp_path / "corpus", [files[0] + files[1]], "parquet", parquet_row_group=8)
    assert pq.ParquetFile(next(corpus.iterdir())).metadata.num_row_groups >= 4
    monkeypatch.setattr(data.build, "PART_BYTES", 20_000)  # a few row groups per part
    _, double = build(tmp_path, corpus, vocab, *format_args("parquet"), "--num-processes", "2")
    rows = len(files[0] + files[1])
    assert double["counts"]["documents"] == double["counts"]["lines"] == rows, "every row read once"
    assert all(shard["examples"] > 0 for shard in double["shards"]), "both processes had work"


def test_a_bad_record_mid_build_exits_2_and_leaves_nothing_complete(tmp_path, documents, capsys):
    files, vocab = documents
    corpus = write_documents(tmp_path / "corpus", files, "jsonl")
    second = sorted(corpus.iterdir())[1]
    lines = second.read_text().splitlines()
    lines[20] = lines[20][:-5]  # a line cut short
    second.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus, vocab, "--corpus-format", "jsonl")
    assert exit_info.value.code == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors[-1].startswith(f"error: {second}:21: not valid JSON")
    output = tmp_path / "out"
    assert not (output / "metadata.json").exists()
    assert not list(output.glob(tfrecords.SHARD_PREFIX + "*"))


def test_a_missing_text_column_stops_before_the_old_dataset_is_touched(tmp_path, documents, capsys):
    files, vocab = documents
    corpus = write_documents(tmp_path / "corpus", files, "parquet")
    output = tmp_path / "out"
    output.mkdir()
    old = {tfrecords.METADATA_FILE: b"{}", tfrecords.shard_name(0, 1): b"old shard"}
    for name, data in old.items():
        (output / name).write_bytes(data)
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus, vocab, "--corpus-format", "parquet", "--overwrite")  # the default field: text
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0 and "part00.parquet: no column 'text'" in message
    assert "its columns: id, url, article_body" in message and "--text-field" in message
    assert {p.name: p.read_bytes() for p in output.iterdir()} == old


def test_text_field_belongs_to_record_formats(tmp_path, documents, capsys):
    files, vocab = documents
    corpus = write_documents(tmp_path / "corpus", files, "plain")
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus, vocab, "--text-field", "body")
    assert exit_info.value.code == 2
    assert "--corpus-format jsonl or parquet" in capsys.readouterr().err
