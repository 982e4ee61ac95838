"""Reads a built dataset back through the training reader, checks it against metadata.json, shows a sample.

    python -m data.inspect_dataset [DATASET_DIR]      # default <data-dir>/pretrain_tfrecords
"""
import argparse
import pathlib

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines

from data import paths, tfrecords  # noqa: E402
from common.errors import InputError, exit_on_input_error  # noqa: E402


def count_examples(dataset_dir, metadata, batch_size: int = 512):
    """Examples and non-padding tokens as the reader sees them, read once, in order."""
    dataset = tfrecords.pretraining_dataset(dataset_dir, batch_size, training=False, metadata=metadata)
    examples = tokens = 0
    first = None
    for batch in dataset:
        examples += int(batch["input_ids"].shape[0])
        tokens += int(batch["input_mask"].numpy().sum())
        if first is None:
            first = {name: batch[name][0].numpy() for name in tfrecords.FEATURE_NAMES}
    return examples, tokens, first


def describe_example(example, tokenizer, width: int = 100) -> str:
    length = int(example["input_mask"].sum())
    tokens = tokenizer.convert_ids_to_tokens(example["input_ids"][:length].tolist())
    segment_b = int(example["segment_ids"].sum())
    text = " ".join(tokens)
    return f"{length} tokens ({segment_b} in segment B): {text[:width]}{'…' if len(text) > width else ''}"


@exit_on_input_error
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", nargs="?", type=pathlib.Path)
    args = parser.parse_args(argv)
    dataset_dir = args.dataset_dir or paths.pretrain_tfrecords_dir(paths.default_data_dir())
    metadata = tfrecords.load_metadata(dataset_dir)
    with tfrecords.naming_damaged_shards(tfrecords.shard_files(dataset_dir, metadata)):
        examples, tokens, first = count_examples(dataset_dir, metadata)
    counts = metadata["counts"]
    if (examples, tokens) != (counts["examples"], counts["tokens"]):
        raise InputError(f"{dataset_dir}: metadata says {counts['examples']} examples / {counts['tokens']} "
                         f"tokens but the shards hold {examples} / {tokens}; rebuild with --overwrite")
    vocab = metadata["vocab"]
    print(f"{dataset_dir}: {examples:,} examples, {tokens:,} tokens in {len(metadata['shards'])} shards "
          f"(read back, matching metadata.json); {counts['documents']:,} documents, "
          f"{counts['text_bytes'] / 1e6:.1f} MB of text; vocabulary {vocab['file']} ({vocab['size']:,} "
          f"entries, {'un' if vocab['lower_case'] else ''}cased), max_seq_length {metadata['max_seq_length']}")
    from data.tokenization import load_tokenizer

    tokenizer = load_tokenizer(vocab_file=vocab["file"] if vocab["kind"] == "wordpiece" else None,
                               spm_model=vocab["file"] if vocab["kind"] == "sentencepiece" else None,
                               lower_case=vocab["lower_case"], strip_accents=vocab["strip_accents"])
    print("First example: " + describe_example(first, tokenizer))
    return {"examples": examples, "tokens": tokens}


if __name__ == "__main__":
    main()
