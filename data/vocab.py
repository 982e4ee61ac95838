"""Learn a WordPiece vocabulary or a SentencePiece model from a corpus, the same bytes for the same seed.

WordPiece: words come from the tokenizer's own BERT pre-tokenization (data/tokenization.py), so every
learned token is reachable. Every character seen goes in first, bare and as a `##` continuation, so a
word of the corpus is [UNK] only when it is longer than 100 characters; then byte-pair merges over
`##`-marked pieces (the scheme of Hugging Face's WordPiece trainer), most frequent pair first, ties
broken by the token strings. tensorflow-text's `bert_vocab_from_dataset` was measured and rejected:
108 s for 7 MB of text and an 8k vocabulary (a pure-Python binary search over count thresholds, each
step enumerating every substring), and it pre-tokenizes with NFKC case folding rather than BERT's rules.
"""
import collections
import heapq
import io
import logging
import pathlib
import random
from typing import Dict, Iterable, List, Sequence, Tuple

from common import atomic
from common.errors import InputError
from data.tokenization import (MAX_INPUT_CHARS_PER_WORD, SPECIAL_TOKENS, SUFFIX_INDICATOR,
                               is_split_character, normalize_case_and_accents, tf_bert_words)

log = logging.getLogger(__name__)

# Single characters may take at most this share of a learned vocabulary; the rarest beyond it are left
# out (and logged), so that a corpus with thousands of rare scripts still gets room for subwords.
MAX_CHARACTER_SHARE = 0.5
# A merge must be seen at least this often: a pair seen once only memorises one word.
MIN_PAIR_COUNT = 2
_COUNT_BATCH_LINES = 4096


def sample_lines(lines: Iterable[str], max_lines: int, seed: int) -> List[str]:
    """All lines, or a seeded reservoir sample of `max_lines` of them (memory stays bounded)."""
    rng = random.Random(seed)
    sample: List[str] = []
    for index, line in enumerate(lines):
        if index < max_lines:
            sample.append(line)
        else:
            slot = rng.randrange(index + 1)
            if slot < max_lines:
                sample[slot] = line
    return sample


