"""Chunk tags ↔ chunks: the BIOES labels the model learns, the IOB2 tags CoNLL-2000 writes, and the
label mapping.

A chunk is (first word, last word, type). Two decoders, which agree on well-formed sequences (gold
tags, and predictions that are valid BIOES) but not on the ill-formed ones a model predicts:

- `original_chunks`, the original's (finetune/tagging/tagging_utils.py, get_span_labels, which its
  EntityLevelF1Scorer scored chunking with): a chunk ends only before B, S or O (or at the sentence's
  end), never after E nor where the type changes, and takes the type of its last tag; it starts at B or
  S, or at any tag after O. So B-NP I-VP is one VP chunk and B-NP E-NP I-NP E-NP one NP chunk.
- `chunks`, conlleval's boundary rules, extended to S as the IOBES versions of conlleval do: a chunk
  ends after E or S, before B, S or O, and where the type changes; it starts at B or S, at I or E after
  O, E or S, and where the type changes. On IOB1, IOB2 and IOBES input that is exactly what conlleval
  counts. Files are read with it (their tags are gold, where the two agree).

The label set is O plus B-, I-, E-, S- for each of CoNLL-2000's 11 chunk types, sorted as the original
sorted its labels. The original collected the BIOES tags that occur in train, dev and test; on
CoNLL-2000 that is 42 of these 45 (no I-LST, I-SBAR or S-UCP). A fixed set keeps the head's size and
every id independent of which files are present, and makes a tag outside it a clear error.
"""
from typing import List, Sequence, Tuple

OUTSIDE = "O"
CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP", "VP")
LABEL_NAMES = tuple(sorted([OUTSIDE] + [f"{prefix}-{kind}" for prefix in "BIES" for kind in CHUNK_TYPES]))

Chunk = Tuple[int, int, str]


def split_tag(tag: str) -> Tuple[str, str]:
    """("B", "NP") for "B-NP"; ("O", "") for O."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


def _ends(prev_prefix, prev_kind, prefix, kind) -> bool:
    if prev_prefix in ("E", "S"):
        return True
    if prev_prefix in ("B", "I") and prefix in ("B", "S", OUTSIDE):
        return True
    return prev_prefix != OUTSIDE and prev_kind != kind


def _starts(prev_prefix, prev_kind, prefix, kind) -> bool:
    if prefix in ("B", "S"):
        return True
    if prefix in ("I", "E") and prev_prefix in (OUTSIDE, "E", "S"):
        return True
    return prefix != OUTSIDE and prev_kind != kind


def chunks(tags: Sequence[str]) -> List[Chunk]:
    """The chunks of one sentence's tags (IOB1, IOB2 or BIOES), in order."""
    found, start = [], None
    prev_prefix, prev_kind = OUTSIDE, ""
    for index, tag in enumerate(list(tags) + [OUTSIDE]):  # the sentence's end closes an open chunk
        prefix, kind = split_tag(tag)
        if start is not None and _ends(prev_prefix, prev_kind, prefix, kind):
            found.append((start, index - 1, prev_kind))
            start = None
        if _starts(prev_prefix, prev_kind, prefix, kind):
            start = index
        prev_prefix, prev_kind = prefix, kind
    return found


def original_chunks(tags: Sequence[str]) -> List[Chunk]:
    """The chunks of one sentence's tags by the original's decoder (module docstring), in order."""
    found, start, previous = [], 0, OUTSIDE
    for index, tag in enumerate(tags):
        prefix, _ = split_tag(tag)
        if previous != OUTSIDE and prefix in ("B", "S", OUTSIDE):
            found.append((start, index - 1, split_tag(previous)[1]))
        if prefix in ("B", "S") or previous == OUTSIDE:
            start = index
        previous = tag
    if previous != OUTSIDE:  # the sentence's end closes an open chunk
        found.append((start, len(tags) - 1, split_tag(previous)[1]))
    return found


def encode(sentence_chunks: Sequence[Chunk], length: int, scheme: str = "BIOES") -> List[str]:
    """Tags for `length` words: BIOES (the labels the model learns) or IOB2 (CoNLL-2000's own)."""
    tags = [OUTSIDE] * length
    for start, end, kind in sentence_chunks:
        for index in range(start, end + 1):
            tags[index] = f"I-{kind}"
        tags[start] = f"B-{kind}"
        if scheme == "BIOES":
            if end > start:
                tags[end] = f"E-{kind}"
            else:
                tags[start] = f"S-{kind}"
    return tags
