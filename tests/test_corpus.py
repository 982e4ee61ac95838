import gzip

import pytest

from data.corpus import ReadStats, iter_documents, resolve_corpus_files
from common.errors import InputError


def write(path, text, compress=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def test_resolves_files_folders_and_globs(tmp_path):
    a = write(tmp_path / "a.txt", "x\n")
    b = write(tmp_path / "sub" / "b.txt.gz", "y\n", compress=True)
    write(tmp_path / "sub" / "notes.md", "ignored\n")
    assert resolve_corpus_files([str(tmp_path)]) == sorted([a.resolve(), b.resolve()])
    assert resolve_corpus_files([str(tmp_path / "*.txt")]) == [a.resolve()]
    assert resolve_corpus_files([str(a), str(a)]) == [a.resolve()]


@pytest.mark.parametrize("spec, fragment", [
    ("missing.txt", "no such file or folder"),
    ("nothing*.txt", "no files match"),
])
def test_resolve_errors_name_the_path(tmp_path, spec, fragment):
    with pytest.raises(InputError, match=fragment) as error:
        resolve_corpus_files([str(tmp_path / spec)])
    assert str(tmp_path) in str(error.value)


def test_folder_without_text_files_is_an_error(tmp_path):
    write(tmp_path / "readme.md", "x")
    with pytest.raises(InputError, match="no .txt, .gz or .zst files"):
        resolve_corpus_files([str(tmp_path)])


def test_plain_documents_split_on_blank_lines(tmp_path):
    path = write(tmp_path / "c.txt", "  One.  \nTwo.\n\n\n\nThree.\n   \nFour.")
    assert list(iter_documents(path, "plain", blanks_separate_docs=True)) == [["One.", "Two."], ["Three."],
                                                                              ["Four."]]
    assert list(iter_documents(path, "plain", blanks_separate_docs=False)) == [["One.", "Two.", "Three.",
                                                                               "Four."]]


def test_wikiextractor_drops_doc_lines_and_titles(tmp_path):
    text = ('<doc id="1" url="u" title="Anarchism">\nAnarchism\n\nFirst paragraph.\nSecond paragraph.\n</doc>\n'
            '<doc id="2" url="v" title="Empty">\nEmpty\n\n</doc>\n'
            '<doc id="3" url="w" title="Autism">\nAutism\n\nOnly one.\n</doc>\n')
    path = write(tmp_path / "wiki.gz", text, compress=True)
    stats = ReadStats()
    documents = list(iter_documents(path, "wikiextractor", stats=stats))
    assert documents == [["First paragraph.", "Second paragraph."], ["Only one."]]
    assert stats.documents == 2
    assert stats.text_bytes == len(text.encode())
    assert stats.disk_bytes == path.stat().st_size


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = write(tmp_path / "bad.txt", b"good line\nbad \xff\xfe line\nok\n")
    stats = ReadStats()
    documents = list(iter_documents(path, "plain", stats=stats))
    assert documents == [["good line", "bad \ufffd\ufffd line", "ok"]]
    assert stats.bad_utf8_lines == 1 and stats.lines == 3


def test_invalid_utf8_under_strict_names_file_and_line(tmp_path):
    path = write(tmp_path / "bad.txt", b"good line\nbad \xff line\n")
    with pytest.raises(InputError) as error:
        list(iter_documents(path, "plain", strict=True))
    assert f"{path}:2" in str(error.value) and "--strict" in str(error.value)


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = write(tmp_path / "cut.txt.gz", "a line of text\n" * 5000, compress=True)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError, match="cannot be read"):
        list(iter_documents(path, "plain"))


def test_unknown_format_is_an_error(tmp_path):
    path = write(tmp_path / "c.txt", "x\n")
    with pytest.raises(InputError, match="unknown corpus format"):
        list(iter_documents(path, "html"))


def _documents_of_parts(parts, corpus_format):
    return [doc for part in parts for doc in iter_documents(part, corpus_format)]


@pytest.mark.parametrize("corpus_format", ["plain", "wikiextractor"])
def test_large_files_are_cut_at_document_boundaries_without_losing_text(tmp_path, corpus_format):
    from data.corpus import CorpusPart, split_large_files

    if corpus_format == "plain":
        text = "\n\n".join(f"Document {d} first line.\nDocument {d} second line." for d in range(300)) + "\n"
    else:
        text = "".join(f'<doc id="{d}">\nTitle {d}\n\nParagraph one of {d}.\nParagraph two.\n</doc>\n'
                       for d in range(300))
    path = write(tmp_path / "big.txt", text)
    parts = split_large_files([path], corpus_format, True, part_bytes=1000)
    assert len(parts) > 5
    assert parts[0].start == 0 and parts[-1].end is None
    assert all(a.end == b.start for a, b in zip(parts, parts[1:])), "parts are contiguous"
    assert sum(p.size for p in parts) == path.stat().st_size
    assert _documents_of_parts(parts, corpus_format) == list(iter_documents(path, corpus_format))
    stats = ReadStats()
    for part in parts:
        list(iter_documents(part, corpus_format, stats=stats))
    assert stats.disk_bytes == stats.text_bytes == path.stat().st_size
    assert parts == split_large_files([path], corpus_format, True, part_bytes=1000), "deterministic"
    assert split_large_files([path], corpus_format, True, part_bytes=10**9) == [CorpusPart(path)]


def test_files_that_cannot_be_cut_stay_whole(tmp_path):
    from data.corpus import CorpusPart, split_large_files

    text = "\n\n".join(f"Document {d}." for d in range(500))
    gz = write(tmp_path / "big.txt.gz", text, compress=True)
    plain = write(tmp_path / "one_doc.txt", text)
    assert split_large_files([gz], "plain", True, part_bytes=100) == [CorpusPart(gz)]
    assert split_large_files([plain], "plain", False, part_bytes=100) == [CorpusPart(plain)]