def count_words(lines: Sequence[str], lower_case: bool = True, strip_accents: bool = True) -> collections.Counter:
    """Word counts after BERT's pre-tokenization; words over 100 characters (always [UNK]) are left out."""
    import tensorflow as tf

    split = tf.function(lambda strings: tf_bert_words(strings, lower_case, strip_accents).flat_values,
                        input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    counts: collections.Counter = collections.Counter()
    for start in range(0, len(lines), _COUNT_BATCH_LINES):
        batch = [line.encode("utf-8", "ignore") for line in lines[start:start + _COUNT_BATCH_LINES]]
        counts.update(split(tf.constant(batch, dtype=tf.string)).numpy().tolist())
    words = collections.Counter()
    for word, count in counts.items():
        text = word.decode("utf-8")
        if len(text) <= MAX_INPUT_CHARS_PER_WORD:
            words[text] = count
    return words


def _character_tokens(word_counts: Dict[str, int], budget: int) -> List[str]:
    """Every character seen, bare and as a `##` continuation (except punctuation and CJK, which are
    always words of their own): the forms seen first, most frequent first, then the unseen forms."""
    seen: collections.Counter = collections.Counter()
    chars: collections.Counter = collections.Counter()
    for word, count in word_counts.items():
        seen[word[0]] += count
        for char in word[1:]:
            seen[SUFFIX_INDICATOR + char] += count
        for char in word:
            chars[char] += count
    unseen = [(token, count) for char, count in chars.items()
              for token in (char, SUFFIX_INDICATOR + char)
              if token not in seen and not (token != char and is_split_character(char))]
    ranked = sorted(seen.items(), key=lambda item: (-item[1], item[0]))
    ranked += sorted(unseen, key=lambda item: (-item[1], item[0]))
    if len(ranked) > budget:
        log.warning("%d character tokens but room for %d: the %d rarest are left out (characters seen %d "
                    "times or less may become [UNK])", len(ranked), budget, len(ranked) - budget,
                    ranked[budget][1])
    return [token for token, _ in ranked[:budget]]


def learn_wordpiece_tokens(word_counts: Dict[str, int], num_tokens: int) -> List[str]:
    """Up to `num_tokens` tokens: characters, then merges of the most frequent adjacent pair."""
    budget = max(1, int(num_tokens * MAX_CHARACTER_SHARE))
    tokens = _character_tokens(word_counts, budget)
    names: List[str] = list(tokens)
    ids = {name: i for i, name in enumerate(names)}

    words: List[List[int]] = []
    counts: List[int] = []
    for word, count in sorted(word_counts.items()):
        pieces = [word[0]] + [SUFFIX_INDICATOR + char for char in word[1:]]
        if len(pieces) > 1 and all(piece in ids for piece in pieces):
            words.append([ids[piece] for piece in pieces])
            counts.append(count)

    pair_counts: Dict[Tuple[int, int], int] = collections.defaultdict(int)
    pair_words: Dict[Tuple[int, int], set] = collections.defaultdict(set)
    for index, (symbols, count) in enumerate(zip(words, counts)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += count
            pair_words[pair].add(index)
    heap = [(-count, names[a], names[b], a, b) for (a, b), count in pair_counts.items()]
    heapq.heapify(heap)

    while len(tokens) < num_tokens and heap:
        negative, name_a, name_b, a, b = heapq.heappop(heap)
        count = pair_counts.get((a, b), 0)
        if count != -negative:  # stale entry: counts only fall without a fresh push, so re-queue it
            if count > 0:
                heapq.heappush(heap, (-count, name_a, name_b, a, b))
            continue
        if count < MIN_PAIR_COUNT:
            break
        merged_name = name_a + name_b[len(SUFFIX_INDICATOR):]
        merged = ids.get(merged_name)
        if merged is None:  # two merge paths can spell the same token; keep one id for it
            merged = ids[merged_name] = len(names)
            names.append(merged_name)
            tokens.append(merged_name)
        grown = set()
        for index in pair_words.pop((a, b), ()):
            symbols = words[index]
            merged_symbols, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                    merged_symbols.append(merged)
                    i += 2
                else:
                    merged_symbols.append(symbols[i])
                    i += 1
            if len(merged_symbols) == len(symbols):
                continue  # the word lost this pair to an earlier merge
            word_count = counts[index]
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] -= word_count
            for pair in zip(merged_symbols, merged_symbols[1:]):
                pair_counts[pair] += word_count
                if merged in pair:
                    pair_words[pair].add(index)
                    grown.add(pair)
            words[index] = merged_symbols
        pair_counts.pop((a, b), None)
        for pair in sorted(grown):
            heapq.heappush(heap, (-pair_counts[pair], names[pair[0]], names[pair[1]], pair[0], pair[1]))
    return tokens


def learn_wordpiece_vocab(lines: Iterable[str], vocab_size: int, output_file, lower_case: bool = True,
                          strip_accents=None, seed: int = 12345, max_lines: int = 2_000_000) -> pathlib.Path:
    """Writes BERT's vocab.txt: [PAD] [UNK] [CLS] [SEP] [MASK], then the learned tokens."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise InputError(f"vocabulary size {vocab_size} leaves no room beside the {len(SPECIAL_TOKENS)} special "
                         "tokens; use 1000 or more")
    strip_accents = lower_case if strip_accents is None else strip_accents
    output_file = pathlib.Path(output_file)
    sample = sample_lines(lines, max_lines, seed)
    word_counts = count_words(sample, lower_case, strip_accents)
    if not word_counts:
        raise InputError(f"{output_file}: no words to learn a vocabulary from; the corpus is empty")
    learned = learn_wordpiece_tokens(word_counts, vocab_size - len(SPECIAL_TOKENS))
    vocab = list(SPECIAL_TOKENS) + learned
    if len(vocab) < vocab_size:
        log.warning("the corpus supports only %d of the %d tokens asked for (no further pair of tokens occurs "
                    "%d times or more): %s has %d lines", len(vocab), vocab_size, MIN_PAIR_COUNT, output_file,
                    len(vocab))
    atomic.write_bytes(output_file, "".join(token + "\n" for token in vocab).encode("utf-8"))
    return output_file


SENTENCEPIECE_MODEL_TYPES = ("unigram", "bpe", "char", "word")


def learn_sentencepiece_model(lines: Iterable[str], vocab_size: int, output_prefix, model_type: str = "unigram",
                              lower_case: bool = True, seed: int = 12345,
                              max_lines: int = 2_000_000) -> pathlib.Path:
    """Writes <prefix>.model and <prefix>.vocab with [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4.

    Lines are lower-cased and accent-stripped first when `lower_case`, as the tokenizer does before
    encoding (strip_accents follows lower_case). [CLS] [SEP] [MASK] are control symbols: single pieces
    that text never produces. One thread and a fixed seed make the model bytes reproducible."""
    import sentencepiece

    if model_type not in SENTENCEPIECE_MODEL_TYPES:
        raise InputError(f"SentencePiece model type {model_type!r}: use one of {', '.join(SENTENCEPIECE_MODEL_TYPES)}")
    output_prefix = pathlib.Path(output_prefix)
    model_file = output_prefix.with_name(output_prefix.name + ".model")
    sample = [normalize_case_and_accents(line, lower_case, lower_case)
              for line in sample_lines(lines, max_lines, seed) if line.strip()]
    if not sample:
        raise InputError(f"{model_file}: no text to learn a SentencePiece model from; the corpus is empty")
    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(seed)
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sample), model_writer=model, model_type=model_type, vocab_size=vocab_size,
            pad_id=0, pad_piece="[PAD]", unk_id=1, unk_piece="[UNK]", bos_id=-1, eos_id=-1,
            control_symbols=list(SPECIAL_TOKENS[2:]), hard_vocab_limit=False, input_sentence_size=0,
            shuffle_input_sentence=False, max_sentence_length=1 << 16, num_threads=1, minloglevel=2)
    except RuntimeError as error:
        raise InputError(f"{model_file}: SentencePiece could not learn {vocab_size:,} pieces from "
                         f"{len(sample):,} lines ({str(error).strip()}); use a smaller vocabulary size or "
                         "more text") from None
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    if processor.get_piece_size() < vocab_size:
        log.warning("the corpus supports only %d of the %d SentencePiece pieces asked for",
                    processor.get_piece_size(), vocab_size)
    vocab = "".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
                    for i in range(processor.get_piece_size()))
    atomic.write_bytes(output_prefix.with_name(output_prefix.name + ".vocab"), vocab.encode("utf-8"))
    atomic.write_bytes(model_file, model.getvalue())
    return model_file
