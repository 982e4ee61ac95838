"""data.record_reader against the product's own tf.data reader (data.tfrecords.pretraining_dataset) in this
process: the same examples, the same training batches for a seed (1 and 2 workers, and fewer files than
workers), the same evaluation batches; damage refused with the file and TensorFlow's byte offset; metadata
refused as the TensorFlow path refuses it; and no TensorFlow in the reader's process."""
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from common.errors import InputError
from data import record_reader, tfrecords
from tests.helpers import assert_same_batches, build_tiny_dataset, tf_batches

NUM_SHARDS = 10  # more than the interleave's cycle of 8: files wait for a slot, as on a real dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A tiny dataset of 10 shards (about 80 examples each): (folder, metadata)."""
    data_dir = tmp_path_factory.mktemp("records")
    build_tiny_dataset(data_dir, max_seq_length=32, num_shards=NUM_SHARDS)
    folder = data_dir / "pretrain_tfrecords"
    return folder, tfrecords.load_metadata(folder)


def test_every_example_equals_the_evaluation_readers(dataset):
    folder, metadata = dataset
    reference = tf_batches(folder, metadata, 4096, training=False)
    expected = {name: np.concatenate([b[name] for b in reference]) for name in tfrecords.FEATURE_NAMES}
    ours = record_reader.read_examples(folder, metadata)
    assert len(expected["input_ids"]) == sum(s["examples"] for s in metadata["shards"])
    assert_same_batches([ours], [expected])
    limited = record_reader.read_examples(folder, None, tfrecords.shard_files(folder, metadata)[3:], limit=100)
    offset = sum(s["examples"] for s in metadata["shards"][:3])
    assert_same_batches([limited], [{name: value[offset:offset + 100] for name, value in expected.items()}])


@pytest.mark.parametrize("workers, global_seed", [(1, None), (2, 7)])
def test_training_batches_equal_tf_datas_for_a_seed(dataset, workers, global_seed):
    """Past an epoch of each worker's files: the file shuffle, interleave and record shuffle all reproduced."""
    import tensorflow as tf

    folder, metadata = dataset
    batches = 2 * sum(s["examples"] for s in metadata["shards"]) // (16 * workers) + 3
    for index in range(workers):
        tf.random.set_seed(global_seed)  # as keras.utils.set_random_seed(config.seed) in a TF run; None: unset
        theirs = tf_batches(folder, metadata, 16, batches, workers, index, training=True, seed=3)
        ours = record_reader.training_batches(folder, 16, num_workers=workers, worker_index=index, seed=3,
                                              global_seed=global_seed, metadata=metadata)
        assert_same_batches(list(itertools.islice(ours, batches)), theirs)


def test_the_split_of_two_workers_is_tf_datas_shard(dataset):
    folder, metadata = dataset
    files = tfrecords.shard_files(folder, metadata)
    assert record_reader.worker_files(files, 2, 1) == (files[1::2], False)
    for index in range(2):
        theirs = tf_batches(folder, metadata, 64, None, 2, index, training=False)
        ours = list(record_reader.evaluation_batches(folder, 64, num_workers=2, worker_index=index,
                                                     metadata=metadata))
        assert_same_batches(ours, theirs)


def test_fewer_files_than_workers_split_records_as_tf_data_does(dataset):
    import tensorflow as tf

    tf.random.set_seed(None)  # the global seed another test set: tf.data's seeds depend on it
    folder, metadata = dataset
    files = tfrecords.shard_files(folder, metadata)[:3]
    for index in (0, 3):
        theirs = tf_batches(folder, metadata, 8, 40, 4, index, files=files, training=True, seed=5)
        ours = record_reader.training_batches(folder, 8, num_workers=4, worker_index=index, seed=5, files=files,
                                              metadata=metadata)
        assert_same_batches(list(itertools.islice(ours, 40)), theirs)
        theirs = tf_batches(folder, metadata, 8, None, 4, index, files=files, training=False)
        assert_same_batches(list(record_reader.evaluation_batches(
            folder, 8, num_workers=4, worker_index=index, files=files, metadata=metadata)), theirs)


def hand_encoded_example(features):
    """A tf.train.Example of {name: (values, packed)}: unpacked varints are legal protobuf that our builder
    never writes; negative int64s are 10-byte varints."""
    from common.protobuf_wire import field_bytes, varint

    entries = b""
    for name, (values, packed) in features.items():
        words = [varint(v & (1 << 64) - 1) for v in values]
        int64_list = field_bytes(1, b"".join(words)) if packed else b"".join(b"\x08" + w for w in words)
        entries += field_bytes(1, field_bytes(1, name.encode()) + field_bytes(2, field_bytes(3, int64_list)))
    return field_bytes(1, entries)


