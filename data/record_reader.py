"""The pretraining dataset folder read with NumPy alone: a JAX run on a machine without TensorFlow reads the
shards build_pretraining_dataset.py wrote, the same examples in the same order as data.tfrecords'
pretraining_dataset gives them.

Records: TFRecord framing (uint64 length, masked CRC-32C of the length, the data, masked CRC-32C of the
data), both checksums checked for every record, vectorised over a file (common.crc32c's word tables), so
damage is refused where TensorFlow's reader refuses it, with the file, the byte offset and the fix.
Examples: tf.train.Example walked in Python to find each int64 feature's varints (packed or not), the
varints of a whole file then decoded in one vectorised pass into int32 arrays of max_seq_length.

Order: evaluation (files in turn, each record once) is tf.data's by construction. Training is tf.data's too
for a given seed: its two shuffles (ShuffleDataset's buffer, drawn from Philox-4x32-10 seeded as TensorFlow
seeds it) and its interleave (a cycle of min(files, 8), a record from each in turn) are reproduced, so the
same (seed, global seed) gives tf.data's batches element for element (tests/test_record_reader.py compares).
Without a seed tf.data shuffles from the OS's entropy, and so does this reader.

Compressed shards (metadata.json's "compression": "gzip", build_pretraining_dataset.py --compression gzip) are
decompressed whole with Python's gzip (its CRC-32 and length checked), then read as above.
"""
import gzip
import itertools
import os
import zlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from common import crc32c
from common.errors import InputError
from data import tfrecords

FEATURE_NAMES = tfrecords.FEATURE_NAMES
REBUILD = "rebuild the dataset with build_pretraining_dataset.py --overwrite"
LENGTH_BYTES, CRC_BYTES = 8, 4
HEADER_BYTES = LENGTH_BYTES + CRC_BYTES
CYCLE_LENGTH = 8  # tfrecords.pretraining_dataset's interleave: at most 8 files open
_UINT32 = 0xFFFFFFFF
_CHUNK_BYTES = 1 << 22  # records checksummed side by side, padded, at most this many bytes at once
_LONG_RECORD = 1 << 16  # longer records are checksummed one by one (common.crc32c's own lanes)


# --- TFRecord framing and checksums -------------------------------------------------------------------

def _refuse(path, offset, what):
    return InputError(f"{path}: {what} at byte offset {offset}; {REBUILD}")


def _masked(crcs):
    """TFRecord's (LevelDB's) masking of an array of CRCs: rotated right by 15, plus a constant."""
    crcs = crcs.astype(np.uint64)
    rotated = ((crcs >> np.uint64(15)) | (crcs << np.uint64(17))) & np.uint64(_UINT32)
    return ((rotated + np.uint64(0xA282EAD8)) & np.uint64(_UINT32)).astype(np.uint32)


def _initial_register_after_zeros(max_length):
    """[n]: the CRC register started at all ones after n zero bytes. Left-padding a record with zeros leaves a
    register started at zero unchanged, so padded records share one lane pass and this table puts back the
    all-ones start each record's own length needs (the CRC is linear: start and data contribute by xor)."""
    table, register, after = crc32c._TABLE_LIST, _UINT32, [_UINT32]
    for _ in range(max_length):
        register = table[register & 0xFF] ^ (register >> 8)
        after.append(register)
    return np.array(after, np.uint32)


