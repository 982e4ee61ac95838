"""TensorFlow's checkpoint files read and written with NumPy alone, for machines that have no TensorFlow.

A checkpoint at `<prefix>` is TensorFlow's TensorBundle:

    <prefix>.index                  a LevelDB-style table: under the empty key a BundleHeaderProto, under each
                                    checkpoint key a BundleEntryProto (dtype, shape, shard, offset, size, CRC32C)
    <prefix>.data-0000k-of-0000n    the tensors' raw little-endian bytes, whole tensors per file

The JAX run writes its weights here so that its output is a model folder (storage.model_folder) that every
TensorFlow reader restores as it restores run_pretraining.py's; write_model_weights writes the same entries
as model_folder.write_weights (tf.train.Checkpoint of model_trackable): each weight under
`model/weights_by_path/<escaped Keras path>/.ATTRIBUTES/VARIABLE_VALUE`, `save_counter`, and the
`_CHECKPOINTABLE_OBJECT_GRAPH` string that tells TensorFlow which object owns which key. Protocol buffers are
encoded by hand (a few varint fields); the checksums are common.crc32c's, NumPy over many slices at once, so
that an electra_base checkpoint (440 MB) is checked in seconds. A damaged file (cut short, bytes flipped) is one
InputError naming it.
"""
import pathlib
import struct

import numpy as np

from common.atomic import atomic_path
from common.errors import InputError
from common.crc32c import crc32c, mask, masked_crc32c
from common.protobuf_wire import field_bytes, field_varint, fields, read_varint, varint

__all__ = ["DamagedCheckpoint", "write_bundle", "read_bundle", "list_bundle", "data_files",
           "weight_key",
           "write_model_weights", "read_model_weights", "model_weight_dtypes", "bundle_files", "OBJECT_GRAPH_KEY",
           "SAVE_COUNTER_KEY"]

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
AGAIN = "copy the checkpoint's files here again"
SAVE_COUNTER_KEY = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
WEIGHTS_SCOPE = "model/weights_by_path/"  # model_folder.model_trackable's module "model", its dict attribute
VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"

class DamagedCheckpoint(InputError):
    """A checkpoint file that cannot be read whole: `file` and `reason` for callers that say more."""

    def __init__(self, file, reason, damaged=True):
        super().__init__(f"{file}: {'damaged (' + reason + ')' if damaged else reason}; {AGAIN}")
        self.file, self.reason = file, reason


# --- tensor entries ---------------------------------------------------------------------------------------

# TensorFlow's DataType numbers (types.proto) of the dtypes a model's weights and a checkpoint's counters use.
_DTYPES = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "int64": 9, "bool": 10,
           "bfloat16": 14, "uint16": 17, "float16": 19, "uint32": 22, "uint64": 23}
_DT_STRING = 7
_NUMPY_DTYPES = {number: name for name, number in _DTYPES.items()}


def _numpy_dtype(name):
    if name == "bfloat16":
        import ml_dtypes  # Keras and TensorFlow both depend on it

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name).newbyteorder("<")


def _entry(dtype, shape, shard, offset, size, crc):
    """A BundleEntryProto: dtype, shape (its dims), shard_id, offset, size, crc32c (fixed32)."""
    dims = b"".join(field_bytes(2, field_varint(1, int(dim))) for dim in shape)
    crc_field = b"\x35" + struct.pack("<I", crc) if crc else b""
    return (field_varint(1, dtype) + field_bytes(2, dims) + field_varint(3, shard) + field_varint(4, offset)
            + field_varint(5, size) + crc_field)


def _parse_entry(data):
    entry = {"dtype": 0, "shape": (), "shard": 0, "offset": 0, "size": 0, "crc": 0}
    for number, _, value in fields(data):
        if number == 1:
            entry["dtype"] = value
        elif number == 2:
            entry["shape"] = tuple(next((v for n, _, v in fields(dim) if n == 1), 0)
                                   for n, _, dim in fields(value) if n == 2)
        elif number in (3, 4, 5, 6):
            entry[{3: "shard", 4: "offset", 5: "size", 6: "crc"}[number]] = value
        elif number == 7:
            raise ValueError("a partitioned (sliced) variable, which this reader does not read")
    return entry


