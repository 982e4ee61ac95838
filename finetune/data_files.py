"""Where a task's files are: the original's `finetuning_data/<task>/` or GLUE's and SQuAD's own names.

For task `sst` under a root R, the folder is the first of R/sst, R/SST-2 and R/glue_data/SST-2 that
exists, so a GLUE download unpacked (or linked) under R works as it is. A split's file name may reach
beside the task folder (`../diagnostic/diagnostic.tsv`: GLUE keeps MNLI's diagnostic set in its own
folder); `..` is taken both as written and through a linked task folder, so a folder linked into
finetuning_data/ still finds its GLUE siblings.
"""
import os
import pathlib
from typing import List, Optional, Sequence

from common.errors import InputError


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


def split_file_candidates(folder, names: Sequence[str]) -> List[pathlib.Path]:
    """The paths `names` (relative to `folder`) may mean, in order, without repeats."""
    folder = pathlib.Path(folder)
    candidates, seen = [], set()
    for name in names:
        for base in (folder, folder.resolve()) if ".." in pathlib.PurePath(name).parts else (folder,):
            path = pathlib.Path(os.path.normpath(base / name))
            if path.resolve() not in seen:
                seen.add(path.resolve())
                candidates.append(path)
    return candidates


def find_file(folder, names: Sequence[str]) -> Optional[pathlib.Path]:
    """The first candidate for `names` that exists, else None."""
    return next((path for path in split_file_candidates(folder, names) if path.is_file()), None)


def find_split_file(folder, split: str, names: Sequence[str], task_name: str) -> pathlib.Path:
    """The first of `names` (file names for `split`, relative to `folder`) that exists."""
    path = find_file(folder, names)
    if path is None:
        looked = " or ".join(str(p) for p in split_file_candidates(folder, names))
        raise InputError(f"task {task_name}: no {split} split (expected {looked}); add the file or choose "
                         "another split")
    return path
