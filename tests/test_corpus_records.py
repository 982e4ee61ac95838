"""JSON-lines and Parquet corpora (and .zst text): the documents they give, how they split across
processes, and one clear error for each kind of bad input."""
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from common.errors import InputError
from data.build import assign_parts
from data.corpus import (CorpusPart, ReadStats, check_corpus_files, iter_documents, resolve_corpus_files,
                         split_large_files)

DOCUMENTS = [["First line.", "Second line."], ["Only one line."], ["A", "B", "C"]]
# The same documents as records: newlines (with stray spaces and a \r) separate lines as in plain text,
# and a record with an empty or null text gives no document.
TEXTS = ["  First line.\r\nSecond line.\n", "Only one line.", "", "A\nB\n\nC", None]


def compress(path, data: bytes):
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_jsonl(path, records, raw_lines=()):
    lines = [json.dumps(record).encode() for record in records] + list(raw_lines)
    return compress(path, b"\n".join(lines) + b"\n")


def write_parquet(path, texts, column="text", row_group_size=2, **columns):
    table = pa.table({"id": list(range(len(texts))), column: texts, **columns})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz", "c.jsonl.zst"])
def test_jsonl_documents_match_the_plain_format(tmp_path, name):
    path = write_jsonl(tmp_path / name, [{"id": i, "text": t} for i, t in enumerate(TEXTS)], [b"", b"  "])
    stats = ReadStats()
    assert list(iter_documents(path, "jsonl", stats=stats)) == DOCUMENTS
    plain = tmp_path / "same.txt"
    plain.write_text("\n\n".join("\n".join(d) for d in DOCUMENTS) + "\n")
    assert list(iter_documents(plain, "plain")) == DOCUMENTS
    assert (stats.documents, stats.lines) == (3, 7), "blank lines are read past, empty records give nothing"
    assert stats.disk_bytes == path.stat().st_size
    assert stats.text_bytes == sum(len(t.encode()) for t in TEXTS if t)


