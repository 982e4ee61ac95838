"""Files and folders that appear complete or not at all.

Everything is written under a temporary name beside the target and renamed into place at the end (a
rename within one folder is atomic), so a crash or a kill never leaves a file or folder that looks
finished but is not.
"""
import contextlib
import json
import os
import pathlib
import shutil
import tempfile

from common.errors import InputError


@contextlib.contextmanager
def atomic_path(path, suffix=""):
    """Yields a temporary path beside `path` to write; on success it replaces `path`, on failure it is
    removed. `suffix` keeps writers that insist on an extension (np.savez: ".npz") from renaming it."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f"{path.name}.tmp{suffix}")
    try:
        yield temp
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    os.replace(temp, path)


def write_bytes(path, data: bytes):
    with atomic_path(path) as temp:
        temp.write_bytes(data)


def write_text(path, text: str):
    with atomic_path(path) as temp:
        temp.write_text(text, encoding="utf-8")


def write_json(path, values, **dumps_args):
    """Sorted keys and 2-space indents unless told otherwise, newline-terminated."""
    write_text(path, json.dumps(values, **{"indent": 2, "sort_keys": True, **dumps_args}) + "\n")


def copy_file(source, path):
    with atomic_path(path) as temp:
        shutil.copyfile(source, temp)


def check_output_dir(path, overwrite, flag="--output"):
    """InputError when `path` is a file, or a non-empty folder and not `overwrite`."""
    path = pathlib.Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: is a file, not a folder; choose a folder path")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise InputError(f"{flag} {path}: the folder exists and is not empty; choose another one or pass "
                         "--overwrite to replace what this command writes there")


@contextlib.contextmanager
def atomic_output_dir(path, overwrite=False, flag="--output"):
    """Yields a temporary folder to fill; on success it becomes `path`. An existing non-empty target is
    replaced only with `overwrite`, and even then the files it holds that this output does not write are
    kept (moved into the new folder), never deleted."""
    path = pathlib.Path(path)
    check_output_dir(path, overwrite, flag)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield temp
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    _swap_into_place(temp, path)


def _swap_into_place(temp, path):
    if not path.exists():
        os.replace(temp, path)
        return
    for entry in path.iterdir():  # the user's other files move into the new folder
        if not (temp / entry.name).exists():
            os.replace(entry, temp / entry.name)
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.replace(path, old)
    os.replace(temp, path)
    shutil.rmtree(old, ignore_errors=True)
