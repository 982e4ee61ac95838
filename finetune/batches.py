"""Batches: the original's fixed ones (the default), or length-bucketed ones (the fast option).

Fixed (bucketing off, FinetuningConfig.length_bucketing false): training cuts a random permutation of
the examples into batches, evaluation keeps the examples' order, and every batch is padded to
max_seq_length, as the original.

Bucketed: each batch is padded to its own longest example. Training draws batches the "sortish" way:
shuffle all examples, cut the order into pools of `pool_batches` batches, sort each pool by length, cut
it into batches and shuffle the batches. The padding is masked out, but the sorting makes examples of
similar length share an update, which changes training, not only its speed; with pool_batches 1 the
batches are the fixed ones' random sets. Evaluation sorts everything by length and keeps the original
order in `index`. Either way every example is in exactly one batch per epoch and none is truncated (the
features are already within max_seq_length).

`pad_to_multiple` rounds each bucketed length up to a multiple (capped at max_seq_length): a compiler
that specialises on shapes (JAX's jit) then sees at most max_seq_length / multiple lengths instead of
one per distinct longest example. The extra positions are masked, so outputs change only by rounding.

`mixed_batches` draws training batches from several tasks' features together (the original's
multi-task batches): random, not length-sorted, each row with its task id and each task's own inputs
under "<task>/<name>"; `task_view` gives one task's inputs of such a batch.

`grow_rows` pads a batch with copies of its first row up to a fixed number of rows, so that a compiler
that specialises on shapes sees one batch size; the copies get weight 0 (EXAMPLE_WEIGHT) in the loss.
"""
from typing import Dict, Iterator, List, Optional

import numpy as np


