"""The dataset builder end to end: output, determinism, atomicity, overwrite safety, bad input, the reader."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import build_pretraining_dataset as cli
from data import tfrecords
from common.errors import InputError
from data.inspect_dataset import count_examples
from tests.conftest import REPO_ROOT
from tests.helpers import write_corpus, write_vocab


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> pathlib.Path:
    """Four plain-format files of real English (Python's language-reference topics)."""
    return write_corpus(tmp_path_factory.mktemp("corpus"), num_files=4)


@pytest.fixture(scope="module")
def vocab_file(corpus_dir, tmp_path_factory) -> pathlib.Path:
    return write_vocab(corpus_dir, tmp_path_factory.mktemp("vocab") / "vocab.txt", num_words=3000)


def build(tmp_path, corpus_dir, vocab_file, *extra, name="out"):
    output = tmp_path / name
    args = ["--corpus-dir", str(corpus_dir), "--vocab-file", str(vocab_file), "--data-dir", str(tmp_path),
            "--output-dir", str(output), "--max-seq-length", "64", *extra]
    return output, cli.main(args)


@pytest.fixture(scope="module")
def default_build(tmp_path_factory, corpus_dir, vocab_file):
    """(output, metadata) of one build with the defaults, built once for the tests that only read it."""
    return build(tmp_path_factory.mktemp("default_build"), corpus_dir, vocab_file)


@pytest.fixture(scope="module")
def four_shard_build(tmp_path_factory, corpus_dir, vocab_file):
    """(output, metadata) of one single-process build into 4 shards, for the tests that only read it."""
    return build(tmp_path_factory.mktemp("four_shard_build"), corpus_dir, vocab_file, "--num-shards", "4")


def shard_bytes(output):
    return {p.name: p.read_bytes() for p in sorted(output.glob(tfrecords.SHARD_PREFIX + "*"))}


def test_build_writes_shards_and_metadata_that_the_reader_confirms(tmp_path, corpus_dir, vocab_file):
    output, metadata = build(tmp_path, corpus_dir, vocab_file, "--num-shards", "3")
    on_disk = json.loads((output / "metadata.json").read_text())
    assert on_disk["counts"] == metadata["counts"]
    assert [s["file"] for s in on_disk["shards"]] == [tfrecords.shard_name(i, 3) for i in range(3)]
    assert not list(output.glob("*" + tfrecords.TEMP_SUFFIX))
    counts = on_disk["counts"]
    assert counts["documents"] > 50 and counts["examples"] > 200 and counts["files"] == 4
    assert on_disk["vocab"]["size"] == len(vocab_file.read_text().split("\n")) - 1
    assert on_disk["vocab"]["special_ids"] == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert on_disk["max_seq_length"] == 64 and on_disk["seed"] == 12345

    examples, tokens, _ = count_examples(output, on_disk)
    assert (examples, tokens) == (counts["examples"], counts["tokens"])
    assert sum(s["examples"] for s in on_disk["shards"]) == examples

    batch = next(iter(tfrecords.pretraining_dataset(output, 32, seed=1)))
    ids, mask, segments = (batch[n].numpy() for n in tfrecords.FEATURE_NAMES)
    assert ids.shape == (32, 64) and ids.dtype == np.int32
    assert (ids[:, 0] == 2).all(), "every example starts with [CLS]"
    lengths = mask.sum(axis=1)
    assert (ids[np.arange(32), lengths - 1] == 3).all(), "and ends with [SEP]"
    assert ((ids == 0) == (mask == 0)).all(), "padding is exactly where the mask is 0"
    assert (segments <= mask).all()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, corpus_dir, vocab_file, default_build):
    first, _ = default_build
    second, _ = build(tmp_path, corpus_dir, vocab_file, name="b")
    third, _ = build(tmp_path, corpus_dir, vocab_file, "--seed", "7", name="c")
    assert shard_bytes(first) == shard_bytes(second)
    assert shard_bytes(first) != shard_bytes(third)
    assert (first / "metadata.json").read_bytes() == (second / "metadata.json").read_bytes()


