"""The arrays that carry pretraining examples to a machine without TensorFlow, compactly.

Packing writes [CLS] A [SEP] (B [SEP]) then padding, so an example is its ids, its length (the mask is a
prefix) and where segment B starts (segment ids are 1 from there to the end of the example): uint16 ids
and two int32 per row instead of three int32 rows. The training arrays travel as <name>.xz (an .npz
compressed by xz, Python's lzma): smaller than np.savez_compressed's deflate (studies/device_path/README.md#sizes); an
older export's plain .npz is read as before.
"""
import io
import lzma
import pathlib

import numpy as np

from common.errors import InputError


def pack_examples(input_ids, input_mask, segment_ids):
    """Compact arrays of packed examples: uint16 ids, per-row lengths and the start of segment B."""
    input_ids, input_mask, segment_ids = (np.asarray(a) for a in (input_ids, input_mask, segment_ids))
    lengths = input_mask.sum(axis=1)
    positions = np.arange(input_ids.shape[1])[None, :]
    if not np.array_equal(input_mask, (positions < lengths[:, None]).astype(input_mask.dtype)):
        raise ValueError("input_mask is not a prefix of each row")
    has_b = segment_ids.max(axis=1) > 0
    b_start = np.where(has_b, np.argmax(segment_ids > 0, axis=1), lengths)
    expected = ((positions >= b_start[:, None]) & (positions < lengths[:, None])).astype(segment_ids.dtype)
    if not np.array_equal(segment_ids, expected):
        raise ValueError("segment_ids are not one run of 1s ending at the example's end")
    if input_ids.size and input_ids.max() >= 2 ** 16:
        raise ValueError("token ids do not fit uint16")
    return {"input_ids": input_ids.astype("uint16"), "lengths": lengths.astype("int32"),
            "b_start": b_start.astype("int32")}


def unpack_examples(arrays):
    """The model's int32 {input_ids, input_mask, segment_ids} from pack_examples' arrays."""
    input_ids = arrays["input_ids"].astype("int32")
    positions = np.arange(input_ids.shape[1])[None, :]
    lengths, b_start = arrays["lengths"][:, None], arrays["b_start"][:, None]
    return {"input_ids": input_ids, "input_mask": (positions < lengths).astype("int32"),
            "segment_ids": ((positions >= b_start) & (positions < lengths)).astype("int32")}


def xz_path(path):
    return pathlib.Path(f"{path}.xz")


def save_packed(path, packed):
    """`packed` ({name: array}) as <path>.xz: the .npz np.savez writes, compressed by xz; returns that file."""
    buffer = io.BytesIO()
    np.savez(buffer, **packed)
    target = xz_path(path)
    target.write_bytes(lzma.compress(buffer.getvalue(), preset=6))
    return target


def load_packed(path):
    """{name: array} of <path>.xz, else of <path> (an older export's .npz); InputError when neither is there."""
    path = pathlib.Path(path)
    try:
        if xz_path(path).is_file():
            data = io.BytesIO(lzma.decompress(xz_path(path).read_bytes()))
        elif path.is_file():
            data = path
        else:
            raise InputError(f"{path}: missing (and no {xz_path(path).name}); copy the whole export folder")
        with np.load(data, allow_pickle=False) as arrays:
            return {key: arrays[key] for key in arrays.files}
    except (lzma.LZMAError, OSError, ValueError) as error:
        raise InputError(f"{path}: not readable ({error}); export it again or copy it whole") from None


def read_weights(files):
    """{path: (array, file)} over .npz files of {Keras variable path: array} (a later file's key wins; the
    file is kept for error messages); InputError for a missing or unreadable file."""
    weights = {}
    for path in files:
        path = pathlib.Path(path)
        if not path.is_file():
            raise InputError(f"{path}: no such weights file; pass the weights-<step>.npz that "
                             "training_jax.pretrain wrote (or none for the random control)")
        try:
            with np.load(path, allow_pickle=False) as arrays:
                weights.update({key: (arrays[key], path) for key in arrays.files})
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable .npz of weights ({error}); copy the file again") from None
    return weights
