"""Protocol-buffer fields encoded and parsed by hand: varints and length-delimited fields, all that the
TensorBoard event files (pretrain_loop.event_file) and TensorFlow's checkpoint index (storage.checkpoint_bundle)
need, where TensorFlow and its protobuf classes may be absent (a JAX-only machine)."""
import struct

__all__ = ["varint", "read_varint", "field_varint", "field_bytes", "fields"]


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data, position):
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("a varint runs past its buffer")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return value, position


def field_varint(number, value):
    return varint(number << 3) + varint(value) if value else b""


def field_bytes(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fields(data):
    """(field number, wire type, value) of a message: ints for varints and fixed32, bytes for the rest."""
    position = 0
    while position < len(data):
        tag, position = read_varint(data, position)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, position = read_varint(data, position)
        elif wire == 2:
            length, position = read_varint(data, position)
            value, position = bytes(data[position:position + length]), position + length
        elif wire == 5:
            value, position = struct.unpack_from("<I", data, position)[0], position + 4
        elif wire == 1:
            value, position = struct.unpack_from("<Q", data, position)[0], position + 8
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value