def test_packed_unpacked_and_negative_values_parse_as_tensorflow_parses_them(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    records = []
    for number in range(5):
        values = {name: rng.integers(-2 ** 40, 2 ** 40, 6).tolist() for name in reversed(tfrecords.FEATURE_NAMES)}
        packed = [(number + k) % 2 == 0 or number == 4 for k in range(3)]  # the last all packed: the fast path
        features = {name: (v, packed[k]) for k, (name, v) in enumerate(values.items())}
        features["other"] = ([1, 2], True)  # a feature the dataset does not hold: skipped, as by TensorFlow
        records.append(hand_encoded_example(features))
    path = tmp_path / "hand.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    assert record_reader.read_records(path) == records
    expected = tf.io.parse_example(records, tfrecords.feature_spec(6))
    ours = record_reader.read_file_examples(path, 6)
    for name in tfrecords.FEATURE_NAMES:
        np.testing.assert_array_equal(ours[name], tf.cast(expected[name], tf.int32).numpy())


def tensorflows_offset(path):
    """The byte offset of TensorFlow's DataLossError ("corrupted record at N") reading `path`."""
    import tensorflow as tf

    with pytest.raises(tf.errors.DataLossError) as error:
        for _ in tf.data.TFRecordDataset(str(path)):
            pass
    return int(re.search(r"corrupted record at (\d+)", str(error.value)).group(1))


@pytest.mark.parametrize("where", ["data", "length"])
def test_a_flipped_byte_names_the_file_the_offset_and_the_fix(dataset, tmp_path, where):
    folder, metadata = dataset
    path = tmp_path / metadata["shards"][0]["file"]
    shutil.copyfile(folder / path.name, path)
    data = bytearray(path.read_bytes())
    offsets, lengths = record_reader.record_spans(np.frombuffer(bytes(data), np.uint8), path)
    record = len(offsets) // 2
    at = int(offsets[record]) + (record_reader.HEADER_BYTES + 5 if where == "data" else 1)
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as error:
        record_reader.read_file_examples(path, 32)
    message = str(error.value)
    assert message.startswith(f"{path}: corrupted record") and f"its {where} fails" in message
    damaged_at = int(offsets[record]) + (record_reader.HEADER_BYTES if where == "data" else 0)
    assert f"at byte offset {damaged_at};" in message and tensorflows_offset(path) == damaged_at
    assert message.endswith("build_pretraining_dataset.py --overwrite") and "\n" not in message


def test_a_truncated_file_names_the_file_and_the_offset(dataset, tmp_path):
    folder, metadata = dataset
    path = tmp_path / metadata["shards"][1]["file"]
    data = (folder / path.name).read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: truncated file .* at byte offset \d+; "
                                         r"rebuild the dataset with build_pretraining_dataset.py --overwrite$"):
        record_reader.read_file_examples(path, 32)
    path.write_bytes(data[:len(data) - 2])  # the last record's checksum cut
    with pytest.raises(InputError, match="truncated file"):
        record_reader.read_records(path)


def test_missing_metadata_a_missing_shard_and_an_empty_folder_are_one_line(dataset, tmp_path):
    folder, metadata = dataset
    copy = tmp_path / "pretrain_tfrecords"
    shutil.copytree(folder, copy)
    (copy / metadata["shards"][2]["file"]).unlink()
    with pytest.raises(InputError, match=rf"^{re.escape(str(copy))}/{metadata['shards'][2]['file']}: missing .*"
                                         "--overwrite$"):
        record_reader.read_examples(copy, None)
    (copy / tfrecords.METADATA_FILE).unlink()
    for empty in (copy, tmp_path / "empty"):
        empty.mkdir(exist_ok=True)
        with pytest.raises(InputError, match=rf"^{re.escape(str(empty))}: no metadata.json.*--overwrite$"):
            next(record_reader.training_batches(empty, 8, seed=1))


def test_the_reader_runs_without_tensorflow_and_its_benchmark_at_the_smallest_size(dataset, tmp_path):
    """TensorFlow made unimportable, as on a GPU machine: reading the folder still works. Then
    bench/record_reader_speed.py at its smallest size (a smoke run: its figures are not checked)."""
    folder, metadata = dataset
    script = ("import sys, json; sys.modules['tensorflow'] = None\n"
              "from data import record_reader\n"
              f"examples = record_reader.read_examples({str(folder)!r}, None)\n"
              f"batch = next(record_reader.training_batches({str(folder)!r}, 4, seed=1))\n"
              "print('RESULTS', json.dumps([len(examples['input_ids']), batch['input_ids'].shape[0]]))")
    env = dict(os.environ, PYTHONPATH=str(tfrecords.pathlib.Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.split("RESULTS", 1)[1])
    assert counts == [sum(s["examples"] for s in metadata["shards"]), 4]

    from bench import record_reader_speed

    rows = record_reader_speed.main(["--dataset", str(folder), "--synthetic-mb", "1", "--work-dir", str(tmp_path), "--repeats", "1"])
    assert {row["input"] for row in rows} == {"dataset", "synthetic 1 MB"}
    assert all(row["equal"] and row["numpy_mb_s"] > 0 and row["tf_data_mb_s"] > 0 for row in rows)
