"""The builder on JSON-lines and Parquet corpora: the same documents give the same shards as plain text,
Parquet row groups are shared by processes, and bad records stop the build with nothing left looking
complete."""
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import build_pretraining_dataset as cli
from data import tfrecords
from data.corpus import iter_documents
from tests.helpers import write_corpus, write_vocab

# name → (--corpus-format, file suffix, --text-field or None)
FORMATS = {
    "plain": ("plain", ".txt", None),
    "jsonl": ("jsonl", ".jsonl", None),
    "jsonl.gz": ("jsonl", ".jsonl.gz", None),
    "jsonl.zst": ("jsonl", ".jsonl.zst", None),
    "parquet": ("parquet", ".parquet", "article_body"),
}


def write_documents(folder, files, name, parquet_row_group=16):
    """Writes `files` (each a list of documents, each a list of lines) in format `name` to `folder`:
    one output file per input file, the same stems, so the builder sees the same files in the same order.
    JSON lines and Parquet carry other fields beside the text, as real exports do."""
    corpus_format, suffix, text_field = FORMATS[name]
    folder.mkdir(parents=True, exist_ok=True)
    for index, documents in enumerate(files):
        path = folder / f"part{index:02d}{suffix}"
        texts = ["\n".join(lines) for lines in documents]
        if corpus_format == "plain":
            path.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
        elif corpus_format == "parquet":
            table = pa.table({"id": list(range(len(texts))), "url": [f"u{i}" for i in range(len(texts))],
                              text_field: texts})
            pq.write_table(table, path, row_group_size=parquet_row_group)
        else:
            data = "".join(json.dumps({"id": i, "text": t, "meta": {"n": i}}) + "\n" for i, t in enumerate(texts))
            data = data.encode("utf-8")
            if suffix.endswith(".gz"):
                data = gzip.compress(data, mtime=0)
            elif suffix.endswith(".zst"):
                data = zstandard.ZstdCompressor().compress(data)
            path.write_bytes(data)
    return folder


def format_args(name):
    corpus_format, _, text_field = FORMATS[name]
    return ["--corpus-format", corpus_format] + (["--text-field", text_field] if text_field else [])


def shard_bytes(output):
    return {p.name: p.read_bytes() for p in sorted(output.glob(tfrecords.SHARD_PREFIX + "*"))}


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """Two files of real English documents (Python's language-reference topics) and a vocabulary."""
    corpus = write_corpus(tmp_path_factory.mktemp("corpus"), num_files=2, max_documents=60)
    vocab = write_vocab(corpus, tmp_path_factory.mktemp("vocab") / "vocab.txt")
    files = [list(iter_documents(path, "plain")) for path in sorted(corpus.glob("*.txt"))]
    return files, vocab


def build(tmp_path, corpus, vocab, *extra, name="out"):
    output = tmp_path / name
    metadata = cli.main(["--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--data-dir", str(tmp_path),
                         "--output-dir", str(output), "--max-seq-length", "64", "--num-shards", "2", *extra])
    return output, metadata


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


def workers_in_turn(settings, parts, counters, progress):
    """Stands in for the process pool: each worker's share built in turn in this process. A worker's
    shards depend only on its index and parts, and a pool costs two TensorFlow imports (test_build.py runs
    the real pool)."""
    import data.build

    return [data.build.build_part(settings, index, share, counters) for index, share in enumerate(parts)]


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
