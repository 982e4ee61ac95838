"""Chunk-level precision, recall and F1: a predicted chunk counts only if a gold chunk has the same type
and both boundaries, pooled over sentences (conlleval's count and the original's EntityLevelF1Scorer).

Which chunks a sentence's predicted tags hold is the decoder's choice (finetune/tagging/spans.py):
"original" (the default, the original's get_span_labels, so that a chunking F1 compares with the
original's table) or "conlleval" (conlleval's boundary rules; the fine-tuning config's chunk_scorer).
The two agree on well-formed tags and differ on what a model predicts: on CoNLL-2000's test tags with 5%
of them replaced at random, about 91 F1 for the original's and 89 for conlleval's
(tests/test_finetune_chunk.py)."""
from typing import Dict, Sequence

from finetune.tagging.spans import chunks, original_chunks

DECODERS = {"original": original_chunks, "conlleval": chunks}


def chunk_f1(gold_sentences: Sequence[Sequence[str]], predicted_sentences: Sequence[Sequence[str]],
             decoder: str = "original") -> Dict[str, float]:
    """{"precision", "recall", "f1"} on 0–100 over sentences of tags (any of IOB1, IOB2, BIOES), gold and
    predicted read by the same `decoder` ("original" or "conlleval"); all 0 when nothing is correct, as
    both scorers report it."""
    decode = DECODERS[decoder]
    correct = found = expected = 0
    for gold, predicted in zip(gold_sentences, predicted_sentences, strict=True):
        gold_chunks, predicted_chunks = set(decode(gold)), set(decode(predicted))
        correct += len(gold_chunks & predicted_chunks)
        expected += len(gold_chunks)
        found += len(predicted_chunks)
    if correct == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    precision, recall = 100.0 * correct / found, 100.0 * correct / expected
    return {"precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall)}
