"""Slices of the shared real data (ELECTRA_SHARED_DATA) that the real-data tests and the studies both use."""
import gzip
import re


def write_wikipedia_slice(shard, folder, max_bytes):
    """The first whole articles of a WikiExtractor shard, up to about max_bytes of text, as folder/wiki.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    size = 0
    with gzip.open(shard, "rt", encoding="utf-8") as source, open(folder / "wiki.txt", "w",
                                                                   encoding="utf-8") as target:
        for line in source:
            target.write(line)
            size += len(line)
            if line.startswith("</doc>") and size > max_bytes:
                break
    return folder


def plain_wikipedia_sentences(shard, count):
    """The first `count` sentences of 8-20 plain lower-case-or-capitalised words (commas allowed) from a
    WikiExtractor shard, each ending " ."; plain so that swapping or replacing words keeps them well formed."""
    found = []
    with gzip.open(shard, "rt", encoding="utf-8") as source:
        for line in source:
            if line.startswith("<") or len(line) < 80:
                continue
            for sentence in re.split(r"(?<=[a-z])\. (?=[A-Z])", line.strip()):
                words = sentence.rstrip(".").split()
                if 8 <= len(words) <= 20 and all(re.fullmatch(r"[A-Za-z][a-z]*,?", w) for w in words):
                    found.append(" ".join(words) + " .")
            if len(found) >= count:
                return found[:count]
    raise ValueError(f"{shard}: fewer than {count} plain sentences")