def _header(num_shards):
    """A BundleHeaderProto: num_shards, little-endian (0, omitted), version {producer: 1}."""
    return field_varint(1, num_shards) + field_bytes(3, field_varint(1, 1))


def _string_bytes(value):
    """A scalar string tensor's data: its length as a varint, the masked CRC of that length (as uint32),
    the bytes; and the CRC TensorFlow records for the whole (tensor_bundle's WriteStringTensor)."""
    length = struct.pack("<I", len(value))
    crc = crc32c(length)
    length_crc = struct.pack("<I", mask(crc))
    return varint(len(value)) + length_crc + value, crc32c(value, crc32c(length_crc, crc))


def _read_string(data):
    data = bytes(data)
    length, position = read_varint(data, 0)
    crc = crc32c(struct.pack("<I", length))
    stored = data[position:position + 4]
    if len(stored) < 4 or struct.unpack("<I", stored)[0] != mask(crc):
        raise ValueError("the string length's checksum does not match")
    value = bytes(data[position + 4:position + 4 + length])
    if len(value) < length:
        raise ValueError("the string is cut short")
    return value, crc32c(value, crc32c(stored, crc))


# --- the LevelDB table of the index file ------------------------------------------------------------------

_BLOCK_SIZE = 262144  # TensorFlow's table::Options
_RESTART_INTERVAL = 16
_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48


class _Block:
    """A table block being built: sorted (key, value) pairs, each key sharing a prefix with the one before,
    a restart point (a key written whole) every `restart_interval` entries."""

    def __init__(self, restart_interval):
        self.out, self.restarts, self.previous, self.count = bytearray(), [0], b"", 0
        self.restart_interval = restart_interval

    def add(self, key, value):
        shared = 0
        if self.count % self.restart_interval:
            limit = min(len(key), len(self.previous))
            while shared < limit and key[shared] == self.previous[shared]:
                shared += 1
        elif self.count:
            self.restarts.append(len(self.out))
        self.out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        self.previous, self.count = key, self.count + 1

    def size_estimate(self):
        return len(self.out) + 4 * len(self.restarts) + 4

    def finish(self):
        return bytes(self.out) + struct.pack(f"<{len(self.restarts) + 1}I", *self.restarts, len(self.restarts))


def _separator(start, limit):
    """LevelDB's shortest key >= start and < limit (bytewise), for an index entry between two blocks."""
    common = 0
    while common < min(len(start), len(limit)) and start[common] == limit[common]:
        common += 1
    if common < min(len(start), len(limit)):
        byte = start[common]
        if byte < 0xFF and byte + 1 < limit[common]:
            return start[:common] + bytes([byte + 1])
    return start


def _successor(key):
    """LevelDB's shortest key >= `key`: the first byte that can grow, grown, the rest cut."""
    for index, byte in enumerate(key):
        if byte != 0xFF:
            return key[:index] + bytes([byte + 1])
    return key


def _table(entries):
    """The index file's bytes: data blocks of at most _BLOCK_SIZE, an empty metaindex, the index, the footer."""
    out, index, last_key = bytearray(), _Block(1), None

    def write_block(contents):
        handle = varint(len(out)) + varint(len(contents))
        out.extend(contents + b"\x00" + struct.pack("<I", masked_crc32c(contents + b"\x00")))
        return handle

    block, handle = _Block(_RESTART_INTERVAL), None
    for key, value in entries:  # TensorFlow's TableBuilder: a block is written once it reaches _BLOCK_SIZE
        if handle is not None:
            index.add(_separator(last_key, key), handle)
            handle = None
        block.add(key, value)
        last_key = key
        if block.size_estimate() >= _BLOCK_SIZE:
            handle, block = write_block(block.finish()), _Block(_RESTART_INTERVAL)
    if block.count:
        handle = write_block(block.finish())
    metaindex = write_block(_Block(1).finish())
    if handle is not None:
        index.add(_successor(last_key), handle)
    index = write_block(index.finish())
    footer = (metaindex + index).ljust(_FOOTER_BYTES - 8, b"\x00") + struct.pack("<Q", _TABLE_MAGIC)
    return bytes(out + footer)


