"""build_pretraining_dataset.py --compression gzip: the same records as an uncompressed build, in a third of the
bytes, read alike by tf.data (data.tfrecords.pretraining_dataset) and by the reader without TensorFlow
(data.record_reader); a damaged or cut stream and an unknown compression refused with one line."""
import gzip
import itertools
import json
import re
import shutil

import numpy as np
import pytest

from common.errors import InputError
from data import record_reader, tfrecords
from tests.helpers import assert_same_batches, tf_batches, write_corpus, write_vocab

NUM_SHARDS = 3


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """{compression: (folder, metadata)}: the same corpus built without and with gzip."""
    import build_pretraining_dataset

    root = tmp_path_factory.mktemp("compressed")
    corpus = write_corpus(root / "corpus")
    vocab = write_vocab(corpus, root / "vocab.txt")
    folders = {}
    for compression in ("none", "gzip"):
        data_dir = root / compression
        build_pretraining_dataset.main(["--corpus-dir", str(corpus), "--vocab-file", str(vocab), "--data-dir",
                                        str(data_dir), "--max-seq-length", "32", "--num-shards", str(NUM_SHARDS),
                                        "--compression", compression])
        folder = data_dir / "pretrain_tfrecords"
        folders[compression] = folder, tfrecords.load_metadata(folder)
    return folders


def test_gzip_shards_hold_the_uncompressed_builds_bytes_in_fewer(builds):
    plain, plain_metadata = builds["none"]
    packed, metadata = builds["gzip"]
    assert metadata["compression"] == "gzip" and "compression" not in plain_metadata
    assert metadata["counts"] == plain_metadata["counts"]
    for shard, plain_shard in zip(metadata["shards"], plain_metadata["shards"]):
        data = (packed / shard["file"]).read_bytes()
        assert data[:2] == b"\x1f\x8b" and shard["bytes"] == len(data)  # a gzip stream, its size recorded
        assert gzip.decompress(data) == (plain / plain_shard["file"]).read_bytes()
        assert shard["examples"] == plain_shard["examples"] and shard["bytes"] < 0.6 * plain_shard["bytes"]


def test_both_readers_give_the_uncompressed_builds_examples_and_batches(builds):
    import tensorflow as tf

    plain, plain_metadata = builds["none"]
    packed, metadata = builds["gzip"]
    expected = record_reader.read_examples(plain, plain_metadata)
    assert len(expected["input_ids"]) == plain_metadata["counts"]["examples"]
    assert_same_batches([record_reader.read_examples(packed, metadata)], [expected])
    theirs = tf_batches(packed, metadata, 4096, training=False)
    assert_same_batches([record_reader.read_examples(packed, metadata)],
                        [{name: np.concatenate([b[name] for b in theirs]) for name in tfrecords.FEATURE_NAMES}])
    tf.random.set_seed(None)
    training = {}
    for compression, (folder, folder_metadata) in builds.items():
        training[compression] = tf_batches(folder, folder_metadata, 8, 30, 2, 1, training=True, seed=4)
        ours = record_reader.training_batches(folder, 8, num_workers=2, worker_index=1, seed=4,
                                              metadata=folder_metadata)
        assert_same_batches(list(itertools.islice(ours, 30)), training[compression])
    assert_same_batches(training["gzip"], training["none"])  # compression changes nothing of the order


def damaged_copy(folder, tmp_path, damage):
    copy = tmp_path / "pretrain_tfrecords"
    shutil.copytree(folder, copy)
    path = copy / json.loads((copy / tfrecords.METADATA_FILE).read_text())["shards"][1]["file"]
    data = damage(bytearray(path.read_bytes()))
    path.write_bytes(bytes(data))
    return copy, path


def flip_middle_byte(data):
    data[len(data) // 2] ^= 0x40
    return data


@pytest.mark.parametrize("damage", [flip_middle_byte, lambda data: data[:len(data) // 2]],
                         ids=["flipped byte", "cut stream"])
def test_a_damaged_gzip_shard_is_one_line_from_either_reader(builds, tmp_path, damage):
    copy, path = damaged_copy(builds["gzip"][0], tmp_path, damage)
    metadata = json.loads((copy / tfrecords.METADATA_FILE).read_text())
    for shard in metadata["shards"]:  # the size check aside: damage in place, found by reading
        shard["bytes"] = (copy / shard["file"]).stat().st_size
    (copy / tfrecords.METADATA_FILE).write_text(json.dumps(metadata))
    with pytest.raises(InputError) as error:
        record_reader.read_examples(copy, None)
    message = str(error.value)
    assert re.match(rf"^{re.escape(str(path))}: (damaged GZIP stream|corrupted record|truncated file)", message)
    assert message.endswith("--overwrite") and "\n" not in message
    found = tfrecords.first_damaged_shard(tfrecords.shard_files(copy, metadata))  # TensorFlow's scan names it
    assert found is not None and found[0] == str(path)
    assert tfrecords.first_damaged_shard(tfrecords.shard_files(*builds["gzip"])) is None


def test_an_unknown_compression_is_refused_before_any_work(builds, tmp_path):
    copy, _ = damaged_copy(builds["gzip"][0], tmp_path, lambda data: data)
    metadata = json.loads((copy / tfrecords.METADATA_FILE).read_text())
    (copy / tfrecords.METADATA_FILE).write_text(json.dumps({**metadata, "compression": "zstd"}))
    for load in (tfrecords.load_metadata, record_reader.load_metadata):
        with pytest.raises(InputError, match=r"^metadata.json: compression 'zstd' is not one this code reads"):
            load(copy)
