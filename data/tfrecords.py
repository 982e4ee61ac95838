"""Pretraining TFRecords: the feature spec, a fast deterministic serializer, atomic shard writing,
metadata.json, and the tf.data reader for one worker of many.

The features keep the original names (`input_ids`, `input_mask`, `segment_ids`, int64, fixed length);
masking happens in the model at every step, so no masked-LM features are stored.
"""
import contextlib
import json
import os
import pathlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from common import atomic
from common.errors import InputError, short_reason
from common.protobuf_wire import varint as _encode_varint

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")
SHARD_PREFIX = "pretrain_data.tfrecord"
METADATA_FILE = "metadata.json"
FORMAT_VERSION = 1
TEMP_SUFFIX = ".incomplete"
# Shards may be written GZIP-compressed (build_pretraining_dataset.py --compression gzip): TFRecord's own
# compression, which tf.data reads with compression_type="GZIP". WordPiece ids as int64 varints compress to about
# a third (139 MB -> 47 MB for the four shared Wikipedia shards), which matters where a dataset is copied (a GPU
# machine that takes 64 MiB per call) or stored many times. metadata.json names it ("compression"); a folder
# without the key is uncompressed, as every folder built before the option.
COMPRESSIONS = ("none", "gzip")
# The dataset folder's copy of its vocabulary, by the tokenizer's kind (build_pretraining_dataset.copy_vocabulary)
VOCAB_COPY_NAMES = {"wordpiece": "vocab.txt", "sentencepiece": "spm.model"}


def shard_name(index: int, num_shards: int) -> str:
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}"


# --- serialization -----------------------------------------------------------------------------------
# tf.train.Example is hand-encoded: it is several times faster than building the protobuf in Python, and
# a fixed field order makes the bytes reproducible. A test parses the result with TensorFlow.

_SMALL_VARINTS = [_encode_varint(i) for i in range(1 << 14)]  # every length a feature can have


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if value < (1 << 14) else _encode_varint(value)


class ExampleSerializer:
    """Serializes the three int64 features; varints of token ids come from a table built once."""

    def __init__(self, vocab_size: int, max_seq_length: int = 0):
        self._id_varints = [_encode_varint(i) for i in range(max(vocab_size, 2))]
        self._max_seq_length = max_seq_length
        self._keys = {name: b"\x0a" + _varint(len(name)) + name.encode() for name in FEATURE_NAMES}
        self._mask_entries = {}  # the builder's input_mask is a prefix of ones: one entry per length

    def _feature_entry(self, name: str, payload: bytes) -> bytes:
        int64_list = b"\x0a" + _varint(len(payload)) + payload          # Int64List.value, packed
        feature = b"\x1a" + _varint(len(int64_list)) + int64_list       # Feature.int64_list
        entry = self._keys[name] + b"\x12" + _varint(len(feature)) + feature
        return b"\x0a" + _varint(len(entry)) + entry                     # Features.feature map entry

    def serialize(self, input_ids: np.ndarray, input_mask: np.ndarray, segment_ids: np.ndarray) -> bytes:
        """Token ids must be below vocab_size; input_mask and segment_ids are 0/1."""
        mask_entry = self._feature_entry("input_mask", input_mask.astype(np.uint8).tobytes())
        ids_payload = b"".join([self._id_varints[i] for i in input_ids.tolist()])
        features = (self._feature_entry("input_ids", ids_payload) + mask_entry
                    + self._feature_entry("segment_ids", segment_ids.astype(np.uint8).tobytes()))
        return b"\x0a" + _varint(len(features)) + features               # Example.features

    def serialize_packed(self, example) -> bytes:
        """The builder's fast path: bytes straight from a PackedExample's segments, no arrays."""
        varints, length, first_length = self._id_varints, example.num_tokens, example.first_length
        padding = self._max_seq_length - length
        parts = [varints[example.cls_id]]
        parts.extend([varints[i] for i in example.first_segment])
        parts.append(varints[example.sep_id])
        if example.second_segment:
            parts.extend([varints[i] for i in example.second_segment])
            parts.append(varints[example.sep_id])
        ids_payload = b"".join(parts) + varints[example.pad_id] * padding
        mask_entry = self._mask_entries.get(length)
        if mask_entry is None:
            mask_entry = self._mask_entries[length] = self._feature_entry(
                "input_mask", b"\x01" * length + b"\x00" * padding)
        segments = b"\x00" * first_length + b"\x01" * (length - first_length) + b"\x00" * padding
        features = (self._feature_entry("input_ids", ids_payload) + mask_entry
                    + self._feature_entry("segment_ids", segments))
        return b"\x0a" + _varint(len(features)) + features


