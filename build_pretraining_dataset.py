"""Corpus → tokenized, packed, sharded TFRecords for ELECTRA pretraining.

    python build_pretraining_dataset.py                       # embedded default corpus (Python's docs)
    python build_pretraining_dataset.py --corpus-dir wiki/ --corpus-format wikiextractor \
        --vocab-file vocab.txt --num-processes 8
    python build_pretraining_dataset.py --corpus-dir 'corpus/*.jsonl.zst' --corpus-format jsonl \
        --text-field content --vocab-file vocab.txt      # JSON lines; --corpus-format parquet alike

Writes <data-dir>/pretrain_tfrecords/ (shards + metadata.json). With no vocabulary given it uses
<data-dir>/vocab.txt, learning one from the corpus first if there is none.
"""
import argparse
import json

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines

import pathlib
import shutil
import sys

from common import atomic
from storage import folder_lock
from data import corpus as corpus_lib
from data import paths, tfrecords
from data.build import BuildSettings, TokenizerSpec, auto_num_shards, build_dataset
from common.errors import InputError, exit_on_input_error

BERT_VOCAB_SIZE = 30522
DEFAULT_CORPUS_VOCAB_SIZE = 8192
MIN_SEQ_LENGTH = 3  # [CLS] x [SEP]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus-dir", nargs="+", metavar="PATH",
                        help="files, folders or globs (folders are searched for .txt/.gz/.zst, .jsonl[.gz|.zst] "
                             "or .parquet by --corpus-format; default: the embedded Python-docs corpus)")
    parser.add_argument("--corpus-format", choices=corpus_lib.CORPUS_FORMATS, default="plain",
                        help="plain: one sentence/paragraph per line; wikiextractor: WikiExtractor's <doc> output; "
                             "jsonl: one JSON object per line, one document each; parquet: one document per row")
    parser.add_argument("--text-field", default=None,
                        help=f"jsonl/parquet: the field or column holding each document's text (default "
                             f"{corpus_lib.DEFAULT_TEXT_FIELD!r}); its newlines separate lines as in plain text")
    parser.add_argument("--blanks-separate-docs", action=argparse.BooleanOptionalAction, default=True,
                        help="plain format: a blank line ends a document (else each file is one document)")
    vocab = parser.add_mutually_exclusive_group()
    vocab.add_argument("--vocab-file", help="WordPiece vocabulary (BERT's vocab.txt format)")
    vocab.add_argument("--spm-model", help="SentencePiece model (.model) with [PAD] [UNK] [CLS] [SEP] [MASK]")
    parser.add_argument("--vocab-size", type=int,
                        help=f"size of a vocabulary learned from the corpus (default {BERT_VOCAB_SIZE}; "
                             f"{DEFAULT_CORPUS_VOCAB_SIZE} for the embedded corpus)")
    parser.add_argument("--vocab-type", choices=("wordpiece", "sentencepiece"), default="wordpiece",
                        help="kind of vocabulary to learn when none is given")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--output-dir", type=pathlib.Path, help="default <data-dir>/pretrain_tfrecords")
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--num-shards", type=int, default=0,
                        help="output shards (default: about one per 32 MB of text, at least 8)")
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--strip-accents", action=argparse.BooleanOptionalAction, default=None,
                        help="default: same as --lower-case (BERT's rule)")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the dataset already in --output-dir (never done silently)")
    parser.add_argument("--compression", choices=("none", "gzip"), default="none",
                        help="gzip: the shards GZIP-compressed (TFRecord's own compression, read by tf.data and by "
                             "the reader without TensorFlow), about a third of the size, for a dataset that is "
                             "copied or stored often; none (default): as the original")
    parser.add_argument("--strict", action="store_true",
                        help="stop at the first non-UTF-8 line instead of replacing and counting bad bytes")
    return parser.parse_args(argv)


def validate_numbers(args) -> None:
    if args.max_seq_length < MIN_SEQ_LENGTH:
        raise InputError(f"--max-seq-length {args.max_seq_length} cannot hold [CLS] x [SEP]; use at least "
                         f"{MIN_SEQ_LENGTH} (128 or 512 as the original)")
    if args.num_processes < 1:
        raise InputError(f"--num-processes {args.num_processes}: use 1 or more")
    if args.num_shards < 0:
        raise InputError(f"--num-shards {args.num_shards}: use a positive count, or 0 for automatic")
    if args.vocab_size is not None and args.vocab_size < 100:
        raise InputError(f"--vocab-size {args.vocab_size} is too small to learn a vocabulary; use 1000 or more")
    if args.text_field is not None and args.corpus_format not in corpus_lib.RECORD_FORMATS:
        raise InputError(f"--text-field names a field of JSON lines or Parquet records; drop it, or pass "
                         f"--corpus-format jsonl or parquet (not {args.corpus_format})")
    if args.text_field == "":
        raise InputError("--text-field is empty; name the field or column that holds the text")


