"""Sentences → model inputs: every word tokenized on its own (so its sub-tokens are known), [CLS] words
[SEP], and the word's label on its first sub-token (the original's tokenize_and_align and
labeled_positions). Other sub-tokens, [CLS], [SEP] and padding carry no label: tag_mask is 0 there.

Words are kept whole while they fit in max_seq_length; the rest of a longer sentence is not seen, nor
scored (as the original: it scored only the words it fed the model). The original stopped earlier than
the length requires (its check also counted the sentence's word count), so it cut long sentences more.
Segment ids are all 1, as the original's tagging features had them.
"""
from typing import List, Sequence

import numpy as np

from finetune.tagging.spans import chunks, encode


def align(sentences, tokenizer, max_seq_length):
    """Per sentence: (input_ids, positions of the kept words' first sub-tokens). A word the tokenizer
    turns into nothing is [UNK], so that every kept word has a position."""
    pieces = iter(tokenizer.encode_batch([word for sentence in sentences for word in sentence.words]))
    special = tokenizer.special_ids
    aligned = []
    for sentence in sentences:
        ids, positions = [special.cls], []
        for word_ids in (next(pieces) for _ in sentence.words):
            word_ids = list(word_ids) or [special.unk]
            if len(ids) + len(word_ids) + 1 > max_seq_length:
                break
            positions.append(len(ids))
            ids.extend(word_ids)
        ids.append(special.sep)
        aligned.append((np.array(ids, np.int32), np.array(positions, np.int64)))
    return aligned


def bioes_ids(tags: Sequence[str], index) -> List[int]:
    """The file's tags (IOB1, IOB2 or BIOES) → the BIOES label ids the model learns."""
    return [index[tag] for tag in encode(chunks(tags), len(tags), "BIOES")]


def featurize_sentences(sentences, tokenizer, max_seq_length, label_names, encode_tags=None) -> dict:
    """{"sequences": {input_ids, segment_ids, tag_ids, tag_mask}} (unpadded int32 per sentence; tag ids 0
    where there is no label, and everywhere for untagged sentences), "scalars": {}, "count", "examples".
    `encode_tags(tags, index)`: a sentence's tags → label ids (default bioes_ids: span tags as BIOES)."""
    index = {name: i for i, name in enumerate(label_names)}
    encode_tags = encode_tags or bioes_ids
    sequences = {"input_ids": [], "segment_ids": [], "tag_ids": [], "tag_mask": []}
    for sentence, (ids, positions) in zip(sentences, align(sentences, tokenizer, max_seq_length)):
        tag_ids, tag_mask = np.zeros(len(ids), np.int32), np.zeros(len(ids), np.int32)
        if sentence.tags is not None:
            tag_ids[positions] = encode_tags(sentence.tags, index)[:len(positions)]
        tag_mask[positions] = 1
        for name, values in (("input_ids", ids), ("segment_ids", np.ones(len(ids), np.int32)),
                             ("tag_ids", tag_ids), ("tag_mask", tag_mask)):
            sequences[name].append(values)
    return {"sequences": sequences, "scalars": {}, "count": len(sentences), "examples": sentences}