def _crcs_side_by_side(buffer, starts, lengths):
    """CRC-32C of records of similar length: right-aligned in rows of a padded matrix, a word per step."""
    width = -(-int(lengths.max()) // 4) * 4 if lengths.size else 0
    positions = (starts + lengths)[:, None] - width + np.arange(width)
    rows = np.where(positions >= starts[:, None], buffer[np.maximum(positions, 0)], 0).astype(np.uint8)
    registers = crc32c._lane_registers(rows.view("<u4")) if width else np.zeros(len(starts), np.uint32)
    return registers ^ _initial_register_after_zeros(width)[lengths] ^ np.uint32(_UINT32)


def masked_crcs(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of buffer[start:start+length] for each record, vectorised over records grouped by length."""
    result = np.zeros(len(starts), np.uint32)
    order = np.argsort(lengths, kind="stable")
    short = order[lengths[order] <= _LONG_RECORD]
    begin = 0
    while begin < short.size:  # sorted by length: a chunk's rows are padded to its longest
        end = min(begin + max(1, _CHUNK_BYTES // max(4, int(lengths[short[begin]]))), short.size)
        chunk = short[begin:begin + max(1, _CHUNK_BYTES // max(4, int(lengths[short[end - 1]])))]
        result[chunk] = _crcs_side_by_side(buffer, starts[chunk], lengths[chunk])
        begin += chunk.size
    for index in order[lengths[order] > _LONG_RECORD]:
        result[index] = crc32c.crc32c(buffer[starts[index]:starts[index] + lengths[index]])
    return _masked(result)


def _stored_crcs(buffer, offsets):
    return buffer[offsets[:, None] + np.arange(CRC_BYTES)].copy().view("<u4").reshape(-1)


def _first_bad_header(buffer, header_offsets):
    """Offset of the first record whose length fails its checksum, else None."""
    if not len(header_offsets):
        return None
    good = masked_crcs(buffer, header_offsets, np.full(len(header_offsets), LENGTH_BYTES)) == _stored_crcs(
        buffer, header_offsets + LENGTH_BYTES)
    return None if good.all() else int(header_offsets[np.argmin(good)])


def record_spans(buffer: np.ndarray, path) -> Tuple[np.ndarray, np.ndarray]:
    """(offset of each record's header, its data length), every checksum checked: a damaged or truncated file
    raises InputError with the offset TensorFlow's reader names (the record's, or for a bad data checksum
    its data's)."""
    data, size = buffer.data, buffer.size
    offsets, lengths, position = [], [], 0
    while position < size:
        length = int.from_bytes(data[position:position + LENGTH_BYTES], "little")
        if position + HEADER_BYTES + length + CRC_BYTES > size:
            bad = _first_bad_header(buffer, np.array(offsets + [position], np.int64)) if (
                size - position >= HEADER_BYTES) else _first_bad_header(buffer, np.array(offsets, np.int64))
            if bad is not None:
                raise _refuse(path, bad, "corrupted record (its length fails its CRC-32C)")
            raise _refuse(path, position, f"truncated file (a record of {length} bytes starts there, the file "
                                          f"ends at byte {size})" if size - position >= HEADER_BYTES
                          else f"truncated file ({size - position} bytes of a record header)")
        offsets.append(position)
        lengths.append(length)
        position += HEADER_BYTES + length + CRC_BYTES
    offsets, lengths = np.array(offsets, np.int64), np.array(lengths, np.int64)
    _check_checksums(buffer, offsets, lengths, path)
    return offsets, lengths


def _check_checksums(buffer, offsets, lengths, path):
    bad_header = _first_bad_header(buffer, offsets)
    data_good = masked_crcs(buffer, offsets + HEADER_BYTES, lengths) == _stored_crcs(
        buffer, offsets + HEADER_BYTES + lengths)
    bad_data = None if data_good.all() else int(offsets[np.argmin(data_good)])
    if bad_header is not None and (bad_data is None or bad_header <= bad_data):
        raise _refuse(path, bad_header, "corrupted record (its length fails its CRC-32C)")
    if bad_data is not None:  # the offset of its data, as TensorFlow's DataLossError gives it
        raise _refuse(path, bad_data + HEADER_BYTES, "corrupted record (its data fails its CRC-32C)")


def read_file(path, compression: str = "none") -> np.ndarray:
    """The file's bytes; a GZIP-compressed shard (tfrecords.COMPRESSIONS) decompressed, its stream checked (gzip's
    own CRC-32 and length, then every record's checksums as for an uncompressed one)."""
    if compression not in tfrecords.COMPRESSIONS:
        raise InputError(f"{path}: compression {compression!r} is not one this code reads; {REBUILD}")
    try:
        if compression == "none":
            return np.fromfile(path, np.uint8)
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror}); {REBUILD}") from None
    try:
        return np.frombuffer(gzip.decompress(data), np.uint8)
    except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{path}: damaged GZIP stream ({error}); {REBUILD}") from None


def read_records(path, compression: str = "none") -> List[bytes]:
    """Every record of a TFRecord file as bytes, checked: for tools and tests; examples go through
    read_file_examples, which never makes a bytes object per record."""
    buffer = read_file(path, compression)
    offsets, lengths = record_spans(buffer, path)
    return [buffer[o + HEADER_BYTES:o + HEADER_BYTES + n].tobytes() for o, n in zip(offsets.tolist(), lengths.tolist())]


# --- tf.train.Example ---------------------------------------------------------------------------------

class _NotAnExample(ValueError):
    pass


def _varint_end(data, position, end):
    """(value, position after it) of the varint at `position`, not past `end`."""
    value, shift = 0, 0
    while True:
        if position >= end or shift > 63:
            raise _NotAnExample("a varint runs past its field")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if byte < 0x80:
            return value, position


def _fields(data, position, end):
    """(field number, wire type, start, end) of each field of the message in data[position:end]: the byte range
    of the payload (for a varint, the varint's own bytes)."""
    while position < end:
        tag, position = _varint_end(data, position, end)
        wire = tag & 7
        if wire == 0:
            _, after = _varint_end(data, position, end)
        elif wire == 2:
            length, position = _varint_end(data, position, end)
            after = position + length
        elif wire in (1, 5):
            after = position + (8 if wire == 1 else 4)
        else:
            raise _NotAnExample(f"wire type {wire}")
        if after > end:
            raise _NotAnExample("a field runs past its message")
        yield tag >> 3, wire, position, after
        position = after


def _int64_ranges(data, start, end, name):
    """Byte ranges of the varints of a Feature's int64_list: a packed run, or one varint per unpacked value."""
    ranges, kind = [], None
    for number, wire, field_start, field_end in _fields(data, start, end):
        if number in (1, 2, 3):
            kind = number
        if number == 3 and wire == 2:
            for value_number, value_wire, value_start, value_end in _fields(data, field_start, field_end):
                if value_number == 1 and value_wire in (0, 2):
                    ranges.append((value_start, value_end))
    if kind != 3:
        raise _NotAnExample(f"feature {name} is not an int64 list")
    return ranges


def _example_ranges(data, start, end, wanted):
    """{feature name: varint byte ranges} of the wanted features of the Example in data[start:end] (a repeated
    map key: the last entry wins, as protobuf merges maps)."""
    found = {}
    for number, wire, features_start, features_end in _fields(data, start, end):
        if number != 1 or wire != 2:
            continue
        for entry_number, entry_wire, entry_start, entry_end in _fields(data, features_start, features_end):
            if entry_number != 1 or entry_wire != 2:
                continue
            key, value = None, (0, 0)
            for part_number, part_wire, part_start, part_end in _fields(data, entry_start, entry_end):
                if part_number == 1 and part_wire == 2:
                    key = bytes(data[part_start:part_end])
                elif part_number == 2 and part_wire == 2:
                    value = (part_start, part_end)
            if key in wanted:
                found[wanted[key]] = _int64_ranges(data, *value, wanted[key])
    return found


def _decode_varints(raw):
    """The int64 values of concatenated varints (uint8 array ending with a varint's last byte). The bits of a
    varint's bytes are disjoint, so a sum of the shifted bytes is their or."""
    last = raw < 0x80
    if last.all():
        return raw.astype(np.int64)
    begins = np.empty(raw.size, bool)
    begins[0], begins[1:] = True, last[:-1]
    indices = np.arange(raw.size)
    position = indices - np.maximum.accumulate(np.where(begins, indices, 0))
    if position.max() > 9:
        raise _NotAnExample("a varint longer than 10 bytes")
    parts = (raw & 0x7F).astype(np.int64) << (7 * position)
    return np.add.reduceat(parts, np.flatnonzero(begins))


def _gather_ranges(buffer, starts, ends):
    lengths = ends - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return buffer[offsets + np.arange(int(lengths.sum()))]


def _feature_arrays(buffer, owner, spans, count, name, length, path, offsets):
    """[count, length] int32 of one feature from its varint ranges (`spans` [n, 2], record `owner` of each, in
    record order); a record of another length is refused as tf.io.FixedLenFeature refuses it."""
    raw = _gather_ranges(buffer, spans[:, 0], spans[:, 1])
    unfinished = spans[:, 1] > spans[:, 0]
    unfinished[unfinished] = buffer[spans[unfinished, 1] - 1] >= 0x80
    if unfinished.any():
        raise _refuse(path, int(offsets[owner[np.argmax(unfinished)]]), f"not a tf.train.Example ({name}: a "
                      "varint runs past its field)")
    counts = np.bincount(np.repeat(owner, spans[:, 1] - spans[:, 0])[raw < 0x80], minlength=count)
    if (counts != length).any():
        wrong = int(np.argmax(counts != length))
        raise _refuse(path, int(offsets[wrong]), f"an example with {counts[wrong]} values of {name}, the dataset's "
                      f"max_seq_length is {length}")
    try:
        values = _decode_varints(raw)
    except _NotAnExample as error:
        raise _refuse(path, int(offsets[0]), f"not a tf.train.Example ({error})") from None
    return values.astype(np.int32).reshape(count, length)


def _varints_at(buffer, positions, ends, width=5):
    """(values, positions after, ok) of the varints at `positions`: ok where one ends within `width` bytes and
    before `ends` (lengths in these messages need at most 5 bytes)."""
    window = buffer[np.minimum(positions[:, None] + np.arange(width), buffer.size - 1)]
    last = window < 0x80
    size = np.argmax(last, axis=1) + 1
    parts = np.where(np.arange(width) < size[:, None], (window & 0x7F).astype(np.int64) << (7 * np.arange(width)), 0)
    return parts.sum(axis=1), positions + size, last.any(axis=1) & (positions + size <= ends)


def _tag_at(buffer, positions, ends, tag):
    return (positions < ends) & (buffer[np.minimum(positions, buffer.size - 1)] == tag)


def _delimited(buffer, positions, ends, tag):
    """(payload start, payload end, ok) of a length-delimited field with this one-byte tag at `positions`."""
    length, start, ok = _varints_at(buffer, positions + 1, ends)
    return start, start + length, ok & _tag_at(buffer, positions, ends, tag) & (start + length <= ends)


def _key_is(buffer, start, end, key):
    window = buffer[np.minimum(start[:, None] + np.arange(len(key)), buffer.size - 1)]
    return (end - start == len(key)) & (window == np.frombuffer(key, np.uint8)).all(axis=1)


def _canonical_ranges(buffer, starts, ends):
    """The packed payload of each feature of records laid out as every TensorFlow or data.tfrecords writer
    lays them out (one Features, map entries of key then an int64_list holding one packed run), found for all
    records at once: (ok, {name: [records, 2] payload ranges}). Records not ok go through _example_ranges."""
    features_start, features_end, ok = _delimited(buffer, starts, ends, 0x0A)
    ok &= features_end == ends
    found = {name: np.zeros((len(starts), 2), np.int64) for name in FEATURE_NAMES}
    seen = {name: np.zeros(len(starts), bool) for name in FEATURE_NAMES}
    cursor = features_start.copy()
    while True:
        rows = np.flatnonzero(ok & (cursor < features_end))
        if not rows.size:
            break
        entry_start, entry_end, good = _delimited(buffer, cursor[rows], features_end[rows], 0x0A)
        key_start, key_end, key_good = _delimited(buffer, entry_start, entry_end, 0x0A)
        value_start, value_end, value_good = _delimited(buffer, key_end, entry_end, 0x12)
        list_start, list_end, list_good = _delimited(buffer, value_start, value_end, 0x1A)
        run_start, run_end, run_good = _delimited(buffer, list_start, list_end, 0x0A)
        good &= key_good & value_good & list_good & run_good & (value_end == entry_end) & (
            list_end == value_end) & (run_end == list_end)
        for name in FEATURE_NAMES:
            match = good & _key_is(buffer, key_start, key_end, name.encode())
            good &= ~(match & seen[name][rows])  # a repeated key: the general walk decides
            found[name][rows[match]] = np.stack([run_start, run_end], axis=1)[match]
            seen[name][rows[match]] = True
        ok[rows[~good]] = False
        cursor[rows] = entry_end
    for name in FEATURE_NAMES:
        ok &= seen[name]
    return ok, found


def parse_examples(buffer, offsets, lengths, max_seq_length: int, path) -> Dict[str, np.ndarray]:
    """{input_ids, input_mask, segment_ids}: [records, max_seq_length] int32, as tf.io.parse_example with
    FixedLenFeature([max_seq_length], tf.int64) and the cast to int32 give them. Records in the usual layout
    are located all at once; any other (unpacked values, other features, repeated keys) walked one by one."""
    starts = offsets + HEADER_BYTES
    canonical, found = _canonical_ranges(buffer, starts, starts + lengths)
    owners = {name: [np.flatnonzero(canonical)] for name in FEATURE_NAMES}
    spans = {name: [found[name][canonical]] for name in FEATURE_NAMES}
    data, wanted = buffer.data, {name.encode(): name for name in FEATURE_NAMES}
    for record in np.flatnonzero(~canonical).tolist():
        start = int(starts[record])
        try:
            ranges = _example_ranges(data, start, start + int(lengths[record]), wanted)
        except _NotAnExample as error:
            raise _refuse(path, int(offsets[record]), f"not a tf.train.Example of int64 features ({error})") from None
        for name in FEATURE_NAMES:
            record_spans = ranges.get(name, [])
            owners[name].append(np.full(len(record_spans), record))
            spans[name].append(np.array(record_spans, np.int64).reshape(-1, 2))
    examples = {}
    for name in FEATURE_NAMES:
        owner = np.concatenate(owners[name])
        order = np.argsort(owner, kind="stable")
        examples[name] = _feature_arrays(buffer, owner[order], np.concatenate(spans[name])[order], len(offsets), name,
                                         max_seq_length, path, offsets)
    return examples


def read_file_examples(path, max_seq_length: int, compression: str = "none") -> Dict[str, np.ndarray]:
    """One shard's examples in file order, every checksum checked."""
    buffer = read_file(path, compression)
    offsets, lengths = record_spans(buffer, path)
    return parse_examples(buffer, offsets, lengths, max_seq_length, path)


# --- the dataset folder -------------------------------------------------------------------------------

def load_metadata(dataset_dir) -> Dict:
    """metadata.json checked as the TensorFlow path checks it (data.tfrecords.load_metadata: the folder, the
    file, its format version, every listed shard present at its size): one InputError line naming the fix."""
    return tfrecords.load_metadata(dataset_dir)


def files_with_examples(dataset_dir, metadata: Dict, files: Optional[Sequence[str]] = None) -> List[str]:
    """The shards pretraining_dataset reads: those listed (all by default) that hold examples."""
    files = list(files) if files is not None else tfrecords.shard_files(dataset_dir, metadata)
    files = [f for f in files if tfrecords._shard_examples(metadata, f) > 0]
    if not files:
        raise InputError(f"{dataset_dir}: the dataset has no examples; build it from a larger corpus")
    return files


def _read_shards(metadata, files, limit=None) -> List[Dict[str, np.ndarray]]:
    """Each file's examples, in order, stopping once `limit` examples are read."""
    parts, count = [], 0
    compression = tfrecords.dataset_compression(metadata)
    for file in files:
        if limit is not None and count >= limit:
            break
        parts.append(read_file_examples(file, metadata["max_seq_length"], compression))
        count += len(parts[-1]["input_ids"])
    return parts


def _concatenate(parts, max_seq_length, limit=None):
    if not parts:
        return {name: np.zeros((0, max_seq_length), np.int32) for name in FEATURE_NAMES}
    return {name: np.concatenate([part[name] for part in parts])[:limit] for name in FEATURE_NAMES}


def read_examples(dataset_dir, metadata: Optional[Dict], files: Optional[Sequence[str]] = None,
                  limit: Optional[int] = None) -> Dict[str, np.ndarray]:
    """{input_ids, input_mask, segment_ids} int32 arrays of the files' examples in file order, at most `limit`:
    what studies.device_path.export.read_examples reads with tf.data (the evaluation reader), without TensorFlow."""
    metadata = metadata if metadata is not None else load_metadata(dataset_dir)
    files = files_with_examples(dataset_dir, metadata, files)
    return _concatenate(_read_shards(metadata, files, limit), metadata["max_seq_length"], limit)


# --- the per-worker split ------------------------------------------------------------------------------

def worker_files(files: Sequence[str], num_workers: int, worker_index: int) -> Tuple[List[str], bool]:
    """(the files this worker reads, whether records rather than files are split): pretraining_dataset's
    rule for input_context.num_input_pipelines / input_pipeline_id. With at least as many files as workers,
    tf.data's shard(num_workers, worker_index) of the file list; otherwise every file, and every
    num_workers-th record of the (interleaved) stream."""
    if not 0 <= worker_index < num_workers:
        raise ValueError(f"worker_index {worker_index} of {num_workers} workers")
    by_file = num_workers > 1 and len(files) >= num_workers
    return (list(files[worker_index::num_workers]) if by_file else list(files)), num_workers > 1 and not by_file


# --- tf.data's random order ----------------------------------------------------------------------------

class Philox:
    """TensorFlow's random::PhiloxRandom (4x32, 10 rounds) behind its SingleSampleAdapter: one uint32 a call."""
    _MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
    _KEY_STEPS = (0x9E3779B9, 0xBB67AE85)

    def __init__(self, seed: int, seed2: int):
        seed, seed2 = seed & (1 << 64) - 1, seed2 & (1 << 64) - 1
        self._key = (seed & _UINT32, seed >> 32)
        self._counter = seed2 << 64  # the 128-bit counter: words 2 and 3 hold seed2
        self._block, self._used = (), 4

    def _next_block(self):
        counter = self._counter
        c0, c1, c2, c3 = (counter & _UINT32, counter >> 32 & _UINT32, counter >> 64 & _UINT32, counter >> 96)
        (k0, k1), (ma, mb), (ka, kb) = self._key, self._MULTIPLIERS, self._KEY_STEPS
        for _ in range(10):
            p0, p1 = ma * c0, mb * c2
            c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _UINT32, (p0 >> 32) ^ c3 ^ k1, p0 & _UINT32
            k0, k1 = (k0 + ka) & _UINT32, (k1 + kb) & _UINT32
        self._counter = (counter + 1) & ((1 << 128) - 1)
        return c0, c1, c2, c3

    def __call__(self) -> int:
        if self._used == 4:
            self._block, self._used = self._next_block(), 0
        self._used += 1
        return self._block[self._used - 1]


def tf_seeds(seed: Optional[int], global_seed: Optional[int] = None) -> Tuple[int, int]:
    """The (seed, seed2) tf.data's shuffle(seed=seed) runs with (tensorflow.python.framework.random_seed.
    get_seed): the global seed is tf.random.set_seed's, which keras.utils.set_random_seed(config.seed) sets
    in a TensorFlow pretraining run. No seed: fresh entropy, as TensorFlow then takes."""
    maxint32, default_graph_seed = 2 ** 31 - 1, 87654321
    if seed is None:
        return int.from_bytes(os.urandom(8), "little"), int.from_bytes(os.urandom(8), "little")
    seeds = (default_graph_seed if global_seed is None else global_seed % maxint32), seed % maxint32
    return (0, maxint32) if seeds == (0, 0) else seeds


def tf_shuffle(items, buffer_size: int, seeds: Tuple[int, int]) -> Iterator:
    """tf.data.Dataset.shuffle over one pass of `items` (ShuffleDataset's iterator: fill the ring buffer, draw an
    offset from the first iteration's Philox, swap the drawn element with the oldest)."""
    seeding = Philox(*seeds)
    first, second = seeding(), seeding()  # the RandomSeedGenerator's seeds for the first iteration
    draw = Philox(first, second)
    buffer, start, end, items, exhausted = [None] * buffer_size, 0, 0, iter(items), False
    while True:
        while not exhausted and end - start < buffer_size:
            try:
                buffer[end % buffer_size] = next(items)
                end += 1
            except StopIteration:
                exhausted = True
        if end == start:
            return
        index = (start + draw() % (end - start)) % buffer_size
        oldest = start % buffer_size
        yield buffer[index]
        buffer[index], buffer[oldest] = buffer[oldest], buffer[index]
        start += 1


def tf_interleave(elements, cycle_length: int, open_element) -> Iterator:
    """tf.data's interleave with block_length 1 (and its deterministic parallel form): a cycle of open elements,
    one item from each in turn; an exhausted one's slot takes the next element on its next turn."""
    slots, index, open_count, elements, exhausted = [None] * cycle_length, 0, 0, iter(elements), False
    while not exhausted or open_count:
        if slots[index] is not None:
            try:
                item = next(slots[index])
            except StopIteration:
                slots[index], open_count, index = None, open_count - 1, (index + 1) % cycle_length
                continue
            index = (index + 1) % cycle_length
            yield item
        elif not exhausted:
            try:
                slots[index], open_count = open_element(next(elements)), open_count + 1
            except StopIteration:
                exhausted = True
        else:
            index = (index + 1) % cycle_length


def training_order(record_counts: Sequence[int], num_files: int, seeds: Tuple[int, int], *,
                   split_records: bool = False, num_workers: int = 1, worker_index: int = 0,
                   shuffle_buffer: int = 100) -> Iterator[int]:
    """The endless order of a worker's training examples as rows of its files' concatenated examples (files as
    worker_files gives them, `record_counts` examples each): pretraining_dataset's repeat, file shuffle (a
    buffer of `num_files`, every file of the dataset), interleave, record split, record shuffle."""
    starts = np.concatenate([[0], np.cumsum(record_counts)]).tolist()
    file_order = tf_shuffle(itertools.cycle(range(len(record_counts))), num_files, seeds)
    rows = tf_interleave(file_order, min(num_files, CYCLE_LENGTH), lambda i: iter(range(starts[i], starts[i + 1])))
    if split_records:
        rows = itertools.islice(rows, worker_index, None, num_workers)
    return tf_shuffle(rows, shuffle_buffer, seeds)


def training_batches(dataset_dir, batch_size: int, *, num_workers: int = 1, worker_index: int = 0,
                     seed: Optional[int] = None, global_seed: Optional[int] = None,
                     files: Optional[Sequence[str]] = None, shuffle_buffer: int = 100,
                     metadata: Optional[Dict] = None) -> Iterator[Dict[str, np.ndarray]]:
    """Endless NumPy batches of one worker, pretraining_dataset(training=True)'s for the same arguments (its
    input_context's num_input_pipelines and input_pipeline_id are num_workers and worker_index, the seed is
    shuffle's, the global seed tf.random.set_seed's). The worker's files are read into memory first."""
    metadata = metadata if metadata is not None else load_metadata(dataset_dir)
    files = files_with_examples(dataset_dir, metadata, files)
    own, split_records = worker_files(files, num_workers, worker_index)
    parts = _read_shards(metadata, own)
    examples = _concatenate(parts, metadata["max_seq_length"])
    order = training_order([len(part["input_ids"]) for part in parts], len(files), tf_seeds(seed, global_seed),
                           split_records=split_records, num_workers=num_workers, worker_index=worker_index,
                           shuffle_buffer=shuffle_buffer)
    while True:
        rows = np.fromiter(itertools.islice(order, batch_size), np.int64, batch_size)
        yield {name: values[rows] for name, values in examples.items()}


def evaluation_batches(dataset_dir, batch_size: int, *, num_workers: int = 1, worker_index: int = 0,
                       files: Optional[Sequence[str]] = None,
                       metadata: Optional[Dict] = None) -> Iterator[Dict[str, np.ndarray]]:
    """One worker's batches of pretraining_dataset(training=False): every record once, files in order, the last
    batch short."""
    metadata = metadata if metadata is not None else load_metadata(dataset_dir)
    files = files_with_examples(dataset_dir, metadata, files)
    own, split_records = worker_files(files, num_workers, worker_index)
    examples = _concatenate(_read_shards(metadata, own), metadata["max_seq_length"])
    if split_records:
        examples = {name: values[worker_index::num_workers] for name, values in examples.items()}
    for start in range(0, len(examples["input_ids"]), batch_size):
        yield {name: values[start:start + batch_size] for name, values in examples.items()}

