"""GLUE-shaped task files of random words, for measuring run_finetuning.py where GLUE's own files are not at hand:
what a task's speed depends on is its size, its lengths and its head, not what its words mean.

`write_glue_files(folder, vocab_file, ...)` writes <folder>/<GLUE's folder name>/train.tsv and dev.tsv for each
task, in GLUE's layout (a header naming the task's text and label columns, which is how finetune.glue finds them),
every word one token of `vocab_file` (`write_vocab`: the special tokens and made-up lower-case words), each
example's featurised length drawn like the real task's (GLUE_LENGTHS), and labels drawn from the task's own.
"""
import pathlib

import numpy as np

# examples in GLUE's train and dev files (MRPC and STS-B train twice as many features: double_unordered)
GLUE_ROWS = {"cola": (8551, 1043), "sst": (67349, 872), "mrpc": (3668, 408), "sts": (5749, 1500), "rte": (2490, 277)}
# featurised lengths (BERT's uncased vocabulary, [CLS] and [SEP] included, at most 128) of the GLUE training
# sets: (median, 90th percentile); means CoLA 11.3, SST-2 13.3, MRPC 53.2, STS-B 27.8,
# RTE 66.6 (95% of SST-2 and all of CoLA within 32 tokens)
GLUE_LENGTHS = {"cola": (10, 17), "sst": (10, 27), "mrpc": (53, 70), "sts": (23, 51), "rte": (56, 128)}
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def glue_lengths(rng, task, count, max_seq_length):
    """`count` lengths like the GLUE task's: log-normal with its median and 90th percentile, 5 to max_seq_length."""
    median, p90 = GLUE_LENGTHS[task]
    sigma = np.log(p90 / median) / 1.2816  # the 90th percentile of a standard normal
    return np.clip(np.round(median * np.exp(sigma * rng.standard_normal(count))), 5, max_seq_length).astype(int)


def made_up_words(count):
    """`count` distinct lower-case words of 3 letters or more ("baa", "bab", ...): each one WordPiece token."""
    words, number = [], 26 * 26
    while len(words) < count:
        word, n = "", number
        while n:
            n, digit = divmod(n, 26)
            word = LETTERS[digit] + word
        words.append(word)
        number += 1
    return words


def write_vocab(path, size=1000):
    """A vocabulary of `size` tokens: the special ones, then made-up words."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(list(SPECIAL_TOKENS) + made_up_words(size - len(SPECIAL_TOKENS))) + "\n",
                    encoding="utf-8")
    return path


def write_glue_files(folder, vocab_file, scale=0.02, tasks=tuple(GLUE_ROWS), max_seq_length=128, seed=0,
                     rows=None):
    """train.tsv and dev.tsv per task (GLUE_ROWS × scale rows, at least 8, or `rows` {task: (train, dev)}) under
    `folder`, for run_finetuning.py --finetuning-data-dir `folder`. Returns the folder."""
    from finetune.registry import get_task

    folder = pathlib.Path(folder)
    rng = np.random.default_rng(seed)
    words = [w for w in pathlib.Path(vocab_file).read_text(encoding="utf-8").split("\n")
             if w.isalpha() and w.islower()]
    if not words:
        raise ValueError(f"{vocab_file}: no lower-case word to write the tasks with")
    rows = rows or {name: tuple(max(8, int(count * scale)) for count in GLUE_ROWS[name]) for name in tasks}
    for name, counts in rows.items():
        task = get_task(name)
        task_dir = folder / task.glue_name
        task_dir.mkdir(parents=True, exist_ok=True)
        for split, count in zip(("train", "dev"), counts):
            lines = ["\t".join([task.id_column, *task.text_columns, task.label_column])]
            for number, length in enumerate(glue_lengths(rng, name, count, max_seq_length)):
                texts = _texts(rng, words, length, len(task.text_columns))
                label = (rng.choice(task.labels) if task.labels else f"{rng.uniform(*task.score_range):.2f}")
                lines.append("\t".join([str(number), *texts, label]))
            (task_dir / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _texts(rng, words, length, parts):
    """`parts` texts whose tokens with [CLS] and one [SEP] per part make `length` (at least one word each)."""
    count = max(parts, length - 1 - parts)
    cut = [count] if parts == 1 else [max(1, count // 2), count - max(1, count // 2)]
    return [" ".join(rng.choice(words, n)) for n in cut]