def _read_block(data, offset, size):
    contents, trailer = data[offset:offset + size], data[offset + size:offset + size + 5]
    if len(contents) < size or len(trailer) < 5:
        raise ValueError("a block runs past the end of the file")
    if trailer[0] != 0:
        raise ValueError(f"a compressed block (type {trailer[0]}), which TensorFlow's bundles do not write")
    if struct.unpack("<I", trailer[1:])[0] != masked_crc32c(contents + trailer[:1]):
        raise ValueError("a block's checksum does not match")
    return contents


def _block_entries(contents):
    if len(contents) < 4:
        raise ValueError("a block too short for its restart count")
    restarts = struct.unpack_from("<I", contents, len(contents) - 4)[0]
    end = len(contents) - 4 * (restarts + 1)
    position, key = 0, b""
    while position < end:
        shared, position = read_varint(contents, position)
        own, position = read_varint(contents, position)
        length, position = read_varint(contents, position)
        key = key[:shared] + bytes(contents[position:position + own])
        position += own
        yield key, bytes(contents[position:position + length])
        position += length


def _read_table(data):
    """[(key, value)] of an index file's bytes."""
    if len(data) < _FOOTER_BYTES or struct.unpack_from("<Q", data, len(data) - 8)[0] != _TABLE_MAGIC:
        raise ValueError("not a TensorFlow checkpoint index (no table footer)")
    footer = data[len(data) - _FOOTER_BYTES:]
    _, position = read_varint(footer, 0)
    _, position = read_varint(footer, position)  # the metaindex: empty in a bundle
    index_offset, position = read_varint(footer, position)
    index_size, _ = read_varint(footer, position)
    entries = []
    for _, handle in _block_entries(_read_block(data, index_offset, index_size)):
        offset, position = read_varint(handle, 0)
        size, _ = read_varint(handle, position)
        entries.extend(_block_entries(_read_block(data, offset, size)))
    return entries


# --- bundles ----------------------------------------------------------------------------------------------

def data_file(prefix, shard, num_shards):
    return pathlib.Path(f"{prefix}.data-{shard:05d}-of-{num_shards:05d}")


def data_files(prefix):
    """The data files a bundle's index names, in shard order."""
    header = _read_index(prefix)[0]
    return [data_file(prefix, shard, header["num_shards"]) for shard in range(header["num_shards"])]


def _tensor_bytes(value):
    """(dtype number, shape, bytes) of an array, or of a bytes value (a scalar string tensor)."""
    if isinstance(value, bytes):
        return _DT_STRING, (), value
    value = np.asarray(value)
    name = value.dtype.name
    if name not in _DTYPES:
        raise ValueError(f"dtype {name} is not one a checkpoint here holds ({', '.join(_DTYPES)})")
    if name != "bfloat16":
        value = value.astype(value.dtype.newbyteorder("<"), copy=False)
    return _DTYPES[name], value.shape, np.ascontiguousarray(value)


def _shards(sizes, max_shard_bytes):
    """Shard numbers of tensors of these sizes, in order: whole tensors, a new shard when one would overflow."""
    shards, shard, used = [], 0, 0
    for size in sizes:
        if max_shard_bytes and used and used + size > max_shard_bytes:
            shard, used = shard + 1, 0
        shards.append(shard)
        used += size
    return shards