# --- writing -----------------------------------------------------------------------------------------

class ShardWriter:
    """Writes examples round-robin over the shards one builder process owns, under temporary names.

    `commit()` renames each finished shard to its final name; `abort()` deletes what was written.
    """

    def __init__(self, output_dir: pathlib.Path, shard_indices: Sequence[int], num_shards: int,
                 compression: str = "none"):
        import tensorflow as tf

        self._final = [output_dir / shard_name(i, num_shards) for i in shard_indices]
        self._temp = [p.with_name(p.name + TEMP_SUFFIX) for p in self._final]
        options = tf.io.TFRecordOptions(compression_type=tf_compression_type(compression))
        self._writers = [tf.io.TFRecordWriter(str(p), options) for p in self._temp]
        self.examples_per_shard = [0] * len(self._final)
        self._next = 0

    def write(self, record: bytes) -> None:
        self._writers[self._next].write(record)
        self.examples_per_shard[self._next] += 1
        self._next = (self._next + 1) % len(self._writers)

    def commit(self) -> List[Dict]:
        for writer in self._writers:
            writer.close()
        shards = []
        for temp, final, count in zip(self._temp, self._final, self.examples_per_shard):
            os.replace(temp, final)
            shards.append({"file": final.name, "examples": count, "bytes": final.stat().st_size})
        return shards

    def abort(self) -> None:
        for writer in self._writers:
            writer.close()
        for temp in self._temp:
            temp.unlink(missing_ok=True)


def tf_compression_type(compression: str) -> str:
    """TensorFlow's name of a COMPRESSIONS entry ("" for none, as tf.data spells it)."""
    if compression not in COMPRESSIONS:
        raise InputError(f"compression {compression!r}: choose one of {', '.join(COMPRESSIONS)}")
    return "" if compression == "none" else compression.upper()


def dataset_compression(metadata: Dict) -> str:
    """How the folder's shards are compressed ("none" for a folder built before the option)."""
    compression = metadata.get("compression", "none")
    if compression not in COMPRESSIONS:
        raise InputError(f"{METADATA_FILE}: compression {compression!r} is not one this code reads "
                         f"({', '.join(COMPRESSIONS)}); rebuild the dataset with this version of the builder")
    return compression


def files_compression(files: Sequence[str]) -> str:
    """The compression of shards named by path alone: from the metadata.json beside the first of them."""
    if not files:
        return "none"
    path = pathlib.Path(files[0]).parent / METADATA_FILE
    try:
        return dataset_compression(json.loads(path.read_text()))
    except (OSError, ValueError):
        return "none"


def write_metadata(output_dir: pathlib.Path, metadata: Dict) -> None:
    """Written last and atomically: its presence is what marks a dataset folder as complete."""
    path = output_dir / METADATA_FILE
    atomic.write_json(path, metadata)


# --- reading -----------------------------------------------------------------------------------------

