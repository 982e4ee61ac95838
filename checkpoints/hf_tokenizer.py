"""A Hugging Face fast tokenizer (tokenizer.json) that reproduces our SentencePiece tokenization.

transformers has no ELECTRA tokenizer class for SentencePiece, and its own SentencePiece converters
encode other models' rules (ALBERT's, T5's), not ours. So the `hf` export builds the pipeline from the
.model proto with the `tokenizers` library, step by step as data/tokenization.py's
`SentencePieceTokenizer` runs it:

1. our rules before SentencePiece (`_tf_case_and_accents`): full lower-casing, final sigma included
   (`Lowercase` maps character by character, so a regex first turns a word-final capital sigma into ς),
   then NFD without category Mn (the same character class as ours, not `StripAccents`, which also drops
   the spacing marks Mc that Indic scripts need);
2. the model's own normalizer: its precompiled character map (e.g. nmt_nfkc), then SentencePiece's
   whitespace rules: leading spaces dropped, runs of spaces collapsed, trailing spaces (and trailing "▁")
   dropped, and the dummy prefix "▁" before non-empty text;
3. a Metaspace pre-tokenizer: spaces become "▁" and, as SentencePiece's pieces never hold an inner "▁"
   (split_by_whitespace), each "▁word" is segmented on its own;
4. the model: Unigram with the pieces' scores, or BPE with merges derived from the pieces (every split
   of a piece into two pieces, ranked by the merged piece's score, as SentencePiece's BPE merges the
   highest-scoring adjacent pair); runs of unknown characters give one [UNK], as in SentencePiece;
5. [CLS] A [SEP] (B [SEP]) with segment ids 0 / 1, the special ids read from the model, as
   finetune/features.py `pack` and data/examples.py build inputs.

Residual differences (measured in tests/test_checkpoints_hf_tokenizer.py and docs/checkpoints.md):
- Unigram ties: two splits of a word with the same summed score ("7000" as ▁7 00 0 or ▁7 0 00).
  SentencePiece adds the scores along the whole line in float32, so the winner depends on the rounding of
  the text before the word; tokenizers adds them per word in float64. Not reproducible by any setting.
  (BPE could tie too where one piece has two splits, ranked here and equal in SentencePiece; not seen.)
- With lower-casing off, a combining mark right after a character the model's map rewrites ("ʲ͡",
  a mark after a space): `Precompiled` rewrites a whole grapheme cluster under 6 bytes by its shortest
  matching rule and drops the rest, where SentencePiece rewrites the longest matching prefix.
- "[CLS]" or "[MASK]" typed in a text is the special token in transformers (fill-mask needs it), plain
  characters in ours.
- Unicode tables of different ages (ICU in TensorFlow, Rust's, Oniguruma's) differ on characters added
  in recent Unicode versions.
"""
import pathlib

from common.errors import InputError

SPACE_SYMBOL = "\u2581"  # "▁", SentencePiece's escaped space
# Final_Sigma (Unicode SpecialCasing): a capital sigma after a cased letter (case-ignorable characters
# between allowed) and not before one.
_FINAL_SIGMA = r"(?<=\p{Cased}\p{Case_Ignorable}*)\u03a3(?!\p{Case_Ignorable}*\p{Cased})"
# ModelProto.TrainerSpec.ModelType and SentencePiece.Type values
_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
_NORMAL = 1
_PIECE_TYPES = {4: "user-defined", 5: "unused", 6: "byte"}


def read_model_proto(model_file):
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(pathlib.Path(model_file).read_bytes())
    except Exception:  # protobuf raises DecodeError, or OSError for an unreadable file
        raise InputError(f"{model_file}: not a SentencePiece model; pass the .model file the model was "
                         "trained with") from None
    return proto


def check_reproducible(proto, model_file):
    """One InputError line for what this converter cannot reproduce (data/vocab.py writes none of it)."""
    model_type = _MODEL_TYPES.get(proto.trainer_spec.model_type, str(proto.trainer_spec.model_type))
    problem = None
    if model_type not in ("unigram", "bpe"):
        problem = (f"its model type is {model_type!r}, and only 'unigram' and 'bpe' models are converted; "
                   "learn a unigram or bpe model with data/vocab.py learn_sentencepiece_model")
    elif proto.trainer_spec.treat_whitespace_as_suffix or not proto.normalizer_spec.escape_whitespaces:
        problem = ("it treats whitespace as a suffix or does not escape it, and only SentencePiece's default "
                   "whitespace handling is converted; learn the model with the defaults")
    elif proto.trainer_spec.byte_fallback:
        problem = "it uses byte fallback, which is not converted; learn the model without byte_fallback"
    else:
        odd = sorted({_PIECE_TYPES[p.type] for p in proto.pieces if p.type in _PIECE_TYPES})
        if odd:
            problem = (f"it has {' and '.join(odd)} pieces, which are not converted; learn the model "
                       "without them (data/vocab.py does)")
    if problem:
        raise InputError(f"{model_file}: cannot build a Hugging Face tokenizer for this SentencePiece model: "
                         f"{problem} (the .model file itself is still usable with sentencepiece)")
    return model_type


