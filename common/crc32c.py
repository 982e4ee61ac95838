"""CRC-32C (Castagnoli) with NumPy, fast enough for whole checkpoints: TensorFlow stores it, masked as LevelDB
masks it, on every block of a checkpoint's index and on every tensor of its data files.

A buffer is cut into equal slices whose CRC registers advance side by side, a 32-bit word a step (two lookups
in 65536-entry tables), instead of a Python loop over its bytes; the registers are then combined pairwise by
the map "register after n zero bytes", which is linear over GF(2) (CRC(a + b) = shift_|b|(CRC a) ^ CRC b),
and the tail of fewer bytes than a slice goes a byte at a time. The result is the standard CRC-32C
(crc32c(b"123456789") == 0xE3069283), as tests/test_checkpoint_bundle.py checks against the byte loop.
"""
import functools

import numpy as np

__all__ = ["crc32c", "mask", "masked_crc32c"]

_POLY = 0x82F63B78  # reflected
_MASK_DELTA = 0xA282EAD8
_ALL = 0xFFFFFFFF


def _byte_tables():
    """Slicing-by-4 tables: [0] the byte-at-a-time table, [k] the same byte k positions further on."""
    tables = np.zeros((4, 256), np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 4):
        tables[k] = (tables[k - 1] >> 8) ^ tables[0][tables[k - 1] & 0xFF]
    return tables


_TABLES = _byte_tables()
_TABLE_LIST = _TABLES[0].tolist()
_LANES = 131072  # slices of one buffer checked side by side
_MIN_LANE_BYTES = 256


def _scalar_register(data, register):
    """The CRC register after `data` (bytes), a byte at a time: for short buffers and the tail of long ones."""
    table = _TABLE_LIST
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


def _apply(operator, registers):
    """A linear map of 32-bit registers (its 4 byte tables) applied to an array of registers."""
    registers = np.asarray(registers, np.uint32)
    return (operator[0][registers & 0xFF] ^ operator[1][(registers >> 8) & 0xFF]
            ^ operator[2][(registers >> 16) & 0xFF] ^ operator[3][registers >> 24])


def _operator_from_columns(columns):
    """The 4 byte tables of the GF(2)-linear map that sends bit j to columns[j]."""
    columns = np.asarray(columns, np.uint32)
    values = np.arange(256, dtype=np.uint32)
    tables = np.zeros((4, 256), np.uint32)
    for k in range(4):
        for bit in range(8):
            tables[k] ^= np.where((values >> bit) & 1, columns[8 * k + bit], 0).astype(np.uint32)
    return tables


def _compose(outer, inner):
    """outer after inner, both as byte tables."""
    columns = _apply(inner, np.uint32(1) << np.arange(32, dtype=np.uint32))
    return _operator_from_columns(_apply(outer, columns))


@functools.lru_cache(maxsize=None)
def _zeros_operator(nbytes):
    """The map register -> register after `nbytes` zero bytes (linear: CRC(a + b) = shift(CRC a) ^ CRC b)."""
    if nbytes == 1:
        bits = np.uint32(1) << np.arange(32, dtype=np.uint32)
        return _operator_from_columns(_TABLES[0][bits & 0xFF] ^ (bits >> 8))
    half = _zeros_operator(nbytes // 2)
    doubled = _compose(half, half)
    return _compose(_zeros_operator(1), doubled) if nbytes % 2 else doubled


@functools.lru_cache(maxsize=None)
def _word_tables():
    """Two 65536-entry tables that advance a register over one 32-bit word in two lookups (its low and high
    halves), half the lookups of four byte tables."""
    t0, t1, t2, t3 = _TABLES
    halves = np.arange(65536, dtype=np.uint32)
    return t3[halves & 0xFF] ^ t2[halves >> 8], t1[halves & 0xFF] ^ t0[halves >> 8]


def _lane_registers(words):
    """The register (started at 0) of each row of `words` [lanes, n] (little-endian uint32), a word a step."""
    low, high = _word_tables()
    registers = np.zeros(words.shape[0], np.uint32)
    block = 64
    for start in range(0, words.shape[1], block):
        for column in np.ascontiguousarray(words[:, start:start + block].T):
            registers ^= column
            registers = low[registers & 0xFFFF] ^ high[registers >> 16]
    return registers


def _register(data, register):
    """The CRC register after `data` (a uint8 array) from `register`: equal slices checked side by side, then
    combined pairwise by the linear shift over a slice's length, then the tail."""
    size = data.size
    lane = max(_MIN_LANE_BYTES, -(-size // _LANES + 3) // 4 * 4)
    lanes = size // lane
    if lanes < 2:
        return _scalar_register(data.tobytes(), register)
    body = lanes * lane
    registers = _lane_registers(data[:body].view("<u4").reshape(lanes, lane // 4))
    pad = (1 << (lanes - 1).bit_length()) - lanes  # zero lanes in front change nothing (a zero register stays 0)
    registers = np.concatenate([np.zeros(pad, np.uint32), registers])
    span = lane
    while registers.size > 1:
        registers = _apply(_zeros_operator(span), registers[0::2]) ^ registers[1::2]
        span *= 2
    combined = int(_apply(_zeros_operator(body), [register])[0]) ^ int(registers[0])
    return _scalar_register(data[body:].tobytes(), combined)


def _as_bytes_array(data):
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, np.uint8)


def crc32c(data, crc=0):
    """CRC32C of `data` (bytes or an array's raw bytes), continuing `crc` (the CRC of what came before)."""
    return _register(_as_bytes_array(data), crc ^ _ALL) ^ _ALL


def mask(crc):
    return ((((crc >> 15) | (crc << 17)) & _ALL) + _MASK_DELTA) & _ALL


def masked_crc32c(data):
    """What LevelDB tables and TensorBundle entries store: the CRC rotated and offset."""
    return mask(crc32c(data))