def load_metadata(dataset_dir) -> Dict:
    """Refuses a folder without metadata.json: an interrupted or foreign build must not be trained on."""
    dataset_dir = pathlib.Path(dataset_dir)
    path = dataset_dir / METADATA_FILE
    if not dataset_dir.is_dir():
        raise InputError(f"{dataset_dir}: no such dataset folder; build one with build_pretraining_dataset.py")
    if not path.is_file():
        raise InputError(
            f"{dataset_dir}: no {METADATA_FILE}, so the dataset is incomplete (an interrupted build?) or not "
            "a pretraining dataset; rebuild it with build_pretraining_dataset.py --overwrite")
    try:
        metadata = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not valid JSON ({error}); rebuild the dataset with --overwrite") from None
    if metadata.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{path}: format_version {metadata.get('format_version')!r}, this code reads "
                         f"{FORMAT_VERSION}; rebuild the dataset with this version of the builder")
    dataset_compression(metadata)  # a value this code cannot read stops here, before any work
    for shard in metadata["shards"]:
        shard_path = dataset_dir / shard["file"]
        if not shard_path.is_file() or shard_path.stat().st_size != shard["bytes"]:
            raise InputError(f"{shard_path}: missing or changed since the build; rebuild the dataset with "
                             "--overwrite")
    return metadata


def check_dataset_matches(metadata: Dict, dataset_dir, *, vocab_sha256: Optional[str] = None,
                          vocab_size: Optional[int] = None, max_seq_length: Optional[int] = None) -> None:
    """Stops before any work when the dataset was built for another vocabulary or a longer model input."""
    vocab = metadata["vocab"]
    if vocab_sha256 is not None and vocab["sha256"] != vocab_sha256:
        raise InputError(f"{dataset_dir}: built with another vocabulary (sha256 {vocab['sha256'][:12]}…, "
                         f"the model's is {vocab_sha256[:12]}…); rebuild the dataset with the model's vocabulary")
    if vocab_size is not None and vocab["size"] != vocab_size:
        raise InputError(f"{dataset_dir}: vocabulary of {vocab['size']} tokens, the model expects "
                         f"{vocab_size}; set vocab_size in --hparams or rebuild the dataset")
    if max_seq_length is not None and metadata["max_seq_length"] != max_seq_length:
        raise InputError(f"{dataset_dir}: examples are {metadata['max_seq_length']} tokens long, the config "
                         f"says max_seq_length={max_seq_length}; set it to {metadata['max_seq_length']} in "
                         "--hparams or rebuild the dataset")


def shard_files(dataset_dir, metadata: Dict) -> List[str]:
    return [str(pathlib.Path(dataset_dir) / shard["file"]) for shard in metadata["shards"]]


def split_shards(dataset_dir, metadata: Dict, do_eval: bool, holdout_shards: int) -> Tuple[List[str], List[str]]:
    """(train files, eval files): with do_eval and ≥ 2 shards the last `holdout_shards` are held out. With
    the dataset, so that pretraining, its JAX export and the inspector's held-out text split it alike."""
    files = [f for f, shard in zip(shard_files(dataset_dir, metadata), metadata["shards"]) if shard["examples"] > 0]
    if not files:
        raise InputError(f"{dataset_dir}: the dataset has no examples; build it from a larger corpus")
    if not do_eval:
        return files, []
    if holdout_shards and len(files) >= 2:
        if holdout_shards >= len(files):
            raise InputError(f"{dataset_dir}: eval_holdout_shards={holdout_shards} leaves no shard of {len(files)} "
                             "for training; lower it in --hparams")
        return files[:-holdout_shards], files[-holdout_shards:]
    return files, files  # one shard: evaluate on training data (said in the log)


def feature_spec(max_seq_length: int):
    import tensorflow as tf

    return {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in FEATURE_NAMES}


