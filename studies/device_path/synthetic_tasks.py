"""GLUE-shaped fine-tuning tasks with random token ids and labels, exported as python -m studies.device_path.task_arrays
exports real ones: for speed measurements (studies/device_path/finetune_speed.py) and the tests of the JAX fine-tuning
path, where what matters is a task's size, its lengths and its head, not what its words mean.
"""
import pathlib

import numpy as np

from bench.synthetic_glue import glue_lengths

# train features (MRPC's and STS-B's pairs featurised in both orders, double_unordered), dev examples: the
# recipe's updates per trial are then the H200 run's (CoLA 804, SST-2 6315, MRPC 690, STS-B 3600, RTE 780)
GLUE_SIZES = {"cola": (8551, 1043), "sst": (67349, 872), "mrpc": (7336, 408), "sts": (11498, 1500),
              "rte": (2490, 277)}
SYNTHETIC_VOCAB = 1000


def synthetic_tasks(folder, scale=0.02, tasks=tuple(GLUE_SIZES), vocab_size=SYNTHETIC_VOCAB, max_seq_length=128,
                    seed=0, sizes=None, lengths="uniform"):
    """Exports GLUE-shaped tasks (GLUE_SIZES × scale, at least 8 each, or `sizes` {task: (train, dev)})
    with random ids and labels to `folder`, as python -m studies.device_path.task_arrays would; lengths "uniform" (8 to
    max_seq_length) or "glue" (like the task's, bench.synthetic_glue.GLUE_LENGTHS)."""
    from studies.device_path.task_arrays import save_task_data
    from finetune.registry import get_task
    from finetune.tasks import Example
    from finetune.trials import TaskData

    rng = np.random.default_rng(seed)

    def features(task, count, with_examples):
        drawn = (rng.integers(8, max_seq_length + 1, count) if lengths == "uniform"
                 else glue_lengths(rng, task.name, count, max_seq_length))
        ids = [rng.integers(5, vocab_size, n).astype(np.int32) for n in drawn]
        segments = [(np.arange(n) >= n // 2).astype(np.int32) for n in drawn]
        labels = (list(rng.choice(task.labels, count)) if task.labels
                  else list(rng.uniform(*task.score_range, count).round(2)))
        examples = [Example(str(i), "", None, label) for i, label in enumerate(labels)]
        made = {"sequences": {"input_ids": ids, "segment_ids": segments},
                "scalars": {"labels": task.targets(examples)}, "count": count}
        return {**made, "examples": examples} if with_examples else made

    data = []
    sizes = sizes or {name: tuple(max(8, int(size * scale)) for size in GLUE_SIZES[name]) for name in tasks}
    for name, (train, dev) in sizes.items():
        task = get_task(name)
        data.append(TaskData(task, features(task, train, False), {"": features(task, dev, True)}, {}, {}))
    save_task_data(data, folder, {"max_seq_length": max_seq_length, "double_unordered": False,
                                  "vocab_size": vocab_size})
    return pathlib.Path(folder)
