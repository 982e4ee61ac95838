"""What the corpus and dataset-builder tests share: paragraphs of a WikiExtractor shard, documents written
in each corpus format the builder reads (plain, JSON lines plain/gzip/zstd, Parquet), a build of them, its
shards' bytes, and the builder's workers run in turn in this process instead of in a pool."""
import gzip
import json

# name → (--corpus-format, file suffix, --text-field or None)
FORMATS = {
    "plain": ("plain", ".txt", None),
    "jsonl": ("jsonl", ".jsonl", None),
    "jsonl.gz": ("jsonl", ".jsonl.gz", None),
    "jsonl.zst": ("jsonl", ".jsonl.zst", None),
    "parquet": ("parquet", ".parquet", "article_body"),
}


def wiki_paragraphs(path, count, skip=0):
    """Paragraph lines of a WikiExtractor shard: not <doc>, title, blank or </doc> lines."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        title_next = False
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("<doc "):
                title_next = True
            elif title_next:
                title_next = False
            elif line.strip() and line != "</doc>":
                out.append(line)
                if len(out) == skip + count:
                    break
    return out[skip:]


def write_documents(folder, files, name, parquet_row_group=16):
    """Writes `files` (each a list of documents, each a list of lines) in format `name` to `folder`:
    one output file per input file, the same stems, so the builder sees the same files in the same order.
    JSON lines and Parquet carry other fields beside the text, as real exports do."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

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
    from data import tfrecords

    return {p.name: p.read_bytes() for p in sorted(output.glob(tfrecords.SHARD_PREFIX + "*"))}


def build(tmp_path, corpus, vocab, *extra, name="out"):
    import build_pretraining_dataset as cli

    output = tmp_path / name
    metadata = cli.main(["--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--data-dir", str(tmp_path),
                         "--output-dir", str(output), "--max-seq-length", "64", "--num-shards", "2", *extra])
    return output, metadata


def workers_in_turn(settings, parts, counters, progress):
    """Stands in for the process pool: each worker's share built in turn in this process. A worker's
    shards depend only on its index and parts, and a pool costs two TensorFlow imports (test_build.py runs
    the real pool)."""
    import data.build

    return [data.build.build_part(settings, index, share, counters) for index, share in enumerate(parts)]