def test_jsonl_text_field_picks_another_field(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": "not this", "body": t} for t in TEXTS])
    assert list(iter_documents(path, "jsonl", text_field="body")) == DOCUMENTS


def test_plain_text_can_be_zstd_compressed(tmp_path):
    path = compress(tmp_path / "c.txt.zst", b"One.\nTwo.\n\nThree.\n")
    stats = ReadStats()
    assert list(iter_documents(path, "plain", stats=stats)) == [["One.", "Two."], ["Three."]]
    assert stats.disk_bytes == path.stat().st_size


@pytest.mark.parametrize("kind", ["string", "large_string", "dictionary"])
def test_parquet_documents_match_and_are_read_by_row_group(tmp_path, kind):
    texts = pa.array(TEXTS, {"string": pa.string(), "large_string": pa.large_string(),
                             "dictionary": pa.dictionary(pa.int32(), pa.string())}[kind])
    path = write_parquet(tmp_path / "c.parquet", texts, column="body", row_group_size=2)
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    stats = ReadStats()
    assert list(iter_documents(path, "parquet", stats=stats, text_field="body")) == DOCUMENTS
    assert (stats.documents, stats.lines) == (3, 5)
    assert stats.disk_bytes == path.stat().st_size
    assert stats.text_bytes == sum(len(t.encode()) for t in TEXTS if t)


def test_parquet_row_groups_are_split_across_processes(tmp_path):
    texts = [f"Document {d} line one.\nDocument {d} line two." for d in range(200)]
    path = write_parquet(tmp_path / "big.parquet", texts, row_group_size=10)
    parts = split_large_files([path], "parquet", True, part_bytes=600)
    assert len(parts) >= 4, "20 row groups of about 450 bytes of text, parts of about 600"
    assert parts[0].start == 0 and parts[-1].end is None
    assert all(a.end == b.start for a, b in zip(parts, parts[1:])), "consecutive row groups, none lost"
    assert sum(p.size for p in parts) == path.stat().st_size
    whole = list(iter_documents(path, "parquet"))
    assert [d for p in parts for d in iter_documents(p, "parquet")] == whole and len(whole) == 200
    stats = ReadStats()
    for part in parts:
        list(iter_documents(part, "parquet", stats=stats))
    assert stats.disk_bytes == path.stat().st_size
    assert parts == split_large_files([path], "parquet", True, part_bytes=600), "deterministic"
    assert split_large_files([path], "parquet", True, part_bytes=10**9) == [CorpusPart(path)]
    loads = [sum(p.size for p in group) for group in assign_parts(parts, 2)]
    assert min(loads) > 0.3 * sum(loads), f"both processes get row groups: {loads}"


def test_large_jsonl_files_are_cut_between_lines(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", [{"text": f"Doc {d}.\nSecond line {d}."} for d in range(300)])
    parts = split_large_files([path], "jsonl", True, part_bytes=1000)
    assert len(parts) > 5 and all(a.end == b.start for a, b in zip(parts, parts[1:]))
    assert [d for p in parts for d in iter_documents(p, "jsonl")] == list(iter_documents(path, "jsonl"))
    gz = write_jsonl(tmp_path / "big.jsonl.zst", [{"text": "x"}] * 300)
    assert split_large_files([gz], "jsonl", True, part_bytes=100) == [CorpusPart(gz)], "compressed: whole"


def test_folders_are_searched_for_the_format_s_files(tmp_path):
    found = [write_jsonl(tmp_path / n, [{"text": "x"}]) for n in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "d.json")]
    parquet = write_parquet(tmp_path / "sub" / "e.parquet", ["x"])
    (tmp_path / "notes.txt").write_text("not a record\n")
    assert resolve_corpus_files([str(tmp_path)], "jsonl") == sorted(p.resolve() for p in found)
    assert resolve_corpus_files([str(tmp_path)], "parquet") == [parquet.resolve()]
    only_jsonl = write_jsonl(tmp_path / "only" / "a.jsonl", [{"text": "x"}]).parent
    with pytest.raises(InputError, match=r"no \.parquet files.*--corpus-format"):
        resolve_corpus_files([str(only_jsonl)], "parquet")


# --- bad input: one line naming the file, the line or row group, and the fix ----------------------------

@pytest.mark.parametrize("raw, fragments", [
    (b'{"text": "cut off', ["not valid JSON", "column"]),
    (b'["a list"]', ["holds an array, not a JSON object"]),
    (b'{"id": 3, "body": "x"}', ["no field 'text'", "fields: id, body", "--text-field"]),
    (b'{"text": 42}', ["field 'text' is a number, not a string", "--text-field"]),
    (b'{"text": ["a", "b"]}', ["is an array"]),
])
def test_bad_json_lines_name_file_line_and_fix(tmp_path, raw, fragments):
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": "fine"}, {"text": "fine too"}], [raw])
    with pytest.raises(InputError) as error:
        list(iter_documents(path, "jsonl"))
    message = str(error.value)
    assert f"{path}:3:" in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize("name", ["c.jsonl.gz", "c.jsonl.zst", "c.jsonl"])
def test_non_utf8_json_lines_stop_with_file_and_line(tmp_path, name):
    path = write_jsonl(tmp_path / name, [{"text": "fine"}], [b'{"text": "caf\xe9"}'])
    with pytest.raises(InputError, match="not valid UTF-8.*re-encode") as error:
        list(iter_documents(path, "jsonl"))
    assert f"{path}:2:" in str(error.value)


def test_truncated_zst_is_an_error_not_a_short_corpus(tmp_path):
    path = write_jsonl(tmp_path / "cut.jsonl.zst", [{"text": f"record {i} " * 20} for i in range(2000)])
    path.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(InputError, match="cannot be read.*truncated"):
        list(iter_documents(path, "jsonl"))
    not_zstd = compress(tmp_path / "fake.jsonl", b"plain bytes\n")
    not_zstd = not_zstd.rename(tmp_path / "fake.jsonl.zst")
    with pytest.raises(InputError, match="cannot be read.*zstd"):
        list(iter_documents(not_zstd, "jsonl"))


def test_parquet_without_the_text_column_lists_its_columns(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", ["x"], column="content")
    for check in (lambda: list(iter_documents(path, "parquet")),
                  lambda: check_corpus_files([path], "parquet"),
                  lambda: split_large_files([path], "parquet", True, 1 << 20)):
        with pytest.raises(InputError) as error:
            check()
        message = str(error.value)
        assert str(path) in message and "no column 'text'" in message
        assert "its columns: id, content" in message and "--text-field" in message


def test_parquet_with_a_non_string_text_column_or_not_parquet(tmp_path):
    path = write_parquet(tmp_path / "c.parquet", ["x"], column="body")
    with pytest.raises(InputError, match="column 'id' holds int64, not strings"):
        list(iter_documents(path, "parquet", text_field="id"))
    fake = tmp_path / "fake.parquet"
    fake.write_text("text, not Parquet\n")
    with pytest.raises(InputError, match=f"{fake}: cannot be read as Parquet"):
        check_corpus_files([fake], "parquet")


def test_a_damaged_parquet_row_group_is_named(tmp_path):
    texts = [f"row {i} " + "words " * 50 for i in range(40)]
    path = write_parquet(tmp_path / "c.parquet", texts, row_group_size=20)
    metadata = pq.ParquetFile(path).metadata
    column = metadata.row_group(1).column(1)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + 20:start + column.total_compressed_size - 20] = b"\xff" * (column.total_compressed_size - 40)
    path.write_bytes(bytes(data))
    documents = iter_documents(path, "parquet")
    assert len([next(documents) for _ in range(20)]) == 20, "row group 0 reads"
    with pytest.raises(InputError, match=f"{path}: row group 1 .*cannot be read"):
        next(documents)


def test_check_corpus_files_reads_only_the_first_json_record(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"text": "x"}], [b"not json: found while building"])
    check_corpus_files([good], "jsonl")
    wrong_field = write_jsonl(tmp_path / "wrong.jsonl.gz", [{"content": "x"}])
    with pytest.raises(InputError, match=f"{wrong_field}:1: no field 'text'.*fields: content"):
        check_corpus_files([good, wrong_field], "jsonl")