def corpus_lines(files, args):
    for path in files:
        for document in corpus_lib.iter_documents(path, args.corpus_format, args.blanks_separate_docs,
                                                  strict=args.strict, text_field=args.text_field):
            yield from document


def resolve_tokenizer(args, data_dir: pathlib.Path, files, embedded_corpus: bool) -> TokenizerSpec:
    """Uses the given vocabulary, else <data-dir>'s, else learns one from the corpus and saves it there."""
    spec = lambda vocab_file=None, spm_model=None: TokenizerSpec(  # noqa: E731
        vocab_file=str(vocab_file) if vocab_file else None, spm_model=str(spm_model) if spm_model else None,
        lower_case=args.lower_case, strip_accents=args.strip_accents)
    if args.vocab_file or args.spm_model:
        return spec(args.vocab_file, args.spm_model)
    learned_wordpiece, learned_spm = data_dir / "vocab.txt", data_dir / "spm.model"
    existing = learned_spm if args.vocab_type == "sentencepiece" else learned_wordpiece
    if existing.exists():
        print(f"Using the vocabulary learned earlier, {existing} (delete it to learn a new one).")
        return spec(spm_model=existing) if existing == learned_spm else spec(vocab_file=existing)
    from data import vocab as vocab_lib

    size = args.vocab_size or (DEFAULT_CORPUS_VOCAB_SIZE if embedded_corpus else BERT_VOCAB_SIZE)
    print(f"No vocabulary given: learning a {args.vocab_type} vocabulary of {size:,} entries from the corpus…")
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.vocab_type == "sentencepiece":
        model = vocab_lib.learn_sentencepiece_model(corpus_lines(files, args), size, data_dir / "spm",
                                                    lower_case=args.lower_case, seed=args.seed)
        print(f"Wrote {model}.")
        return spec(spm_model=model)
    with atomic.atomic_path(learned_wordpiece) as temp:
        vocab_lib.learn_wordpiece_vocab(corpus_lines(files, args), size, temp, lower_case=args.lower_case,
                                        strip_accents=args.strip_accents, seed=args.seed)
    print(f"Wrote {learned_wordpiece}.")
    return spec(vocab_file=learned_wordpiece)


def prepare_output_dir(output_dir: pathlib.Path, overwrite: bool, keep=()) -> None:
    """Never deletes a dataset without --overwrite, and never deletes files the builder did not write (its
    vocabulary copy is its own only where metadata.json names it). `keep`: the vocabulary this build reads, left
    in place if it is that copy (copy_vocabulary then leaves it as it is)."""
    if output_dir.exists() and not output_dir.is_dir():
        raise InputError(f"{output_dir}: exists and is not a folder; choose another --output-dir")
    entries = sorted(output_dir.iterdir()) if output_dir.exists() else []
    if entries and not overwrite:
        raise InputError(f"{output_dir}: not empty; pass --overwrite to replace the dataset in it, or choose "
                         "another --output-dir")
    copy = recorded_vocabulary_copy(output_dir)
    ours = [p for p in entries if p.name.startswith(tfrecords.SHARD_PREFIX)
            or p.name.startswith(tfrecords.METADATA_FILE) or p.name == copy]
    foreign = [p for p in entries if p not in ours]
    if foreign:
        raise InputError(f"{output_dir}: holds files the builder did not write ({foreign[0].name}); "
                         "choose an empty --output-dir")
    kept = {pathlib.Path(k).resolve() for k in keep if k}
    metadata = output_dir / tfrecords.METADATA_FILE
    metadata.unlink(missing_ok=True)  # first, so an interrupted rebuild never looks complete
    for path in ours:
        if path.resolve() not in kept:
            path.unlink(missing_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)


def recorded_vocabulary_copy(output_dir: pathlib.Path):
    """The name of the vocabulary copy an earlier build's metadata.json records, or None."""
    try:
        return json.loads((output_dir / tfrecords.METADATA_FILE).read_text())["vocab"].get("copy")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@exit_on_input_error