def pretraining_dataset(dataset_dir, batch_size: int, *, files: Optional[Sequence[str]] = None,
                        input_context=None, training: bool = True, shuffle_buffer: int = 100,
                        seed: Optional[int] = None, metadata: Optional[Dict] = None):
    """The original reader, made distribution-aware.

    `batch_size` is per input pipeline (under tf.distribute: input_context.get_per_replica_batch_size).
    Files are split across input pipelines when there are enough of them, records otherwise. Training
    repeats, shuffles files and records and interleaves; evaluation reads each record once, in order.
    """
    import tensorflow as tf

    metadata = metadata if metadata is not None else load_metadata(dataset_dir)
    files = list(files) if files is not None else shard_files(dataset_dir, metadata)
    files = [f for f in files if _shard_examples(metadata, f) > 0]
    if not files:
        raise InputError(f"{dataset_dir}: the dataset has no examples; build it from a larger corpus")
    max_seq_length = metadata["max_seq_length"]
    compression_type = tf_compression_type(dataset_compression(metadata))

    def records(file):
        return tf.data.TFRecordDataset(file, compression_type=compression_type)

    dataset = tf.data.Dataset.from_tensor_slices(files)

    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines
    if shard_by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)

    if training:
        dataset = dataset.repeat().shuffle(len(files), seed=seed)
        dataset = dataset.interleave(records, cycle_length=min(len(files), 8),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    else:
        dataset = dataset.flat_map(records)
    if num_pipelines > 1 and not shard_by_file:
        dataset = dataset.shard(num_pipelines, pipeline_id)
    if training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)

    spec = feature_spec(max_seq_length)

    def parse(records):
        features = tf.io.parse_example(records, spec)
        return {name: tf.cast(features[name], tf.int32) for name in FEATURE_NAMES}

    dataset = dataset.batch(batch_size, drop_remainder=training)
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


# --- damage ------------------------------------------------------------------------------------------
# load_metadata catches a shard whose size changed; bytes damaged in place are only found when a record
# fails its checksum, deep in an interleaved read whose DataLossError says "corrupted record at <offset>"
# but not in which file. The files are then read one by one to name it, only after such an error, so a
# healthy run never pays for the scan.

def first_damaged_shard(files: Sequence[str], compression: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """(file, TensorFlow's reason) for the first file whose records fail their checksums (or, compressed, whose
    stream is cut or damaged), else None. `compression` None: the metadata.json beside the files says.

    Records are read in large batches, so the scan runs at disk speed (a 112 MB shard: 0.2 s from the
    page cache on 2 cores, against 2.6 s record by record).
    """
    import tensorflow as tf

    compression_type = tf_compression_type(compression or files_compression(files))
    for file in files:
        try:
            for _ in tf.data.TFRecordDataset(file, compression_type=compression_type).batch(4096):
                pass
        except tf.errors.DataLossError as error:
            return file, short_reason(error)
    return None


@contextlib.contextmanager
def naming_damaged_shards(files: Sequence[str], then: str = ""):
    """A DataLossError while reading `files` becomes one InputError naming the damaged shard and the fix.

    With several workers only the one reading the damaged shard meets the DataLossError; it stops, and
    the others see their collective aborted (UnavailableError, CancelledError or AbortedError) instead.
    Those errors are checked against the shards too (every worker holds the whole list), so every worker
    ends with the same line. `then` ends the line with what the user does after the rebuild. An error
    that no shard's checksums explain (a failing disk, a peer that died for another reason) is raised
    unchanged.
    """
    import tensorflow as tf

    try:
        yield
    except (tf.errors.DataLossError, tf.errors.UnavailableError, tf.errors.CancelledError,
            tf.errors.AbortedError):
        damaged = first_damaged_shard(files)
        if damaged is None:
            raise
        file, reason = damaged
        raise InputError(f"{file}: damaged ({reason}); rebuild the dataset with the same "
                         f"build_pretraining_dataset.py command and --overwrite{then}") from None


def _shard_examples(metadata: Dict, file: str) -> int:
    name = pathlib.Path(file).name
    for shard in metadata["shards"]:
        if shard["file"] == name:
            return shard["examples"]
    raise InputError(f"{file}: not a shard listed in this dataset's {METADATA_FILE}")
