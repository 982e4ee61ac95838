"""GLUE examples → model inputs: [CLS] A [SEP] (B [SEP]) with BERT's pair truncation, and the original's
`double_unordered` (MRPC and STS train pairs also swapped).

Inputs are kept unpadded (one id array per example); batches.py pads each batch.
"""
import dataclasses
from typing import List

import numpy as np

DOUBLE_UNORDERED_TASKS = ("mrpc", "sts")


@dataclasses.dataclass
class Features:
    """Per example: token ids and segment ids (unpadded int32 arrays) and a label (or -1 / NaN for test)."""
    input_ids: List[np.ndarray]
    segment_ids: List[np.ndarray]
    labels: np.ndarray
    example_index: np.ndarray  # which example each feature came from (doubling repeats them)

    def __len__(self):
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.input_ids], np.int64)


def truncate_pair(tokens_a, tokens_b, max_tokens):
    """BERT's _truncate_seq_pair: drop the last token of the longer side (B on ties) until they fit."""
    len_a, len_b = len(tokens_a), len(tokens_b)
    while len_a + len_b > max_tokens:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return tokens_a[:len_a], tokens_b[:len_b]


def pack(tokens_a, tokens_b, cls_id, sep_id, max_seq_length):
    """(input_ids, segment_ids) for one example, truncated to max_seq_length."""
    if tokens_b is None:
        tokens_a = tokens_a[:max_seq_length - 2]
        ids = np.concatenate([[cls_id], tokens_a, [sep_id]]).astype(np.int32)
        return ids, np.zeros(len(ids), np.int32)
    tokens_a, tokens_b = truncate_pair(tokens_a, tokens_b, max_seq_length - 3)
    ids = np.concatenate([[cls_id], tokens_a, [sep_id], tokens_b, [sep_id]]).astype(np.int32)
    segments = np.concatenate([np.zeros(len(tokens_a) + 2, np.int32), np.ones(len(tokens_b) + 1, np.int32)])
    return ids, segments


def unordered_pairs(task) -> bool:
    """Whether the task's training pairs are also taken swapped: MRPC and STS (the original's
    double_unordered), or a task that says so (a task of the user's files whose spec has unordered_pairs)."""
    return bool(getattr(task, "unordered_pairs", task.name in DOUBLE_UNORDERED_TASKS))


def featurize(task, examples, tokenizer, max_seq_length, training=False, double_unordered=True) -> Features:
    """Tokenizes every text in one batched call, then packs. Test examples get label -1 (NaN for STS)."""
    texts = [e.text_a for e in examples] + [e.text_b for e in examples if e.text_b is not None]
    encoded = tokenizer.encode_batch(texts)
    tokens_a = encoded[:len(examples)]
    tokens_b = iter(encoded[len(examples):])
    pairs = [(a, next(tokens_b) if e.text_b is not None else None) for e, a in zip(examples, tokens_a)]
    order = list(range(len(examples)))
    if training and double_unordered and unordered_pairs(task):
        pairs = pairs + [(b, a) for a, b in pairs]
        order = order + order
    special = tokenizer.special_ids
    packed = [pack(a, b, special.cls, special.sep, max_seq_length) for a, b in pairs]
    if any(e.label is None for e in examples):
        labels = np.full(len(examples), -1 if task.label_names else np.nan)
        labels = labels.astype(np.int32 if task.label_names else np.float32)
    else:
        labels = task.targets(examples)
    return Features([p[0] for p in packed], [p[1] for p in packed], labels[np.array(order, np.int64)],
                    np.array(order, np.int64))


def model_inputs(task, examples, tokenizer, config, training=False):
    """What a sentence(-pair) task hands the trainer: {"sequences": {input_ids, segment_ids}, "scalars":
    {labels}, "examples", "count"}, featurised as the original's classification and regression tasks are."""
    features = featurize(task, examples, tokenizer, config.max_seq_length, training=training,
                         double_unordered=config.double_unordered)
    return {"sequences": {"input_ids": features.input_ids, "segment_ids": features.segment_ids},
            "scalars": {"labels": features.labels}, "examples": examples, "count": len(features)}
