"""Where a task's files are: the original's `finetuning_data/<task>/` or GLUE's and SQuAD's own names.

For task `sst` under a root R, the folder is the first of R/sst, R/SST-2 and R/glue_data/SST-2 that
exists, so a GLUE download unpacked (or linked) under R works as it is.
"""
import pathlib
from typing import Sequence

from data.errors import InputError


def find_task_dir(root, task_name: str, other_names: Sequence[str] = ()) -> pathlib.Path:
    root = pathlib.Path(root)
    candidates = [root / task_name]
    for name in other_names:
        candidates += [root / name, root / "glue_data" / name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise InputError(f"task {task_name}: no data folder (looked for {looked}); put the task's files there "
                     "or pass --finetuning-data-dir")


def find_split_file(folder, split: str, names: Sequence[str], task_name: str) -> pathlib.Path:
    """The first of `names` (file names for `split`) that exists in `folder`."""
    folder = pathlib.Path(folder)
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise InputError(f"task {task_name}: no {split} split in {folder} (expected {' or '.join(names)}); "
                     "add the file or choose another split")