def batch_order(lengths, batch_size, rng: Optional[np.random.Generator], pool_batches=50) -> List[np.ndarray]:
    """Lists of example indices, one per batch. rng None: evaluation order (sorted by length, stable)."""
    lengths = np.asarray(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    order = rng.permutation(len(lengths))
    pool = batch_size * pool_batches
    batches = []
    for start in range(0, len(order), pool):
        members = order[start:start + pool]
        members = members[np.argsort(lengths[members], kind="stable")]
        batches += [members[i:i + batch_size] for i in range(0, len(members), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def pad_batch(sequences: Dict[str, List[np.ndarray]], indices, length: int) -> Dict[str, np.ndarray]:
    """Pads the chosen examples' sequences to `length` with zeros; adds input_mask."""
    first = sequences["input_ids"]
    out = {}
    for name, values in sequences.items():
        array = np.zeros((len(indices), length), np.int32)
        for row, index in enumerate(indices):
            array[row, :len(values[index])] = values[index]
        out[name] = array
    mask = np.zeros((len(indices), length), np.int32)
    for row, index in enumerate(indices):
        mask[row, :len(first[index])] = 1
    out["input_mask"] = mask
    return out


def iterate_batches(sequences: Dict[str, List[np.ndarray]], scalars: Dict[str, np.ndarray], batch_size: int,
                    max_seq_length: int, rng=None, bucketing=True, pool_batches=50,
                    min_length: int = 1, pad_to_multiple: int = 0) -> Iterator[dict]:
    """Padded batches of `sequences` (per-example int arrays) and `scalars` (per-example values); each
    batch also has "index" (the examples' positions). Without bucketing, order is shuffled or kept.
    `min_length`: the shortest padded length (the span head's beam needs that many positions).
    `pad_to_multiple` > 0: bucketed lengths rounded up to a multiple of it, at most max_seq_length."""
    lengths = np.array([len(v) for v in sequences["input_ids"]])
    if bucketing:
        groups = batch_order(lengths, batch_size, rng, pool_batches)
    else:
        order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
        groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for indices in groups:
        length = max(int(lengths[indices].max()), min_length) if bucketing else max_seq_length
        if bucketing and pad_to_multiple > 0:
            length = min(-(-length // pad_to_multiple) * pad_to_multiple, max(max_seq_length, length))
        batch = pad_batch(sequences, indices, length)
        for name, values in scalars.items():
            batch[name] = values[indices]
        batch["index"] = np.asarray(indices)
        yield batch


EXAMPLE_WEIGHT = "example_weight"  # 1 for a batch's real rows, 0 for the copies grow_rows adds


def grow_rows(inputs: Dict[str, np.ndarray], rows: int) -> Dict[str, np.ndarray]:
    """`inputs` with `rows` rows: the missing ones are copies of the first (real inputs, so every value
    computed on them is finite, and a weight of 0 removes them exactly) plus EXAMPLE_WEIGHT (1.0 on the
    real rows, 0.0 on the copies)."""
    present = len(next(iter(inputs.values())))
    take = np.concatenate([np.arange(present), np.zeros(max(rows - present, 0), np.int64)])
    grown = {key: value[take] if present < rows else value for key, value in inputs.items()}
    grown[EXAMPLE_WEIGHT] = (np.arange(len(take)) < present).astype(np.float32)
    return grown


# ---------------------------------------------------------------- several tasks in one batch
SHARED = ("input_ids", "segment_ids")  # the sequences every task has; the rest are a task's own
TASK_SEPARATOR = "/"  # a task's own inputs in a mixed batch: "<task>/<name>" ("rte/labels")


def task_key(task_name: str, name: str) -> str:
    return f"{task_name}{TASK_SEPARATOR}{name}"


def task_view(batch: dict, task_name: str) -> dict:
    """One task's inputs in a batch: the shared ones and, in a mixed batch, its own ("rte/labels") under
    their plain names ("labels"); other tasks' inputs are left out. A one-task batch is returned as is."""
    if "task_id" not in batch:
        return batch
    prefix = task_key(task_name, "")
    view = {key: value for key, value in batch.items() if TASK_SEPARATOR not in key}
    view.update({key[len(prefix):]: value for key, value in batch.items() if key.startswith(prefix)})
    return view


def mixed_batches(task_features: List[dict], task_names: List[str], batch_size: int, max_seq_length: int,
                  rng: np.random.Generator, bucketing=True, min_length: int = 1,
                  pad_to_multiple: int = 0) -> Iterator[dict]:
    """One epoch of training batches drawn from the features of all tasks together, as the original
    (finetune/preprocessing.py): every feature of every task exactly once, in one random order cut into
    batches (the last may be smaller), so a batch holds the tasks in about the proportion of their sizes.

    Each batch has the shared input_ids, segment_ids and input_mask, "task_id" (the task's position in
    `task_names`, the original's task_id feature), and each task's own inputs (its training targets; a
    tagging task's tag sequences) as "<task>/<name>", zero on the rows of other tasks (the original's
    default values), and "index" (each row's position in its task's features; bookkeeping).

    No length sorting, even with bucketing: sorting would group the tasks by their lengths (short SST
    sentences apart from long MNLI pairs) instead of mixing them. `bucketing` pads each batch to its
    longest feature (rounded up to `pad_to_multiple`), else every batch to max_seq_length."""
    counts = [len(features["sequences"]["input_ids"]) for features in task_features]
    task_of = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    position = np.concatenate([np.arange(count) for count in counts]) if counts else np.zeros(0, np.int64)
    lengths = np.concatenate([[len(v) for v in f["sequences"]["input_ids"]] for f in task_features])
    order = rng.permutation(len(task_of))
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        length = max(int(lengths[rows].max()), min_length) if bucketing else max_seq_length
        if bucketing and pad_to_multiple > 0:
            length = min(-(-length // pad_to_multiple) * pad_to_multiple, max(max_seq_length, length))
        batch = {}
        for name in SHARED:
            batch[name] = _pad_rows([task_features[t]["sequences"][name][i]
                                     for t, i in zip(task_of[rows], position[rows])], length)
        batch["input_mask"] = (np.arange(length)[None, :] < lengths[rows][:, None]).astype(np.int32)
        batch["task_id"] = task_of[rows]
        for number, (features, task_name) in enumerate(zip(task_features, task_names)):
            mine = task_of[rows] == number
            chosen = position[rows][mine]
            for name, sequences in features["sequences"].items():
                if name not in SHARED:
                    values = np.zeros((len(rows), length), np.int32)
                    values[mine] = _pad_rows([sequences[i] for i in chosen], length)
                    batch[task_key(task_name, name)] = values
            for name, values in features["scalars"].items():
                values = np.asarray(values)
                column = np.zeros((len(rows),) + values.shape[1:], values.dtype)
                column[mine] = values[chosen]
                batch[task_key(task_name, name)] = column
        batch["index"] = position[rows]
        yield batch


def _pad_rows(sequences, length) -> np.ndarray:
    array = np.zeros((len(sequences), length), np.int32)
    for row, values in enumerate(sequences):
        array[row, :len(values)] = values
    return array