def write_bundle(prefix, tensors, max_shard_bytes=None):
    """A checkpoint at `prefix` holding `tensors` ({checkpoint key: array, or bytes for a scalar string}),
    written in their order; data files of at most `max_shard_bytes` (whole tensors, so one larger tensor has
    a file of its own), else one. The index is written last: a checkpoint whose index exists is complete."""
    prefix = pathlib.Path(prefix)
    prepared = {key: _tensor_bytes(value) for key, value in tensors.items()}
    sizes = [len(data) if dtype == _DT_STRING else data.nbytes for dtype, _, data in prepared.values()]
    shards = _shards(sizes, max_shard_bytes)
    num_shards = shards[-1] + 1 if shards else 1
    entries, files = {}, [data_file(prefix, shard, num_shards) for shard in range(num_shards)]
    keys = iter(zip(prepared.items(), shards))
    pending = next(keys, None)
    for shard, path in enumerate(files):
        with atomic_path(path) as temp, open(temp, "wb") as out:
            offset = 0
            while pending is not None and pending[1] == shard:
                (key, (dtype, shape, data)), _ = pending
                if dtype == _DT_STRING:
                    data, crc = _string_bytes(data)
                else:
                    crc = crc32c(data)
                    data = memoryview(data.reshape(-1).view(np.uint8))
                out.write(data)
                entries[key] = _entry(dtype, shape, shard, offset, len(data), mask(crc))
                offset += len(data)
                pending = next(keys, None)
    table = [(b"", _header(num_shards))] + sorted((key.encode(), entry) for key, entry in entries.items())
    with atomic_path(f"{prefix}.index") as temp:
        temp.write_bytes(_table(table))
    return prefix


def _read_index(prefix):
    """(header, {key: entry}) of a bundle's index; InputError naming the file when it cannot be read."""
    path = pathlib.Path(f"{prefix}.index")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DamagedCheckpoint(path, f"cannot be read ({error.strerror})", damaged=False) from None
    try:
        table = _read_table(data)
        header = {"num_shards": 1, "endianness": 0}
        if not table or table[0][0] != b"":
            raise ValueError("no header under the empty key")
        for number, _, value in fields(table[0][1]):
            if number in (1, 2):
                header["num_shards" if number == 1 else "endianness"] = value
        if header["endianness"] != 0:
            raise ValueError("a big-endian checkpoint")
        return header, {key.decode(): _parse_entry(value) for key, value in table[1:]}
    except (ValueError, struct.error, UnicodeDecodeError) as error:
        raise DamagedCheckpoint(path, str(error)) from None


def list_bundle(prefix):
    """{key: (dtype name, shape)} of a bundle, from its index alone (as tf.train.list_variables)."""
    _, entries = _read_index(prefix)
    return {key: ("string" if e["dtype"] == _DT_STRING else _NUMPY_DTYPES.get(e["dtype"], str(e["dtype"])),
                  e["shape"]) for key, e in entries.items()}


def read_bundle(prefix, keys=None):
    """{key: array (bytes for a scalar string)} of a bundle, every tensor's checksum checked; `keys` limits
    what is read. InputError naming the data file that is missing, cut short or damaged."""
    header, entries = _read_index(prefix)
    wanted = entries if keys is None else {key: entries[key] for key in keys}
    by_shard = {}
    for key, entry in wanted.items():
        by_shard.setdefault(entry["shard"], []).append(key)
    values = {}
    for shard, shard_keys in sorted(by_shard.items()):
        path = data_file(prefix, shard, header["num_shards"])
        try:
            data = np.fromfile(path, np.uint8)
        except OSError as error:
            raise DamagedCheckpoint(path, f"cannot be read ({error.strerror})", damaged=False) from None
        for key in shard_keys:
            try:
                values[key] = _tensor(data, entries[key])
            except ValueError as error:
                raise DamagedCheckpoint(path, f"{key}: {error}") from None
    return {key: values[key] for key in wanted}


def _tensor(data, entry):
    start, size = entry["offset"], entry["size"]
    if start + size > data.size:
        raise ValueError(f"the file ends at {data.size} bytes, before this tensor's end at {start + size}")
    raw = data[start:start + size]
    if entry["dtype"] == _DT_STRING:
        if entry["shape"] != ():
            raise ValueError("a string tensor that is not a scalar")
        value, crc = _read_string(raw)
    else:
        name = _NUMPY_DTYPES.get(entry["dtype"])
        if name is None:
            raise ValueError(f"DataType {entry['dtype']}, which this reader does not read")
        dtype = _numpy_dtype(name)
        if size != dtype.itemsize * int(np.prod(entry["shape"], dtype=np.int64)):
            raise ValueError(f"{size} bytes for shape {entry['shape']} of {name}")
        crc = crc32c(raw)
        value = raw.view(dtype).reshape(entry["shape"])
    if mask(crc) != entry["crc"]:
        raise ValueError("its checksum does not match")
    return value


