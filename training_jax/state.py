"""A JAX run's whole state in one file, so a run cut into pieces continues exactly where it stopped.

An accelerator lent for a few minutes at a time can be taken back at any point, so a run saves everything
its next step depends on: the model's trainable and non-trainable arrays (the latter hold the masking,
sampling and dropout seed states), the optimizer's slots and iteration count, the batch sampler's position
and random state, the partial sums of the current logging window and the held-out evaluation's fixed seed
state. Resumed from it, a run computes the same updates, bit for bit, as one that never stopped
(tests/test_jax_pretraining.py).

One .npz holds it all (the small metadata as a JSON string inside), written under a temporary name and
renamed: a file that exists is complete, and a crash while saving leaves the previous state.
"""
import json
import pathlib

import numpy as np

from common.atomic import atomic_path

STATE_FILE = "state.npz"
GROUPS = ("trainable", "non_trainable", "optimizer", "eval_non_trainable", "stats")


def save_state(folder, step, groups, metadata):
    """groups: {name: list of arrays} for GROUPS; metadata: JSON-able (sampler position, log offsets)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"step": np.asarray(step, np.int64),
              "metadata": np.asarray(json.dumps({"step": step, **metadata}))}
    for name in GROUPS:
        for index, value in enumerate(groups[name]):
            arrays[f"{name}/{index:05d}"] = np.asarray(value)
    with atomic_path(folder / STATE_FILE, suffix=".npz") as temp:  # np.savez appends .npz to other names
        np.savez(temp, **arrays)


def load_state(folder):
    """(step, {group: [arrays]}, metadata), or None when the folder holds no saved state."""
    path = pathlib.Path(folder) / STATE_FILE
    if not path.is_file():
        return None
    with np.load(path) as saved:
        groups = {name: [saved[key] for key in sorted(k for k in saved.files if k.startswith(name + "/"))]
                  for name in GROUPS}
        metadata = json.loads(str(saved["metadata"]))
        step = int(saved["step"])
    return step, groups, metadata


def check_matches(path, groups, expected):
    """ValueError naming the first group whose count or shapes differ from the model's (another config)."""
    for name in GROUPS:
        saved, wanted = groups[name], expected[name]
        if len(saved) != len(wanted) or any(tuple(a.shape) != tuple(b.shape) for a, b in zip(saved, wanted)):
            raise ValueError(f"{path}: its {name} arrays do not match this run's model (another config?); "
                             "delete the state folder to start this run over")
