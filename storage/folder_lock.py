"""One writer per folder: a second run on the same folder stops at once instead of writing over the first.

Two `run_pretraining.py` commands on one model folder would otherwise both run to the end, saving the
same checkpoints, state file and logs in turn. A writer holds an advisory lock (`fcntl.flock`) on a small
file beside what it writes for as long as it runs. The kernel drops the lock when the process ends, however
it ends, so a run that was killed never blocks the next one; the file keeps the holder's pid and command
line so that the message can name it. The file is left in place (removing it would race a starting run).
"""
import os
import pathlib
import sys
import time

from common.errors import InputError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; runs there are not guarded
    fcntl = None

LOCK_SUFFIX = ".lock"


def lock_path_for(folder, name=None):
    """Where the lock of `folder` lives: `<parent>/.<folder name>.lock`, outside the folder so that nothing
    that lists the folder (the builder's own-files check, an export) sees it; `name` picks a lock inside
    the folder instead, for writers of one part of it (fine-tuning one task's results)."""
    folder = pathlib.Path(folder)
    if name is not None:
        return folder / f".{name}{LOCK_SUFFIX}"
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


class FolderLock:
    """Held from `acquire` until `release` or the end of the process; keep a reference to it (the lock
    goes with the open file)."""

    def __init__(self, path, handle):
        self.path, self._handle = path, handle

    def release(self):
        if self._handle is not None:
            self._handle.close()  # closing the file drops the flock
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def shared():
    """A FolderLock that holds nothing: for a writer that shares the folder with the process holding its lock
    (a multi-worker run's non-chief workers)."""
    return FolderLock(None, None)


def acquire(folder, what, name=None, fix="wait for it to finish or stop it, or choose another folder"):
    """Takes the lock of `folder` for this process, or raises InputError naming the process that holds it.

    `what`: the writing in words, for the message ("pretraining", "building a dataset")."""
    path = lock_path_for(folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    if fcntl is None:
        return FolderLock(path, handle)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise InputError(f"{folder}: another run is {what} here ({holder}); {fix}")
    handle.seek(0)
    handle.truncate()
    command = " ".join([pathlib.Path(sys.argv[0]).name, *sys.argv[1:]])
    command = command if len(command) <= 80 else command[:79] + "…"
    handle.write(f"pid {os.getpid()}, `{command}`, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    handle.flush()
    return FolderLock(path, handle)
