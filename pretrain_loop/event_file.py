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

from common.crc32c import masked_crc32c
from common.protobuf_wire import field_bytes, varint


def tfrecord(data):
    """One TFRecord: the framing around `data`."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


# SummaryMetadata{plugin_data: PluginData{plugin_name: "scalars"}, data_class: DATA_CLASS_SCALAR (1)}
_SCALAR_METADATA = field_bytes(1, field_bytes(1, b"scalars")) + varint(4 << 3) + varint(1)


def scalar_event(tag, value, step, wall_time):
    """Event{wall_time, step, summary: Summary{value: [Value{tag, tensor: float32 scalar, metadata}]}}."""
    tensor = varint(1 << 3) + varint(1) + field_bytes(2, b"") + field_bytes(5, struct.pack("<f", float(value)))
    summary_value = field_bytes(1, tag.encode()) + field_bytes(8, tensor) + field_bytes(9, _SCALAR_METADATA)
    return (varint(1 << 3 | 1) + struct.pack("<d", wall_time) + varint(2 << 3) + varint(step & (2 ** 64 - 1))
            + field_bytes(5, field_bytes(1, summary_value)))


def version_event(wall_time):
    return varint(1 << 3 | 1) + struct.pack("<d", wall_time) + field_bytes(3, b"brain.Event:2")


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