# --- a model's weights, as model_folder.write_weights writes them ------------------------------------------

def _escape(name):
    """TensorFlow's escaping of an object's local name in a checkpoint key ('.' -> '..', '/' -> '.S')."""
    return name.replace(".", "..").replace("/", ".S")


def _unescape(name):
    out, position = [], 0
    while position < len(name):
        if name[position] == "." and position + 1 < len(name):
            out.append("/" if name[position + 1] == "S" else name[position + 1])
            position += 2
        else:
            out.append(name[position])
            position += 1
    return "".join(out)


def weight_key(path):
    """The checkpoint key of the model weight at Keras path `path`."""
    return f"{WEIGHTS_SCOPE}{_escape(path)}{VALUE_SUFFIX}"


def _object_graph(paths):
    """A serialized TrackableObjectGraph as tf.train.Checkpoint(model=model_trackable(model)) writes it: the
    root (model, save_counter), the module, its weights_by_path dict, one node per weight in `paths` order."""
    has_values = field_bytes(5, field_varint(1, 1))

    def child(node, name):
        return field_bytes(1, field_varint(1, node) + field_bytes(2, name.encode()))

    def variable(full_name, key):
        attribute = field_bytes(1, b"VARIABLE_VALUE") + field_bytes(2, full_name.encode()) + field_bytes(
            3, key.encode())
        return field_bytes(2, attribute) + has_values

    nodes = [child(1, "model") + child(2, "save_counter") + has_values,
             child(3, "weights_by_path") + has_values,
             variable("save_counter", SAVE_COUNTER_KEY),
             b"".join(child(4 + index, path) for index, path in enumerate(paths)) + has_values]
    nodes += [variable(path, weight_key(path)) for path in paths]
    return b"".join(field_bytes(1, node) for node in nodes)


def write_model_weights(prefix, weights, save_counter=0, max_shard_bytes=None):
    """The checkpoint model_folder.write_weights writes for a model whose weights are `weights` ({Keras path:
    array}, in model.weights order), in their own dtypes: every TensorFlow reader of model folders restores
    it (a float16 one through model_folder.restore_weights, which casts)."""
    tensors = {SAVE_COUNTER_KEY: np.asarray(save_counter, np.int64)}  # TensorFlow's order in the data file
    tensors.update((weight_key(path), value) for path, value in weights.items())
    tensors[OBJECT_GRAPH_KEY] = _object_graph(list(weights))
    return write_bundle(prefix, tensors, max_shard_bytes)


def _model_keys(keys):
    return {_unescape(key[len(WEIGHTS_SCOPE):-len(VALUE_SUFFIX)]): key for key in keys
            if key.startswith(WEIGHTS_SCOPE) and key.endswith(VALUE_SUFFIX)
            and "/" not in key[len(WEIGHTS_SCOPE):-len(VALUE_SUFFIX)]}


def model_weight_dtypes(prefix):
    """{Keras path: dtype name} of the model weights a checkpoint holds (its index only)."""
    listed = list_bundle(prefix)
    return {path: listed[key][0] for path, key in _model_keys(listed).items()}


def read_model_weights(prefix):
    """{Keras path: array} of the model weights of a checkpoint written by write_model_weights or by
    model_folder.write_weights (and a TF run's ckpt-N); its optimizer and counters are not read."""
    keys = _model_keys(list_bundle(prefix))
    values = read_bundle(prefix, list(keys.values()))
    return {path: values[key] for path, key in keys.items()}


def bundle_files(prefix):
    """The index and data files of the checkpoint at `prefix` (what copying it means)."""
    return [pathlib.Path(f"{prefix}.index"), *data_files(prefix)]

