"""Chunk tags ↔ chunks: the BIOES labels the model learns, the IOB2 tags CoNLL-2000 writes, and the
label mapping.

A chunk is (first word, last word, type). Tags are decoded with conlleval's boundary rules, extended to
S as the IOBES versions of conlleval do: a chunk ends after E or S, before B, S or O, and where the type
changes; it starts at B or S, at I or E after O, E or S, and where the type changes. On IOB1, IOB2 and
IOBES input that is exactly what conlleval counts. The original (tagging_utils.get_span_labels) agrees
on well-formed sequences; on ill-formed predictions it merged across E and type changes (B-NP I-VP was
one VP chunk), where conlleval's rules, used here, see two chunks.

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