def main(argv=None) -> dict:
    args = parse_args(argv)
    validate_numbers(args)
    if args.strip_accents is None:
        args.strip_accents = args.lower_case
    args.text_field = args.text_field or corpus_lib.DEFAULT_TEXT_FIELD
    data_dir = args.data_dir or paths.default_data_dir()
    output_dir = args.output_dir or paths.pretrain_tfrecords_dir(data_dir)

    embedded_corpus = not args.corpus_dir
    if embedded_corpus:
        from data.default_corpus import write_default_corpus

        corpus_dir = paths.default_corpus_dir(data_dir)
        print(f"No --corpus-dir given: writing the embedded corpus (Python's own documentation) to {corpus_dir}")
        files = write_default_corpus(corpus_dir)
        args.corpus_format = "plain"
    else:
        files = corpus_lib.resolve_corpus_files(args.corpus_dir, args.corpus_format)
    if sum(p.stat().st_size for p in files) == 0:
        raise InputError(f"{files[0]}: the corpus files are empty; point --corpus-dir at text")
    corpus_lib.check_corpus_files(files, args.corpus_format, args.text_field)  # before anything is deleted

    with folder_lock.acquire(output_dir, "building a dataset"):  # before anything in it is deleted
        return build_into(output_dir, args, data_dir, files, embedded_corpus)


def build_into(output_dir, args, data_dir, files, embedded_corpus) -> dict:
    """Empties the folder of an earlier build (with --overwrite) and builds the dataset in it."""
    prepare_output_dir(output_dir, args.overwrite, keep=(args.vocab_file, args.spm_model))
    tokenizer_spec = resolve_tokenizer(args, data_dir, files, embedded_corpus)
    tokenizer = tokenizer_spec.load()
    num_shards = args.num_shards or auto_num_shards(files, args.num_processes)
    settings = BuildSettings(output_dir=str(output_dir), tokenizer=tokenizer_spec, corpus_format=args.corpus_format,
                             blanks_separate_docs=args.blanks_separate_docs, text_field=args.text_field,
                             max_seq_length=args.max_seq_length,
                             num_processes=args.num_processes, num_shards=num_shards, seed=args.seed,
                             strict=args.strict, compression=args.compression)
    source = pathlib.Path(tokenizer.vocab_file)
    copy = copy_vocabulary(source, tokenizer.kind, output_dir)
    vocab_metadata = {
        "kind": tokenizer.kind,
        "file": str(source.resolve()),
        "copy": copy.name,
        "sha256": tokenizer.fingerprint,
        "size": tokenizer.vocab_size,
        "special_ids": tokenizer.special_ids.as_dict(),
        "lower_case": tokenizer.lower_case,
        "strip_accents": tokenizer.strip_accents,
    }
    print(f"Building {output_dir} from {len(files)} file(s) with {args.num_processes} process(es), "
          f"{num_shards} shards, max_seq_length {args.max_seq_length}…")
    metadata = build_dataset(settings, files, {"vocab": vocab_metadata})
    report(metadata, output_dir)
    return metadata


def copy_vocabulary(vocab_file: pathlib.Path, kind: str, output_dir: pathlib.Path) -> pathlib.Path:
    """The dataset folder keeps its own copy of the vocabulary, so that it travels whole (another machine, a
    device call): its readers prefer the copy (configs.resolve.vocab_source). Written before metadata.json,
    which alone marks the folder complete."""
    copy = output_dir / tfrecords.VOCAB_COPY_NAMES[kind]
    if copy.exists() and copy.samefile(vocab_file):  # this build reads the earlier build's copy
        return copy
    with atomic.atomic_path(copy) as temp:
        shutil.copyfile(vocab_file, temp)
    return copy


def report(metadata: dict, output_dir: pathlib.Path) -> None:
    counts, seconds = metadata["counts"], metadata["build_seconds"]
    print(f"Done in {seconds:.1f} s ({counts['text_bytes'] / 1e6 / max(seconds, 1e-9):.2f} MB/s of text): "
          f"{counts['documents']:,} documents, {counts['examples']:,} examples, {counts['tokens']:,} tokens "
          f"in {len(metadata['shards'])} shards under {output_dir}")
    rates = ", ".join(f"{rate:.2f}" for rate in metadata["process_rates"])
    print(f"Packing rate per process, after start-up: {rates} MB/s of text")
    if counts["bad_utf8_lines"]:
        print(f"Warning: {counts['bad_utf8_lines']:,} lines had bytes that are not UTF-8; they were replaced by "
              "U+FFFD (use --strict to stop on them instead).", file=sys.stderr)


if __name__ == "__main__":
    main()