@pytest.fixture(scope="module")
def one_file_builds(tmp_path_factory, corpus_dir, vocab_file):
    """The corpus as one file, which the builder cuts into 5 parts (data.build.PART_BYTES): the metadata of a
    single-process build, and (output, metadata) of two identical builds by 2 processes, 4 shards each. Each
    process of a build starts TensorFlow for its tokenizer (~5 s of CPU): the two tests below share these builds."""
    import data.build

    root = tmp_path_factory.mktemp("one_file")
    corpus = root / "corpus"
    corpus.mkdir()
    one_file = corpus / "all.txt"
    one_file.write_text("\n\n".join(p.read_text().strip() for p in sorted(corpus_dir.glob("*.txt"))) + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(data.build, "PART_BYTES", one_file.stat().st_size // 5)
        _, single = build(root, corpus, vocab_file, "--num-shards", "4", name="single")
        doubles = [build(root, corpus, vocab_file, "--num-processes", "2", "--num-shards", "4", name=name)
                   for name in ("p1", "p2")]
    return single, doubles


def test_two_processes_are_deterministic_and_lose_nothing(one_file_builds):
    single_meta, ((first, meta), (second, _)) = one_file_builds
    assert shard_bytes(first) == shard_bytes(second)
    assert meta["counts"]["documents"] == single_meta["counts"]["documents"]
    assert meta["counts"]["lines"] == single_meta["counts"]["lines"]
    # packing draws differ per process, so example counts may differ slightly; text does not get lost
    assert abs(meta["counts"]["examples"] - single_meta["counts"]["examples"]) < 0.05 * meta["counts"]["examples"]
    assert count_examples(first, meta)[0] == meta["counts"]["examples"]


def test_non_empty_output_is_never_replaced_without_overwrite(tmp_path, corpus_dir, vocab_file, capsys):
    output, _ = build(tmp_path, corpus_dir, vocab_file)
    before = shard_bytes(output)
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus_dir, vocab_file, "--seed", "3")
    assert exit_info.value.code == 2
    assert "--overwrite" in capsys.readouterr().err
    assert shard_bytes(output) == before
    build(tmp_path, corpus_dir, vocab_file, "--seed", "3", "--overwrite")
    assert shard_bytes(output) != before


def test_overwrite_never_deletes_foreign_files(tmp_path, corpus_dir, vocab_file, capsys):
    output, _ = build(tmp_path, corpus_dir, vocab_file)
    (output / "my_notes.txt").write_text("keep me")
    with pytest.raises(SystemExit):
        build(tmp_path, corpus_dir, vocab_file, "--overwrite")
    assert "my_notes.txt" in capsys.readouterr().err
    assert (output / "my_notes.txt").read_text() == "keep me"
    assert (output / "metadata.json").exists()


def test_the_dataset_keeps_its_vocabulary_so_that_it_travels_without_it(tmp_path, corpus_dir, vocab_file):
    """A folder copied to another machine (a GPU call carries only the repository) still resolves its vocabulary;
    a rebuild that reads the folder's own copy keeps it; a user's file of the same name is never taken as ours."""
    from configs.resolve import vocab_source

    source = tmp_path / "elsewhere" / "my_vocab.txt"
    source.parent.mkdir()
    source.write_bytes(vocab_file.read_bytes())
    output, metadata = build(tmp_path, corpus_dir, source)
    assert metadata["vocab"]["copy"] == "vocab.txt"
    assert (output / "vocab.txt").read_bytes() == source.read_bytes()
    moved = tmp_path / "moved"
    output.rename(moved)
    source.unlink()
    assert vocab_source(tfrecords.load_metadata(moved), moved) == moved / "vocab.txt"
    kept = (moved / "vocab.txt").read_bytes()
    (moved / "vocab.txt").write_text("[PAD]\n")  # changed since the build: not the dataset's vocabulary
    with pytest.raises(InputError, match="neither its copy vocab.txt"):
        vocab_source(tfrecords.load_metadata(moved), moved)
    (moved / "vocab.txt").write_bytes(kept)
    before = shard_bytes(moved)
    _, again = build(tmp_path, corpus_dir, moved / "vocab.txt", "--overwrite", name="moved")
    assert shard_bytes(moved) == before and again["vocab"]["sha256"] == metadata["vocab"]["sha256"]
    users = tmp_path / "users"
    users.mkdir()
    (users / "vocab.txt").write_text("mine")
    with pytest.raises(SystemExit):
        build(tmp_path, corpus_dir, vocab_file, "--overwrite", name="users")
    assert (users / "vocab.txt").read_text() == "mine"


def test_interrupted_build_leaves_no_metadata_and_no_partial_shards(tmp_path, corpus_dir, vocab_file,
                                                                     monkeypatch):
    calls = {"n": 0}
    original = tfrecords.ExampleSerializer.serialize_packed

    def failing(self, *args):
        calls["n"] += 1
        if calls["n"] == 100:
            raise KeyboardInterrupt  # what Ctrl-C looks like mid-build
        return original(self, *args)

    monkeypatch.setattr(tfrecords.ExampleSerializer, "serialize_packed", failing)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path, corpus_dir, vocab_file)
    output = tmp_path / "out"
    assert not (output / "metadata.json").exists()
    assert not list(output.glob(tfrecords.SHARD_PREFIX + "*")), "no shard of the failed build is left"
    with pytest.raises(InputError, match="no metadata.json"):
        tfrecords.load_metadata(output)


def test_reader_refuses_a_changed_shard(tmp_path, corpus_dir, vocab_file):
    output, _ = build(tmp_path, corpus_dir, vocab_file, "--num-shards", "2")
    shard = output / tfrecords.shard_name(1, 2)
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(InputError, match="missing or changed"):
        tfrecords.load_metadata(output)


