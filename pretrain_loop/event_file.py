"""TensorBoard scalars without TensorFlow: event files written by hand, so both backends log the same way.

An event file is a TFRecord file (each record: uint64 length, uint32 masked CRC-32C of the length, the
bytes, uint32 masked CRC-32C of the bytes) of serialized `Event` protobufs: the first holds only
file_version "brain.Event:2", each later one a wall time, a step and a `Summary` of one value. A value is
written as tf.summary.scalar writes it: a rank-0 float32 TensorProto tagged with the "scalars" plugin
(data class SCALAR), so TensorBoard and tf.compat.v1.train.summary_iterator read it as theirs. The protobuf
bytes are spelled out field by field, like data/tfrecords.py's Example serializer.
"""
import os
import pathlib
import socket
import struct
import time


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data):
    """One TFRecord: the framing around `data`."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def _varint(value):
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number, payload):
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# SummaryMetadata{plugin_data: PluginData{plugin_name: "scalars"}, data_class: DATA_CLASS_SCALAR (1)}
_SCALAR_METADATA = _field(1, _field(1, b"scalars")) + _varint(4 << 3) + _varint(1)


def scalar_event(tag, value, step, wall_time):
    """Event{wall_time, step, summary: Summary{value: [Value{tag, tensor: float32 scalar, metadata}]}}."""
    tensor = _varint(1 << 3) + _varint(1) + _field(2, b"") + _field(5, struct.pack("<f", float(value)))
    summary_value = _field(1, tag.encode()) + _field(8, tensor) + _field(9, _SCALAR_METADATA)
    return (_varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(step & (2 ** 64 - 1))
            + _field(5, _field(1, summary_value)))


def version_event(wall_time):
    return _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _field(3, b"brain.Event:2")


class ScalarWriter:
    """Scalars into a new events.out.tfevents.* file in `folder` (one per writer, as tf.summary makes)."""

    _count = 0

    def __init__(self, folder):
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        ScalarWriter._count += 1
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.{ScalarWriter._count}.v2"
        self.path = folder / name
        self.path.write_bytes(tfrecord(version_event(now)))

    def scalars(self, step, values):
        now = time.time()
        with self.path.open("ab") as out:
            out.write(b"".join(tfrecord(scalar_event(tag, value, step, now)) for tag, value in values.items()))