def _our_normalizers(lower_case, strip_accents, nonspacing_marks):
    from tokenizers import Regex, normalizers

    steps = []
    if lower_case:
        steps += [normalizers.Replace(Regex(_FINAL_SIGMA), "\u03c2"), normalizers.Lowercase()]
    if strip_accents:
        # NFC after the marks are gone: SentencePiece's map recomposes what NFD split (Hangul syllables,
        # Indic vowel signs) with rules over several characters, which `Precompiled` applies only to
        # clusters under 6 bytes (a Hangul syllable's 2-3 jamo are 6-9 bytes).
        steps += [normalizers.NFD(), normalizers.Replace(Regex(nonspacing_marks), ""), normalizers.NFC()]
    return steps


def _sentencepiece_normalizers(normalizer_spec):
    from tokenizers import Regex, normalizers

    steps = []
    if normalizer_spec.precompiled_charsmap:
        steps.append(normalizers.Precompiled(normalizer_spec.precompiled_charsmap))
    if normalizer_spec.remove_extra_whitespaces:
        steps += [normalizers.Replace(Regex(r"\A +"), ""),
                  normalizers.Replace(Regex(f"[ {SPACE_SYMBOL}]+\\z"), ""),
                  normalizers.Replace(Regex(" {2,}"), " ")]
    if normalizer_spec.add_dummy_prefix:
        steps.append(normalizers.Prepend(SPACE_SYMBOL))  # only before non-empty text, as SentencePiece
    return steps


def bpe_merges(pieces):
    """Every (left, right) split of a normal piece into two normal pieces, best merged piece first
    (SentencePiece's BPE scores a piece by when it was merged; ties by id, then by split position)."""
    ids = {piece.piece: i for i, piece in enumerate(pieces) if piece.type == _NORMAL}
    merges = []
    for merged, i in ids.items():
        for cut in range(1, len(merged)):
            left, right = merged[:cut], merged[cut:]
            if left in ids and right in ids:
                merges.append((-pieces[i].score, i, cut, left, right))
    return [(left, right) for *_, left, right in sorted(merges)]


def _model(proto, model_type):
    from tokenizers import models

    pieces = proto.pieces
    unk_id = proto.trainer_spec.unk_id
    if model_type == "unigram":
        return models.Unigram([(piece.piece, piece.score) for piece in pieces], unk_id=unk_id, byte_fallback=False)
    vocab = {piece.piece: i for i, piece in enumerate(pieces)}
    return models.BPE(vocab, bpe_merges(pieces), unk_token=pieces[unk_id].piece, fuse_unk=True,
                      byte_fallback=False, dropout=None)


def build_hf_tokenizer(tokenizer):
    """A `tokenizers.Tokenizer` that gives our SentencePieceTokenizer's ids (see the module docstring)."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors

    from data.tokenization import SPECIAL_TOKENS, _char_classes

    proto = read_model_proto(tokenizer.vocab_file)
    model_type = check_reproducible(proto, tokenizer.vocab_file)
    hf = Tokenizer(_model(proto, model_type))
    hf.normalizer = normalizers.Sequence(
        _our_normalizers(tokenizer.lower_case, tokenizer.strip_accents, _char_classes().nonspacing_marks)
        + _sentencepiece_normalizers(proto.normalizer_spec))
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE_SYMBOL, prepend_scheme="never",
                                                split=proto.trainer_spec.split_by_whitespace)
    hf.decoder = decoders.Metaspace(replacement=SPACE_SYMBOL, prepend_scheme="always")
    hf.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    special = tokenizer.special_ids
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", special.cls), ("[SEP]", special.sep)])
    # the special tokens are pieces of the model (SentencePieceTokenizer checked), so adding them gave no new ids
    assert [hf.token_to_id(t) for t in SPECIAL_TOKENS] == [special.pad, special.unk, special.cls, special.sep,
                                                           special.mask]
    return hf

