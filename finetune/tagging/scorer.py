"""Chunk-level precision, recall and F1 as conlleval (and the original's EntityLevelF1Scorer) report them:
a predicted chunk counts only if a gold chunk has the same type and both boundaries."""
from typing import Dict, Sequence

from finetune.tagging.spans import chunks


def chunk_f1(gold_sentences: Sequence[Sequence[str]], predicted_sentences: Sequence[Sequence[str]]) -> Dict[str, float]:
    """{"precision", "recall", "f1"} on 0–100 over sentences of tags (any of IOB1, IOB2, BIOES); all
    0 when nothing is correct, as conlleval prints."""
    correct = found = expected = 0
    for gold, predicted in zip(gold_sentences, predicted_sentences, strict=True):
        gold_chunks, predicted_chunks = set(chunks(gold)), set(chunks(predicted))
        correct += len(gold_chunks & predicted_chunks)
        expected += len(gold_chunks)
        found += len(predicted_chunks)
    if correct == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    precision, recall = 100.0 * correct / found, 100.0 * correct / expected
    return {"precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall)}