def test_reader_splits_files_across_input_pipelines(four_shard_build):
    import tensorflow as tf

    output, metadata = four_shard_build
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                             num_replicas_in_sync=2)
        dataset = tfrecords.pretraining_dataset(output, 16, input_context=context, training=False)
        seen.append([tuple(row) for batch in dataset for row in batch["input_ids"].numpy()])
    per_shard = [shard["examples"] for shard in metadata["shards"]]
    assert len(seen[0]) == per_shard[0] + per_shard[2], "pipeline 0 reads shards 0 and 2"
    assert len(seen[1]) == per_shard[1] + per_shard[3], "pipeline 1 reads shards 1 and 3"


def test_dataset_check_against_model(default_build):
    output, metadata = default_build
    tfrecords.check_dataset_matches(metadata, output, vocab_sha256=metadata["vocab"]["sha256"],
                                    vocab_size=metadata["vocab"]["size"], max_seq_length=64)
    with pytest.raises(InputError, match="another vocabulary"):
        tfrecords.check_dataset_matches(metadata, output, vocab_sha256="0" * 64)
    with pytest.raises(InputError, match="max_seq_length=128"):
        tfrecords.check_dataset_matches(metadata, output, max_seq_length=128)


def test_non_utf8_is_counted_in_metadata_or_refused_under_strict(tmp_path, vocab_file, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"the first line of text\nthe second \xff line\n\nanother document here\n")
    _, metadata = build(tmp_path, corpus, vocab_file)
    assert metadata["counts"]["bad_utf8_lines"] == 1
    assert "--strict" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus, vocab_file, "--strict", name="strict")
    assert exit_info.value.code == 2
    assert "a.txt:2" in capsys.readouterr().err


def run_cli(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "build_pretraining_dataset.py", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("case", ["missing_path", "empty_corpus", "no_specials", "short_length", "blank_corpus"])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, corpus_dir, vocab_file, case):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n")
    bad_vocab = tmp_path / "bad_vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\nhello\n")
    args = {
        "missing_path": ["--corpus-dir", str(tmp_path / "nope"), "--vocab-file", str(vocab_file)],
        "empty_corpus": ["--corpus-dir", str(empty), "--vocab-file", str(vocab_file)],
        "blank_corpus": ["--corpus-dir", str(blank), "--vocab-file", str(vocab_file)],
        "no_specials": ["--corpus-dir", str(corpus_dir), "--vocab-file", str(bad_vocab)],
        "short_length": ["--corpus-dir", str(corpus_dir), "--vocab-file", str(vocab_file), "--max-seq-length", "2"],
    }[case]
    output = tmp_path / "out"
    result = run_cli(*args, "--data-dir", str(tmp_path), "--output-dir", str(output))
    assert result.returncode == 2, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1
    named = {"missing_path": "nope", "empty_corpus": "empty.txt", "blank_corpus": "corpus",
             "no_specials": "bad_vocab.txt", "short_length": "--max-seq-length"}[case]
    assert named in error_lines[0]
    assert not (output / "metadata.json").exists()


def test_a_failing_worker_process_stops_the_build_cleanly(tmp_path, vocab_file, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.txt").write_text("a good line of text\n" * 2000)
    (corpus / "bad.txt").write_bytes(b"fine\n" * 100 + b"broken \xff byte\n")
    with pytest.raises(SystemExit) as exit_info:
        build(tmp_path, corpus, vocab_file, "--strict", "--num-processes", "2")
    assert exit_info.value.code == 2
    assert "bad.txt:101" in capsys.readouterr().err
    output = tmp_path / "out"
    assert not (output / "metadata.json").exists()
    assert not list(output.glob(tfrecords.SHARD_PREFIX + "*"))


def test_one_large_file_is_shared_by_two_processes(one_file_builds):
    single, ((_, double), _) = one_file_builds
    assert double["counts"]["documents"] == single["counts"]["documents"]
    assert double["counts"]["lines"] == single["counts"]["lines"]
    assert all(shard["examples"] > 0 for shard in double["shards"]), "both processes had work"


@pytest.mark.parametrize("vocab_type, learned_name", [("wordpiece", "vocab.txt"), ("sentencepiece", "spm.model")])
def test_without_a_vocabulary_one_is_learned_into_the_data_dir(tmp_path, corpus_dir, vocab_type, learned_name):
    from data.tokenization import file_sha256

    args = ["--corpus-dir", str(corpus_dir), "--data-dir", str(tmp_path), "--vocab-size", "1000",
            "--vocab-type", vocab_type, "--max-seq-length", "64"]
    metadata = cli.main(args)
    learned = tmp_path / learned_name
    assert learned.is_file()
    assert metadata["vocab"]["file"] == str(learned.resolve())
    assert metadata["vocab"]["sha256"] == file_sha256(learned)
    assert metadata["vocab"]["kind"] == vocab_type and 900 <= metadata["vocab"]["size"] <= 1000
    assert (tmp_path / "pretrain_tfrecords" / "metadata.json").is_file()
    copy = tmp_path / "pretrain_tfrecords" / metadata["vocab"]["copy"]  # the folder's own, named by its kind
    assert copy.name == learned_name and copy.read_bytes() == learned.read_bytes()
    # A second build reuses the learned vocabulary rather than learning another.
    again = cli.main(args + ["--overwrite"])
    assert again["vocab"]["sha256"] == metadata["vocab"]["sha256"]
