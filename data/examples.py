"""The original release's packing of tokenized lines into pretraining examples, rule for rule.

Mirrors ExampleBuilder in google-research/electra's build_pretraining_dataset.py, including the order in
which it draws random numbers, so that the same seed reproduces the same segment layout:
- lines accumulate until their length reaches the target, or the document ends;
- with probability 0.1 the example is single-segment, otherwise segment A aims at (target - 3) // 2;
- a line joins A if A is empty, if it keeps A under its target, or on a 0.5 coin flip while B is empty and
  A is under target; otherwise it joins B;
- A is cut to max - 2 tokens and B to max - len(A) - 3;
- after each example, with probability 0.05 the next target is randint(5, max).
"""
import dataclasses
import random
from typing import List, Optional, Sequence

import numpy as np

SINGLE_SEGMENT_PROBABILITY = 0.1
SHORT_TARGET_PROBABILITY = 0.05
MIN_SHORT_TARGET = 5
UNLIMITED_FIRST_SEGMENT = 100000


@dataclasses.dataclass
class PackedExample:
    """`[CLS] A [SEP] (B [SEP])` padded to max_seq_length; the feature arrays are derived on demand."""

    first_segment: List[int]
    second_segment: List[int]
    max_seq_length: int
    cls_id: int
    sep_id: int
    pad_id: int
    truncated_tokens: int = 0

    @property
    def first_length(self) -> int:
        """[CLS] A [SEP]: the positions of segment 0."""
        return len(self.first_segment) + 2

    @property
    def num_tokens(self) -> int:
        return self.first_length + (len(self.second_segment) + 1 if self.second_segment else 0)

    @property
    def input_ids(self) -> np.ndarray:
        ids = [self.cls_id] + self.first_segment + [self.sep_id]
        if self.second_segment:
            ids += self.second_segment + [self.sep_id]
        return np.array(ids + [self.pad_id] * (self.max_seq_length - len(ids)), dtype=np.int64)

    @property
    def input_mask(self) -> np.ndarray:
        return (np.arange(self.max_seq_length) < self.num_tokens).astype(np.int64)

    @property
    def segment_ids(self) -> np.ndarray:
        positions = np.arange(self.max_seq_length)
        return ((positions >= self.first_length) & (positions < self.num_tokens)).astype(np.int64)


class ExampleBuilder:
    """Feeds on tokenized lines and document ends; returns an example whenever one is complete."""

    def __init__(self, max_seq_length: int, cls_id: int, sep_id: int, pad_id: int, rng: random.Random):
        self._max_length = max_seq_length
        self._cls_id, self._sep_id, self._pad_id = cls_id, sep_id, pad_id
        self._rng = rng
        self._current_sentences: List[Sequence[int]] = []
        self._current_length = 0
        self._target_length = max_seq_length

    def add_line(self, token_ids: Sequence[int]) -> Optional[PackedExample]:
        self._current_sentences.append(token_ids)
        self._current_length += len(token_ids)
        if self._current_length >= self._target_length:
            return self._create_example()
        return None

    def end_document(self) -> Optional[PackedExample]:
        """A document end (a blank line, `</doc>` or the end of a file) flushes a non-empty buffer."""
        if self._current_length != 0:
            return self._create_example()
        self._current_sentences = []
        return None

    def _create_example(self) -> PackedExample:
        rng = self._rng
        if rng.random() < SINGLE_SEGMENT_PROBABILITY:
            first_segment_target_length = UNLIMITED_FIRST_SEGMENT
        else:
            first_segment_target_length = (self._target_length - 3) // 2  # room for [CLS] and two [SEP]

        first_segment: List[int] = []
        second_segment: List[int] = []
        for sentence in self._current_sentences:
            if (not first_segment
                    or len(first_segment) + len(sentence) < first_segment_target_length
                    or (not second_segment
                        and len(first_segment) < first_segment_target_length
                        and rng.random() < 0.5)):
                first_segment.extend(sentence)
            else:
                second_segment.extend(sentence)

        untruncated = len(first_segment) + len(second_segment)
        first_segment = first_segment[:self._max_length - 2]
        second_segment = second_segment[:max(0, self._max_length - len(first_segment) - 3)]

        self._current_sentences = []
        self._current_length = 0
        if rng.random() < SHORT_TARGET_PROBABILITY:
            self._target_length = rng.randint(min(MIN_SHORT_TARGET, self._max_length), self._max_length)
        else:
            self._target_length = self._max_length

        return PackedExample(first_segment, second_segment, self._max_length, self._cls_id, self._sep_id,
                             self._pad_id, truncated_tokens=untruncated - len(first_segment) - len(second_segment))
